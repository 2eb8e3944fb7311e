// The sandbox (base/sandbox.h) around code someone else chose. The fourth
// review of issue 49: a worker's home was left readable to candidates
// whenever the runner or the job's folder lay inside it (a runner installed
// under $HOME). A hidden folder is masked whatever lies inside it; the
// `readable` and `writable` paths inside are bound back, and nothing else.
#include "base/sandbox.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

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
    SandboxSpec spec{.hidden = {h}, .readable = {h + "/bin/runner"}, .writable = {h + "/job"}, .keep_fd = fd};
    if (Status s = enter_sandbox(spec); !s.ok()) {
      std::string why = "no sandbox: " + s.message();
      (void)!write(fd, why.data(), why.size());
      _exit(3);
    }
    // The secret, the runner's neighbour: hidden; the runner: readable, not
    // writable; the job's folder: writable.
    std::string got = reads(h + "/secret", 's') + reads(h + "/bin/other", 'o') + reads(h + "/bin/runner", 'r') +
                      writes(h + "/bin") + writes(h + "/job") + writes(h);
    (void)!write(fd, got.data(), got.size());
    _exit(0);
  });
  ASSERT_TRUE(r.ok()) << r.status().message();
  if (r->exit_code == 3 && r->out.find("user namespaces") != std::string::npos) GTEST_SKIP() << r->out;
  EXPECT_EQ(r->exit_code, 0) << r->out;
  EXPECT_EQ(r->out, "001010") << "secret, other, runner, write bin, write job, write home";
  EXPECT_TRUE(std::filesystem::exists(h + "/job/new"));  // written through to the real folder
}

}  // namespace
}  // namespace mlk
