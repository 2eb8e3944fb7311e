// The help texts of the mlk commands, made from their CommandSpecs
// (cli/flags.h): `mlk --help`, `mlk NAME --help`, and the markdown that
// docs/cli.md holds between its generated-block markers (`mlk help
// --markdown`; scripts/sync_cli_docs.py splices it in and, with --check, is
// the test cli.docs_generated).
#pragma once

#include <string>
#include <vector>

#include "cli/flags.h"

namespace mlk::cli {

// Text is wrapped to this many columns (preformatted paragraphs are not).
inline constexpr size_t kHelpWidth = 88;

// The "usage:" lines: each form (or the one made from the positionals and
// every flag), wrapped, continuation lines indented under the first word.
std::string synopsis(const CommandSpec& spec);

// `mlk NAME --help`: the synopsis, the description, the subcommands, the
// flags (help wrapped, default shown) and the epilogue.
std::string usage_text(const CommandSpec& spec);

// `mlk --help`: every command with its summary.
std::string main_help(const std::vector<CommandSpec>& specs);

// `mlk help --markdown`: `mlk --help` and each command's usage_text, each as
// a fenced block between the markers
//   <!-- BEGIN GENERATED: mlk NAME --help ... -->  and  <!-- END GENERATED -->
std::string markdown(const std::vector<CommandSpec>& specs);

}  // namespace mlk::cli
