// A sandbox for code that someone else chose, entered by a forked child
// before it runs that code: what a candidate pack does on a measurement
// worker (runtime/worker_loop.cpp), what an artifact's constructors do
// under `mlk verify --sign` (cli/verify_command.cpp).
//
// Inside it the process has:
// - user, mount, PID and network namespaces of its own: no network at all,
//   no capability over anything outside, no view of other processes (a
//   fresh /proc shows only the sandbox's), so no /proc/PID/{mem,environ,root}
//   of the parent or any other process of the same user;
// - every file system read-only, but for `writable` folders (bound
//   read-write, at the same paths) and an empty private /tmp;
// - a seccomp filter: sockets of the inet, inet6 and netlink families only
//   (no AF_UNIX, so no socket file on disk answers; no AF_VSOCK, so not the
//   host of a VM; no socketpair, whose AF_UNIX datagrams could be sent to
//   socket files), no io_uring, no new namespaces, mounts, ptrace, bpf,
//   keyrings, perf events, userfaultfd, memfd_create or System V shared
//   memory (pages no RLIMIT_AS counts), and no x32 system calls;
// - a /dev of its own: null, zero, full, random, urandom and NVIDIA's
//   nodes bound from the host's, a /dev/shm and the /dev/fd links, nothing
//   else (no terminal, kvm, vhost-vsock, sound, video, message queues);
//   the folders that hold a machine's secrets masked (/run with every
//   user's runtime folder, /var/run, /etc/mlk, /var/lib/mlk,
//   /etc/ssl/private, and each path of $MLK_SANDBOX_HIDE), and no way to
//   undo dying with its parent (prctl PR_SET_PDEATHSIG refused), so a
//   time limit that kills the caller's child ends the whole sandbox;
// - "/" as its folder (it starts nowhere the caller stood: a hidden folder
//   the caller stood in is not reachable by relative paths);
// - at most max(256, 4 x CPUs) processes and threads, no file written past
//   2 GiB, a /tmp of 1 GiB and a /dev/shm of 256 MiB (memory stays bounded
//   per process, by the caller's RLIMIT_AS: a cgroup would bound the total);
// - IPC and UTS namespaces of its own, an empty /dev/shm;
// - a session of its own (no controlling terminal to type into), no
//   descriptor of the caller's but `keep_fd` (and 0-2, or /dev/null);
// - each `hidden` path masked: a file reads as empty, a folder as empty
//   but for the `readable` and `writable` paths inside it, bound back at
//   the same paths (read-only and read-write);
// - no environment but `keep_env` (the old variables' text is zeroed in
//   memory too), no capabilities, no_new_privs, and nothing left to unmount.
//
// enter_sandbox forks once more (a PID namespace's first process is the
// next child): in the process that called it, it returns only in that
// grandchild; the child in between waits for it and exits with its status,
// so the caller's pipe and exit code work as without the sandbox. When the
// sandbox cannot be made (a kernel without unprivileged user namespaces) it
// returns the reason and the caller must not run the code.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace mlk {

struct SandboxSpec {
  std::vector<std::string> hidden;    // absolute paths masked inside
  std::vector<std::string> readable;  // absolute paths kept readable (read-only), inside hidden folders too
  std::vector<std::string> writable;  // absolute folders kept writable, inside hidden folders too
  std::vector<std::string> keep_env;  // "NAME=VALUE" entries the environment is reset to
  int keep_fd = -1;                   // the one descriptor above 2 left open (the answer's pipe); -1 none
  bool null_stdio = false;            // standard input, output and error from and to /dev/null
};

// Call in a forked child only, single-threaded. OK in the sandboxed
// grandchild; an error (nothing entered) otherwise.
Status enter_sandbox(const SandboxSpec& spec);

}  // namespace mlk
