#include "autotune/measure.h"

#include "base/stats.h"

#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <nlohmann/json.hpp>

#include "scheduler/kernel.h"
#include "base/json.h"

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

void write_all(int fd, const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + off, bytes.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
}

// Runs in the worker: everything that may crash or hang. Writes one line
// {"compiled": true, "compile_ms": ...} on `fd` as soon as the candidate
// compiled; returns the result, which the caller writes after it.
json work(const MeasureSetup& s, const Schedule& sched, int fd) {
  auto t0 = Clock::now();
  if (s.compile_fault) s.compile_fault(sched);
  // The schedule is given: the profile lends only the Halide target the setup names.
  Profile target = host_profile();
  target.halide_target = s.target;
  auto k = Kernel::CompileJit(*s.module, s.fn, target, &sched, s.dims);
  double compile_ms = ms_since(t0);
  write_all(fd, json{{"compiled", true}, {"compile_ms", compile_ms}}.dump() + "\n");
  if (!k.ok()) return {{"verdict", "error"}, {"detail", k.status().message()}, {"compile_ms", compile_ms}};
  if (s.errors_only) {
    std::vector<double> errs;
    for (const VerifyCase& c : s.verify) {
      auto out = (*k)->RunAll(c.inputs, c.dims);
      if (!out.ok())
        return {{"verdict", "error"}, {"detail", c.name + ": " + out.status().message()}, {"compile_ms", compile_ms}};
      for (size_t k = 0; k < c.references.size() && k < out->size(); ++k)
        errs.push_back(error_stats(c.references[k], (*out)[k]).max_abs);
    }
    return {{"verdict", "ok"}, {"compile_ms", compile_ms}, {"case_errors", errs}};
  }
  ErrorStats worst;
  for (const VerifyCase& c : s.verify) {
    auto out = (*k)->RunAll(c.inputs, c.dims);
    if (!out.ok())
      return {{"verdict", "error"}, {"detail", c.name + ": " + out.status().message()}, {"compile_ms", compile_ms}};
    if (s.fault) s.fault(sched, c, (*out)[0]);
    Status cmp = compare_case(c, *out);
    if (!cmp.ok()) return {{"verdict", "wrong"}, {"detail", c.name + ": " + cmp.message()}, {"compile_ms", compile_ms}};
    ErrorStats e = error_stats(c, *out);
    worst.max_abs = std::max(worst.max_abs, e.max_abs);
    worst.max_rel = std::max(worst.max_rel, e.max_rel);
  }
  // Warm-up, then timed runs rotating over the input sets, into one output
  // buffer (the kernel is timed, not the allocator).
  std::vector<HostTensor> result((*k)->function().results().size());
  Status w = (*k)->RunAllInto(s.timing[0], s.dims, result);
  if (!w.ok()) return {{"verdict", "error"}, {"detail", w.message()}, {"compile_ms", compile_ms}};
  std::vector<double> times;
  auto start = Clock::now();
  for (int i = 0; i < s.max_reps; ++i) {
    const auto& in = s.timing[i % s.timing.size()];
    auto t = Clock::now();
    Status r = (*k)->RunAllInto(in, s.dims, result);
    double ms = ms_since(t);
    if (!r.ok()) return {{"verdict", "error"}, {"detail", r.message()}, {"compile_ms", compile_ms}};
    times.push_back(ms);
    if (s.cutoff_ms > 0 && times.size() == 1 && ms > s.cutoff_ms) break;
    if (static_cast<int>(times.size()) >= s.min_reps && ms_since(start) >= s.min_time_s * 1000) break;
  }
  return {{"verdict", "ok"},       {"compile_ms", compile_ms},       {"times_ms", times},
          {"max_abs_error", worst.max_abs}, {"max_rel_error", worst.max_rel}};
}

}  // namespace

std::string seconds_str(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", s);
  return b;
}

ErrorStats error_stats(const VerifyCase& c, const std::vector<HostTensor>& outs) {
  ErrorStats worst;
  for (size_t i = 0; i < c.references.size() && i < outs.size(); ++i) {
    ErrorStats e = error_stats(c.references[i], outs[i]);
    worst.max_abs = std::max(worst.max_abs, e.max_abs);
    worst.max_rel = std::max(worst.max_rel, e.max_rel);
  }
  return worst;
}

Status compare_case(const VerifyCase& c, const std::vector<HostTensor>& outs) {
  if (outs.size() != c.references.size())
    return Status::InvalidArgument(std::to_string(outs.size()) + " results, expected " +
                                   std::to_string(c.references.size()));
  for (size_t i = 0; i < outs.size(); ++i) {
    Status s = compare(c.references[i], outs[i], c.tols[i]);
    if (!s.ok())
      return outs.size() == 1 ? s : Status::InvalidArgument("result " + std::to_string(i) + ": " + s.message());
  }
  return Status::Ok();
}

namespace {

std::string gib(int64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f GiB", static_cast<double>(bytes) / (1 << 30));
  return b;
}

// What a worker that ran out of memory is told to say.
std::string out_of_memory(int64_t limit) {
  return "the candidate's worker ran out of memory: it may map " + gib(limit) +
         " (by default a third of this machine's memory), and compiling or running this candidate wanted more";
}

}  // namespace

Measurement measure(const MeasureSetup& setup, const Schedule& schedule) {
  Measurement m;
  const int64_t mem_limit = setup.memory_limit_bytes > 0 ? setup.memory_limit_bytes : default_worker_memory_limit();
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
    // Not on GPU targets: the CUDA driver reserves far more address space
    // than it uses.
    if (setup.target.find("cuda") == std::string::npos) {
      rlimit as{static_cast<rlim_t>(mem_limit), static_cast<rlim_t>(mem_limit)};
      setrlimit(RLIMIT_AS, &as);
    }
    std::string bytes;
    try {
      bytes = work(setup, schedule, fds[1]).dump();
    } catch (const std::bad_alloc&) {
      bytes = json{{"verdict", "error"}, {"detail", out_of_memory(mem_limit)}}.dump();
    } catch (const std::exception& e) {
      bytes = json{{"verdict", "crash"}, {"detail", std::string("exception: ") + e.what()}}.dump();
    }
    write_all(fds[1], bytes);
    _exit(0);
  }
  close(fds[1]);
  std::string buf;
  auto limit = [](double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000)); };
  // The compile limit runs until the worker's first line (it compiled), the
  // run limit from then on.
  auto deadline = Clock::now() + limit(setup.compile_timeout_s);
  bool compiled = false, timed_out = false;
  for (;;) {
    if (!compiled && buf.find('\n') != std::string::npos) {
      compiled = true;
      deadline = Clock::now() + limit(setup.run_timeout_s);
    }
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
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  // A worker that died with most of its limit resident ran out of memory
  // where no exception could say so (LLVM aborts, a failed mmap faults).
  const bool near_limit = static_cast<int64_t>(usage.ru_maxrss) * 1024 > mem_limit * 8 / 10;
  // The first line, when there is one, says that (and how fast) it compiled.
  size_t nl = buf.find('\n');
  if (nl != std::string::npos) {
    json first = parse_json(buf.substr(0, nl));
    if (!first.is_discarded() && first.is_object()) m.compile_ms = first.value("compile_ms", 0.0);
    buf.erase(0, nl + 1);
  }
  if (timed_out) {
    m.verdict = Measurement::Verdict::kTimeout;
    m.detail = compiled ? "run took longer than " + seconds_str(setup.run_timeout_s) + " s"
                        : "compile took longer than " + seconds_str(setup.compile_timeout_s) + " s";
    return m;
  }
  if (WIFSIGNALED(status) || buf.empty()) {
    m.verdict = Measurement::Verdict::kCrash;
    m.detail = WIFSIGNALED(status) ? std::string("worker died with signal ") + strsignal(WTERMSIG(status))
                                   : "worker exited without a result";
    if (!compiled) m.detail += " while compiling";
    if (near_limit) m.detail += "; " + out_of_memory(mem_limit);
    return m;
  }
  json j = parse_json(buf);
  if (j.is_discarded()) {
    m.verdict = Measurement::Verdict::kCrash;
    m.detail = "worker sent a malformed result";
    return m;
  }
  std::string v = j.value("verdict", "error");
  m.verdict = v == "ok" ? Measurement::Verdict::kOk : v == "wrong" ? Measurement::Verdict::kWrong
              : v == "crash" ? Measurement::Verdict::kCrash : Measurement::Verdict::kError;
  m.detail = j.value("detail", "");
  if (m.verdict == Measurement::Verdict::kError && m.detail.find("ran out of memory") == std::string::npos) {
    std::string lower = m.detail;
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (lower.find("out of memory") != std::string::npos) m.detail += " (" + out_of_memory(mem_limit) + ")";
  }
  m.compile_ms = j.value("compile_ms", m.compile_ms);
  m.times_ms = j.value("times_ms", std::vector<double>{});
  m.max_abs_error = j.value("max_abs_error", 0.0);
  m.max_rel_error = j.value("max_rel_error", 0.0);
  if (j.contains("case_errors"))
    for (const auto& e : j["case_errors"])  // JSON has no infinity: null stands for it
      m.case_max_abs_errors.push_back(e.is_number() ? e.get<double>() : std::numeric_limits<double>::infinity());
  if (!m.times_ms.empty()) {
    m.median_ms = median(m.times_ms);
  }
  return m;
}

}  // namespace mlk::tune
