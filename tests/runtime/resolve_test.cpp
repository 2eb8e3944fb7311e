// The artifact resolver (runtime/resolve.h) through the runtime: exact key,
// the nearest other shape (deterministic, whatever was used last), artifacts
// this CPU cannot run skipped, the default schedule with the JIT on a miss,
// the strict policies, and `mlk build` directories.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "autotune/cached_tune.h"
#include "cache/key.h"
#include "cache/store.h"
#include "lang/compare.h"
#include "lang/frontend.h"
#include "lang/interpreter.h"
#include "runtime/boundary.h"
#include "tests/runtime/dl_tensor.h"
#include "runtime/resolve.h"
#include "runtime/runtime.h"
#include "artifact/build.h"
#include "targets/detect.h"

namespace mlk {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using nlohmann::json;

const std::string kNorms = std::string(MLK_SOURCE_DIR) + "/examples/norms.tl";


// rmsnorm tuned (one trial) for host at D=64 and at D=256, B=2, S=4.
class ResolveTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = (fs::temp_directory_path() / ("mlk_resolve_test_" + std::to_string(getpid()))).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    store_path_ = dir_ + "/cache.db";
    auto store = cache::Store::Open(store_path_);
    ASSERT_TRUE(store.ok()) << store.status().message();
    auto fe = compile_file(kNorms);
    ASSERT_TRUE(fe.ok() && fe->ok());
    for (int64_t d : {64, 256}) {
      tune::TuneOptions o;
      o.trials = 1;
      o.time_s = 20;
      o.autoschedulers = false;
      o.progress = false;
      o.log_path = dir_ + "/rmsnorm" + std::to_string(d) + ".log";
      DimEnv dims = {{"B", 2}, {"S", 4}, {"D", d}};
      auto r = tune::tune_cached({.module = &fe->module,
                                  .fn = "rmsnorm",
                                  .source = kNorms,
                                  .profile = host_profile(),
                                  .dims = dims,
                                  .opts = o,
                                  .store = store->get(),
                                  .work_dir = dir_ + "/work"});
      ASSERT_TRUE(r.ok()) << r.status().message();
      keys_[d] = r->key;
    }
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static std::unique_ptr<rt::Runtime> open(const std::string& store) {
    auto r = rt::Runtime::Open({store, "default", ""});
    EXPECT_TRUE(r.ok()) << r.status().message();
    return std::move(r).value();
  }
  static Expected<std::shared_ptr<const rt::Kernel>> rmsnorm(rt::Runtime& r, int64_t d, const std::string& policy = "host") {
    return r.GetKernel(kNorms, "rmsnorm", *rt::TargetPolicy::Parse(policy), {{"B", 2}, {"S", 4}, {"D", d}});
  }
  // Runs the kernel at B=2,S=4,D=d and compares it with the interpreter.
  static void expect_correct(const rt::Kernel& k, int64_t d) {
    Dl x(DType::F32, {2, 4, d}, 1), w(DType::F32, {d}, 2), eps(DType::F32, {}, 3), out(DType::F32, {2, 4, d});
    eps.t.set(0, 1e-5);
    Status s = k.Run({&x.d, &w.d, &eps.d}, &out.d);
    ASSERT_TRUE(s.ok()) << s.message();
    auto fe = compile_file(kNorms);
    auto want = interpret(fe->module, "rmsnorm", {x.t, w.t, eps.t}, {});
    ASSERT_TRUE(want.ok());
    Status cmp = compare(*want, out.t, tolerance_for(DType::F32, d));
    EXPECT_TRUE(cmp.ok()) << cmp.message();
  }

  static std::string dir_, store_path_;
  static std::map<int64_t, std::string> keys_;
};
std::string ResolveTest::dir_, ResolveTest::store_path_;
std::map<int64_t, std::string> ResolveTest::keys_;

TEST_F(ResolveTest, TheNearestTunedShapeWinsWhateverWasUsedLast) {
  for (bool touch_other_first : {false, true}) {
    auto r = open(store_path_);
    // Using the farther artifact first makes it the most recently used one.
    if (touch_other_first) ASSERT_TRUE(rmsnorm(*r, 64).ok());
    auto k = rmsnorm(*r, 200);  // |log2(256/200)| = 0.36 < |log2(64/200)| = 1.64
    ASSERT_TRUE(k.ok()) << k.status().message();
    EXPECT_EQ((*k)->selection().source, rt::Selection::Source::kOtherShape);
    EXPECT_EQ((*k)->selection().key, keys_[256]);
    EXPECT_THAT((*k)->selection().reason, HasSubstr("tuned at B=2,D=256,S=4 (the nearest tuned shape), run at B=2,D=200,S=4"));
    expect_correct(**k, 200);
    auto r2 = open(store_path_);
    if (touch_other_first) ASSERT_TRUE(rmsnorm(*r2, 256).ok());
    auto near64 = rmsnorm(*r2, 100);  // 0.64 < 1.36
    ASSERT_TRUE(near64.ok()) << near64.status().message();
    EXPECT_EQ((*near64)->selection().key, keys_[64]);
  }
}

TEST_F(ResolveTest, ExactKeyFirst) {
  auto r = open(store_path_);
  auto k = rmsnorm(*r, 256, "host;require=exact");
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_EQ((*k)->selection().source, rt::Selection::Source::kExact);
  EXPECT_EQ((*k)->selection().key, keys_[256]);
}

TEST_F(ResolveTest, StrictPoliciesRefuseInsteadOfFallingBack) {
  auto r = open(store_path_);
  auto exact = rmsnorm(*r, 200, "host;require=exact");
  ASSERT_FALSE(exact.ok());
  EXPECT_EQ(exact.status().code(), Status::Code::kNotFound);
  EXPECT_THAT(exact.status().message(), HasSubstr("host: no artifact of `rmsnorm` tuned for host at exactly B=2,D=200,S=4"));
  // require=tuned takes another shape, but never the JIT.
  auto tuned = rmsnorm(*r, 200, "host;require=tuned");
  ASSERT_TRUE(tuned.ok()) << tuned.status().message();
  EXPECT_EQ((*tuned)->selection().source, rt::Selection::Source::kOtherShape);
  auto none = r->GetKernel(kNorms, "layernorm", *rt::TargetPolicy::Parse("host;require=tuned"), {{"N", 4}, {"D", 8}});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Status::Code::kNotFound);
  EXPECT_THAT(none.status().message(), HasSubstr("under policy host;require=tuned"));
  EXPECT_THAT(none.status().message(), HasSubstr("host: no artifact of `layernorm` tuned for host"));
  // Bad policy text names the choices.
  auto bad = rt::TargetPolicy::Parse("host;require=fast");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("expected `any`, `tuned`"));
  auto unknown = rt::TargetPolicy::Parse("host;speed=1");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("unknown option `speed=1`"));
}

TEST_F(ResolveTest, AMissWithNoCacheAtAllRunsTheDefaultScheduleAndSaysSo) {
  auto r = open(dir_ + "/no_such_store.db");  // a store that does not exist is not created
  auto k = rmsnorm(*r, 48);
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_EQ((*k)->selection().source, rt::Selection::Source::kDefaultJit);
  EXPECT_THAT((*k)->selection().explain(), HasSubstr("host: default schedule (JIT), not tuned"));
  EXPECT_THAT((*k)->selection().explain(), HasSubstr("no artifact cache at " + dir_ + "/no_such_store.db"));
  expect_correct(**k, 48);
  EXPECT_FALSE(fs::exists(dir_ + "/no_such_store.db"));
  // Compiled once per fn and profile: another shape reuses it.
  auto again = rmsnorm(*r, 16);
  ASSERT_TRUE(again.ok());
  expect_correct(**again, 16);
  // A CUDA-only policy has no JIT fallback here.
  if (detect_cuda().devices.empty()) {
    auto gpu = rmsnorm(*r, 48, "cuda_sm90");
    ASSERT_FALSE(gpu.ok());
    EXPECT_THAT(gpu.status().message(), HasSubstr("no CPU profile of it runs here"));
  }
}

// Issue 51: a model's first call resolves its kernels together. Each
// distinct request is resolved once (the JIT compiles unlocked, distinct fns
// side by side); repeats share its kernel; a failing request fails at its
// own place; first calls of one kernel from several threads at once get
// one Kernel, which computes the right thing.
TEST_F(ResolveTest, GetKernelsResolvesEachDistinctRequestOnceInItsPlace) {
  auto r = open(dir_ + "/no_such_store.db");
  auto prog = r->LoadProgram(kNorms);
  ASSERT_TRUE(prog.ok()) << prog.status().message();
  const rt::TargetPolicy host = *rt::TargetPolicy::Parse("host");
  const DimEnv at = {{"B", 2}, {"S", 4}, {"D", 40}};
  auto got = r->GetKernels(*prog, host, {{"rmsnorm", at}, {"layernorm", {{"N", 8}, {"D", 40}}}, {"rmsnorm", at},
                                         {"nope", at}});
  ASSERT_EQ(got.size(), 4u);
  ASSERT_TRUE(got[0].ok()) << got[0].status().message();
  ASSERT_TRUE(got[1].ok()) << got[1].status().message();
  ASSERT_TRUE(got[2].ok());
  EXPECT_EQ(*got[0], *got[2]);
  EXPECT_EQ((*got[1])->selection().source, rt::Selection::Source::kDefaultJit);
  ASSERT_FALSE(got[3].ok());
  EXPECT_THAT(got[3].status().message(), HasSubstr("no fn `nope`"));
  expect_correct(**got[0], 40);
  // Under cpu_avx2 nothing is compiled yet: the threads meet a compile in
  // progress (or start it), and all get its one kernel.
  std::vector<std::shared_ptr<const rt::Kernel>> same(4);
  std::vector<std::string> errors(same.size());
  std::vector<std::thread> callers;
  for (size_t i = 0; i < same.size(); ++i)
    callers.emplace_back([&, i] {
      auto k = rmsnorm(*r, 24, "cpu_avx2");
      if (k.ok()) same[i] = *k;
      else errors[i] = k.status().message();
    });
  for (std::thread& t : callers) t.join();
  for (size_t i = 0; i < same.size(); ++i) {
    ASSERT_TRUE(same[i]) << errors[i];
    EXPECT_EQ(same[i], same[0]);
  }
  EXPECT_EQ(same[0]->selection().profile, "cpu_avx2");
  expect_correct(*same[0], 24);
}

TEST_F(ResolveTest, AnArtifactThatNeedsFeaturesThisCpuLacksIsSkipped) {
  // A copy of the D=256 entry, said to be tuned at D=128 (nearer to 120) and
  // to need a CPU feature no machine has.
  const std::string copy = dir_ + "/needs_more.db";
  fs::copy_file(store_path_, copy, fs::copy_options::overwrite_existing);
  {
    auto store = cache::Store::Open(copy);
    ASSERT_TRUE(store.ok());
    auto a = (*store)->get_entry("default", keys_[256]);
    ASSERT_TRUE(a.ok());
    json man = json::parse(a->files.at("manifest.json"));
    man["requires"]["cpu_features"].push_back("avx1024");
    a->files["manifest.json"] = man.dump(2);
    json meta = json::parse(a->info.manifest.meta_json);
    meta["dims"]["D"] = 128;
    ASSERT_TRUE((*store)->put_entry("default", std::string(64, 'e'), meta.dump(), a->info.manifest.provenance, a->files).ok());
  }
  auto r = open(copy);
  auto k = rmsnorm(*r, 120);  // 128 is nearest, but cannot run; then 64 (0.91) before 256 (1.09)
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_EQ((*k)->selection().key, keys_[64]);
  expect_correct(**k, 120);
}

TEST_F(ResolveTest, AnMlkBuildDirectoryIsLoadedAndCheckedAgainstItsManifest) {
  auto fe = compile_file(kNorms);
  ASSERT_TRUE(fe.ok() && fe->ok());
  const std::string out = dir_ + "/built";
  BuildRequest req{&fe->module, "rmsnorm", kNorms, host_profile(), {{"B", 2}, {"S", 4}, {"D", 64}}, std::nullopt, out};
  auto b = build_artifact(req);
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_TRUE(fs::exists(out + "/program.tl"));
  auto r = open(dir_ + "/no_such_store.db");
  auto prog = r->LoadArtifactDir(out);
  ASSERT_TRUE(prog.ok()) << prog.status().message();
  auto k = r->GetKernel(*prog, "rmsnorm", *rt::TargetPolicy::Parse("host"), {{"B", 2}, {"S", 4}, {"D", 96}});
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_EQ((*k)->selection().source, rt::Selection::Source::kDirectory);
  EXPECT_THAT((*k)->selection().reason, HasSubstr("the artifact in " + out));
  expect_correct(**k, 96);
  // Another fn of the program is not in the directory.
  auto other = r->GetKernel(*prog, "layernorm", *rt::TargetPolicy::Parse("host"), {{"N", 4}, {"D", 8}});
  ASSERT_FALSE(other.ok());
  EXPECT_THAT(other.status().message(), HasSubstr("holds the artifact of `rmsnorm`, not of `layernorm`"));
  // A program.tl that no longer matches the manifest is refused.
  {
    std::ofstream f(out + "/program.tl", std::ios::app);
    f << "\npublic fn extra [N](x: Tensor[F32, [N]]) -> Tensor[F32, [N]] = x\n";
  }
  auto r2 = open(dir_ + "/no_such_store.db");
  auto changed = r2->LoadArtifactDir(out);
  // Adding a fn does not change rmsnorm's hash, but the file's digest in the manifest.
  ASSERT_FALSE(changed.ok());
  EXPECT_EQ(changed.status().code(), Status::Code::kCorruption);
  auto missing = r2->LoadArtifactDir(dir_ + "/nowhere");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("is not an artifact directory of `mlk build`"));
}

// The key is computed from what the artifact requires, never from what the
// consumer has installed: no CUDA toolkit version is part of it.
TEST(CacheKeyInputs, TheKeyDoesNotDependOnTheConsumersCudaToolkit) {
  auto fe = compile_file(kNorms);
  ASSERT_TRUE(fe.ok() && fe->ok());
  auto sm90 = find_profile("cuda_sm90");
  ASSERT_TRUE(sm90.ok());
  const DimEnv dims = {{"B", 1}, {"S", 8}, {"D", 64}};
  const std::string text = cache::canonical_key_text(tune::key_inputs(fe->module, "rmsnorm", dims, *sm90));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("cuda_version")));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("toolkit")));
  const std::string with = cache::cache_key(tune::key_inputs(fe->module, "rmsnorm", dims, *sm90));
  const char* old_path = std::getenv("PATH");
  std::string saved = old_path ? old_path : "";
  setenv("PATH", "/nonexistent", 1);
  setenv("CUDA_HOME", "/nonexistent", 1);
  const std::string without = cache::cache_key(tune::key_inputs(fe->module, "rmsnorm", dims, *sm90));
  setenv("PATH", saved.c_str(), 1);
  unsetenv("CUDA_HOME");
  EXPECT_EQ(with, without);
}

}  // namespace
}  // namespace mlk
