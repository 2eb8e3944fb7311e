// `mlk cache`: maintenance of the artifact store. The command itself lives in
// cache/cache_cli.cpp (testable with captured output); this file gives it the
// names the command table uses.
#include <iostream>
#include <string>
#include <vector>

#include "cache/cache_cli.h"

namespace mlk::cli {

// Full text for `mlk cache --help`.
const char* kCacheUsage = mlk::cache::kCacheUsageText;

int run_cache(const std::vector<std::string>& args) { return mlk::cache::run_cache_cli(args, std::cout, std::cerr); }

}  // namespace mlk::cli
