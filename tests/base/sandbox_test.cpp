// The sandbox (base/sandbox.h) around code someone else chose. The fourth
// review of issue 49: a worker's home was left readable to candidates
// whenever the runner or the job's folder lay inside it (a runner installed
// under $HOME). A hidden folder is masked whatever lies inside it; the
// `readable` and `writable` paths inside are bound back, and nothing else.
#include "base/sandbox.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>

#include "../cache/test_util.h"
#include "base/child.h"

namespace mlk {
namespace {

// "1" when `path` can be read and its first byte is `want`, else "0".
std::string reads(const std::string& path, char want) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "0";
  char c = 0;
  ssize_t n = read(fd, &c, 1);
  close(fd);
  return n == 1 && c == want ? "1" : "0";
}

// "1" when a file can be created in folder `dir`, else "0".
std::string writes(const std::string& dir) {
  int fd = open((dir + "/new").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) return "0";
  close(fd);
  return "1";
}

// A fresh folder outside /tmp (the sandbox has a private /tmp of its own),
// removed with its contents.
struct HomeDir {
  std::string path;
  HomeDir() {
    std::string tmpl = (std::filesystem::current_path() / "mlk_sandbox_home.XXXXXX").string();
    if (mkdtemp(tmpl.data())) path = tmpl;
  }
  ~HomeDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};

TEST(Sandbox, AHiddenFolderIsMaskedButForThePathsKeptInside) {
  HomeDir home;
  ASSERT_FALSE(home.path.empty());
  const std::string h = std::filesystem::weakly_canonical(home.path).string();
  ASSERT_EQ(mkdir((h + "/bin").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((h + "/job").c_str(), 0755), 0);
  cache::testing::write_file(h + "/secret", "s");
  cache::testing::write_file(h + "/bin/runner", "r");
  cache::testing::write_file(h + "/bin/other", "o");
  auto r = run_child([&](int fd) {
    // Started from inside the hidden folder (review 5 of issue 49: relative
    // paths reached it, the mount over it not moving a process inside).
    if (chdir(h.c_str()) != 0) _exit(4);
    SandboxSpec spec{.hidden = {h}, .readable = {h + "/bin/runner"}, .writable = {h + "/job"}, .keep_fd = fd};
    if (Status s = enter_sandbox(spec); !s.ok()) {
      std::string why = "no sandbox: " + s.message();
      (void)!write(fd, why.data(), why.size());
      _exit(3);
    }
    // The secret, the runner's neighbour: hidden; the runner: readable, not
    // writable; the job's folder: writable.
    std::string got = reads(h + "/secret", 's') + reads(h + "/bin/other", 'o') + reads(h + "/bin/runner", 'r') +
                      writes(h + "/bin") + writes(h + "/job") + writes(h) + reads("secret", 's') + reads("bin/other", 'o');
    (void)!write(fd, got.data(), got.size());
    _exit(0);
  });
  ASSERT_TRUE(r.ok()) << r.status().message();
  if (r->exit_code == 3 && r->out.find("user namespaces") != std::string::npos) GTEST_SKIP() << r->out;
  EXPECT_EQ(r->exit_code, 0) << r->out;
  EXPECT_EQ(r->out, "00101000") << "secret, other, runner, write bin, write job, write home, and relative: secret, other";
  EXPECT_TRUE(std::filesystem::exists(h + "/job/new"));  // written through to the real folder
}

// Issue 49, review 5 (M1, M2): inside, socket(AF_VSOCK) reached the host of
// a VM (only AF_UNIX was refused), and nothing bounded processes, tmpfs or
// memfd pages (RLIMIT_AS counts none of them). Each probe: "1" when the
// sandbox refused or bounded it.
TEST(Sandbox, RefusesOtherSocketFamiliesAndBoundsWhatRlimitAsDoesNot) {
  auto r = run_child([&](int fd) {
    if (Status s = enter_sandbox(SandboxSpec{.keep_fd = fd}); !s.ok()) {
      std::string why = "no sandbox: " + s.message();
      (void)!write(fd, why.data(), why.size());
      _exit(3);
    }
    auto refused = [](int got, int err) { return got < 0 && errno == err ? "1" : "0"; };
    std::string got = refused(socket(AF_VSOCK, SOCK_STREAM, 0), EACCES);
    got += refused(socket(AF_PACKET, SOCK_RAW, 0), EACCES);
    got += refused(static_cast<int>(syscall(SYS_memfd_create, "x", 0)), EPERM);
    int pair[2];
    got += refused(socketpair(AF_UNIX, SOCK_DGRAM, 0, pair), EPERM);
    got += refused(static_cast<int>(syscall(SYS_shmget, 0 /* IPC_PRIVATE */, 4096, 01600)), EPERM);
    got += refused(prctl(PR_SET_PDEATHSIG, 0), EPERM);
    got += access("/dev/pts/ptmx", F_OK) != 0 ? "1" : "0";  // the host's terminals: masked
    got += access("/dev/kmsg", F_OK) != 0 && reads("/dev/zero", '\0') == "1" ? "1" : "0";  // a /dev of its own
    rlimit nproc{};
    getrlimit(RLIMIT_NPROC, &nproc);
    got += nproc.rlim_cur != RLIM_INFINITY && nproc.rlim_cur <= 4096 ? "1" : "0";
    struct statfs tmp {};
    got += statfs("/tmp", &tmp) == 0 && static_cast<uint64_t>(tmp.f_blocks) * tmp.f_bsize <= (uint64_t{1} << 30) ? "1" : "0";
    int ok = socket(AF_INET, SOCK_STREAM, 0);  // still allowed: the network namespace has only its own loopback
    got += ok >= 0 ? "1" : "0";
    (void)!write(fd, got.data(), got.size());
    _exit(0);
  });
  ASSERT_TRUE(r.ok()) << r.status().message();
  if (r->exit_code == 3 && r->out.find("user namespaces") != std::string::npos) GTEST_SKIP() << r->out;
  EXPECT_EQ(r->out, "11111111111") << "vsock, packet, memfd_create, socketpair, shmget, PDEATHSIG reset, /dev/pts, "
                                      "a /dev of its own, RLIMIT_NPROC, /tmp size, inet";
}

// Review 17 of issue 49 (M1): the sandbox hid the caller's paths and the
// user's runtime folder only, so a candidate read a credential a machine
// keeps elsewhere (/run/secrets, /run/credentials, /etc/mlk) and sent it out
// in its run times. The folders of secrets are masked always, and each path
// of $MLK_SANDBOX_HIDE; a relative one there is refused.
TEST(Sandbox, Review17_M1_TheMachinesSecretFoldersAndMlkSandboxHideAreMasked) {
  HomeDir extra;
  ASSERT_FALSE(extra.path.empty());
  const std::string e = std::filesystem::weakly_canonical(extra.path).string();
  cache::testing::write_file(e + "/token", "t");
  // A file under /run where this user may write one (root; else that part is skipped).
  std::string run_file = "/run/mlk_sandbox_test_" + std::to_string(getpid());
  const bool in_run = [&] {
    int fd = open(run_file.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) return false;
    bool ok = write(fd, "r", 1) == 1;
    close(fd);
    return ok;
  }();
  auto probe = [&](const std::string& hide) {
    return run_child([&](int fd) {
      setenv("MLK_SANDBOX_HIDE", hide.c_str(), 1);
      if (Status s = enter_sandbox(SandboxSpec{.keep_fd = fd}); !s.ok()) {
        std::string why = "no sandbox: " + s.message();
        (void)!write(fd, why.data(), why.size());
        _exit(3);
      }
      std::string got = reads(e + "/token", 't') + (in_run ? reads(run_file, 'r') : "0");
      (void)!write(fd, got.data(), got.size());
      _exit(0);
    });
  };
  auto r = probe("/nonexistent:" + e);
  if (in_run) unlink(run_file.c_str());
  ASSERT_TRUE(r.ok()) << r.status().message();
  if (r->exit_code == 3 && r->out.find("user namespaces") != std::string::npos) GTEST_SKIP() << r->out;
  EXPECT_EQ(r->exit_code, 0) << r->out;
  EXPECT_EQ(r->out, "00") << "the $MLK_SANDBOX_HIDE folder, a file under /run" << (in_run ? "" : " (not made here)");
  r = probe("relative/dir");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_NE(r->out.find("sandbox: $MLK_SANDBOX_HIDE: `relative/dir` is not an absolute path"), std::string::npos) << r->out;
}

// Review 6 of issue 49 (hardening): run_child's time limit held only while
// the child's output was open; a child that closed it and ran on was waited
// for without end.
TEST(RunChild, TheTimeLimitHoldsAfterTheChildClosesItsOutput) {
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run_child(
      [](int fd) {
        close(fd);
        sleep(20);
      },
      ChildLimits{.time_s = 0.5});
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->timed_out);
  EXPECT_LT(took, std::chrono::seconds(10));
}

}  // namespace
}  // namespace mlk
