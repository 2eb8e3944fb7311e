// A child process that does one thing and hands back what it wrote: the one
// place mlk forks for isolation. `mlk verify --sign` runs the levels (which
// load the artifact) in a child that never held the verifier's key; workers
// run uploaded candidates in a sandboxed child (runtime/worker_loop.cpp);
// readers of state that must not be initialised in a forking process (the
// CUDA driver) do it in a short-lived child.
//
// Contracts:
// - The child's side runs in a fresh fork and ends with _exit (or exec):
//   nothing of the parent's is flushed, destroyed or returned twice.
// - What the child writes to `out_fd` (at most max_output bytes; more kills
//   it) comes back whole, with how it ended.
// - With limits.time_s, a child still running then is killed (SIGKILL).
// - With limits.die_with_parent, the child dies when the parent does.
// - With limits.memory_bytes, the child's address space is bounded.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "base/status.h"

namespace mlk {

struct ChildLimits {
  double time_s = 0;                   // > 0: killed after this many seconds
  int64_t memory_bytes = 0;            // > 0: RLIMIT_AS of the child
  int64_t max_output = int64_t{16} << 20;  // more output than this: killed, `overflow`
  bool die_with_parent = false;        // PR_SET_PDEATHSIG: SIGKILL when the parent dies
  std::mutex* fork_lock = nullptr;     // held across fork() (a lock threads take around library calls)
};

struct ChildResult {
  std::string out;
  bool timed_out = false;
  bool overflow = false;
  int signal = 0;     // the signal that ended it, or 0
  int exit_code = 0;  // when it exited
};

// Forks; the child runs child_main(out_fd), then _exit(0) if it returns
// (an exception in it is _exit(70)). IOError when no child can be made.
Expected<ChildResult> run_child(const std::function<void(int out_fd)>& child_main, const ChildLimits& limits = {});

// run_child for a function whose result is text: the child writes fn()'s
// result, or its Status, and the parent gets it back as it was (the code
// and message of an error; IOError or InvalidArgument naming `what` when
// the child died, hung or wrote too much).
Expected<std::string> text_from_child(const std::function<Expected<std::string>()>& fn, const std::string& what,
                                      const ChildLimits& limits = {});

}  // namespace mlk
