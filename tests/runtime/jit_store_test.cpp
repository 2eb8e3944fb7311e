// The JIT store (runtime/jit_store.h): a default-schedule kernel compiled by
// one Runtime is loaded, not compiled, by the next one on the same cache; a
// damaged entry is built again; where the store is off or cannot keep a
// kernel (no C compiler, another user's folder) the kernel is compiled in
// memory and still runs, and the selection says which happened.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>
#include <vector>

#include "base/files.h"
#include "lang/compare.h"
#include "lang/frontend.h"
#include "lang/interpreter.h"
#include "lang/ir_printer.h"
#include "runtime/jit.h"
#include "runtime/jit_store.h"
#include "runtime/runtime.h"
#include "tests/runtime/dl_tensor.h"
#include "tests/runtime/scoped_env.h"
#include "targets/profile.h"

namespace mlk {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kNorms = std::string(MLK_SOURCE_DIR) + "/examples/norms.tl";

using Env = ScopedEnv;

class JitStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = make_private_temp_dir("mlk_jit_store_test_");
    ASSERT_TRUE(d.ok()) << d.status().message();
    dir_ = *d;
    store_ = dir_ + "/cache.db";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // rmsnorm at B=2,S=4,D=48 from a new Runtime on the test's cache: the
  // default schedule, as the JIT path gives it.
  std::shared_ptr<const rt::Kernel> kernel() {
    auto r = rt::Runtime::Open({store_, "default", ""});
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (!r.ok()) return nullptr;
    auto k = (*r)->GetKernel(kNorms, "rmsnorm", *rt::TargetPolicy::Parse("host"), {{"B", 2}, {"S", 4}, {"D", 48}});
    EXPECT_TRUE(k.ok()) << k.status().message();
    if (!k.ok()) return nullptr;
    EXPECT_EQ((*k)->selection().source, rt::Selection::Source::kDefaultJit);
    runtimes_.push_back(std::move(*r));  // the kernel lives as long as its runtime
    return *k;
  }
  // The kernel's result on fixed inputs, checked against the interpreter.
  HostTensor run(const rt::Kernel& k) {
    Dl x(DType::F32, {2, 4, 48}, 1), w(DType::F32, {48}, 2), eps(DType::F32, {}, 3), out(DType::F32, {2, 4, 48});
    eps.t.set(0, 1e-5);
    Status s = k.Run({&x.d, &w.d, &eps.d}, &out.d);
    EXPECT_TRUE(s.ok()) << s.message();
    auto fe = compile_file(kNorms);
    EXPECT_TRUE(fe.ok() && fe->ok());
    auto want = interpret(fe->module, "rmsnorm", {x.t, w.t, eps.t}, {});
    EXPECT_TRUE(want.ok());
    Status cmp = compare(*want, out.t, tolerance_for(DType::F32, 48));
    EXPECT_TRUE(cmp.ok()) << cmp.message();
    return out.t;
  }
  // The store's entries (directories named by a 64-hex key).
  std::vector<fs::path> entries() const {
    std::vector<fs::path> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(store_ + ".jit", ec))
      if (e.path().filename().string().size() == 64) out.push_back(e.path());
    return out;
  }
  std::string dir_, store_;
  std::vector<std::unique_ptr<rt::Runtime>> runtimes_;
};

TEST_F(JitStoreTest, ASecondRuntimeLoadsWhatTheFirstCompiled) {
  Env off("MLK_JIT_STORE", nullptr);
  auto first = kernel();
  ASSERT_TRUE(first);
  EXPECT_THAT(first->selection().reason, HasSubstr("; compiled and kept in the JIT store " + store_ + ".jit/"));
  ASSERT_EQ(entries().size(), 1u);
  EXPECT_TRUE(fs::exists(entries()[0] / "manifest.json"));
  struct stat st {};
  ASSERT_EQ(::stat((store_ + ".jit").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);  // only this user enters it: its code runs here

  auto second = kernel();
  ASSERT_TRUE(second);
  EXPECT_THAT(second->selection().reason,
              HasSubstr("; loaded from the JIT store (compiled earlier) " + entries()[0].string()));
  EXPECT_EQ(entries().size(), 1u);
  EXPECT_EQ(run(*first).bytes, run(*second).bytes);  // one schedule, one kernel
}

TEST_F(JitStoreTest, ADamagedEntryIsBuiltAgain) {
  Env off("MLK_JIT_STORE", nullptr);
  ASSERT_TRUE(kernel());
  ASSERT_EQ(entries().size(), 1u);
  const fs::path lib = entries()[0] / "librmsnorm.so";
  auto bytes = read_file(lib.string());
  ASSERT_TRUE(bytes.ok());
  ASSERT_TRUE(write_file(lib.string(), *bytes + "x").ok());
  auto again = kernel();
  ASSERT_TRUE(again);
  EXPECT_THAT(again->selection().reason, HasSubstr("; compiled and kept in the JIT store"));
  EXPECT_THAT(again->selection().reason, HasSubstr("was damaged ("));
  EXPECT_THAT(again->selection().reason, HasSubstr(") and was built again"));
  run(*again);
  auto third = kernel();
  ASSERT_TRUE(third);
  EXPECT_THAT(third->selection().reason, HasSubstr("loaded from the JIT store"));
}

TEST_F(JitStoreTest, OffEveryProcessCompilesInMemory) {
  Env off("MLK_JIT_STORE", "off");
  auto k = kernel();
  ASSERT_TRUE(k);
  EXPECT_THAT(k->selection().reason, HasSubstr("; compiled in memory ($MLK_JIT_STORE=off)"));
  EXPECT_FALSE(fs::exists(store_ + ".jit"));
  run(*k);
}

TEST_F(JitStoreTest, WithoutACCompilerTheKernelIsCompiledInMemoryOnce) {
  Env off("MLK_JIT_STORE", nullptr);
  Env cc("CC", "/nonexistent/cc");
  auto k = kernel();
  ASSERT_TRUE(k);
  // Looked for before anything is compiled: the kernel is compiled once, in memory.
  EXPECT_THAT(k->selection().reason,
              HasSubstr("; compiled in memory (the JIT store " + store_ + ".jit could not keep it: no C compiler to "
                        "link it ($CC=`/nonexistent/cc` is not an executable))"));
  EXPECT_FALSE(fs::exists(store_ + ".jit"));
  run(*k);
  Env none("CC", "no-such-compiler-here");
  auto again = kernel();
  ASSERT_TRUE(again);
  EXPECT_THAT(again->selection().reason, HasSubstr("no C compiler to link it ($CC=`no-such-compiler-here` is not on $PATH)"));
}

TEST_F(JitStoreTest, AFolderThatIsNotAStoreIsLeftAlone) {
  const std::string mine = dir_ + "/mine";
  ASSERT_TRUE(fs::create_directory(mine));
  ASSERT_TRUE(write_file(mine + "/notes.txt", "mine").ok());
  fs::permissions(mine, fs::perms(0755));
  Env given("MLK_JIT_STORE", mine.c_str());
  auto k = kernel();
  ASSERT_TRUE(k);
  EXPECT_THAT(k->selection().reason, HasSubstr("could not keep it: " + mine + " is not a JIT store (no "
                                               ".mlk-jit-store in it) and is not empty: name a new folder)"));
  EXPECT_EQ(fs::status(mine).permissions(), fs::perms(0755));  // not made private
  run(*k);
}

TEST_F(JitStoreTest, AStoreInAFolderOthersCanWriteIsNotUsed) {
  const std::string open = dir_ + "/open";
  ASSERT_TRUE(fs::create_directory(open));
  fs::permissions(open, fs::perms(0777));  // not sticky
  const std::string store = open + "/store";
  Env given("MLK_JIT_STORE", store.c_str());
  auto k = kernel();
  ASSERT_TRUE(k);
  EXPECT_THAT(k->selection().reason,
              HasSubstr("could not keep it: " + open + " is writable by other users (and not sticky)"));
  EXPECT_FALSE(fs::exists(store));
  fs::permissions(open, fs::perms(01777));  // sticky, as /tmp: no one else can replace the store
  auto sticky = kernel();
  ASSERT_TRUE(sticky);
  EXPECT_THAT(sticky->selection().reason, HasSubstr("compiled and kept in the JIT store " + store + "/"));
  EXPECT_TRUE(fs::exists(store + "/.mlk-jit-store"));
}

TEST_F(JitStoreTest, TwoBuildersOfOneKeyEndWithOneEntry) {
  // The outer build finds, when it moves its result into place, that another
  // builder (here: a nested one) put the same key there first; it loads that.
  auto plugin = rt::load_jit_plugin();
  ASSERT_TRUE(plugin.ok()) << plugin.status().message();
  auto text = read_file(kNorms);
  ASSERT_TRUE(text.ok());
  auto fe = compile_source(kNorms, *text);
  ASSERT_TRUE(fe.ok());
  const std::string hash = ir::function_hash(fe.module, *fe.module.find("rmsnorm"));
  const DimEnv dims{{"B", 2}, {"S", 4}, {"D", 48}};
  auto build = [&](const std::string& tmp) {
    return rt::build_jit_artifact(*plugin, kNorms, *text, "f32", "rmsnorm", hash, "host", "", dims, tmp);
  };
  const std::string store = store_ + ".jit", key(64, 'a');
  bool nested = false;
  auto outer = rt::jit_store_get(store, key, [&](const std::string& tmp) {
    Status s = build(tmp);
    auto inner = rt::jit_store_get(store, key, build);
    nested = inner.ok() && inner->built;
    return s;
  });
  ASSERT_TRUE(outer.ok()) << outer.status().message();
  EXPECT_TRUE(nested);
  EXPECT_TRUE(outer->artifact);
  EXPECT_EQ(entries().size(), 1u);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(store, ec))  // no build left behind
    EXPECT_NE(e.path().filename().string().rfind(".tmp-", 0), 0u) << e.path();
}

TEST_F(JitStoreTest, ABuildACrashedProcessLeftIsRemovedAfterAnHour) {
  Env off("MLK_JIT_STORE", nullptr);
  ASSERT_TRUE(kernel());
  const fs::path store = store_ + ".jit";
  const auto old = fs::file_time_type::clock::now() - std::chrono::hours(2);
  for (const char* name : {".tmp-abcdef", ".tmp-fresh1", ".tmp-notabuild"}) {
    fs::create_directory(store / name);
    if (std::string(name) != ".tmp-fresh1") fs::last_write_time(store / name, old);
  }
  auto r = rt::Runtime::Open({store_, "default", ""});
  ASSERT_TRUE(r.ok());
  auto k = (*r)->GetKernel(kNorms, "rmsnorm", *rt::TargetPolicy::Parse("host"), {{"B", 3}, {"S", 4}, {"D", 48}});
  ASSERT_TRUE(k.ok());  // another shape: a second build, then the store is tidied
  EXPECT_FALSE(fs::exists(store / ".tmp-abcdef"));
  EXPECT_TRUE(fs::exists(store / ".tmp-fresh1"));     // may still be in progress
  EXPECT_TRUE(fs::exists(store / ".tmp-notabuild"));  // not a name a build has
}

TEST_F(JitStoreTest, AStoreAnotherUserOwnsIsNotUsed) {
  if (::geteuid() != 0) GTEST_SKIP() << "only root can give a folder to another user";
  const std::string other = dir_ + "/theirs";
  ASSERT_TRUE(fs::create_directory(other));
  ASSERT_EQ(::chown(other.c_str(), 4242, 4242), 0);
  Env given("MLK_JIT_STORE", other.c_str());
  auto k = kernel();
  ASSERT_TRUE(k);
  EXPECT_THAT(k->selection().reason, HasSubstr("; compiled in memory (the JIT store " + other +
                                               " could not keep it: " + other + " belongs to user 4242"));
  run(*k);
}

TEST_F(JitStoreTest, TheLeastRecentlyUsedEntriesBeyondTheLimitAreRemoved) {
  Env off("MLK_JIT_STORE", nullptr);
  ASSERT_TRUE(ensure_private_dir(store_ + ".jit").ok());
  ASSERT_TRUE(write_file(store_ + ".jit/.mlk-jit-store", "").ok());  // a store, as the runtime marks one
  const auto old = fs::file_time_type::clock::now() - std::chrono::hours(24);
  for (int i = 0; i < rt::kJitStoreKeep; ++i) {
    char name[65];
    std::snprintf(name, sizeof name, "%064x", i);
    fs::path e = fs::path(store_ + ".jit") / name;
    fs::create_directory(e);
    fs::last_write_time(e, old + std::chrono::minutes(i));
  }
  auto k = kernel();  // the new entry makes one too many
  ASSERT_TRUE(k);
  EXPECT_THAT(k->selection().reason, HasSubstr("compiled and kept in the JIT store"));
  auto now = entries();
  EXPECT_EQ(now.size(), static_cast<size_t>(rt::kJitStoreKeep));
  EXPECT_FALSE(fs::exists(fs::path(store_ + ".jit") / std::string(64, '0')));  // the oldest went
  char second[65];
  std::snprintf(second, sizeof second, "%064x", 1);
  EXPECT_TRUE(fs::exists(fs::path(store_ + ".jit") / second));
}

TEST(JitStoreKey, ThePluginIsNamedByItsLinkersBuildId) {
  auto plugin = rt::load_jit_plugin();
  ASSERT_TRUE(plugin.ok()) << plugin.status().message();
  const std::string id = rt::jit_plugin_identity(*plugin);
  EXPECT_THAT(id, ::testing::MatchesRegex("abi [0-9]+, build id [0-9a-f]{40}"));
  EXPECT_EQ(id, rt::jit_plugin_identity(*plugin));
}

TEST(JitStoreKey, NamesEverythingTheKernelDependsOn) {
  auto p = find_profile("cpu_avx2");
  ASSERT_TRUE(p.ok());
  const DimEnv dims{{"B", 2}, {"D", 48}};
  const std::string k = rt::jit_store_key("plugin 1", "rmsnorm", "abc", "f32", *p, dims);
  EXPECT_EQ(k.size(), 64u);
  EXPECT_EQ(k, rt::jit_store_key("plugin 1", "rmsnorm", "abc", "f32", *p, dims));
  EXPECT_NE(k, rt::jit_store_key("plugin 2", "rmsnorm", "abc", "f32", *p, dims));
  EXPECT_NE(k, rt::jit_store_key("plugin 1", "rmsnorm", "abd", "f32", *p, dims));
  EXPECT_NE(k, rt::jit_store_key("plugin 1", "rmsnorm", "abc", "bf16", *p, dims));
  EXPECT_NE(k, rt::jit_store_key("plugin 1", "rmsnorm", "abc", "f32", *p, {{"B", 3}, {"D", 48}}));
  Profile q = *p;
  q.features.push_back("avx512f");
  EXPECT_NE(k, rt::jit_store_key("plugin 1", "rmsnorm", "abc", "f32", q, dims));
}

TEST_F(JitStoreTest, ThreadsOpeningANewStoreAtOnceAllUseIt) {
  // A model's first call compiles its fns side by side, each opening the
  // store: one that finds the folder made but not yet marked, then the
  // marker written, must not take the marker for another's file (it once
  // refused the store so, and a shipped schedule gave way to the default).
  for (int round = 0; round < 40; ++round) {
    const std::string store = dir_ + "/store" + std::to_string(round);
    std::vector<std::string> got(8);
    std::vector<std::thread> threads;
    for (size_t t = 0; t < got.size(); ++t)
      threads.emplace_back([&, t] {
        auto e = rt::jit_store_get(store, "key" + std::to_string(t),
                                   [](const std::string&) { return Status::InvalidArgument("built"); });
        got[t] = e.ok() ? "ok" : e.status().message();
      });
    for (auto& th : threads) th.join();
    for (size_t t = 0; t < got.size(); ++t) ASSERT_EQ(got[t], "built") << "round " << round << ", thread " << t;
  }
}

}  // namespace
}  // namespace mlk
