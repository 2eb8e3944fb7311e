// mlk-measure-worker: a measurement worker for built artifacts only
// (runtime/worker_loop.h): what a GPU machine runs to serve `mlk tune
// --workers KEY`. Links the runtime's artifact loader and the jobs client; no
// compiler. mlk-measure stays apart from it so that it needs no network
// libraries and travels alone.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "base/decimal.h"
#include "runtime/worker_loop.h"
#include "targets/toolchain.h"

namespace {

constexpr const char* kUsage =
    "usage: mlk-measure-worker --device-key KEY [--server URL] [--name NAME] [--namespace NS]\n"
    "                          [--lease SECONDS] [--poll SECONDS] [--max-jobs N] [--json] [--quiet]\n"
    "                          [--trusted-signers KEYS]\n"
    "\n"
    "A measurement worker for `mlk tune --workers KEY` (docs/deploy.md, \"Measurement\n"
    "workers\"), as `mlk worker --run-artifacts` is, for built artifacts only (GPU profiles,\n"
    "`mlk tune --workers-run-artifacts`), with no compiler: it registers with the server\n"
    "under the device key and this machine's hardware fingerprint, leases jobs one at a\n"
    "time, runs each candidate as mlk-measure does (verified, then timed) in a child\n"
    "process, and reports it. A job of source to compile fails, saying so.\n"
    "\n"
    "  --server URL      the server (default $MLK_SERVERS); the token is $MLK_TOKEN, with\n"
    "                    the scopes read and worker\n"
    "  --device-key KEY  the key `mlk tune --workers KEY` names\n"
    "  --name NAME       this worker's name (default HOSTNAME-PID)\n"
    "  --namespace NS    the namespace of the jobs (default the token's)\n"
    "  --lease SECONDS   the lease of a job, renewed while it runs (default 30)\n"
    "  --poll SECONDS    the wait between polls of an empty queue (default 0.2)\n"
    "  --max-jobs N      exit after N jobs (default 0: no limit)\n"
    "  --json            events as JSON lines on stdout (format mlk-worker-1)\n"
    "  -q, --quiet       no line per job\n"
    "  --run-artifacts   accepted for `mlk worker`'s command lines; always on here\n"
    "  --trusted-signers KEYS  run only packs one of these Ed25519 public keys (or KEY.pub\n"
    "                    files, comma-separated) signed for the namespace (`mlk tune\n"
    "                    --sign-packs`); default $MLK_TRUSTED_SIGNERS; others fail unrun\n"
    "\n"
    "SIGTERM or SIGINT: the job in hand is finished, then exit 0. Exit status 1 for bad\n"
    "usage or when the server refuses the worker.\n";

int fail(const std::string& why) {
  std::fprintf(stderr, "mlk-measure-worker: %s\n", why.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  mlk::rt::WorkerLoopOptions o;
  o.program = "mlk-measure-worker";
  o.run_artifacts = true;
  if (const char* s = std::getenv("MLK_SERVERS")) o.server = s;
  if (const char* t = std::getenv("MLK_TOKEN")) o.token = t;
  std::string trusted;
  const std::map<std::string, std::string*> text = {{"--server", &o.server},
                                                    {"--device-key", &o.device_key},
                                                    {"--name", &o.name},
                                                    {"--namespace", &o.ns},
                                                    {"--trusted-signers", &trusted}};
  const std::map<std::string, double*> numbers = {{"--lease", &o.lease_s}, {"--poll", &o.poll_s}};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool takes_value = text.count(a) || numbers.count(a) || a == "--max-jobs";
    if (a == "-h" || a == "--help") return std::fputs(kUsage, stdout), 0;
    if (a == "--version") return std::printf("mlk-measure-worker %s\n", mlk::mlk_version().c_str()), 0;
    if (a == "--run-artifacts") continue;  // `mlk worker`'s switch; always on here
    if (a == "--json") o.json = true;
    else if (a == "--quiet" || a == "-q") o.quiet = true;
    else if (takes_value && i + 1 >= argc) return fail(a + " needs a value");
    else if (text.count(a)) *text.at(a) = argv[++i];
    else if (takes_value) {
      // Decimal digits, with one point for seconds: no signs, exponents, inf or nan.
      const std::string v = argv[++i];
      const bool seconds = a != "--max-jobs";
      const auto x = mlk::parse_plain_decimal(v, seconds ? 1 : 0);
      if (!x || (!seconds && *x > 1e9))
        return fail(a + " wants " + (seconds ? "a number of seconds (e.g. 0.5)" : "a whole number") + ", not `" + v +
                    "`");
      if (seconds) *numbers.at(a) = *x;
      else o.max_jobs = static_cast<int64_t>(*x);
    } else
      return std::fprintf(stderr, "mlk-measure-worker: unknown argument %s\n%s", a.c_str(), kUsage), 1;
  }
  if (std::string why = mlk::rt::check_worker_options(o); !why.empty()) return fail(why);
  auto keys = mlk::rt::worker_trusted_signers(trusted);
  if (!keys.ok()) return fail(keys.status().message());
  o.trusted = *keys;
  return mlk::rt::run_worker_loop(o, nullptr);
}
