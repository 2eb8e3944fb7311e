// `mlk worker`: a measurement worker (docs/deploy.md, "Measurement
// workers"). The loop (registration, leases, heartbeats, built-artifact jobs
// run by mlk-measure's runner) is runtime/worker_loop.h, shared with
// mlk-measure-worker; what this command adds is the compiler: a source
// job's setup is fetched (cached by sha256), its program compiled here, and
// the candidate run in the isolated measurer (autotune/measure.h), which
// verifies it against the tuner's references before timing it.
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "autotune/measure.h"
#include "autotune/measure_wire.h"
#include "base/child.h"
#include "base/json.h"
#include "cli/args.h"
#include "cli/command.h"
#include "lang/frontend.h"
#include "runtime/worker_loop.h"

namespace mlk::cli {

namespace {

using nlohmann::json;

struct WorkerArgs {
  rt::WorkerLoopOptions o;
  std::string trusted;  // --trusted-signers
};

CommandSpec spec(WorkerArgs& a) {
  return {
      .name = "worker",
      .summary = "measure tuning candidates for `mlk tune --workers` (a measurement worker)",
      .description =
          "Registers with a `mlk serve` under a device key and this machine's hardware\n"
          "fingerprint (CPU model, cpuid flags, GPUs), then leases measurement jobs of that\n"
          "key one at a time: each candidate is compiled here, verified against the\n"
          "tuner's reference results and timed in an isolated process, and its times are\n"
          "reported. Jobs of built artifacts (GPU profiles: nothing is compiled here) run\n"
          "only with --run-artifacts. The lease is extended while the candidate runs; a worker that dies\n"
          "loses its lease and the job goes to another worker. The token ($MLK_TOKEN)\n"
          "needs the scopes read and worker. Runs until SIGTERM or SIGINT, then\n"
          "finishes the job in hand and exits 0.\n"
          "\n"
          "With --json, stdout has one JSON object per line for each event:\n"
          "{\"format\": \"mlk-worker-1\", \"event\": \"registered\" | \"job\" | \"stopped\" | \"done\", ...}\n"
          "(docs/cli.md); the progress lines stay on stderr. A GPU machine without the\n"
          "compiler runs mlk-measure-worker instead: the same loop, built artifacts only.\n",
      .flags =
          {
              {.name = "--server", .metavar = "URL", .help = "the server, or several comma-separated (replicas)",
               .default_value = "$MLK_SERVERS", .set = store(a.o.server)},
              {.name = "--device-key", .metavar = "KEY", .help = "the device key this worker measures for",
               .set = store(a.o.device_key), .required = true},
              {.name = "--name", .metavar = "NAME", .help = "this worker's name in progress lines and the jobs",
               .default_value = "HOSTNAME-PID", .set = store(a.o.name)},
              {.name = "--namespace", .metavar = "NAME", .help = "the namespace whose jobs it takes",
               .default_value = "the token's team", .set = store(a.o.ns)},
              {.name = "--lease", .metavar = "SECONDS",
               .help = "how long a lease lasts without a heartbeat (heartbeats come every third of it)",
               .default_value = "30", .set = store_seconds(a.o.lease_s)},
              {.name = "--poll", .metavar = "SECONDS", .help = "the wait between lease requests while idle",
               .default_value = "0.2", .set = store_seconds(a.o.poll_s)},
              {.name = "--max-jobs", .metavar = "N", .help = "exit 0 after N jobs; 0: no limit", .default_value = "0",
               .set = [&a](const std::string& flag, const std::string& v) -> Status {
                 auto n = parse_int_flag(flag, v, 0, std::numeric_limits<int>::max());
                 if (!n.ok()) return n.status();
                 a.o.max_jobs = *n;
                 return Status::Ok();
               }},
              {.name = "--run-artifacts",
               .help = "also run jobs of built artifacts (GPU profiles, `mlk tune --workers-run-artifacts`): "
                       "native code built by whoever may submit jobs in the namespace, loaded and timed here in a "
                       "child process by mlk-measure's runner; without it such jobs fail with the reason",
               .set = set_bool(a.o.run_artifacts)},
              {.name = "--trusted-signers", .metavar = "KEYS",
               .help = "with --run-artifacts, run only built artifacts whose pack one of these Ed25519 public keys "
                       "(or KEY.pub files, comma-separated) signed for this namespace (`mlk tune --sign-packs`); "
                       "others fail unrun",
               .default_value = "$MLK_TRUSTED_SIGNERS", .set = store(a.trusted)},
              {.name = "-q", .help = "no line per job", .set = set_bool(a.o.quiet), .aliases = {"--quiet"}},
              {.name = "--json", .help = "events as JSON lines on stdout (registered, each job's result, the end)",
               .set = set_bool(a.o.json)},
          },
  };
}

// A decoded setup and the module compiled from its source.
struct Prepared {
  tune::DecodedSetup d;
  std::unique_ptr<FrontendResult> fe;
};

Expected<Prepared*> prepare(client::JobsClient& c, const client::JobView& job, std::map<std::string, Prepared>& cache) {
  if (auto it = cache.find(job.setup); it != cache.end()) return &it->second;
  auto bytes = c.setup_of(job);
  if (!bytes.ok()) return bytes.status();
  auto d = tune::decode_setup(*bytes);
  if (!d.ok()) return d.status();
  Prepared p{std::move(*d), std::make_unique<FrontendResult>()};
  // Another's program, checked first in a child bounded in time and memory
  // (review 5 of issue 49: the front end ran unbounded in the worker, which
  // holds its secret); then, known to finish, compiled here. No file of this
  // machine is read (the review's finding 4).
  auto checked = text_from_child(
      [&]() -> Expected<std::string> {
        FrontendResult r = compile_source(p.d.source_name, p.d.source, /*file_imports=*/false);
        return r.ok() ? Expected<std::string>(std::string()) : Expected<std::string>(Status::InvalidArgument(r.rendered()));
      },
      "checking the setup's program",
      ChildLimits{.time_s = 60, .memory_bytes = int64_t{4} << 30, .max_output = int64_t{1} << 20, .die_with_parent = true});
  if (!checked.ok())
    return Status::InvalidArgument("the setup's program does not compile here (within 60 s and 4 GiB):\n" +
                                   checked.status().message());
  *p.fe = compile_source(p.d.source_name, p.d.source, /*file_imports=*/false);
  if (!p.fe->ok()) return Status::InvalidArgument("the setup's program does not compile here:\n" + p.fe->rendered());
  auto precision = parse_precision(p.d.precision);
  if (!precision.ok()) return Status::InvalidArgument("the setup's " + precision.status().message());
  p.fe->module = with_precision(p.fe->module, *precision);
  if (!p.fe->module.find(p.d.setup.fn))
    return Status::InvalidArgument("the setup's program has no fn `" + p.d.setup.fn + "`");
  p.d.setup.module = &p.fe->module;
  if (cache.size() > 8) cache.clear();
  return &cache.emplace(job.setup, std::move(p)).first->second;
}

// A source job: its setup's program compiled here, the candidate measured
// by the isolated measurer. The measurement as JSON, or why the job is bad.
Expected<std::string> run_source_job(client::JobsClient& c, const client::JobView& job, const std::string& payload,
                                     std::map<std::string, Prepared>& cache) {
  json pl = parse_json(payload);
  auto p = prepare(c, job, cache);
  if (!p.ok()) return p.status();
  if (!pl.is_object() || !pl.contains("schedule"))
    return Status::InvalidArgument("the job's payload has no `schedule`");
  auto sched = Schedule::from_json(pl["schedule"].dump());
  if (!sched.ok()) return Status::InvalidArgument("the job's schedule: " + sched.status().message());
  tune::MeasureSetup setup = (*p)->d.setup;
  // GPU candidates arrive built (a job of candidates); a source job is
  // compiled and run here on the CPU, within the CPU's memory bound.
  for (const char* gpu : {"cuda", "opencl", "vulkan", "metal", "d3d12", "webgpu", "hexagon", "opengl"})
    if (setup.target.find(gpu) != std::string::npos)  // a device API would load its driver in the unsandboxed child
      return Status::InvalidArgument("the job's setup targets `" + setup.target.substr(0, 100) +
                                     "`: a source job is compiled for this machine's CPU; GPU candidates come built");
  for (const char* off : {"no_asserts", "no_bounds_query"})  // Halide's run-time checks stay on another's code
    if (setup.target.find(off) != std::string::npos)
      return Status::InvalidArgument("the job's setup targets `" + setup.target.substr(0, 100) + "`, which turns off `" +
                                     off + "`: a source job runs with Halide's checks");
  try {
    setup.compile_timeout_s = pl.value("compile_timeout_s", setup.compile_timeout_s);
    setup.run_timeout_s = pl.value("run_timeout_s", setup.run_timeout_s);
    setup.min_time_s = pl.value("min_time_s", setup.min_time_s);
    setup.min_reps = pl.value("min_reps", setup.min_reps);
    setup.max_reps = pl.value("max_reps", setup.max_reps);
    setup.cutoff_ms = pl.value("cutoff_ms", setup.cutoff_ms);
  } catch (const json::exception& e) {
    return Status::InvalidArgument(std::string("the job's payload has a limit of the wrong type: ") + e.what());
  }
  // Bounded as a job of built artifacts is (runtime/worker_loop.cpp): one job cannot hold a worker for ever.
  if (!(setup.compile_timeout_s > 0 && setup.compile_timeout_s <= 86400) ||
      !(setup.run_timeout_s > 0 && setup.run_timeout_s <= 86400) || !(setup.min_time_s >= 0 && setup.min_time_s <= 3600) ||
      setup.min_reps < 1 || setup.max_reps < setup.min_reps || setup.max_reps > 1000000)
    return Status::InvalidArgument("the job's limits are out of range (timeouts in (0, 86400] s, min_time_s in [0, 3600], "
                                   "1 <= min_reps <= max_reps <= 1000000)");
  return tune::measurement_json(tune::measure(setup, *sched));
}

}  // namespace

CommandSpec worker_spec() {
  static WorkerArgs scratch;
  return spec(scratch);
}

int run_worker(const std::vector<std::string>& args) {
  WorkerArgs a;
  if (int bad = parse_or_usage_error(spec(a), args)) return bad;
  if (a.o.server.empty() && std::getenv("MLK_SERVERS")) a.o.server = std::getenv("MLK_SERVERS");
  if (std::string why = rt::check_worker_options(a.o); !why.empty()) return usage_error("worker", why);
  a.o.token = std::getenv("MLK_TOKEN") ? std::getenv("MLK_TOKEN") : "";
  auto trusted = rt::worker_trusted_signers(a.trusted);
  if (!trusted.ok()) return usage_error("worker", trusted.status().message());
  a.o.trusted = *trusted;
  std::map<std::string, Prepared> cache;
  return rt::run_worker_loop(a.o, [&](client::JobsClient& c, const client::JobView& job, const std::string& payload) {
    return run_source_job(c, job, payload, cache);
  });
}

}  // namespace mlk::cli
