// The mlk command line: one Command per subcommand, each with its flag table
// (cli/flags.h), from which its parsing, its `--help` text and docs/cli.md
// are made. Exit codes: 0 success, 1 bad program or input, 2 bad usage, 3 an
// internal error (an exception escaped the command; cli/main.cpp).
#pragma once

#include <string>
#include <vector>

#include "cli/flags.h"

namespace mlk::cli {

struct Command {
  const char* name;
  // The command's spec for `--help` and the docs: its flags' setters write
  // into scratch options that nothing reads.
  CommandSpec (*spec)();
  int (*run)(const std::vector<std::string>& args);
};

// Every command, in the order `mlk --help` lists them.
const std::vector<Command>& commands();

// The specs of commands(), in order.
std::vector<CommandSpec> command_specs();

// Each command's spec (for help and docs) and its run function, defined in
// cli/NAME_command.cpp.
CommandSpec bench_spec();
CommandSpec build_spec();
CommandSpec cache_spec();
CommandSpec check_spec();
CommandSpec key_spec();
CommandSpec run_spec();
CommandSpec serve_spec();
CommandSpec signature_spec();
CommandSpec targets_spec();
CommandSpec token_spec();
CommandSpec tune_spec();
CommandSpec verify_spec();
CommandSpec version_spec();
CommandSpec worker_spec();
int run_bench(const std::vector<std::string>& args);
int run_build(const std::vector<std::string>& args);
int run_cache(const std::vector<std::string>& args);
int run_check(const std::vector<std::string>& args);
int run_key(const std::vector<std::string>& args);
int run_run(const std::vector<std::string>& args);
int run_serve(const std::vector<std::string>& args);
int run_signature(const std::vector<std::string>& args);
int run_targets(const std::vector<std::string>& args);
int run_token(const std::vector<std::string>& args);
int run_tune(const std::vector<std::string>& args);
int run_verify(const std::vector<std::string>& args);
int run_version(const std::vector<std::string>& args);
int run_worker(const std::vector<std::string>& args);

// Prints "mlk NAME: MESSAGE" and the usage hint to stderr; returns 2.
int usage_error(const std::string& name, const std::string& message);

// Parses `args` by `spec` (parse_command_line); a usage error is printed
// (usage_error) and its exit status returned; 0 when the command line is good.
int parse_or_usage_error(const CommandSpec& spec, const std::vector<std::string>& args, ParsedFlags* seen = nullptr);

}  // namespace mlk::cli
