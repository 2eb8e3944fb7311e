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

namespace mlk::cli {

int run_serve(const std::vector<std::string>& args);  // cli/serve_command.cpp
int run_token(const std::vector<std::string>& args);  // cli/token_command.cpp
int run_bench(const std::vector<std::string>& args);  // cli/bench_command.cpp
extern const char* kBenchUsage;                        // cli/bench_command.cpp

namespace {

const char* kCheckUsage =
    "usage: mlk check FILE.tl... [--emit-ir] [--emit-tokens] [--hash] [-q]\n"
    "\n"
    "Parses and type-checks .tl programs: dtypes, symbolic shapes and refinements.\n"
    "Exit status 0 when every file is well-typed, 1 when any has errors (printed as\n"
    "FILE:LINE:COL: error: MESSAGE with the source line and a caret), 2 on bad usage,\n"
    "3 on an internal error (a bug in mlk).\n"
    "\n"
    "  --emit-ir      print the canonical typed IR of each file\n"
    "  --emit-tokens  print the token stream (one token per line)\n"
    "  --hash         print the content hash of every function and of the file\n"
    "  -q             print nothing on success\n";

const char* kRunUsage =
    "usage: mlk run FILE.tl [--fn NAME] --inputs IN.safetensors --output OUT.safetensors\n"
    "               [--dims N=V,...] [--target PROFILE] [--repeat K] [--reference]\n"
    "               [--cache PATH] [--namespace NAME] [--no-cache] [--require any|tuned|exact]\n"
    "               [--dump-after STAGE]\n"
    "\n"
    "Computes fn NAME of FILE.tl on the tensors of IN.safetensors and writes its result\n"
    "as the tensor \"output\" of OUT.safetensors.\n"
    "\n"
    "  --fn NAME        the fn to run; may be omitted when the file has one public fn\n"
    "  --inputs FILE    one tensor per parameter, matched by name; dtypes must match\n"
    "                   exactly and every other tensor in the file is an error\n"
    "  --output FILE    where to write the result (written atomically)\n"
    "  --dims N=V,...   values of dimensions no input binds (and checks on the rest)\n"
    "  --target PROFILE the profile to run (default host). From the artifact cache (re-hashed,\n"
    "                   then loaded): the artifact tuned for PROFILE, this fn and exactly this\n"
    "                   shape; else the one tuned at the nearest other shape (whose required\n"
    "                   CPU features this machine has); else, for a CPU profile, the default\n"
    "                   schedule with Halide's JIT. stderr says which was run and why\n"
    "  --require WHAT   any (default); tuned: refuse the JIT fallback; exact: refuse all but\n"
    "                   an artifact tuned at exactly this shape (exit 1, naming what is missing)\n"
    "  --cache PATH     the store or a `mlk serve` URL (default: $MLK_CACHE, else\n"
    "                   $XDG_CACHE_HOME/mlk/cache.db); a server's entries are found too\n"
    "  --no-cache       never consult the cache\n"
    "  --repeat K       run K more times and print the median and minimum time\n"
    "  --reference      use the reference interpreter (double precision) instead\n"
    "  --dump-after STAGE  print, on stdout, the kernel's compile stage STAGE (for a tuned\n"
    "                   artifact: rebuilt from its schedule up to code generation) and go on:\n"
    "                   ir (typed IR), stages (stage table), schedule (applied schedule JSON),\n"
    "                   loops (Halide's loop nest)\n"
    "\n"
    "Dimensions are inferred from the input shapes and checked against the signature\n"
    "and its refinements; a mismatch names the parameter, axis and symbol. Exit status\n"
    "0 on success, 1 on a bad program or input (also inputs and outputs larger than\n"
    "this machine's memory, refused before anything is allocated), 2 on bad usage,\n"
    "3 on an internal error (a bug in mlk).\n";

const char* kBuildUsage =
    "usage: mlk build FILE.tl [--fn NAME] --target PROFILE [--dims N=V,...] [--schedule S.json] -o DIR\n"
    "                 [--cache PATH] [--namespace NAME] [--no-cache] [--dump-after STAGE]\n"
    "\n"
    "Compiles fn NAME ahead of time for a target capability profile into DIR:\n"
    "  libNAME.so        the kernel, exporting the C ABI entry mlk_NAME (see mlk_abi.h)\n"
    "  NAME_halide.h     Halide's declaration of the inner entry point\n"
    "  mlk_abi.h         the C ABI: mlk_tensor_t, dtype codes, error codes\n"
    "  NAME.ptx          CUDA profiles: the PTX (and NAME.cubin where ptxas exists)\n"
    "  manifest.json     signature, profile and required capabilities, schedule,\n"
    "                    toolchain versions, sha256 of every file, ptxas report\n"
    "\n"
    "  --target PROFILE  one of `mlk targets` (host, cpu_avx2, cpu_avx512, cpu_avx512_spr,\n"
    "                    cuda_sm80, cuda_sm90); CUDA profiles build without a GPU\n"
    "  --dims N=V,...    the shape the schedule is made for (default: the fn's first\n"
    "                    `tune` bucket); the kernel still runs on every valid shape\n"
    "  --schedule FILE   a schedule (JSON, see docs/schedules.md) instead of the default\n"
    "  --cache PATH      when no --schedule is given and the store (default: $MLK_CACHE,\n"
    "                    else $XDG_CACHE_HOME/mlk/cache.db) holds a tuned artifact for this\n"
    "                    fn, shape and profile, that artifact is the build (says `cached:`)\n"
    "  --namespace NAME  the cache namespace (default: default)\n"
    "  --no-cache        never consult the cache\n"
    "  --dump-after STAGE  print, on stdout, compile stage STAGE and go on building: ir\n"
    "                    (typed IR), stages (stage table), schedule (applied schedule\n"
    "                    JSON), loops (Halide's loop nest)\n";

const char* kTargetsUsage =
    "usage: mlk targets\n"
    "\n"
    "Lists the target capability profiles, whether each can run on this machine\n"
    "(and why not), and what was detected: CPU features by cpuid, CUDA devices\n"
    "through the driver (loaded at run time; none is needed to build).\n";

const char* kTuneUsage =
    "usage: mlk tune FILE.tl --target PROFILE [--fn NAME] [--dims N=V,...] [--trials N] [--time SECONDS]\n"
    "                [--seed K] [--json] [-o DIR] [--cache PATH] [--namespace NAME] [--log FILE]\n"
    "                [--timeout SECONDS] [--compile-timeout SECONDS] [--require-measured]\n"
    "                [--no-autoschedulers] [--no-cache] [--dump-after STAGE] [-q]\n"
    "\n"
    "Searches schedules for every public fn of FILE.tl (or --fn NAME) at each shape of\n"
    "its `tune` declarations (or --dims), verifies every candidate against the reference\n"
    "interpreter (two random input sets at each of two shapes, one with ragged tails),\n"
    "measures it in an isolated worker process, and keeps the fastest. The winner's\n"
    "stored artifact is called through its C ABI and checked the same way.\n"
    "The winner's artifact (as `mlk build` makes it), schedule, tuning log and timings\n"
    "go into the artifact cache under a key of everything that determines them; a\n"
    "cache hit returns at once and says so.\n"
    "\n"
    "  --trials N          candidates to measure, at most (default 40)\n"
    "  --time SECONDS      search budget per shape (default 150)\n"
    "  --seed K            the search's random seed (default 1); the same seed replays\n"
    "                      the same search\n"
    "  --json              print only a JSON array on stdout (the summary lines go to\n"
    "                      stderr) with, per tuned fn and shape: fn, target, dims,\n"
    "                      best_ms, default_ms, speedup, trials, key, measured, cached\n"
    "  -o DIR              also write the artifact files to DIR\n"
    "  --cache PATH        the store (default: $MLK_CACHE, else $XDG_CACHE_HOME/mlk/cache.db)\n"
    "  --log FILE          the tuning log (JSON lines, appended after every trial); an\n"
    "                      interrupted run resumes from it (default: next to the store)\n"
    "  --timeout SECONDS   per candidate, the limit on its run (verification and\n"
    "                      timing; default 60); a hung or crashed candidate costs one\n"
    "                      trial\n"
    "  --compile-timeout SECONDS\n"
    "                      per candidate, the limit on its compilation (Halide's JIT\n"
    "                      and any autoscheduler; default: max(60, 10 x the default\n"
    "                      schedule's compile time))\n"
    "  --require-measured  refuse results that are estimates (GPU profiles with no GPU)\n"
    "  --no-autoschedulers do not try Halide's autoschedulers as extra candidates\n"
    "  --dump-after STAGE  after each winner's final build, print its compile stage\n"
    "                      STAGE (on stdout; on stderr with --json): ir, stages,\n"
    "                      schedule or loops\n"
    "\n"
    "GPU profiles on a machine without a GPU are tuned with the cost model and the\n"
    "ptxas resource report; their results are marked measured: false.\n"
    "Progress goes to stderr: trials done, best time, speedup over the default, ETA.\n"
    "\n"
    "Exit status: 0 success; 1 a bad program or input (including a shape whose\n"
    "inputs and outputs would not fit in this machine's memory, refused before\n"
    "anything is allocated); 2 bad usage; 3 an internal error (a bug in mlk).\n";

const char* kServeUsage =
    "usage: mlk serve [--cache PATH] [--listen HOST:PORT] [--threads N] [--max-body SIZE]\n"
    "                 [--quota TEAM=SIZE]... [--default-quota SIZE] [--timeout SECONDS]\n"
    "                 [--keep-alive SECONDS] [--staged-ttl SECONDS] [--access-log]\n"
    "\n"
    "Serves the artifact store over HTTP (docs/api.md): blobs by sha256, entries by\n"
    "key, queries, status and Prometheus metrics under /v1/ and /metrics, and ccache's\n"
    "HTTP remote-storage protocol under /ccache/. Every request needs a token from\n"
    "`mlk token create`, which binds it to a team (namespace) and scopes. Runs until\n"
    "SIGTERM or SIGINT, then finishes the requests in flight and exits 0.\n"
    "\n"
    "  --cache PATH         the store (default: $MLK_CACHE, else $XDG_CACHE_HOME/mlk/cache.db)\n"
    "  --listen HOST:PORT   the address (default 127.0.0.1:8080; port 0: any free port,\n"
    "                       printed on the first line of output)\n"
    "  --threads N          worker threads, each serving one connection at a time (default 8)\n"
    "  --max-body SIZE      largest request body; larger ones get 413 (default 64M)\n"
    "  --quota TEAM=SIZE    hard limit of a namespace's bytes; over it writes get 507\n"
    "  --default-quota SIZE the limit of every namespace without --quota (default: none)\n"
    "  --timeout SECONDS    per socket read or write; a stalled client is dropped (default 30)\n"
    "  --keep-alive SECONDS idle time before a keep-alive connection is closed (default 5)\n"
    "  --staged-ttl SECONDS how long an uploaded blob no entry uses stays charged to its\n"
    "                       namespace and readable by it (default 3600)\n"
    "  --access-log         one line per request on stderr\n"
    "\n"
    "SIZE is bytes, or a whole number with K, M or G (powers of 1024).\n";

const char* kTokenUsage =
    "usage: mlk token create --team NAME --scopes LIST [--note TEXT] [--cache PATH]\n"
    "       mlk token list [--json] [--cache PATH]\n"
    "       mlk token revoke ID|PREFIX [--cache PATH]\n"
    "\n"
    "Manages the access tokens of `mlk serve`, kept in the store file it serves (only\n"
    "a sha256 of each token is stored). `create` prints the new token on stdout, once.\n"
    "\n"
    "  --team NAME    the namespace the token may use\n"
    "  --scopes LIST  comma-separated: read, write-blobs, write-entries, admin (admin:\n"
    "                 everything, in every namespace, and /metrics)\n"
    "  --note TEXT    a reminder of who or what the token is for\n"
    "  --cache PATH   the store (default: $MLK_CACHE, else $XDG_CACHE_HOME/mlk/cache.db)\n"
    "\n"
    "Clients send the token as `Authorization: Bearer TOKEN`; mlk reads it from $MLK_TOKEN.\n";

const char* kVersionUsage =
    "usage: mlk version\n"
    "\n"
    "Prints the versions of mlk, Halide and its LLVM, and the CUDA toolkit found\n"
    "on PATH, $CUDA_HOME/bin or /usr/local/cuda/bin (or that none was found).\n";

}  // namespace

const std::vector<Command>& commands() {
  static const std::vector<Command> cmds = {
      {"bench", "time fns against their peers; record baselines and gate on regressions", kBenchUsage, run_bench},
      {"build", "compile a fn for a target profile into an artifact directory", kBuildUsage, run_build},
      {"cache", "inspect and maintain the artifact cache", kCacheUsage, run_cache},
      {"check", "type-check .tl programs and print diagnostics", kCheckUsage, run_check},
      {"run", "compute a fn on safetensors inputs (Halide JIT or --reference)", kRunUsage, run_run},
      {"serve", "serve the artifact cache over HTTP (API, ccache protocol, metrics)", kServeUsage, run_serve},
      {"targets", "list target profiles and what this machine can run", kTargetsUsage, run_targets},
      {"token", "create, list and revoke access tokens of `mlk serve`", kTokenUsage, run_token},
      {"tune", "autotune fns for a target profile into the artifact cache", kTuneUsage, run_tune},
      {"version", "print mlk, Halide, LLVM and CUDA toolkit versions", kVersionUsage, run_version},
  };
  return cmds;
}

const Command& command(const std::string& name) {
  for (const auto& c : commands())
    if (name == c.name) return c;
  return commands().front();
}

int usage_error(const Command& c, const std::string& message) {
  std::fprintf(stderr, "mlk %s: %s\n(see `mlk %s --help`)\n", c.name, message.c_str(), c.name);
  return 2;
}

namespace {

void print_help(FILE* out) {
  std::fprintf(out,
               "usage: mlk COMMAND [ARGS...]\n"
               "\n"
               "mlk compiles typed tensor programs (.tl) to tuned kernels.\n"
               "\n"
               "commands:\n");
  for (const auto& c : commands()) std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
  std::fprintf(out,
               "\n"
               "`mlk COMMAND --help` describes one command. Exit status: 0 success,\n"
               "1 bad program or input, 2 bad usage, 3 internal error (a bug in mlk).\n");
}

// Exit status of a command that ended by an exception: a bug in mlk, distinct
// from 1 (bad program or input) and 2 (bad usage).
constexpr int kInternalErrorExit = 3;

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
    // Test seam: MLK_TEST_THROW=1 makes the command throw before it starts, so
    // that tests can check the internal-error path (tests/cli_tests.cmake).
    if (const char* t = std::getenv("MLK_TEST_THROW"); t && std::string(t) == "1")
      throw std::runtime_error("MLK_TEST_THROW is set (a test of the internal-error path)");
    return c.run(args);
  } catch (const std::exception& e) {
    return internal_error(c.name, e.what());
  } catch (...) {
    return internal_error(c.name, "an exception that is not a std::exception");
  }
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
  if (name == "--help" || name == "-h" || name == "help") {
    print_help(stdout);
    return 0;
  }
  for (const auto& c : commands()) {
    if (name != c.name && !(name == "--version" && std::string(c.name) == "version")) continue;
    std::vector<std::string> rest(args.begin() + 1, args.end());
    for (const auto& a : rest)
      if (a == "--help" || a == "-h") {
        std::fputs(c.usage, stdout);
        return 0;
      }
    return run_guarded(c, rest);
  }
  std::fprintf(stderr, "mlk: unknown command `%s`\n\n", name.c_str());
  print_help(stderr);
  return 2;
}
