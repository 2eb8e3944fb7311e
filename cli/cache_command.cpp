// `mlk cache`: maintenance of the artifact store. The command itself lives in
// cli/cache_cli.cpp and cli/transfer_cli.cpp (the mlk_cli library, testable
// with captured output); this file gives it the names the command table uses.
#include <iostream>
#include <string>
#include <vector>

#include "cli/cache_cli.h"
#include "cli/command.h"

namespace mlk::cli {

CommandSpec cache_spec() { return cache_command_spec(); }

int run_cache(const std::vector<std::string>& args) { return run_cache_cli(args, std::cout, std::cerr); }

}  // namespace mlk::cli
