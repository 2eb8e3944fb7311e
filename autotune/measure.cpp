#include "autotune/measure.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "scheduler/kernel.h"

namespace mlk::tune {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

const char* verdict_name(Measurement::Verdict v) {
  switch (v) {
    case Measurement::Verdict::kOk: return "ok";
    case Measurement::Verdict::kWrong: return "wrong";
    case Measurement::Verdict::kCrash: return "crash";
    case Measurement::Verdict::kTimeout: return "timeout";
    case Measurement::Verdict::kError: return "error";
  }
  return "?";
}

namespace {

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Runs in the worker: everything that may crash or hang.
json work(const MeasureSetup& s, const Schedule& sched) {
  auto t0 = Clock::now();
  auto k = Kernel::CompileJit(*s.module, s.fn, s.target, &sched, s.dims);
  if (!k.ok()) return {{"verdict", "error"}, {"detail", k.status().message()}};
  double compile_ms = ms_since(t0);
  auto out = (*k)->Run(s.verify_inputs, s.verify_dims);
  if (!out.ok()) return {{"verdict", "error"}, {"detail", out.status().message()}, {"compile_ms", compile_ms}};
  if (s.fault) s.fault(sched, *out);
  Status cmp = compare(s.reference, *out, s.tol);
  if (!cmp.ok()) return {{"verdict", "wrong"}, {"detail", cmp.message()}, {"compile_ms", compile_ms}};
  // Warm-up, then timed runs rotating over the input sets, into one output
  // buffer (the kernel is timed, not the allocator).
  HostTensor result;
  Status w = (*k)->RunInto(s.timing[0], s.dims, result);
  if (!w.ok()) return {{"verdict", "error"}, {"detail", w.message()}, {"compile_ms", compile_ms}};
  std::vector<double> times;
  auto start = Clock::now();
  for (int i = 0; i < s.max_reps; ++i) {
    const auto& in = s.timing[i % s.timing.size()];
    auto t = Clock::now();
    Status r = (*k)->RunInto(in, s.dims, result);
    double ms = ms_since(t);
    if (!r.ok()) return {{"verdict", "error"}, {"detail", r.message()}, {"compile_ms", compile_ms}};
    times.push_back(ms);
    if (s.cutoff_ms > 0 && times.size() == 1 && ms > s.cutoff_ms) break;
    if (static_cast<int>(times.size()) >= s.min_reps && ms_since(start) >= s.min_time_s * 1000) break;
  }
  return {{"verdict", "ok"}, {"compile_ms", compile_ms}, {"times_ms", times}};
}

}  // namespace

Measurement measure(const MeasureSetup& setup, const Schedule& schedule) {
  Measurement m;
  int fds[2];
  if (pipe(fds) != 0) {
    m.detail = "pipe() failed";
    return m;
  }
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) {
    m.detail = "fork() failed";
    close(fds[0]);
    close(fds[1]);
    return m;
  }
  if (pid == 0) {
    close(fds[0]);
    std::string bytes;
    try {
      bytes = work(setup, schedule).dump();
    } catch (const std::exception& e) {
      bytes = json{{"verdict", "crash"}, {"detail", std::string("exception: ") + e.what()}}.dump();
    }
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = write(fds[1], bytes.data() + off, bytes.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string buf;
  auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(setup.timeout_s * 1000));
  bool timed_out = false;
  for (;;) {
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int r = poll(&p, 1, left);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char chunk[65536];
    ssize_t n = read(fds[0], chunk, sizeof chunk);
    if (n <= 0) break;  // the worker closed the pipe (finished or died)
    buf.append(chunk, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  if (timed_out) {
    m.verdict = Measurement::Verdict::kTimeout;
    m.detail = "killed after " + std::to_string(setup.timeout_s) + " s";
    return m;
  }
  if (WIFSIGNALED(status) || buf.empty()) {
    m.verdict = Measurement::Verdict::kCrash;
    m.detail = WIFSIGNALED(status) ? std::string("worker died with signal ") + strsignal(WTERMSIG(status))
                                   : "worker exited without a result";
    return m;
  }
  json j = json::parse(buf, nullptr, false);
  if (j.is_discarded()) {
    m.verdict = Measurement::Verdict::kCrash;
    m.detail = "worker sent a malformed result";
    return m;
  }
  std::string v = j.value("verdict", "error");
  m.verdict = v == "ok" ? Measurement::Verdict::kOk : v == "wrong" ? Measurement::Verdict::kWrong
              : v == "crash" ? Measurement::Verdict::kCrash : Measurement::Verdict::kError;
  m.detail = j.value("detail", "");
  m.compile_ms = j.value("compile_ms", 0.0);
  m.times_ms = j.value("times_ms", std::vector<double>{});
  if (!m.times_ms.empty()) {
    std::vector<double> t = m.times_ms;
    std::sort(t.begin(), t.end());
    m.median_ms = t[t.size() / 2];
  }
  return m;
}

}  // namespace mlk::tune
