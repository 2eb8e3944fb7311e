// `mlk cache push KEY --remote URL` and `mlk cache pull KEY --remote URL`:
// copy one entry between a local store and a `mlk serve` through the client
// (client/remote_store.h). cli/cache_command.cpp sends `push` and `pull` here
// and everything else to cli/cache_cli.h.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace mlk::cli {

// `args` starts with "push" or "pull". Returns the exit status: 0 success,
// 1 failure (no such key, server unreachable or refusing), 2 bad usage.
int run_cache_transfer(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace mlk::cli
