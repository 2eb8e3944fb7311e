// mlk: the command-line driver. Dispatches to one Command per subcommand.
// Any exception that escapes a command is a bug in mlk: it becomes the one
// line `mlk COMMAND: internal error: WHAT (...)` on stderr and exit status 3
// (kInternalErrorExit), never an abort.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/completion.h"
#include "cli/usage.h"
#include "targets/toolchain.h"

namespace mlk::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> cmds = {
      {"bench", bench_spec, run_bench},     {"build", build_spec, run_build}, {"cache", cache_spec, run_cache},
      {"check", check_spec, run_check},     {"key", key_spec, run_key},     {"run", run_spec, run_run},       {"serve", serve_spec, run_serve},
      {"signature", signature_spec, run_signature},
      {"targets", targets_spec, run_targets}, {"token", token_spec, run_token}, {"tune", tune_spec, run_tune},
      {"verify", verify_spec, run_verify},    {"version", version_spec, run_version},
      {"worker", worker_spec, run_worker},
  };
  return cmds;
}

std::vector<CommandSpec> command_specs() {
  std::vector<CommandSpec> specs;
  for (const auto& c : commands()) specs.push_back(c.spec());
  return specs;
}

int usage_error(const std::string& name, const std::string& message) {
  std::fprintf(stderr, "mlk %s: %s\n(see `mlk %s --help`)\n", name.c_str(), message.c_str(), name.c_str());
  return 2;
}

int parse_or_usage_error(const CommandSpec& spec, const std::vector<std::string>& args, ParsedFlags* seen) {
  auto parsed = parse_command_line(spec, args);
  if (!parsed.ok()) return usage_error(spec.name, parsed.status().message());
  if (seen) *seen = *parsed;
  return 0;
}

namespace {

void print_help(FILE* out) { std::fputs(main_help(command_specs()).c_str(), out); }

int internal_error(const char* command, const char* what) {
  std::fprintf(stderr,
               "mlk %s: internal error: %s (please report this bug to the mlk maintainers with the command line "
               "that caused it)\n",
               command, what);
  return kInternalErrorExit;
}

// Runs one command; an escaping exception becomes exit status 3.
int run_guarded(const Command& c, const std::vector<std::string>& args) {
  try {
    // Test seam (tests/cli_tests.cmake): each internal-error route before the
    // command starts: MLK_TEST_THROW=1 an exception, =check a failing
    // MLK_CHECK, =status a Status::Internal. Each must end with exit 3.
    if (const char* t = std::getenv("MLK_TEST_THROW"); t && *t) {
      const std::string route = t;
      if (route == "1") throw std::runtime_error("MLK_TEST_THROW is set (a test of the internal-error path)");
      MLK_CHECK(route != "check", "MLK_TEST_THROW=check (a test of the failed-check path)");
      if (route == "status") {
        Status s = Status::Internal("MLK_TEST_THROW=status (a test of the internal-status path)");
        std::fprintf(stderr, "mlk %s: internal error: %s\n", c.name, s.message().c_str());
        return s.exit_code();
      }
    }
    return c.run(args);
  } catch (const std::exception& e) {
    return internal_error(c.name, e.what());
  } catch (...) {
    return internal_error(c.name, "an exception that is not a std::exception");
  }
}

const Command* find_command(const std::string& name) {
  for (const auto& c : commands())
    if (name == c.name || (name == "--version" && std::string(c.name) == "version")) return &c;
  return nullptr;
}

// `mlk help`, `mlk help NAME` (NAME's usage), `mlk help --bash|--zsh|--man`
// (cli/completion.h) and, for docs/cli.md, the unlisted `mlk help --markdown`.
int help(const std::vector<std::string>& args) {
  if (args.size() <= 1) {
    print_help(stdout);
    return 0;
  }
  if (args.size() == 2 && args[1] == "--markdown") {
    std::fputs(markdown(command_specs()).c_str(), stdout);
    return 0;
  }
  if (args.size() == 2 && (args[1] == "--bash" || args[1] == "--zsh" || args[1] == "--man")) {
    const auto specs = command_specs();
    std::fputs((args[1] == "--bash"  ? bash_completion(specs)
                : args[1] == "--zsh" ? zsh_completion(specs)
                                     : man_page(specs, mlk_version()))
                   .c_str(),
               stdout);
    return 0;
  }
  const Command* c = args.size() == 2 ? find_command(args[1]) : nullptr;
  if (!c) {
    std::fprintf(stderr, "mlk help: `%s` is not a command\n\n", args[1].c_str());
    print_help(stderr);
    return 2;
  }
  std::fputs(usage_text(c->spec()).c_str(), stdout);
  return 0;
}

}  // namespace
}  // namespace mlk::cli

int main(int argc, char** argv) {
  using namespace mlk::cli;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    print_help(stderr);
    return 2;
  }
  const std::string& name = args[0];
  if (name == "--help" || name == "-h") {
    print_help(stdout);
    return 0;
  }
  if (name == "help") return help(args);
  const Command* c = find_command(name);
  if (!c) {
    std::fprintf(stderr, "mlk: unknown command `%s`\n\n", name.c_str());
    print_help(stderr);
    return 2;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  for (const auto& a : rest)
    if (a == "--help" || a == "-h") {
      std::fputs(usage_text(c->spec()).c_str(), stdout);
      return 0;
    }
  return run_guarded(*c, rest);
}
