// A command's flags from a TOML file (`mlk serve --config FILE`): the file is
// another spelling of the command line, read through the same flag table
// (cli/flags.h), so every flag has a key and the two cannot drift apart.
//
//   listen = "0.0.0.0:8080"          # --listen 0.0.0.0:8080
//   threads = 16                     # --threads 16 (integers as written)
//   access-log = true                # a switch: true gives it, false does not
//   [quota]                          # a repeatable NAME=VALUE flag as a table:
//   vision = "50G"                   #   --quota vision=50G
//   [trusted-signers]
//   release = ["ab12...", "k.pub"]   #   --trusted-signers release=ab12...,k.pub
//
// Flags on the command line override the file: a flag given there replaces
// the file's key whole (for a repeatable flag, its whole table: the file's
// trusted keys are not kept beside the command line's).
//
// A key is a flag's name without its dashes. A repeatable flag also takes an
// array of its values (`quota = ["vision=50G"]`). Errors are usage errors
// (exit 2) that start with FILE:LINE:COLUMN: an unknown key (with the nearest
// flag's name), a value of the wrong TOML type, a table or array where the
// flag is not repeatable, a key naming `--config` itself, and whatever the
// flag's own setter says of the value; TOML syntax errors as toml++ reports
// them.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "cli/flags.h"

namespace mlk::cli {

// Calls the setters of `spec`'s flags for every key of the TOML file at
// `path` (in key order: each key sets its own flag, so order does not
// matter), but for the flags named in `skip` (by table name, "--quota"):
// those the command line gives, which replace the file's value whole (a
// repeatable flag's whole table). Run it before parse_command_line on the
// same spec. `refused` names flags a file may not set (actions such as
// --routes); a key naming one is an error at its position.
Status apply_config_file(const CommandSpec& spec, const std::string& path, const std::set<std::string>& skip = {},
                         const std::set<std::string>& refused = {});

// The value of `--config FILE` / `--config=FILE` in `args`, if given, without
// parsing anything else. Given twice, or with no value, is a usage error.
Expected<std::optional<std::string>> config_flag_value(const std::vector<std::string>& args);

}  // namespace mlk::cli
