// `mlk cache push KEY --remote URL` and `mlk cache pull KEY --remote URL`:
// copy one entry between a local store and a `mlk serve` through the client
// (client/remote_store.h). run_cache_cli (cli/cache_cli.h) parses the
// command line and sends `push` and `pull` here.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "cli/cache_cli.h"

namespace mlk::cli {

// `a.command` is "push" or "pull", with one KEY and a --remote URL (as
// run_cache_cli checks). Returns the exit status: 0 success, 1 failure (no
// such key, server unreachable or refusing), 2 bad usage.
int run_cache_transfer(const CacheArgs& a, std::ostream& out, std::ostream& err);

}  // namespace mlk::cli
