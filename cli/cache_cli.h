// `mlk cache`: list, show, verify, gc, export, import, rm, pin and unpin
// entries of the artifact store (cache/store.h), and push and pull of one
// entry to and from a `mlk serve` (cli/transfer_cli.h). A library (mlk_cli)
// rather than part of the mlk command so that tests run it with captured
// output; cli/cache_command.cpp registers it.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace mlk::cli {

extern const char kCacheUsageText[];

// Runs `mlk cache ARGS...` other than push and pull; returns the exit status:
// 0 success, 1 corruption found or bad input (no such key, damaged or
// unwritable store), 2 bad usage.
int run_cache_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace mlk::cli
