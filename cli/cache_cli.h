// `mlk cache`: list, show, verify, gc, export, import, rm, pin and unpin
// entries of the artifact store (cache/store.h), and push and pull of one
// entry to and from a `mlk serve` (cli/transfer_cli.h). A library (mlk_cli)
// rather than part of the mlk command so that tests run it with captured
// output; cli/cache_command.cpp registers it.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "cli/flags.h"

namespace mlk::cli {

// `mlk cache` parsed: the subcommand, its arguments and the flags.
struct CacheArgs {
  std::string command;
  std::vector<std::string> positional;
  std::string cache;
  std::optional<std::string> ns;  // validated
  std::optional<int64_t> max_size;
  bool repair = false;
  bool json = false;  // ls: one JSON object on stdout instead of the table
  std::string remote;  // an http:// URL when given
  std::string require_verified;  // push: the levels the entry's report must pass ("" = none)
  std::string sign;              // push: sign the entry with this key file first (docs/signing.md; "" = no)
  std::string trusted_signers;   // push --sign: keys whose signature lets an entry not made here be re-signed
};

// The flags and subcommands of `mlk cache`, for its help and the docs.
CommandSpec cache_command_spec();

// Runs `mlk cache ARGS...` (`--help` included); returns the exit status:
// 0 success, 1 corruption found or bad input (no such key, damaged or
// unwritable store, a server that fails), 2 bad usage.
int run_cache_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace mlk::cli
