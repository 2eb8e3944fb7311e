#include "base/sandbox.h"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

extern char** environ;

namespace mlk {

namespace {

Status failed(const std::string& what) { return Status::Unsupported("sandbox: " + what + ": " + std::strerror(errno)); }

// Writes `text` to a /proc file of this process (uid_map and friends).
bool write_proc(const char* path, const std::string& text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  return ok;
}

// Every file system read-only, recursively (mount_setattr, Linux 5.12).
Status read_only_root() {
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID;
  if (syscall(SYS_mount_setattr, -1, "/", AT_RECURSIVE, &attr, sizeof attr) != 0) return failed("cannot make / read-only");
  return Status::Ok();
}

Status mask(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return Status::Ok();  // nothing there to hide
  if (S_ISDIR(st.st_mode)) {
    if (mount("tmpfs", path.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "size=4k,mode=000") != 0)
      return failed("cannot hide " + path);
  } else if (mount("/dev/null", path.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    return failed("cannot hide " + path);
  }
  return Status::Ok();
}

// Drops every capability, in the bounding set too: nothing mounted here can
// be unmounted, nothing gained by exec.
Status drop_capabilities() {
  for (int cap = 0; cap <= CAP_LAST_CAP; ++cap) prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capset, &hdr, data) != 0) return failed("cannot drop capabilities");
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return failed("cannot set no_new_privs");
  return Status::Ok();
}

// A seccomp filter: socket(AF_UNIX, ...) fails with EACCES. A network
// namespace cuts TCP and abstract sockets, but a socket file on any file
// system (a database's, a container runtime's) would still answer.
Status no_unix_sockets() {
#if defined(__x86_64__)
  constexpr uint32_t kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
  constexpr uint32_t kArch = AUDIT_ARCH_AARCH64;
#else
#error "no seccomp architecture for this target"
#endif
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EACCES),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0) return failed("cannot install the seccomp filter");
  return Status::Ok();
}

// The environment reset to `keep`, the old entries' text zeroed first.
void reset_environment(const std::vector<std::string>& keep) {
  for (char** e = environ; e && *e; ++e) std::memset(*e, 0, std::strlen(*e));
  clearenv();
  for (const std::string& kv : keep) {
    size_t eq = kv.find('=');
    if (eq != std::string::npos) setenv(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), 1);
  }
}

}  // namespace

Status enter_sandbox(const SandboxSpec& spec) {
  const uid_t uid = getuid();
  const gid_t gid = getgid();
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET) != 0)
    return failed("cannot make user, mount, PID and network namespaces (unprivileged user namespaces are needed)");
  // The same ids inside, so that files keep their owners.
  write_proc("/proc/self/setgroups", "deny");
  write_proc("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1\n");
  write_proc("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1\n");
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return failed("cannot make the mounts private");
  for (const std::string& p : spec.hidden)
    if (Status s = mask(p); !s.ok()) return s;
  if (Status s = read_only_root(); !s.ok()) return s;
  // The writable folders, held open across the new /tmp (one of them may be below it).
  std::vector<int> held;
  for (const std::string& w : spec.writable) {
    int fd = open(w.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return failed("cannot open " + w);
    held.push_back(fd);
  }
  if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0) return failed("cannot mount a private /tmp");
  for (size_t i = 0; i < spec.writable.size(); ++i) {
    const std::string& w = spec.writable[i];
    if (w.rfind("/tmp/", 0) == 0)  // its mount point, in the new /tmp
      for (size_t slash = 5; slash != std::string::npos; slash = w.find('/', slash + 1))
        mkdir(w.substr(0, w.find('/', slash + 1)).c_str(), 0700);
    const std::string from = "/proc/self/fd/" + std::to_string(held[i]);
    mount_attr rw{};
    rw.attr_clr = MOUNT_ATTR_RDONLY;
    if (mount(from.c_str(), w.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0 ||
        syscall(SYS_mount_setattr, -1, w.c_str(), AT_RECURSIVE, &rw, sizeof rw) != 0)
      return failed("cannot keep " + w + " writable");
    close(held[i]);
  }
  pid_t pid = fork();  // the PID namespace's first process
  if (pid < 0) return failed("cannot fork into the PID namespace");
  if (pid > 0) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFSIGNALED(status)) {
      signal(WTERMSIG(status), SIG_DFL);
      kill(getpid(), WTERMSIG(status));
    }
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
  }
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
    return failed("cannot mount a /proc of the sandbox's own");
  if (Status s = drop_capabilities(); !s.ok()) return s;
  if (Status s = no_unix_sockets(); !s.ok()) return s;
  reset_environment(spec.keep_env);
  return Status::Ok();
}

}  // namespace mlk
