// Explicit selection over artifacts the caller holds (runtime/select.h):
// select({prefer(a_sm90), fallback(a_cpu)}). A candidate this machine cannot
// run (a CUDA artifact without a device, a cpu_avx512 one on an AVX2 host) or
// that lacks the fn is skipped with its reason; prefer before fallback
// whatever the list order; none left is NotFound naming every candidate; a
// damaged candidate is an error, never skipped.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "lang/compare.h"
#include "lang/frontend.h"
#include "lang/interpreter.h"
#include "runtime/runtime.h"
#include "runtime/select.h"
#include "artifact/build.h"
#include "targets/detect.h"
#include "tests/runtime/dl_tensor.h"

namespace mlk {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string kNorms = std::string(MLK_SOURCE_DIR) + "/examples/norms.tl";
const DimEnv kDims = {{"B", 2}, {"S", 4}, {"D", 64}};

// Whether profile `name` runs on this machine.
bool runs_here(const std::string& name) {
  auto p = resolve_profile(name);
  return p.ok() && can_run(*p, detect_cpu(), detect_cuda()).ok;
}

// `mlk build` directories of examples/norms.tl, built once: rmsnorm for
// cpu_avx512, cuda_sm90, cpu_avx2 and host, layernorm for host.
class SelectTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = (fs::temp_directory_path() / ("mlk_select_test_" + std::to_string(getpid()))).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto fe = compile_file(kNorms);
    ASSERT_TRUE(fe.ok() && fe->ok());
    struct Job {
      std::string fn, profile;
      DimEnv dims;
    };
    for (const Job& j : {Job{"rmsnorm", "cpu_avx512", kDims}, Job{"rmsnorm", "cuda_sm90", kDims},
                         Job{"rmsnorm", "cpu_avx2", kDims}, Job{"rmsnorm", "host", kDims},
                         Job{"layernorm", "host", {{"N", 4}, {"D", 8}}}}) {
      auto p = resolve_profile(j.profile);
      ASSERT_TRUE(p.ok()) << p.status().message();
      BuildRequest req{&fe->module, j.fn, kNorms, *p, j.dims, std::nullopt, path(j.fn, j.profile)};
      auto b = build_artifact(req);
      ASSERT_TRUE(b.ok()) << j.profile << ": " << b.status().message();
    }
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static std::string path(const std::string& fn, const std::string& profile) { return dir_ + "/" + fn + "_" + profile; }

  std::shared_ptr<rt::Runtime> runtime() {
    auto r = rt::Runtime::Open({.cache = dir_ + "/no_such_store.db"});
    EXPECT_TRUE(r.ok()) << r.status().message();
    return std::shared_ptr<rt::Runtime>(std::move(*r));
  }
  rt::Candidate dir(const std::shared_ptr<rt::Runtime>& r, const std::string& fn, const std::string& profile) {
    auto c = rt::dir_candidate(r, path(fn, profile));
    EXPECT_TRUE(c.ok()) << c.status().message();
    return *c;
  }

  static void expect_correct(const rt::Kernel& k) {
    Dl x(DType::F32, {2, 4, 64}, 1), w(DType::F32, {64}, 2), eps(DType::F32, {}, 3), out(DType::F32, {2, 4, 64});
    eps.t.set(0, 1e-5);
    Status s = k.Run({&x.d, &w.d, &eps.d}, &out.d);
    ASSERT_TRUE(s.ok()) << s.message();
    auto fe = compile_file(kNorms);
    auto want = interpret(fe->module, "rmsnorm", {x.t, w.t, eps.t}, {});
    ASSERT_TRUE(want.ok());
    Status cmp = compare(*want, out.t, tolerance_for(DType::F32, 64));
    EXPECT_TRUE(cmp.ok()) << cmp.message();
  }

  static std::string dir_;
};
std::string SelectTest::dir_;

// The seed's scenario 5: prefer the GPU artifact, fall back to the CPU one.
TEST_F(SelectTest, APreferredArtifactThatCannotRunHereIsSkippedWithItsReason) {
  auto r = runtime();
  auto s = rt::select({rt::prefer(dir(r, "rmsnorm", "cuda_sm90")), rt::prefer(dir(r, "rmsnorm", "cpu_avx512")),
                       rt::fallback(dir(r, "rmsnorm", "cpu_avx2"))});
  ASSERT_TRUE(s.ok()) << s.status().message();
  const size_t want = runs_here("cuda_sm90") ? 0 : runs_here("cpu_avx512") ? 1 : 2;
  rt::Choice c = (*s)->Choose("rmsnorm");
  ASSERT_TRUE(c.found()) << c.explain();
  EXPECT_EQ(c.chosen()->index, want) << c.explain();
  ASSERT_EQ(c.considered.size(), want + 1);
  if (want > 0) {  // no CUDA device here (this project's CI): the reason is the driver's or the device's
    EXPECT_FALSE(c.considered[0].chosen);
    EXPECT_THAT(c.considered[0].reason, HasSubstr("cannot run here: cuda_sm90: "));
    EXPECT_THAT(c.explain(), HasSubstr("\n  not candidate 0 (prefer, " + path("rmsnorm", "cuda_sm90") +
                                       "): cannot run here: cuda_sm90: "));
  }
  if (want > 1) {  // an AVX2-only host: refused at load for its CPU features
    EXPECT_THAT(c.considered[1].reason,
                HasSubstr("cannot be loaded here: " + path("rmsnorm", "cpu_avx512") +
                          " was built for cpu_avx512 and needs CPU features this machine lacks: avx512f"));
    EXPECT_EQ(c.chosen()->rank, rt::Rank::kFallback);
    EXPECT_THAT(c.explain(), HasSubstr("`rmsnorm`: candidate 2 (fallback, " + path("rmsnorm", "cpu_avx2") +
                                       "): cpu_avx2: the artifact in "));
  }
  auto k = (*s)->GetKernel("rmsnorm", {{"B", 2}, {"S", 4}, {"D", 64}});
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_EQ(k->choice.chosen()->index, want);
  EXPECT_EQ(k->kernel->selection().source, rt::Selection::Source::kDirectory);
  if (want == 2) {
    EXPECT_EQ(k->kernel->selection().profile, "cpu_avx2");
    expect_correct(*k->kernel);
  }
}

TEST_F(SelectTest, PreferComesBeforeFallbackWhateverTheListOrder) {
  auto r = runtime();
  auto s = rt::select({rt::fallback(dir(r, "rmsnorm", "cpu_avx2")), rt::prefer(dir(r, "rmsnorm", "host"))});
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto k = (*s)->GetKernel("rmsnorm", kDims);
  ASSERT_TRUE(k.ok()) << k.status().message();
  ASSERT_EQ(k->choice.considered.size(), 1u);  // the fallback was never tried
  EXPECT_EQ(k->choice.chosen()->index, 1u);
  EXPECT_EQ(k->choice.chosen()->rank, rt::Rank::kPrefer);
  EXPECT_EQ(k->kernel->selection().profile, "host");
  expect_correct(*k->kernel);
}

TEST_F(SelectTest, AnArtifactLackingTheFnIsSkippedForThatFnOnly) {
  auto r = runtime();
  auto s = rt::select({rt::prefer(dir(r, "layernorm", "host")), rt::fallback(dir(r, "rmsnorm", "host"))});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ((*s)->fns(), (std::vector<std::string>{"layernorm", "rmsnorm"}));
  rt::Choice rms = (*s)->Choose("rmsnorm");
  ASSERT_TRUE(rms.found());
  EXPECT_EQ(rms.chosen()->index, 1u);
  EXPECT_EQ(rms.considered[0].reason, "holds the artifact of `layernorm`, not of `rmsnorm`");
  rt::Choice ln = (*s)->Choose("layernorm");
  ASSERT_TRUE(ln.found());
  EXPECT_EQ(ln.chosen()->index, 0u);
  EXPECT_EQ(ln.considered.size(), 1u);
}

TEST_F(SelectTest, WhenNoCandidateServesEveryReasonIsListed) {
  if (runs_here("cpu_avx512")) GTEST_SKIP() << "this host runs cpu_avx512";
  auto r = runtime();
  auto missing = rt::dir_candidate(r, dir_ + "/nowhere");
  ASSERT_TRUE(missing.ok()) << missing.status().message();
  auto s = rt::select({rt::prefer(dir(r, "rmsnorm", "cpu_avx512")), rt::fallback(*missing)});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_FALSE((*s)->Choose("rmsnorm").found());
  EXPECT_THAT((*s)->Choose("rmsnorm").explain(), HasSubstr("`rmsnorm`: no candidate serves it here"));
  auto k = (*s)->GetKernel("rmsnorm", kDims);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), Status::Code::kNotFound);
  EXPECT_THAT(k.status().message(), HasSubstr("no candidate of select(...) serves `rmsnorm` at B=2,D=64,S=4 here:"));
  EXPECT_THAT(k.status().message(), HasSubstr("\n  candidate 0 (prefer, " + path("rmsnorm", "cpu_avx512") +
                                              "): cannot be loaded here: "));
  EXPECT_THAT(k.status().message(), HasSubstr("needs CPU features this machine lacks: avx512f"));
  EXPECT_THAT(k.status().message(), HasSubstr("\n  candidate 1 (fallback, " + dir_ + "/nowhere): cannot be loaded here: " +
                                              dir_ + "/nowhere is not an artifact directory of `mlk build`"));
}

// A program with a policy is a candidate too; whether it has a kernel depends
// on the shape, so GetKernel may go past the one Choose names.
TEST_F(SelectTest, AProgramWithoutAKernelAtTheShapeIsSkippedPerCall) {
  auto r = runtime();
  auto prog = r->LoadProgram(kNorms);
  ASSERT_TRUE(prog.ok()) << prog.status().message();
  auto tuned = rt::TargetPolicy::Parse("host;require=tuned");
  ASSERT_TRUE(tuned.ok());
  auto s = rt::select({rt::prefer(rt::program_candidate(r, *prog, *tuned)), rt::fallback(dir(r, "rmsnorm", "host"))});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ((*s)->Choose("rmsnorm").chosen()->index, 0u);  // it runs here, shape aside
  auto k = (*s)->GetKernel("rmsnorm", kDims);
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_EQ(k->choice.chosen()->index, 1u);
  EXPECT_THAT(k->choice.considered[0].reason, HasSubstr("no kernel for `rmsnorm` at B=2,D=64,S=4 under policy host;require=tuned"));
  expect_correct(*k->kernel);
}

// Review 14, M2: a policy made without TargetPolicy::Parse (a program
// candidate's default, the C++ API's) skipped the machine's trust list, so
// an unsigned cache entry or the JIT served a runtime set up with
// $MLK_TRUSTED_SIGNERS. Now the list applies to every policy: no unsigned
// directory, no JIT fallback.
TEST_F(SelectTest, Review14_M2_TheMachinesTrustListAppliesToEveryPolicy) {
  auto r = runtime();
  auto prog = r->LoadProgram(kNorms);
  ASSERT_TRUE(prog.ok()) << prog.status().message();
  setenv("MLK_TRUSTED_SIGNERS", std::string(64, 'a').c_str(), 1);
  auto s = rt::select({rt::prefer(rt::program_candidate(r, *prog)), rt::fallback(dir(r, "rmsnorm", "host"))});
  if (!s.ok()) unsetenv("MLK_TRUSTED_SIGNERS");
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto k = (*s)->GetKernel("rmsnorm", kDims);
  unsetenv("MLK_TRUSTED_SIGNERS");
  ASSERT_FALSE(k.ok()) << "served by candidate " << k->choice.chosen()->index;
  EXPECT_THAT(k.status().message(), HasSubstr("no kernel for `rmsnorm`"));
  EXPECT_THAT(k.status().message(), HasSubstr("is unsigned"));
}

TEST_F(SelectTest, ADamagedCandidateIsAnErrorNeverSkipped) {
  const std::string copy = dir_ + "/damaged";
  fs::remove_all(copy);
  fs::copy(path("rmsnorm", "host"), copy);
  {
    std::fstream f(copy + "/librmsnorm.so", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x5a');
  }
  auto r = runtime();
  auto c = rt::dir_candidate(r, copy);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Status::Code::kCorruption);
  // Made by hand, select() refuses it too.
  rt::Candidate forged;
  forged.name = copy;
  forged.unavailable = Status::Corruption("damaged");
  auto s = rt::select({rt::prefer(forged), rt::fallback(dir(r, "rmsnorm", "host"))});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Status::Code::kCorruption);
}

TEST_F(SelectTest, CandidatesMustDeclareTheSameSignature) {
  auto r = runtime();
  auto other = r->LoadSource("other.tl", "public fn rmsnorm [N](x: Tensor[F32, [N]]) -> Tensor[F32, [N]] = x\n");
  ASSERT_TRUE(other.ok()) << other.status().message();
  auto s = rt::select({rt::prefer(dir(r, "rmsnorm", "host")), rt::fallback(rt::program_candidate(r, *other))});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("`rmsnorm` differs between candidate 0 (prefer, "));
  EXPECT_THAT(s.status().message(), HasSubstr("and candidate 1 (fallback, other.tl): [N](x: Tensor[F32, [N]]) -> "));
  EXPECT_FALSE(rt::select({}).ok());
}

}  // namespace
}  // namespace mlk
