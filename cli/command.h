// The mlk command line: one Command per subcommand, each with its own usage
// text. Exit codes: 0 success, 1 bad program or input, 2 bad usage, 3 an
// internal error (an exception escaped the command; cli/main.cpp).
#pragma once

#include <string>
#include <vector>

namespace mlk::cli {

struct Command {
  const char* name;
  const char* summary;  // one line for `mlk --help`
  const char* usage;    // full text for `mlk NAME --help`
  int (*run)(const std::vector<std::string>& args);
};

const std::vector<Command>& commands();

int run_build(const std::vector<std::string>& args);
int run_cache(const std::vector<std::string>& args);
extern const char* kCacheUsage;
int run_check(const std::vector<std::string>& args);
int run_targets(const std::vector<std::string>& args);
int run_run(const std::vector<std::string>& args);
int run_tune(const std::vector<std::string>& args);
int run_version(const std::vector<std::string>& args);

// Prints "mlk NAME: MESSAGE" and the usage hint to stderr; returns 2.
int usage_error(const Command& c, const std::string& message);
const Command& command(const std::string& name);

}  // namespace mlk::cli
