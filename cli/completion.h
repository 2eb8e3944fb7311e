// Shell completion and the man page of mlk, made from the same flag tables
// as `--help` and docs/cli.md (cli/flags.h), so none can drift from the
// commands: `mlk help --bash`, `mlk help --zsh`, `mlk help --man`.
#pragma once

#include <string>
#include <vector>

#include "cli/flags.h"

namespace mlk::cli {

// A bash completion script (`source <(mlk help --bash)`, or a file in
// /usr/share/bash-completion/completions/mlk): commands, then each command's
// subcommands and flags; a flag that takes a value completes file names.
std::string bash_completion(const std::vector<CommandSpec>& specs);

// The same for zsh, through its bash-completion layer (bashcompinit): a file
// `_mlk` on $fpath.
std::string zsh_completion(const std::vector<CommandSpec>& specs);

// mlk(1) in man(7) roff: every command with its synopsis, description,
// subcommands and flags (`mlk help --man | man -l -`).
std::string man_page(const std::vector<CommandSpec>& specs, const std::string& version);

}  // namespace mlk::cli
