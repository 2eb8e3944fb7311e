// CallPlan (runtime/call_plan.h): one full check per argument signature,
// the per-call rules after it, and a call that breaks one of them gets the
// full check's error word for word.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "base/files.h"
#include "runtime/call_plan.h"
#include "runtime/runtime.h"
#include "tests/runtime/dl_tensor.h"

namespace mlk {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string kNorms = std::string(MLK_SOURCE_DIR) + "/examples/norms.tl";

class CallPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = make_private_temp_dir("mlk_call_plan_test_");
    ASSERT_TRUE(d.ok());
    dir_ = *d;
    auto r = rt::Runtime::Open({dir_ + "/cache.db", "default", ""});
    ASSERT_TRUE(r.ok()) << r.status().message();
    rt_ = std::shared_ptr<rt::Runtime>(std::move(*r));
    auto p = rt_->LoadProgram(kNorms);
    ASSERT_TRUE(p.ok()) << p.status().message();
    prog_ = *p;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  rt::CallPlan plan(const std::string& fn, std::shared_ptr<const rt::Program> prog = nullptr) {
    return rt::CallPlan(rt_, prog ? prog : prog_, fn, *rt::TargetPolicy::Parse("host"));
  }
  std::string dir_;
  std::shared_ptr<rt::Runtime> rt_;
  std::shared_ptr<const rt::Program> prog_;
};

TEST_F(CallPlanTest, OneStepPerSignatureRunningAsKernelRunDoes) {
  auto p = plan("rmsnorm");
  Dl x(DType::F32, {2, 4, 48}, 1), w(DType::F32, {48}, 2), eps(DType::F32, {}, 3);
  eps.t.set(0, 1e-5);
  const DLTensor* args[] = {&x.d, &w.d, &eps.d};
  auto s1 = p.Plan(args, 3);
  ASSERT_TRUE(s1.ok()) << s1.status().message();
  auto s2 = p.Plan(args, 3);
  ASSERT_TRUE(s2.ok());
  EXPECT_EQ(s1->get(), s2->get());  // planned once
  EXPECT_EQ((*s1)->call.out_shape, (std::vector<int64_t>{2, 4, 48}));
  Dl fast(DType::F32, {2, 4, 48}), full(DType::F32, {2, 4, 48});
  ASSERT_TRUE(p.Run(**s1, args, 3, &fast.d).ok());
  EXPECT_EQ(p.planned_runs(), 1);  // the planned way, not Kernel::Run
  ASSERT_TRUE((*s1)->kernel->Run({&x.d, &w.d, &eps.d}, &full.d).ok());
  EXPECT_EQ(fast.t.bytes, full.t.bytes);

  Dl y(DType::F32, {1, 3, 48}, 4);
  const DLTensor* other[] = {&y.d, &w.d, &eps.d};
  auto s3 = p.Plan(other, 3);
  ASSERT_TRUE(s3.ok());
  EXPECT_NE(s3->get(), s1->get());  // another shape, another step
}

TEST_F(CallPlanTest, ABrokenPerCallRuleGetsTheFullChecksError) {
  auto p = plan("rmsnorm");
  Dl x(DType::F32, {2, 4, 48}, 1), w(DType::F32, {48}, 2), eps(DType::F32, {}, 3), out(DType::F32, {2, 4, 48});
  const DLTensor* args[] = {&x.d, &w.d, &eps.d};
  auto step = p.Plan(args, 3);
  ASSERT_TRUE(step.ok());
  const rt::Kernel& k = *(*step)->kernel;
  // Each case breaks one rule in a call of the planned signature: the plan's
  // error is Kernel::Run's, and is not Ok.
  auto same_error = [&](const char* what, DLTensor* o) {
    Status planned = p.Run(**step, args, 3, o);
    Status full = k.Run({args[0], args[1], args[2]}, o);
    EXPECT_FALSE(planned.ok()) << what;
    EXPECT_EQ(planned.message(), full.message()) << what;
    EXPECT_EQ(p.planned_runs(), 0) << what;  // each went the full check's way
    return planned.message();
  };
  int64_t strides[] = {4, 1, 8};  // not row-major
  x.d.strides = strides;
  EXPECT_THAT(same_error("strides", &out.d), HasSubstr("argument 0 `x` of `rmsnorm`: not contiguous"));
  x.d.strides = nullptr;
  x.d.byte_offset = 1;  // misaligned
  EXPECT_THAT(same_error("alignment", &out.d), HasSubstr("not aligned to its 4-byte elements"));
  x.d.byte_offset = 0;
  DLTensor alias = out.d;
  alias.data = x.d.data;  // the output over an argument
  EXPECT_THAT(same_error("aliasing", &alias), HasSubstr("`x`"));
  alias.byte_offset = 64;  // a part of it
  EXPECT_THAT(same_error("partial aliasing", &alias), HasSubstr("`x`"));
  void* data = x.d.data;
  x.d.data = nullptr;
  EXPECT_THAT(same_error("NULL data", &out.d), HasSubstr("data is NULL"));
  x.d.data = data;
  Dl small(DType::F32, {2, 4, 47});
  same_error("the output's shape", &small.d);
  Dl f64(DType::F64, {2, 4, 48});
  same_error("the output's dtype", &f64.d);
  // And a good call after them runs the planned way.
  EXPECT_TRUE(p.Run(**step, args, 3, &out.d).ok());
  EXPECT_EQ(p.planned_runs(), 1);
}

TEST_F(CallPlanTest, TheFullCheckRefusesAFirstCallAndPlansNothing) {
  auto p = plan("rmsnorm");
  Dl x(DType::F64, {2, 4, 48}, 1), w(DType::F32, {48}, 2), eps(DType::F32, {}, 3);
  const DLTensor* args[] = {&x.d, &w.d, &eps.d};
  auto s = p.Plan(args, 3);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("argument 0 `x` of `rmsnorm`"));
}

TEST_F(CallPlanTest, FnsOutOfScopeAreUnsupported) {
  auto prog = rt_->LoadSource("scope.tl",
                              "public fn both [N](x: Tensor[F32, [N]]) -> (Tensor[F32, [N]], Scalar[F32]) =\n"
                              "  let y = x * x\n"
                              "  (y, sum(y, axes=[0]))\n"
                              "public fn fill [N](v: Scalar[F32]) -> Tensor[F32, [N]] = broadcast(v, [N])\n");
  ASSERT_TRUE(prog.ok()) << prog.status().message();
  Dl x(DType::F32, {8}, 1), v(DType::F32, {}, 2);
  const DLTensor* one[] = {&x.d};
  auto both = plan("both", *prog).Plan(one, 1);
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(both.status().code(), Status::Code::kUnsupported);
  const DLTensor* scalar[] = {&v.d};
  auto fill = plan("fill", *prog).Plan(scalar, 1);
  ASSERT_FALSE(fill.ok());
  EXPECT_EQ(fill.status().code(), Status::Code::kUnsupported);
}

}  // namespace
}  // namespace mlk
