#include "runtime/worker_loop.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "artifact/candidate_set.h"
#include "base/child.h"
#include "base/escape.h"
#include "base/files.h"
#include "base/log.h"
#include "base/json.h"
#include "base/sandbox.h"
#include "base/signing.h"
#include "cache/signatures.h"
#include "runtime/candidate_runner.h"
#include "targets/detect.h"

namespace mlk::rt {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::atomic<bool> g_stop{false};
// Held by the heartbeat thread during each request and by run_child around
// fork(), so that no child starts with a lock of the HTTP or TLS library
// held by a thread it does not have.
std::mutex g_fork_mutex;

// Whether a job's payload is built artifacts ("kind": "candidates") or
// source ("kind": "source", or none); any other kind is refused.
Expected<bool> is_artifact_job(const json& pl) {
  if (!pl.is_object() || !pl.contains("kind")) return false;
  const json& k = pl["kind"];
  if (k.is_string() && k.get<std::string>() == "candidates") return true;
  if (k.is_string() && k.get<std::string>() == "source") return false;
  return Status::InvalidArgument("the job's payload: `kind` must be \"source\" or \"candidates\", not " + k.dump());
}

// The job's run limit: a number of seconds in (0, 86400], 60 by default.
Expected<double> run_timeout_of(const json& pl) {
  if (!pl.contains("run_timeout_s")) return 60.0;
  const json& t = pl["run_timeout_s"];
  if (!t.is_number() || !std::isfinite(t.get<double>()) || !(t.get<double>() > 0) || t.get<double>() > 86400)
    return Status::InvalidArgument("the job's payload: `run_timeout_s` must be a number of seconds in (0, 86400], not " +
                                   t.dump());
  return t.get<double>();
}

// SIGTERM and SIGINT are blocked in every thread (children inherit that)
// and taken by one thread that sets g_stop.
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

// One event of `--json` as a line on stdout (docs/cli.md, "mlk-worker-1").
void emit(const WorkerLoopOptions& o, json event) {
  if (!o.json) return;
  event["format"] = "mlk-worker-1";
  std::printf("%s\n", event.dump().c_str());
  std::fflush(stdout);
}

// The most times of one candidate a result carries (each a number the
// candidate's process reported: a bounded channel, not free text).
constexpr size_t kMaxTimes = 64;

// `v` to `digits` significant decimal digits, clamped to [lo, hi]; 0 for a
// value below lo, NaN or negative (a grid of few values: a bounded channel).
double coarse_in(double v, double lo, double hi, int digits) {
  if (!(v >= lo)) return 0;
  char b[32];
  std::snprintf(b, sizeof b, "%.*g", digits, std::min(v, hi));
  return std::strtod(b, nullptr);
}

// A measurement in the wire form of autotune/measure_wire.h.
std::string wire(const std::string& verdict, const std::string& detail, double median_ms = 0,
                 const std::vector<double>& times = {}, double abs_err = 0, double rel_err = 0) {
  return json{{"verdict", verdict}, {"detail", detail},     {"compile_ms", 0.0},       {"median_ms", median_ms},
              {"times_ms", times},  {"max_abs_error", abs_err}, {"max_rel_error", rel_err}}
      .dump();
}

// The sandbox of a job of built artifacts: its candidates are native code
// that any write-entries token of the namespace chose. They run in
// mlk-measure, exec'd in a child (a fresh image: nothing of the worker's
// memory, so not its secret or token) inside base/sandbox.h's sandbox: no
// network, no view of other processes, a read-only file system but for the
// job's folder, an environment of a few named variables, no capabilities,
// no_new_privs; bounded in time and, on the CPU, in memory, and killed with
// the worker. What it cannot get, the job fails naming; it never runs
// unsandboxed.
struct Sandboxed {
  std::string program;                // mlk-measure
  std::vector<std::string> argv;      // made before fork: the child only execs
  SandboxSpec spec;
};

// The variables a candidate may see: where its libraries and device are.
std::vector<std::string> sandbox_env(const std::string& dir) {
  std::vector<std::string> env = {"PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + dir, "HOME=" + dir};
  for (const char* k : {"LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "MLK_CUDA_DEVICE", "LANG"})
    if (const char* v = std::getenv(k)) env.push_back(std::string(k) + "=" + v);
  return env;
}

// In the forked child: becomes the sandboxed runner, or says why not on
// out_fd and exits 125 (sandbox) or 127 (exec).
[[noreturn]] void exec_sandboxed(int out_fd, const Sandboxed& sb) {
  auto die = [&](int code, const std::string& why) {
    const std::string line = why + "\n";
    (void)!write(out_fd, line.data(), line.size());
    _exit(code);
  };
  int null = open("/dev/null", O_RDONLY);
  if (null < 0 || dup2(null, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(out_fd, 2) < 0)
    die(125, "sandbox: cannot set up the runner's standard streams");
  if (close_range(3, ~0U, 0) != 0) die(125, "sandbox: cannot close the worker's descriptors");
  if (Status s = enter_sandbox(sb.spec); !s.ok()) die(125, s.message());
  std::vector<char*> argv, envp;
  for (const auto& a : sb.argv) argv.push_back(const_cast<char*>(a.c_str()));
  for (const auto& e : sb.spec.keep_env) envp.push_back(const_cast<char*>(e.c_str()));
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  execve(sb.program.c_str(), argv.data(), envp.data());
  die(127, std::string("sandbox: cannot start mlk-measure: ") + std::strerror(errno));
}

// What a candidate must not read: the worker user's home (keys, tokens,
// configuration, the shared mirror), always, and the folder that holds the
// job's folder `job_dir` ($TMPDIR) unless it is /tmp, which the sandbox
// replaces anyway (review 7 of issue 49: under another $TMPDIR a candidate
// read the job folders of the user's other workers). The runner and the
// job's folder are bound back into them when they lie inside (the
// sandbox's `readable` and `writable`).
std::vector<std::string> hidden_from_candidates(const std::string& job_dir) {
  std::vector<std::string> out;
  out = home_folders();  // $HOME and the user's own, set or not
  const std::string parent = std::filesystem::path(job_dir).parent_path().string();
  if (!parent.empty() && parent != "/" && parent != "/tmp") out.push_back(parent);
  return out;
}

// The runner's measurements, as a file the sandbox wrote: a regular file
// (no link, no FIFO that would hang the worker), at most 16 MiB.
Expected<std::string> read_answer(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return Status::IOError("cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  std::string text;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (int64_t{16} << 20)) {
    close(fd);
    return Status::InvalidArgument(path + " is not a regular file of at most 16 MiB");
  }
  text.resize(static_cast<size_t>(st.st_size));
  ssize_t n = pread(fd, text.data(), text.size(), 0);
  close(fd);
  if (n != static_cast<ssize_t>(text.size())) return Status::IOError("cannot read " + path);
  return text;
}

// A job of built artifacts: its pack unpacked into a private folder and run
// by the candidate runner in a child process (bounded in memory for CPU
// candidates: the CUDA driver maps far more than it uses).
Expected<std::string> run_candidates_job(const WorkerLoopOptions& o, client::JobsClient& c, const client::JobView& job,
                                         const json& payload, const std::string& ns) {
  if (!o.run_artifacts)
    return Status::Unsupported(
        "the job is a built artifact (native code built by the tuning client), and this worker runs only source it "
        "compiles itself; start it with --run-artifacts to run such jobs (GPU profiles need it)");
  auto run_timeout = run_timeout_of(payload);
  if (!run_timeout.ok()) return run_timeout.status();
  // Signed packs only (issue 49, finding 5): checked over the digest that
  // setup_of() checks the bytes against, before anything is unpacked.
  if (!o.trusted.empty())
    if (Status s = cache::check_pack_signed(job.setup, job.payload, o.trusted, {ns}); !s.ok())
      return Status::InvalidArgument(s.message() + "; this worker runs only packs its --trusted-signers signed");
  auto bytes = c.setup_of(job);
  if (!bytes.ok()) return bytes.status();
  std::string dir = (std::filesystem::temp_directory_path() / "mlk-worker-XXXXXX").string();
  if (!mkdtemp(dir.data())) return Status::IOError("cannot create a folder for the job's candidates");
  std::error_code canon_ec;  // the paths as they are bound in the sandbox
  if (auto canon = std::filesystem::weakly_canonical(dir, canon_ec); !canon_ec) dir = canon.string();
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{dir};
  if (Status st = unpack_candidate_set(*bytes, dir); !st.ok()) return st;
  auto set = read_candidate_set(dir);
  if (!set.ok()) return set.status();
  const double limit_s = 60 + 2 * *run_timeout;
  const bool gpu = o.gpu_here && set->profile.find("cuda") != std::string::npos;
  auto program = measure_program("this worker runs built artifacts");
  if (!program.ok()) return program.status();
  const std::string& runner = *program;
  const std::string out = dir + "/measurements.json";
  const Sandboxed sb{runner, {runner, dir, "-o", out, "--quiet"},
                     SandboxSpec{.hidden = hidden_from_candidates(dir), .readable = {runner}, .writable = {dir},
                                 .keep_env = sandbox_env(dir)}};
  auto child = run_child([&](int fd) { exec_sandboxed(fd, sb); },
                         ChildLimits{.time_s = limit_s,
                                     .memory_bytes = gpu ? 0 : default_worker_memory_limit(),
                                     .max_output = int64_t{1} << 20,
                                     .die_with_parent = true,
                                     .fork_lock = &g_fork_mutex});
  if (!child.ok()) return child.status();
  char s[32];
  std::snprintf(s, sizeof s, "%.0f", limit_s);
  if (child->timed_out) return wire("timeout", std::string("the candidate ran more than ") + s + " s and was killed");
  if (child->signal) return wire("crash", "the candidate's process died of signal " + std::to_string(child->signal));
  // What the candidate's process printed or wrote is its own words: it may
  // have read any file the sandbox lets it see and put it there. So only
  // numbers and a verdict go back to the job's submitter, in this worker's
  // words; the text goes to this worker's own log (issue 49, review 12).
  std::string said = ascii_printable(child->out.substr(0, 2000));  // for a terminal: no escape sequence
  while (!said.empty() && said.back() == '\n') said.pop_back();
  const std::string code = std::to_string(child->exit_code);
  if (child->exit_code != 0 && !said.empty())
    log_linef(LogLevel::kWarning, "job %lld: mlk-measure exited %s: %s", static_cast<long long>(job.id), code.c_str(),
              said.c_str());
  if (child->exit_code == 125 || child->exit_code == 127)
    return Status::Unsupported("the sandbox could not run mlk-measure (exit " + code + "; the worker's log says why)");
  if (child->exit_code == 2)  // the set cannot run on this machine
    return Status::Unsupported("the candidate set cannot run on this worker (mlk-measure exit 2; its log says why)");
  if (child->exit_code != 0) return Status::InvalidArgument("mlk-measure failed (exit " + code + "; the worker's log says why)");
  auto text = read_answer(out);
  if (!text.ok()) return Status::InvalidArgument("mlk-measure wrote no measurements");
  auto m = parse_measurements(*text, "the runner's measurements");
  if (!m.ok()) return Status::InvalidArgument("mlk-measure wrote measurements this worker cannot read");
  if (m->results.size() != 1) return Status::InvalidArgument("the job's candidate set holds more than one candidate");
  const CandidateResult& r = m->results[0];
  if (!r.detail.empty())
    log_linef(LogLevel::kNote, "job %lld: the candidate's %s: %s", static_cast<long long>(job.id),
              ascii_printable(r.verdict.substr(0, 40)).c_str(), ascii_printable(r.detail.substr(0, 2000)).c_str());
  const bool ok = r.verdict == "ok", wrong = r.verdict == "wrong";
  // The numbers, on a coarse grid: times to 3 significant digits between
  // 1 us and the run's limit, the median recomputed from them, errors to 2
  // digits between 1e-12 and 1e12 (0 below): at most about 110 bytes of the
  // candidate's choosing a job (reviews 13 and 14), not free text.
  const double abs_err = coarse_in(r.max_abs_error, 1e-12, 1e12, 2), rel_err = coarse_in(r.max_rel_error, 1e-12, 1e12, 2);
  char numbers[160];
  std::snprintf(numbers, sizeof numbers, "its outputs differ from the reference (max abs error %g, max rel error %g)",
                abs_err, rel_err);
  const std::string detail = ok ? "" : wrong ? numbers : "the candidate failed to run (the worker's log says why)";
  std::vector<double> times;
  for (size_t i = 0; i < std::min<size_t>(r.times_ms.size(), kMaxTimes); ++i)
    times.push_back(coarse_in(r.times_ms[i], 1e-3, limit_s * 1000, 3));
  double median = coarse_in(r.median_ms, 1e-3, limit_s * 1000, 3);
  if (!times.empty()) {
    std::vector<double> sorted = times;
    std::sort(sorted.begin(), sorted.end());
    median = sorted[sorted.size() / 2];
  }
  return wire(ok || wrong ? r.verdict : "error", detail, median, times, abs_err, rel_err);
}

// The measurement of `job` as JSON, or why it cannot be measured.
Expected<std::string> run_job(const WorkerLoopOptions& o, client::JobsClient& c, const client::JobView& job,
                              const SourceJobRunner& source, const std::string& ns) {
  json pl = parse_json(job.payload);
  auto artifact = is_artifact_job(pl);
  if (!artifact.ok()) return artifact.status();
  if (*artifact) return run_candidates_job(o, c, job, pl, ns);
  if (!source)
    return Status::Unsupported("the job is source to compile, and this worker (" + o.program +
                               ") runs built artifacts only; `mlk worker` compiles source");
  return source(c, job, job.payload);
}

// This machine's fingerprint, read in a child process: reading it
// initialises the CUDA driver, which a process may not use in children it
// forks afterwards, as it forks one per job.
Expected<std::string> fingerprint_here() {
  auto r = text_from_child([]() -> Expected<std::string> { return hardware_fingerprint(); },
                           "reading this machine's hardware fingerprint",
                           ChildLimits{.time_s = 60, .die_with_parent = true, .fork_lock = &g_fork_mutex});
  if (!r.ok() || r->empty())
    return Status::Internal("cannot read this machine's hardware fingerprint (" +
                            (r.ok() ? std::string("it is empty") : r.status().message()) + ")");
  return *r;
}

// Extends the lease of `job` every third of the lease until `done`.
void heartbeats(const WorkerLoopOptions& o, client::RemoteOptions ro, int64_t job, const client::WorkerView& me,
                std::atomic<bool>& done) {
  auto c = client::JobsClient::Open(ro);
  if (!c.ok()) {
    std::fprintf(stderr, "%s: no heartbeats for job %lld: %s\n", o.program.c_str(), static_cast<long long>(job),
                 c.status().message().c_str());
    return;
  }
  auto every = std::chrono::milliseconds(static_cast<int64_t>(o.lease_s * 1000 / 3));
  auto next = Clock::now() + every;
  while (!done) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (Clock::now() < next) continue;
    next += every;
    std::unique_lock<std::mutex> no_fork(g_fork_mutex);
    auto held = (*c)->heartbeat(job, me, o.lease_s);
    no_fork.unlock();
    if (!held.ok())
      std::fprintf(stderr, "%s: heartbeat of job %lld: %s\n", o.program.c_str(), static_cast<long long>(job),
                   held.status().message().c_str());
  }
}

// The job's event and progress line.
void tell(const WorkerLoopOptions& o, const client::WorkerView& me, const client::JobView& j,
          const Expected<std::string>& m, bool held) {
  json r = m.ok() ? parse_json(*m) : json::object();
  if (!r.is_object()) r = json::object();
  const std::string verdict = r.value("verdict", "");
  const bool ok = verdict == "ok";
  const double ms = r.value("median_ms", 0.0);
  const auto kind = is_artifact_job(parse_json(j.payload));
  const bool artifact = kind.ok() && *kind;
  emit(o, {{"event", "job"},
           {"worker", me.name},
           {"job", j.id},
           {"kind", artifact ? "candidates" : "source"},
           {"attempt", j.attempts},
           {"verdict", m.ok() ? json(verdict) : json(nullptr)},
           {"median_ms", ok ? json(ms) : json(nullptr)},
           {"error", m.ok() ? (ok ? json(nullptr) : json(r.value("detail", ""))) : json(m.status().message())},
           {"recorded", held}});
  if (o.quiet) return;
  std::string what = !m.ok() ? "bad job: " + m.status().message()
                     : ok    ? verdict + " " + std::to_string(ms) + " ms"
                             : verdict + ": " + r.value("detail", "").substr(0, 200);
  what = ascii_printable(what);  // the candidate's words: no escape sequence reaches the worker's terminal
  std::fprintf(stderr, "%s %s: job %lld (attempt %d%s): %s%s\n", o.program.c_str(), me.name.c_str(),
               static_cast<long long>(j.id), j.attempts, artifact ? ", a built artifact" : "", what.c_str(),
               held ? "" : " (not recorded: the lease was lost meanwhile)");
}

// Leases, measures and reports one job; false when there was none.
Expected<bool> one_job(const WorkerLoopOptions& o, const client::RemoteOptions& ro, client::JobsClient& c,
                       const client::WorkerView& me, const SourceJobRunner& source, const std::string& ns) {
  auto job = c.lease(me, o.lease_s);
  if (!job.ok()) return job.status();
  if (!*job) return false;
  const client::JobView& j = **job;
  if (!o.quiet)
    std::fprintf(stderr, "%s %s: job %lld leased (attempt %d)\n", o.program.c_str(), me.name.c_str(),
                 static_cast<long long>(j.id), j.attempts);
  Expected<std::string> m = Status::Internal("not run");
  {
    std::atomic<bool> done{false};
    std::thread hb(heartbeats, std::cref(o), ro, j.id, std::cref(me), std::ref(done));
    try {
      m = run_job(o, c, j, source, ns);
    } catch (const std::exception& e) {  // a bug of ours; the job fails, the worker goes on
      m = Status::Internal(std::string("the job could not be run: ") + e.what());
    }
    done = true;
    hb.join();
  }
  auto held = c.report(j.id, me, m.ok(), m.ok() ? *m : json{{"error", m.status().message()}}.dump());
  if (!held.ok()) return held.status();
  tell(o, me, j, m, *held);
  return true;
}

}  // namespace

std::string check_worker_options(const WorkerLoopOptions& o) {
  if (o.server.empty()) return "no server: give --server URL or set $MLK_SERVERS";
  if (o.device_key.empty()) return "no device key: give --device-key KEY";
  if (!(o.lease_s >= 0.5 && o.lease_s <= 3600)) return "--lease must be 0.5-3600 seconds";
  if (!(o.poll_s > 0 && o.poll_s <= 60)) return "--poll must be more than 0 and at most 60 seconds";
  if (o.max_jobs < 0) return "--max-jobs must be 0 or more";
  return "";
}

Expected<std::vector<std::string>> worker_trusted_signers(const std::string& flag) {
  if (flag.empty()) {
    auto keys = default_trusted_signers();
    if (!keys.ok()) return Status::Usage(keys.status().message());
    return keys;
  }
  auto keys = parse_trusted_keys(flag);
  if (!keys.ok()) return Status::Usage("--trusted-signers: " + keys.status().message());
  return keys;
}

int run_worker_loop(WorkerLoopOptions o, const SourceJobRunner& source) {
  // The worker holds its token and, once registered, its secret: no process
  // of the same user (a candidate among them) may read its memory or
  // environment through /proc or ptrace.
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  if (o.name.empty()) {
    char host[256] = "worker";
    gethostname(host, sizeof host - 1);
    o.name = std::string(host) + "-" + std::to_string(getpid());
  }
  client::RemoteOptions ro{.url = o.server, .token = o.token, .ns = o.ns};
  auto c = client::JobsClient::Open(ro);
  if (!c.ok()) {
    std::fprintf(stderr, "%s: %s\n", o.program.c_str(), c.status().message().c_str());
    return 1;
  }
  auto fingerprint = fingerprint_here();
  if (!fingerprint.ok()) {
    std::fprintf(stderr, "%s: %s\n", o.program.c_str(), fingerprint.status().message().c_str());
    return 1;
  }
  const std::string fp = *fingerprint;
  o.gpu_here = fp.find("; gpu=none") == std::string::npos;
  std::string ns = o.ns;  // what a signed pack must be signed for
  if (!o.trusted.empty() && ns.empty()) {
    auto team = (*c)->whoami();
    if (!team.ok()) {
      std::fprintf(stderr, "%s: %s\n", o.program.c_str(), team.status().message().c_str());
      return 1;
    }
    ns = *team;
  }
  watch_signals();
  auto me = (*c)->register_worker(o.device_key, o.name, fp);
  if (!me.ok()) {
    std::fprintf(stderr, "%s: %s\n", o.program.c_str(), me.status().message().c_str());
    return 1;
  }
  std::fprintf(stderr, "%s %s: registered as worker %lld for device key `%s` on %s; fingerprint %s (%s)\n",
               o.program.c_str(), me->name.c_str(), static_cast<long long>(me->id), o.device_key.c_str(),
               (*c)->url().c_str(), fingerprint_id(fp).c_str(), fp.c_str());
  emit(o, {{"event", "registered"},
           {"worker", me->name},
           {"id", me->id},
           {"device_key", o.device_key},
           {"server", (*c)->url()},
           {"fingerprint", fingerprint_id(fp)}});
  int64_t done = 0;
  while (!g_stop && (o.max_jobs == 0 || done < o.max_jobs)) {
    auto got = one_job(o, ro, **c, *me, source, ns);
    if (!got.ok())
      std::fprintf(stderr, "%s %s: %s; trying again\n", o.program.c_str(), me->name.c_str(),
                   got.status().message().c_str());
    if (got.ok() && *got) {
      ++done;
      continue;
    }
    for (double slept = 0; slept < o.poll_s && !g_stop; slept += 0.02)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::fprintf(stderr, "%s %s: %s after %lld jobs\n", o.program.c_str(), me->name.c_str(),
               g_stop ? "stopped by a signal" : "done", static_cast<long long>(done));
  emit(o, {{"event", g_stop ? "stopped" : "done"}, {"worker", me->name}, {"jobs", done}});
  return 0;
}

}  // namespace mlk::rt
