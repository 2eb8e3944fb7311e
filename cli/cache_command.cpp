// `mlk cache`: maintenance of the artifact store. The command itself lives in
// cache/cache_cli.cpp (testable with captured output); this file gives it the
// names the command table uses.
#include <iostream>
#include <string>
#include <vector>

#include "cache/cache_cli.h"
#include "service/transfer_cli.h"

namespace mlk::cli {

// Full text for `mlk cache --help`.
const char* kCacheUsage = mlk::cache::kCacheUsageText;

int run_cache(const std::vector<std::string>& args) {
  // push and pull talk HTTP, which cache/ does not know: service/ runs them.
  if (!args.empty() && (args[0] == "push" || args[0] == "pull"))
    return mlk::service::run_cache_transfer(args, std::cout, std::cerr);
  return mlk::cache::run_cache_cli(args, std::cout, std::cerr);
}

}  // namespace mlk::cli
