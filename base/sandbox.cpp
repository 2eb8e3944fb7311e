#include "base/sandbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
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

// A path bound back inside the sandbox: held open (O_PATH) before anything
// is masked, so that it can be found under a hidden folder.
struct Kept {
  std::string path;
  bool dir = false;
  bool writable = false;
  int fd = -1;
};

// The device nodes code in the sandbox may use (the host's /dev is masked:
// its terminals, kvm, vhost-vsock, sound, video and the like stay out):
// null, zero, full, random, urandom, and NVIDIA's nodes for CUDA.
std::vector<std::string> device_nodes() {
  std::vector<std::string> out;
  auto add = [&](const std::string& path) {
    struct stat st {};
    if (lstat(path.c_str(), &st) == 0 && (S_ISCHR(st.st_mode) || S_ISDIR(st.st_mode))) out.push_back(path);
  };
  for (const char* d : {"null", "zero", "full", "random", "urandom"}) add(std::string("/dev/") + d);
  if (DIR* dev = opendir("/dev")) {
    while (dirent* e = readdir(dev))
      if (std::strncmp(e->d_name, "nvidia", 6) == 0) add(std::string("/dev/") + e->d_name);
    closedir(dev);
  }
  return out;
}

// Masks `path`. A folder becomes an empty tmpfs; when some `kept` paths lie
// inside it, the tmpfs holds only their mount points (the folders on the
// way, and an empty folder or file at each), made read-only with everything
// else by read_only_root, for the kept paths to be bound onto.
Status mask(const std::string& path, const std::vector<Kept>& kept) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return Status::Ok();  // nothing there to hide
  if (!S_ISDIR(st.st_mode))
    return mount("/dev/null", path.c_str(), nullptr, MS_BIND, nullptr) == 0 ? Status::Ok() : failed("cannot hide " + path);
  std::vector<const Kept*> inside;
  for (const Kept& k : kept)
    if (k.path.size() > path.size() + 1 && k.path.compare(0, path.size() + 1, path + "/") == 0) inside.push_back(&k);
  if (inside.empty())
    return mount("tmpfs", path.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "size=4k,mode=000") == 0
               ? Status::Ok()
               : failed("cannot hide " + path);
  if (mount("tmpfs", path.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=64k,mode=755") != 0)
    return failed("cannot hide " + path);
  for (const Kept* k : inside) {
    for (size_t slash = path.size() + 1; (slash = k->path.find('/', slash)) != std::string::npos; ++slash)
      mkdir(k->path.substr(0, slash).c_str(), 0755);
    int made = k->dir ? mkdir(k->path.c_str(), 0755) : open(k->path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    if (made < 0 && errno != EEXIST) return failed("cannot keep " + k->path);
    if (!k->dir && made >= 0) close(made);
  }
  return Status::Ok();
}

// Binds a kept path back at its own path, read-only or read-write.
Status bind_back(const Kept& k) {
  const std::string from = "/proc/self/fd/" + std::to_string(k.fd);
  mount_attr attr{};
  if (k.writable) attr.attr_clr = MOUNT_ATTR_RDONLY;
  else attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID;
  if (mount(from.c_str(), k.path.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0 ||
      syscall(SYS_mount_setattr, -1, k.path.c_str(), AT_RECURSIVE, &attr, sizeof attr) != 0)
    return failed(std::string("cannot keep ") + k.path + (k.writable ? " writable" : " readable"));
  close(k.fd);
  return Status::Ok();
}

// What no process of the sandbox may exceed, beside its caller's limits
// (a worker's RLIMIT_AS): its processes and threads together, counted in
// its own user namespace (so a fork bomb stops there), and the size of any
// one file it writes (its /tmp is a tmpfs of 1 GiB, /dev/shm 256 MiB).
Status limit_resources() {
  const rlim_t threads = std::max<rlim_t>(256, 4 * static_cast<rlim_t>(std::thread::hardware_concurrency()));
  const rlimit nproc{threads, threads}, fsize{rlim_t{2} << 30, rlim_t{2} << 30};
  if (setrlimit(RLIMIT_NPROC, &nproc) != 0 || setrlimit(RLIMIT_FSIZE, &fsize) != 0)
    return failed("cannot limit the sandbox's processes and file sizes");
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

// The seccomp filter: the calls that reach past the namespaces (a socket
// file on disk through socket(AF_UNIX) or io_uring; new namespaces in
// which to regain capabilities; mounts, ptrace, bpf, keyrings, perf events,
// userfaultfd) fail with EPERM, clone3 with ENOSYS (the C library then uses
// clone, whose flags are checked), and x32 calls kill the process.
Status install_filter() {
#if defined(__x86_64__)
  constexpr uint32_t kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
  constexpr uint32_t kArch = AUDIT_ARCH_AARCH64;
#else
#error "no seccomp architecture for this target"
#endif
  constexpr uint32_t kDenied[] = {
    __NR_io_uring_setup, __NR_io_uring_enter, __NR_io_uring_register, __NR_unshare, __NR_setns, __NR_mount,
    __NR_umount2, __NR_pivot_root, __NR_ptrace, __NR_bpf, __NR_keyctl, __NR_add_key, __NR_request_key,
    __NR_perf_event_open, __NR_userfaultfd, __NR_open_by_handle_at, __NR_fsopen, __NR_fsmount, __NR_move_mount,
    __NR_open_tree, __NR_mount_setattr, __NR_memfd_create, __NR_socketpair, __NR_shmget,
  };
  constexpr uint32_t kNewNamespaces = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC |
                                      CLONE_NEWUTS | CLONE_NEWCGROUP;
  const uint32_t deny = SECCOMP_RET_ERRNO | EPERM;
  std::vector<sock_filter> f = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
#if defined(__x86_64__)
      BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1),  // x32
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
#endif
  };
  for (uint32_t nr : kDenied) {
    f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1));
    f.push_back(BPF_STMT(BPF_RET | BPF_K, deny));
  }
  f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 0, 1));
  f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS));
  // clone: no new namespace in its flags.
  f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 3));
  f.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])));
  f.push_back(BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, kNewNamespaces, 0, 1));
  f.push_back(BPF_STMT(BPF_RET | BPF_K, deny));
  // prctl: not PR_SET_PDEATHSIG (the sandbox's first process dies with its
  // parent; undone, it would outlive the time limit and the worker).
  f.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)));
  f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_prctl, 0, 3));
  f.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])));
  f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PR_SET_PDEATHSIG, 0, 1));
  f.push_back(BPF_STMT(BPF_RET | BPF_K, deny));
  // socket: only the families the network namespace confines (inet, inet6,
  // netlink); not AF_UNIX (socket files on disk), AF_VSOCK (the host of a
  // VM) or any other.
  f.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)));
  f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 0, 5));
  f.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])));
  f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET, 3, 0));
  f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET6, 2, 0));
  f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_NETLINK, 1, 0));
  f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EACCES));
  f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  sock_fprog prog{static_cast<unsigned short>(f.size()), f.data()};
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

// Folders that hold secrets on a machine whatever the caller hides (review
// 17 of issue 49: a candidate read a file credential there and sent it out
// in its run times): /run (systemd credentials, container and Kubernetes
// secrets, sockets, every user's runtime folder) and /var/run, mlk's own
// configuration and state (/etc/mlk, /var/lib/mlk), TLS keys
// (/etc/ssl/private), and each absolute path of $MLK_SANDBOX_HIDE
// (colon-separated). Each as it really is (a link's target), once; missing
// ones left out. A relative path in $MLK_SANDBOX_HIDE is an error.
Expected<std::vector<std::string>> secret_folders() {
  std::vector<std::string> wanted = {"/run", "/var/run", "/etc/mlk", "/var/lib/mlk", "/etc/ssl/private"};
  if (const char* env = std::getenv("MLK_SANDBOX_HIDE")) {
    std::string list = env;
    for (size_t at = 0; at <= list.size();) {
      size_t end = list.find(':', at);
      if (end == std::string::npos) end = list.size();
      std::string p = list.substr(at, end - at);
      if (!p.empty() && p[0] != '/')
        return Status::InvalidArgument("sandbox: $MLK_SANDBOX_HIDE: `" + p + "` is not an absolute path");
      if (!p.empty()) wanted.push_back(p);
      at = end + 1;
    }
  }
  std::vector<std::string> out;
  for (const std::string& w : wanted) {
    char real[PATH_MAX];
    if (!realpath(w.c_str(), real)) continue;
    if (std::find(out.begin(), out.end(), real) == out.end()) out.push_back(real);
  }
  return out;
}

}  // namespace

Status enter_sandbox(const SandboxSpec& spec) {
  const uid_t uid = getuid();
  const gid_t gid = getgid();
  auto secrets = secret_folders();  // before the environment is reset
  if (!secrets.ok()) return secrets.status();
  // Nothing of the caller's but the answer's pipe, and no terminal.
  if (setsid() < 0) return failed("cannot start a session of its own");
  if (spec.null_stdio) {
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0) return failed("cannot detach stdio");
  }
  if (spec.keep_fd > 3 && close_range(3, static_cast<unsigned>(spec.keep_fd) - 1, 0) != 0) return failed("cannot close descriptors");
  if (close_range(spec.keep_fd >= 3 ? static_cast<unsigned>(spec.keep_fd) + 1 : 3, ~0U, 0) != 0)
    return failed("cannot close descriptors");
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) != 0)
    return failed("cannot make user, mount, PID and network namespaces (unprivileged user namespaces are needed)");
  // The same ids inside, so that files keep their owners. A process that is
  // not dumpable (a worker) has /proc/self owned by root: dumpable while the
  // maps are written (nothing else runs in this process meanwhile).
  prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
  const bool mapped = write_proc("/proc/self/setgroups", "deny") &&
                      write_proc("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1\n") &&
                      write_proc("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1\n");
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  if (!mapped) return failed("cannot map the user's ids into the sandbox");
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return failed("cannot make the mounts private");
  // The kept paths, held open before anything is masked (some lie under a
  // hidden folder or the new /tmp).
  std::vector<Kept> kept;
  for (const std::string& d : device_nodes()) kept.push_back({d, false, false, -1});
  for (const std::string& r : spec.readable) kept.push_back({r, false, false, -1});
  for (const std::string& w : spec.writable) kept.push_back({w, true, true, -1});
  for (Kept& k : kept) {
    k.fd = open(k.path.c_str(), O_PATH | O_CLOEXEC | (k.writable ? O_DIRECTORY : 0));
    struct stat ks {};
    if (k.fd < 0 || fstat(k.fd, &ks) != 0) return failed("cannot open " + k.path);
    k.dir = S_ISDIR(ks.st_mode);
  }
  // The caller's hidden paths, and always: the host's /dev but for the
  // nodes of device_nodes(), bound back (device nodes stay usable on a
  // read-only mount: its terminals, message queues, kvm), and the folders
  // of secret_folders() (the user's runtime folder among them).
  std::vector<std::string> hidden = {"/dev"};
  hidden.insert(hidden.end(), spec.hidden.begin(), spec.hidden.end());
  hidden.insert(hidden.end(), secrets->begin(), secrets->end());
  for (const std::string& p : hidden)
    if (Status s = mask(p, kept); !s.ok()) return s;
  if (Status s = read_only_root(); !s.ok()) return s;
  if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=1g,nr_inodes=65536") != 0)
    return failed("cannot mount a private /tmp");
  mkdir("/dev/shm", 01777);  // on the masked /dev: its own tmpfs below
  for (const auto& [link, to] : {std::pair<const char*, const char*>{"/dev/fd", "/proc/self/fd"},
                                 {"/dev/stdin", "/proc/self/fd/0"}, {"/dev/stdout", "/proc/self/fd/1"},
                                 {"/dev/stderr", "/proc/self/fd/2"}})
    (void)!symlink(to, link);
  struct stat shm {};
  if (stat("/dev/shm", &shm) == 0 && S_ISDIR(shm.st_mode) &&
      mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=1777,size=256m,nr_inodes=4096") != 0)
    return failed("cannot mount a private /dev/shm");
  for (Kept& k : kept) {
    if (k.path.rfind("/tmp/", 0) == 0) {  // its mount point, in the new /tmp
      for (size_t slash = 5; (slash = k.path.find('/', slash)) != std::string::npos; ++slash)
        mkdir(k.path.substr(0, slash).c_str(), 0700);
      int made = k.dir ? mkdir(k.path.c_str(), 0700) : open(k.path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
      if (!k.dir && made >= 0) close(made);
    }
    if (Status s = bind_back(k); !s.ok()) return s;
  }
  // Out of the caller's folder: a mount over a hidden folder does not move a
  // process that stands in it, whose relative paths would still reach it.
  if (chdir("/") != 0) return failed("cannot leave the caller's folder");
  int alive[2];  // the middle process holds the write end: its end reads as a hang-up
  if (pipe2(alive, O_CLOEXEC) != 0) return failed("cannot make a pipe");
  pid_t pid = fork();  // the PID namespace's first process
  if (pid < 0) return failed("cannot fork into the PID namespace");
  if (pid > 0) {
    close(alive[0]);
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
  close(alive[1]);
  pollfd gone{alive[0], POLLIN, 0};
  if (poll(&gone, 1, 0) != 0) _exit(1);  // the middle process died before the line above: nothing to die with
  close(alive[0]);
  if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
    return failed("cannot mount a /proc of the sandbox's own");
  if (Status s = limit_resources(); !s.ok()) return s;
  if (Status s = drop_capabilities(); !s.ok()) return s;
  if (Status s = install_filter(); !s.ok()) return s;
  reset_environment(spec.keep_env);
  return Status::Ok();
}

}  // namespace mlk
