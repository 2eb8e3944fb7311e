// `mlk cache`: maintenance of the artifact store. The command itself lives in
// cli/cache_cli.cpp and cli/transfer_cli.cpp (the mlk_cli library, testable
// with captured output); this file gives it the names the command table uses.
#include <iostream>
#include <string>
#include <vector>

#include "cli/cache_cli.h"
#include "cli/transfer_cli.h"

namespace mlk::cli {

// Full text for `mlk cache --help`.
const char* kCacheUsage = kCacheUsageText;

int run_cache(const std::vector<std::string>& args) {
  // push and pull talk HTTP through the client (client/remote_store.h).
  if (!args.empty() && (args[0] == "push" || args[0] == "pull")) return run_cache_transfer(args, std::cout, std::cerr);
  return run_cache_cli(args, std::cout, std::cerr);
}

}  // namespace mlk::cli
