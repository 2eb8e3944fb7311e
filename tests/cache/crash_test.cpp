// Crash safety and concurrency: writer processes killed with SIGKILL at random
// points, and parallel writer and reader processes and threads on one store.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <set>
#include <thread>

#include "cache/store.h"
#include "tests/cache/test_util.h"

namespace mlk::cache {
namespace {

using testing::bytes_of;
using testing::IsOk;
using testing::open_store;
using testing::TempDir;
using testing::test_provenance;

// The files of the entry stored under `key`: derived from the key alone, so
// any process can check what it reads. "shared" is the same for many keys.
std::map<std::string, std::string> files_for(const std::string& key) {
  uint64_t seed = std::stoull(key.substr(0, 12), nullptr, 16);
  return {{"kernel.so", bytes_of(200 + seed % 6000, seed)},
          {"schedule.json", "{\"key\":\"" + key + "\"}"},
          {"shared.bin", bytes_of(4096, seed % 3)}};
}

// Writes `key\n` (65 bytes, one atomic pipe write) for every put that returned OK.
[[noreturn]] void killed_writer(const std::string& path, int fd, int iteration) {
  auto s = Store::Open(path);
  if (!s.ok()) _exit(3);
  for (int i = 0; i < 400; ++i) {
    std::string key = sha256_hex("crash " + std::to_string(iteration) + " " + std::to_string(i));
    if (!(*s)->put_entry("default", key, "{}", test_provenance("crash writer"), files_for(key)).ok()) _exit(4);
    std::string line = key + "\n";
    if (write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) _exit(5);
    if (i % 3 == 0) {  // a short-lived entry: put, then rm (its own blob is deleted)
      std::string tmp = "tmp-" + key;
      if (!(*s)->put_entry("scratch", tmp, "{}", test_provenance(), {{"t", bytes_of(3000, i)}}).ok()) _exit(6);
      if (!(*s)->rm("scratch", tmp).ok()) _exit(7);
    }
    if (i % 10 == 5 && !(*s)->gc(int64_t{1} << 40).ok()) _exit(8);  // deletes unreferenced blobs only
  }
  _exit(0);
}

TEST(CrashSafety, KilledWritersLeaveAConsistentStore) {
  TempDir dir;
  std::string path = dir.file("c.db");
  std::set<std::string> committed;
  std::mt19937 rng(4242);
  auto start = std::chrono::steady_clock::now();
  for (int iteration = 0; iteration < 30; ++iteration) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      killed_writer(path, fds[1], iteration);
    }
    close(fds[1]);
    // Kill at a random instant: sometimes while opening (or creating) the store.
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 30000));
    kill(pid, SIGKILL);
    std::string reported;
    char buf[4096];
    for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) reported.append(buf, n);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 0))
        << "writer failed with exit code " << WEXITSTATUS(status);
    for (size_t pos = 0; pos + 65 <= reported.size(); pos += 65) committed.insert(reported.substr(pos, 64));

    auto s = open_store(path);
    auto v = s->verify();
    ASSERT_TRUE(IsOk(v));
    ASSERT_TRUE(v->consistent()) << "after kill " << iteration << ":\n" << v->summary();
    EXPECT_EQ(v->quarantined_now, 0);
  }
  auto s = open_store(path);
  EXPECT_GT(committed.size(), 30u) << "the writers hardly got to commit anything";
  for (const auto& key : committed) {
    auto a = s->get_entry("default", key);
    ASSERT_TRUE(IsOk(a)) << key;
    EXPECT_EQ(a->files, files_for(key));
  }
  EXPECT_LE(s->list("scratch")->size(), 30u);  // at most one put-then-rm cut short per kill
  std::printf("%zu entries committed before 30 kills\n", committed.size());
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_LT(std::chrono::duration_cast<std::chrono::seconds>(elapsed).count(), 20);
}

// Exit codes: 0 fine, 1 wrong bytes served, 2 an unexpected error.
[[noreturn]] void writer_process(const std::string& path, int id, int count) {
  auto s = Store::Open(path);
  if (!s.ok()) _exit(2);
  for (int i = 0; i < count; ++i) {
    std::string key = sha256_hex("writer " + std::to_string(id) + " " + std::to_string(i));
    if (!(*s)->put_entry("default", key, "{}", test_provenance(), files_for(key)).ok()) _exit(2);
  }
  _exit(0);
}

[[noreturn]] void reader_process(const std::string& path, int rounds) {
  auto s = Store::Open(path);
  if (!s.ok()) _exit(2);
  for (int r = 0; r < rounds; ++r) {
    auto entries = (*s)->list("default");
    if (!entries.ok()) _exit(2);
    for (const auto& e : *entries) {
      auto a = (*s)->get_entry("default", e.key);
      if (!a.ok()) _exit(2);  // nothing is removed in this test
      if (a->files != files_for(e.key)) _exit(1);
    }
  }
  _exit(0);
}

TEST(Concurrency, WriterAndReaderProcesses) {
  TempDir dir;
  std::string path = dir.file("c.db");  // not there yet: the processes race to create it
  std::vector<pid_t> pids;
  for (int w = 0; w < 3; ++w) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) writer_process(path, w, 25);
    pids.push_back(pid);
  }
  for (int r = 0; r < 2; ++r) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) reader_process(path, 6);
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "process " << pid << " exit " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  auto s = open_store(path);
  EXPECT_EQ(s->stats()->entries, 75);
  for (int w = 0; w < 3; ++w)
    for (int i = 0; i < 25; ++i) {
      std::string key = sha256_hex("writer " + std::to_string(w) + " " + std::to_string(i));
      auto a = s->get_entry("default", key);
      ASSERT_TRUE(IsOk(a));
      EXPECT_EQ(a->files, files_for(key));
    }
  EXPECT_TRUE(s->verify()->consistent());
}

TEST(Concurrency, ThreadsWithOwnAndSharedStores) {
  TempDir dir;
  std::string path = dir.file("c.db");
  auto shared = open_store(path);
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::unique_ptr<Store> own = t % 2 ? open_store(path) : nullptr;
      Store& s = own ? *own : *shared;  // two threads share one Store, two have their own
      for (int i = 0; i < 15; ++i) {
        std::string key = sha256_hex("thread " + std::to_string(t) + " " + std::to_string(i));
        if (!s.put_entry("default", key, "{}", test_provenance(), files_for(key)).ok()) ++errors;
        auto a = s.get_entry("default", key);
        if (!a.ok() || a->files != files_for(key)) ++errors;
        auto all = s.list("default");
        if (!all.ok()) ++errors;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(shared->stats()->entries, 60);
  EXPECT_TRUE(shared->verify()->consistent());
}

}  // namespace
}  // namespace mlk::cache
