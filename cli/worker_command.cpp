// `mlk worker`: a measurement worker (docs/deploy.md, "Measurement
// workers"). Registers with the server under a device key and this
// machine's hardware fingerprint, then leases jobs one at a time: fetches
// the job's measurement setup (cached by sha256), compiles the program's
// source, runs the candidate in the isolated measurer (autotune/measure.h),
// which verifies it against the tuner's references before timing it, and
// reports the measurement. A job of built artifacts (GPU profiles, or
// `mlk tune --workers-run-artifacts`) is run by mlk-measure's runner
// (runtime/candidate_runner.h) instead: nothing is compiled here. A second thread extends the lease while the
// candidate runs. SIGTERM or SIGINT: no new lease; the job in hand is
// finished and reported; exit 0.
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "artifact/candidate_set.h"
#include "autotune/candidate_export.h"
#include "autotune/measure.h"
#include "autotune/measure_wire.h"
#include "cli/args.h"
#include "cli/command.h"
#include "autotune/remote_measure.h"
#include "lang/frontend.h"
#include "runtime/candidate_runner.h"
#include "base/json.h"

namespace mlk::cli {

using tune::fingerprint_id;
using tune::hardware_fingerprint;

namespace {

using nlohmann::json;

struct WorkerArgs {
  std::string server, device_key, name, ns;
  double lease_s = 30, poll_s = 0.2;
  int64_t max_jobs = 0;
  bool quiet = false;
  bool json = false;
  bool run_artifacts = false;  // --run-artifacts
};

// One event of `--json` as a line on stdout (docs/cli.md, "mlk-worker-1").
void emit(const WorkerArgs& a, json event) {
  if (!a.json) return;
  event["format"] = "mlk-worker-1";
  std::printf("%s\n", event.dump().c_str());
  std::fflush(stdout);
}

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
          "(docs/cli.md); the progress lines stay on stderr.\n",
      .flags =
          {
              {.name = "--server", .metavar = "URL", .help = "the server, or several comma-separated (replicas)",
               .default_value = "$MLK_SERVERS", .set = store(a.server)},
              {.name = "--device-key", .metavar = "KEY", .help = "the device key this worker measures for",
               .set = store(a.device_key), .required = true},
              {.name = "--name", .metavar = "NAME", .help = "this worker's name in progress lines and the jobs",
               .default_value = "HOSTNAME-PID", .set = store(a.name)},
              {.name = "--namespace", .metavar = "NAME", .help = "the namespace whose jobs it takes",
               .default_value = "the token's team", .set = store(a.ns)},
              {.name = "--lease", .metavar = "SECONDS",
               .help = "how long a lease lasts without a heartbeat (heartbeats come every third of it)",
               .default_value = "30", .set = store_count(a.lease_s)},
              {.name = "--poll", .metavar = "SECONDS", .help = "the wait between lease requests while idle",
               .default_value = "0.2", .set = store_count(a.poll_s)},
              {.name = "--max-jobs", .metavar = "N", .help = "exit 0 after N jobs; 0: no limit", .default_value = "0",
               .set = store_count(a.max_jobs)},
              {.name = "--run-artifacts",
               .help = "also run jobs of built artifacts (GPU profiles, `mlk tune --workers-run-artifacts`): "
                       "native code built by whoever may submit jobs in the namespace, loaded and timed here in a "
                       "child process by mlk-measure's runner; without it such jobs fail with the reason",
               .set = set_bool(a.run_artifacts)},
              {.name = "-q", .help = "no line per job", .set = set_bool(a.quiet), .aliases = {"--quiet"}},
              {.name = "--json", .help = "events as JSON lines on stdout (registered, each job's result, the end)",
               .set = set_bool(a.json)},
          },
  };
}

std::atomic<bool> g_stop{false};

// SIGTERM and SIGINT are blocked in every thread (the measurer's children
// inherit that) and taken by one thread that sets g_stop.
void watch_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    int sig = 0;
    sigwait(&set, &sig);
    g_stop = true;
  }).detach();
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
  *p.fe = compile_source(p.d.source_name, p.d.source);
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

// Runs `fn` in a child process (a candidate that crashes or hangs takes the
// child, not the worker) and returns what it wrote, or why nothing came:
// the child killed after `limit_s`, or dead by a signal. The child's address
// space is bounded by `mem_limit` bytes when that is not 0.
Expected<std::string> in_child(const std::function<std::string()>& fn, double limit_s, int64_t mem_limit) {
  int fds[2];
  if (pipe(fds) != 0) return Status::IOError("pipe() failed");
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return Status::IOError("fork() failed");
  }
  if (pid == 0) {
    close(fds[0]);
    if (mem_limit > 0) {
      rlimit as{static_cast<rlim_t>(mem_limit), static_cast<rlim_t>(mem_limit)};
      setrlimit(RLIMIT_AS, &as);
    }
    std::string out;
    try {
      out = fn();
    } catch (const std::exception& e) {
      out = json{{"error", std::string("the runner failed: ") + e.what()}}.dump();
    }
    for (size_t at = 0; at < out.size();) {
      ssize_t n = write(fds[1], out.data() + at, out.size() - at);
      if (n <= 0) break;
      at += static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string buf;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(limit_s * 1000));
  bool timed_out = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (r <= 0) continue;
    char chunk[65536];
    ssize_t n = read(fds[0], chunk, sizeof chunk);
    if (n <= 0) break;
    buf.append(chunk, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  char limit[32];
  std::snprintf(limit, sizeof limit, "%.0f", limit_s);
  if (timed_out) return Status::IOError(std::string("the runner took more than ") + limit + " s and was killed");
  if (WIFSIGNALED(status)) return Status::Internal("the runner died of signal " + std::to_string(WTERMSIG(status)));
  return buf;
}

// A job of built artifacts (GPU profiles, --workers-run-artifacts): its
// pack unpacked into a private folder and run by mlk-measure's runner in a
// child process; nothing is compiled. Refused unless the worker was started
// with --run-artifacts: the pack is native code from whoever may submit
// jobs in this namespace.
Expected<tune::Measurement> run_candidates_job(const WorkerArgs& a, client::JobsClient& c, const client::JobView& job,
                                               const json& payload) {
  if (!a.run_artifacts)
    return Status::Unsupported(
        "the job is a built artifact (native code built by the tuning client), and this worker runs only source it "
        "compiles itself; start it with --run-artifacts to run such jobs (GPU profiles need it)");
  auto bytes = c.setup_of(job);
  if (!bytes.ok()) return bytes.status();
  std::string tmpl = (std::filesystem::temp_directory_path() / "mlk-worker-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) return Status::IOError("cannot create a folder for the job's candidates");
  Status st = unpack_candidate_set(*bytes, tmpl);
  auto set = st.ok() ? read_candidate_set(tmpl) : Expected<CandidateSet>(st);
  Expected<std::string> out = set.ok() ? Expected<std::string>(std::string()) : Expected<std::string>(set.status());
  if (set.ok()) {
    const bool gpu = set->profile.find("cuda") != std::string::npos;  // the driver maps far more than it uses
    const double limit_s = 60 + payload.value("run_timeout_s", 60.0) * 2;
    out = in_child(
        [&] {
          auto m = rt::run_candidates(tmpl, {});
          return m.ok() ? measurements_json(*m) : json{{"error", m.status().message()}}.dump();
        },
        limit_s, gpu ? 0 : tune::default_worker_memory_limit());
  }
  std::error_code ec;
  std::filesystem::remove_all(tmpl, ec);
  if (!out.ok()) return out.status();
  json err = parse_json(*out);
  if (err.is_object() && err.contains("error")) return Status::InvalidArgument(err.value("error", std::string()));
  auto m = parse_measurements(*out, "the runner's measurements");
  if (!m.ok()) return m.status();
  if (m->results.size() != 1) return Status::InvalidArgument("the job's candidate set holds more than one candidate");
  return tune::measurement_of(m->results[0]);
}

// The measurement of `job`, or why it cannot be measured (a bad job).
Expected<tune::Measurement> run_job(const WorkerArgs& a, client::JobsClient& c, const client::JobView& job,
                                    std::map<std::string, Prepared>& cache) {
  json pl = parse_json(job.payload);
  if (pl.is_object() && pl.value("kind", "source") == "candidates") return run_candidates_job(a, c, job, pl);
  auto p = prepare(c, job, cache);
  if (!p.ok()) return p.status();
  if (!pl.is_object() || !pl.contains("schedule"))
    return Status::InvalidArgument("the job's payload has no `schedule`");
  auto sched = Schedule::from_json(pl["schedule"].dump());
  if (!sched.ok()) return Status::InvalidArgument("the job's schedule: " + sched.status().message());
  tune::MeasureSetup setup = (*p)->d.setup;
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
  if (!(setup.compile_timeout_s > 0) || !(setup.run_timeout_s > 0) || setup.min_reps < 1 || setup.max_reps < setup.min_reps)
    return Status::InvalidArgument("the job's limits are out of range (timeouts > 0, 1 <= min_reps <= max_reps)");
  return tune::measure(setup, *sched);
}

// Extends the lease of `job` every third of the lease until `done`.
void heartbeats(const client::RemoteOptions& ro, int64_t job, const client::WorkerView& worker, double lease_s,
                std::atomic<bool>& done, std::atomic<bool>& lost) {
  auto c = client::JobsClient::Open(ro);
  if (!c.ok()) {
    std::fprintf(stderr, "mlk worker: no heartbeats for job %lld: %s\n", static_cast<long long>(job), c.status().message().c_str());
    return;
  }
  auto every = std::chrono::milliseconds(static_cast<int64_t>(lease_s * 1000 / 3));
  auto next = std::chrono::steady_clock::now() + every;
  while (!done) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (std::chrono::steady_clock::now() < next) continue;
    next += every;
    auto held = (*c)->heartbeat(job, worker, lease_s);
    if (held.ok() && !*held) lost = true;
    if (!held.ok()) std::fprintf(stderr, "mlk worker: heartbeat of job %lld: %s\n", static_cast<long long>(job), held.status().message().c_str());
  }
}

// Leases, measures and reports one job; false when there was none.
Expected<bool> one_job(const WorkerArgs& a, const client::RemoteOptions& ro, client::JobsClient& c,
                       const client::WorkerView& me, std::map<std::string, Prepared>& cache) {
  auto job = c.lease(me, a.lease_s);
  if (!job.ok()) return job.status();
  if (!*job) return false;
  const client::JobView& j = **job;
  if (!a.quiet)
    std::fprintf(stderr, "mlk worker %s: job %lld leased (attempt %d)\n", me.name.c_str(), static_cast<long long>(j.id),
                 j.attempts);
  std::atomic<bool> done{false}, lost{false};
  std::thread hb(heartbeats, ro, j.id, std::cref(me), a.lease_s, std::ref(done), std::ref(lost));
  auto m = run_job(a, c, j, cache);
  done = true;
  hb.join();
  std::string result = m.ok() ? tune::measurement_json(*m) : json{{"error", m.status().message()}}.dump();
  auto held = c.report(j.id, me, m.ok(), result);
  if (!held.ok()) return held.status();
  const bool artifact = parse_json(j.payload).value("kind", "source") == "candidates";
  emit(a, {{"event", "job"},
           {"worker", me.name},
           {"job", j.id},
           {"kind", artifact ? "candidates" : "source"},
           {"attempt", j.attempts},
           {"verdict", m.ok() ? json(tune::verdict_name(m->verdict)) : json(nullptr)},
           {"median_ms", m.ok() && m->ok() ? json(m->median_ms) : json(nullptr)},
           {"error", m.ok() ? (m->ok() ? json(nullptr) : json(m->detail)) : json(m.status().message())},
           {"recorded", *held}});
  if (!a.quiet) {
    std::string what = m.ok() ? std::string(tune::verdict_name(m->verdict)) +
                                    (m->ok() ? " " + std::to_string(m->median_ms) + " ms" : ": " + m->detail.substr(0, 200))
                              : "bad job: " + m.status().message();
    std::fprintf(stderr, "mlk worker %s: job %lld (attempt %d%s): %s%s\n", me.name.c_str(), static_cast<long long>(j.id),
                 j.attempts, artifact ? ", a built artifact" : "", what.c_str(),
                 *held ? "" : " (not recorded: the lease was lost meanwhile)");
  }
  return true;
}

}  // namespace

CommandSpec worker_spec() {
  static WorkerArgs scratch;
  return spec(scratch);
}

int run_worker(const std::vector<std::string>& args) {
  WorkerArgs a;
  if (int bad = parse_or_usage_error(spec(a), args)) return bad;
  if (a.server.empty() && std::getenv("MLK_SERVERS")) a.server = std::getenv("MLK_SERVERS");
  if (a.server.empty()) return usage_error("worker", "no server: give --server URL or set $MLK_SERVERS");
  if (!(a.lease_s >= 0.5 && a.lease_s <= 3600)) return usage_error("worker", "--lease must be 0.5-3600 seconds");
  if (!(a.poll_s > 0 && a.poll_s <= 60)) return usage_error("worker", "--poll must be more than 0 and at most 60 seconds");
  if (a.name.empty()) {
    char host[256] = "worker";
    gethostname(host, sizeof host - 1);
    a.name = std::string(host) + "-" + std::to_string(getpid());
  }
  client::RemoteOptions ro{.url = a.server, .token = std::getenv("MLK_TOKEN") ? std::getenv("MLK_TOKEN") : "", .ns = a.ns};
  auto c = client::JobsClient::Open(ro);
  if (!c.ok()) return usage_error("worker", c.status().message());
  watch_signals();
  std::string fp = hardware_fingerprint();
  auto me = (*c)->register_worker(a.device_key, a.name, fp);
  if (!me.ok()) {
    std::fprintf(stderr, "mlk worker: %s\n", me.status().message().c_str());
    return 1;
  }
  std::fprintf(stderr, "mlk worker %s: registered as worker %lld for device key `%s` on %s; fingerprint %s (%s)\n",
               me->name.c_str(), static_cast<long long>(me->id), a.device_key.c_str(), (*c)->url().c_str(),
               fingerprint_id(fp).c_str(), fp.c_str());
  emit(a, {{"event", "registered"},
           {"worker", me->name},
           {"id", me->id},
           {"device_key", a.device_key},
           {"server", (*c)->url()},
           {"fingerprint", fingerprint_id(fp)}});
  std::map<std::string, Prepared> cache;
  int64_t done = 0;
  while (!g_stop && (a.max_jobs == 0 || done < a.max_jobs)) {
    auto got = one_job(a, ro, **c, *me, cache);
    if (!got.ok())
      std::fprintf(stderr, "mlk worker %s: %s; trying again\n", me->name.c_str(), got.status().message().c_str());
    if (got.ok() && *got) {
      ++done;
      continue;
    }
    for (double slept = 0; slept < a.poll_s && !g_stop; slept += 0.02)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::fprintf(stderr, "mlk worker %s: %s after %lld jobs\n", me->name.c_str(), g_stop ? "stopped by a signal" : "done",
               static_cast<long long>(done));
  emit(a, {{"event", g_stop ? "stopped" : "done"}, {"worker", me->name}, {"jobs", done}});
  return 0;
}

}  // namespace mlk::cli
