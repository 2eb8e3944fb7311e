#include "base/child.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>
#include <cstdio>
#include <cstdlib>

namespace mlk {

namespace {

using Clock = std::chrono::steady_clock;

void write_all(int fd, const std::string& s) {
  for (size_t at = 0; at < s.size();) {
    ssize_t n = write(fd, s.data() + at, s.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    at += static_cast<size_t>(n);
  }
}

}  // namespace

Expected<ChildResult> run_child(const std::function<void(int out_fd)>& child_main, const ChildLimits& limits) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Status::IOError("cannot make a pipe for a child process");
  std::fflush(nullptr);
  const pid_t parent = getpid();
  pid_t pid;
  {
    std::unique_lock<std::mutex> held;
    if (limits.fork_lock) held = std::unique_lock<std::mutex>(*limits.fork_lock);
    pid = fork();
  }
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return Status::IOError("cannot fork a child process");
  }
  if (pid == 0) {
    close(fds[0]);
    if (limits.die_with_parent) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
    }
    if (limits.memory_bytes > 0) {
      rlimit as{static_cast<rlim_t>(limits.memory_bytes), static_cast<rlim_t>(limits.memory_bytes)};
      setrlimit(RLIMIT_AS, &as);
    }
    try {
      child_main(fds[1]);
    } catch (...) {
      _exit(70);
    }
    _exit(0);
  }
  close(fds[1]);
  ChildResult r;
  const bool timed = limits.time_s > 0;
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(limits.time_s * 1000));
  for (;;) {
    int wait_ms = 1000;
    if (timed) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) {
        r.timed_out = true;
        break;
      }
      wait_ms = static_cast<int>(std::min<int64_t>(left, 1000));
    }
    pollfd p{fds[0], POLLIN, 0};
    int ready = poll(&p, 1, wait_ms);
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    char chunk[65536];
    ssize_t n = read(fds[0], chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    r.out.append(chunk, static_cast<size_t>(n));
    if (static_cast<int64_t>(r.out.size()) > limits.max_output) {
      r.overflow = true;
      break;
    }
  }
  close(fds[0]);
  if (r.timed_out || r.overflow) kill(pid, SIGKILL);
  int status = 0;
  // The deadline holds after the child closed its output too (a child that
  // closes it and then runs on).
  for (bool killed = r.timed_out || r.overflow || !timed;;) {
    const pid_t w = waitpid(pid, &status, killed ? 0 : WNOHANG);
    if (w == pid || (w < 0 && errno != EINTR)) break;
    if (w == 0) {
      if (Clock::now() >= deadline) {
        r.timed_out = killed = true;
        kill(pid, SIGKILL);
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
  }
  if (WIFSIGNALED(status) && !r.timed_out && !r.overflow) r.signal = WTERMSIG(status);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  return r;
}

Expected<std::string> text_from_child(const std::function<Expected<std::string>()>& fn, const std::string& what,
                                      const ChildLimits& limits) {
  auto r = run_child(
      [&](int fd) {
        Expected<std::string> got = fn();
        write_all(fd, got.ok() ? "0\n" + *got
                               : std::to_string(static_cast<int>(got.status().code())) + "\n" + got.status().message());
      },
      limits);
  if (!r.ok()) return r.status();
  if (r->timed_out) return Status::IOError(what + ": the child process ran past its time and was killed");
  if (r->overflow) return Status::InvalidArgument(what + ": the child process wrote more than it may");
  if (r->signal) return Status::InvalidArgument(what + ": the child process was killed by signal " + std::to_string(r->signal));
  const size_t nl = r->out.find('\n');
  if (r->exit_code != 0 || nl == std::string::npos)
    return Status::InvalidArgument(what + ": the child process ended without an answer");
  const std::string body = r->out.substr(nl + 1);
  switch (static_cast<Status::Code>(std::atoi(r->out.c_str()))) {
    case Status::Code::kOk: return body;
    case Status::Code::kUsage: return Status::Usage(body);
    case Status::Code::kNotFound: return Status::NotFound(body);
    case Status::Code::kCorruption: return Status::Corruption(body);
    case Status::Code::kIOError: return Status::IOError(body);
    case Status::Code::kUnsupported: return Status::Unsupported(body);
    case Status::Code::kInternal: return Status::Internal(body);
    default: return Status::InvalidArgument(body);
  }
}

}  // namespace mlk
