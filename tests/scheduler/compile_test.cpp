// The compile driver (scheduler/compile.h): the JIT and AOT builds go through
// it and agree on the schedule; one set of errors; --dump-after dumps.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "lang/frontend.h"
#include "tests/test_support.h"
#include "scheduler/compile.h"
#include "scheduler/kernel.h"
#include "base/files.h"
#include "base/log.h"
#include "scheduler/rules.h"
#include "artifact/build.h"
#include "targets/detect.h"

namespace mlk {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

ir::Module load(const std::string& example) { return testing_support::load_example(example); }

std::string tmpdir(const std::string& name) { return testing_support::scratch_dir("mlk_compile_test", name); }

const DimEnv kSgemmDims = {{"M", 64}, {"K", 32}, {"N", 48}};

// The JIT compiles the profile it is given, rules and all: `--target
// cpu_avx2` on an AVX-512 machine gets the AVX2 profile's default schedule
// (8-lane vectors), not the host's (16 lanes) with AVX2 instructions, which
// is what a Halide target string alone once gave it.
TEST(CompileDriver, TheJitSchedulesForTheProfileItIsGiven) {
  ir::Module m = load("mlp.tl");
  auto avx2 = find_profile("cpu_avx2");
  ASSERT_TRUE(avx2.ok()) << avx2.status().message();
  if (!can_run(*avx2, detect_cpu(), detect_cuda()).ok) GTEST_SKIP() << "this machine cannot run cpu_avx2";
  CompileRequest req;
  req.module = &m;
  req.fn = "sgemm";
  req.profile = *avx2;
  req.dims = kSgemmDims;
  auto want = compile_until_codegen(req);
  ASSERT_TRUE(want.ok()) << want.status().message();
  auto jit = Kernel::CompileJit(m, "sgemm", *avx2, nullptr, kSgemmDims);
  ASSERT_TRUE(jit.ok()) << jit.status().message();
  EXPECT_EQ((*jit)->schedule().hash(), want->hash());
  if (host_profile().vector_bits > avx2->vector_bits) {
    auto host = Kernel::CompileJit(m, "sgemm", host_profile(), nullptr, kSgemmDims);
    ASSERT_TRUE(host.ok()) << host.status().message();
    EXPECT_NE((*host)->schedule().hash(), (*jit)->schedule().hash())
        << "on this AVX-512 host the AVX2 profile's schedule should differ from the host's";
  }
  // A CUDA profile has no JIT: refused, not compiled for the CPU.
  auto cuda = find_profile("cuda_sm90");
  ASSERT_TRUE(cuda.ok());
  auto refused = Kernel::CompileJit(m, "sgemm", *cuda, nullptr, kSgemmDims);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), testing::HasSubstr("the JIT compiles for CPU profiles, not `cuda_sm90`"));
}

// The schedule the JIT applied, the one the AOT build applied and the
// manifest's schedule_hash are one hash, for the default and a given schedule.
TEST(CompileDriver, JitAndAotReportTheSameScheduleHash) {
  ir::Module m = load("mlp.tl");
  auto jit = Kernel::CompileJit(m, "sgemm", host_profile(), nullptr, kSgemmDims);
  ASSERT_TRUE(jit.ok()) << jit.status().message();
  BuildRequest req{&m, "sgemm", "", host_profile(), kSgemmDims, std::nullopt, tmpdir("default")};
  auto aot = build_artifact(req);
  ASSERT_TRUE(aot.ok()) << aot.status().message();
  EXPECT_EQ((*jit)->schedule().hash(), aot->schedule.hash());
  EXPECT_EQ(nlohmann::json::parse(aot->manifest_json)["schedule_hash"], aot->schedule.hash());

  // A given schedule (an autoscheduler's) is the one both apply.
  Schedule given;
  given.autoscheduler = "Mullapudi2016";
  auto jit2 = Kernel::CompileJit(m, "sgemm", host_profile(), &given, kSgemmDims);
  ASSERT_TRUE(jit2.ok()) << jit2.status().message();
  BuildRequest req2{&m, "sgemm", "", host_profile(), kSgemmDims, given, tmpdir("given")};
  auto aot2 = build_artifact(req2);
  ASSERT_TRUE(aot2.ok()) << aot2.status().message();
  EXPECT_EQ((*jit2)->schedule().hash(), given.hash());
  EXPECT_EQ(aot2->schedule.hash(), given.hash());
  EXPECT_NE(given.hash(), aot->schedule.hash());
}

// A missing fn is one error, whichever way it is compiled.
TEST(CompileDriver, JitAndAotShareTheirErrors) {
  ir::Module m = load("mlp.tl");
  auto jit = Kernel::CompileJit(m, "nope");
  const std::string dir = tmpdir("nope");
  BuildRequest req{&m, "nope", "", host_profile(), {}, std::nullopt, dir};
  auto aot = build_artifact(req);
  ASSERT_FALSE(jit.ok());
  ASSERT_FALSE(aot.ok());
  EXPECT_EQ(jit.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(jit.status().message(), "no fn `nope` in the program");
  EXPECT_EQ(aot.status().message(), jit.status().message());
  EXPECT_FALSE(fs::exists(dir));
}

// Each dump is delivered once, at its stage, and the compilation goes on.
TEST(CompileDriver, DumpsEachStage) {
  ir::Module m = load("mlp.tl");
  auto dump_of = [&](DumpStage s) {
    std::string text;
    int calls = 0;
    CompileRequest req;
    req.module = &m;
    req.fn = "sgemm";
    req.profile = host_profile();
    req.dims = kSgemmDims;
    req.dump_after = s;
    req.dump = [&](const std::string& t) {
      text += t;
      ++calls;
    };
    auto sched = compile_until_codegen(req);
    EXPECT_TRUE(sched.ok()) << sched.status().message();
    EXPECT_EQ(calls, 1) << dump_stage_name(s);
    if (s == DumpStage::kSchedule && sched.ok()) {
      EXPECT_EQ(text, sched->to_json() + "\n");
    }
    return text;
  };
  EXPECT_THAT(dump_of(DumpStage::kIr), HasSubstr("fn sgemm [M, K, N]"));
  const std::string stages = dump_of(DumpStage::kStages);
  EXPECT_THAT(stages, HasSubstr("matmul0 matmul pure[a0=M:64 a1=N:48] reduction[r0=K:32] reads[load_a load_b]\n"));
  EXPECT_THAT(stages, HasSubstr("load_a input pure[a0=M:64 a1=K:32]"));
  EXPECT_THAT(dump_of(DumpStage::kSchedule), HasSubstr("\"stages\""));
  const std::string loops = dump_of(DumpStage::kLoops);
  EXPECT_THAT(loops, HasSubstr("produce "));
  EXPECT_THAT(loops, HasSubstr("for "));

  // The JIT delivers the same dump.
  std::string jit_text;
  auto k = Kernel::CompileJit(m, "sgemm", host_profile(), nullptr, kSgemmDims, DumpStage::kStages,
                              [&](const std::string& t) { jit_text += t; });
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_EQ(jit_text, stages);
}

// The ir dump carries the fns the fn calls (they are inlined by lowering).
TEST(CompileDriver, IrDumpIncludesCallees) {
  ir::Module m = load("mlp.tl");
  std::string text;
  CompileRequest req;
  req.module = &m;
  req.fn = "mlp";
  req.profile = host_profile();
  req.dump_after = DumpStage::kIr;
  req.dump = [&](const std::string& t) { text = t; };
  ASSERT_TRUE(compile_until_codegen(req).ok());
  EXPECT_THAT(text, HasSubstr("fn mlp ["));
  EXPECT_THAT(text, HasSubstr("fn gelu_tanh ["));
}

TEST(CompileDriver, UnknownDumpStageIsAUsageErrorListingTheStages) {
  auto s = parse_dump_stage("lowered");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Status::Code::kUsage);
  EXPECT_EQ(s.status().message(), "--dump-after: unknown stage `lowered` (stages: ir, stages, schedule, loops)");
  for (const char* name : {"ir", "stages", "schedule", "loops"}) {
    auto d = parse_dump_stage(name);
    ASSERT_TRUE(d.ok()) << name;
    EXPECT_STREQ(dump_stage_name(*d), name);
  }
}

}  // namespace
}  // namespace mlk

namespace mlk {
namespace {

// A scalar result: Run's default-made output has the scalar's shape, [],
// but no bytes, and must still be allocated.
TEST(CompileDriver, ScalarResultsAreAllocated) {
  auto fe = compile_source("s.tl", "public fn total [N](x: Tensor[F32, [N]]) -> Scalar[F32] = sum(x, axes=[0])\n");
  ASSERT_TRUE(fe.ok()) << fe.rendered();
  auto k = Kernel::CompileJit(fe.module, "total", host_profile());
  ASSERT_TRUE(k.ok()) << k.status().message();
  HostTensor x(DType::F32, {5});
  for (int i = 0; i < 5; ++i) x.set(i, i);
  auto out = (*k)->Run({x}, {});
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_EQ(out->bytes.size(), 4u);
  EXPECT_EQ(out->get(0), 10.0);
}

// The default schedule always compiles (issue 51): where Halide refuses the
// rules' first seed, here the vectorised rfactor of an F16 sum that the
// f16_accumulate test fault makes accumulate in F16 (whose associativity
// Halide cannot prove), the JIT and `mlk build` fall back to the naive
// schedule and say so in the schedule they return; a schedule the caller
// gives still fails as it is.
TEST(CompileDriver, WhereHalideRefusesTheDefaultTheNaiveScheduleIsCompiled) {
  setenv("MLK_TEST_FAULT", "f16_accumulate", 1);
  struct Unset {
    ~Unset() { unsetenv("MLK_TEST_FAULT"); }
  } unset;
  auto fe = compile_source("t.tl", *read_file(std::string(MLK_SOURCE_DIR) + "/tests/verify/defects.tl"));
  ASSERT_TRUE(fe.ok()) << fe.rendered();
  const DimEnv dims = {{"N", 2}, {"K", 4096}};
  auto infos = stage_infos_for(fe.module, "sum16", dims);
  ASSERT_TRUE(infos.ok()) << infos.status().message();
  const Profile p = host_profile();
  const Schedule seed = schedule_from_knobs(*infos, untuned_knobs(*infos, p), p);
  auto naive = naive_schedule_for(fe.module, "sum16", p, dims);
  ASSERT_TRUE(naive.ok()) << naive.status().message();
  ASSERT_NE(seed.hash(), naive->hash());
  auto refused = Kernel::CompileJit(fe.module, "sum16", p, &seed, dims);
  ASSERT_FALSE(refused.ok()) << "the seed must be refused for this test to mean anything";
  EXPECT_THAT(refused.status().message(), HasSubstr("associativity"));
  std::vector<std::string> warnings;
  LogSink old = set_log_sink([&](LogLevel level, std::string_view line) {
    if (level == LogLevel::kWarning) warnings.emplace_back(line);
  });
  auto jit = Kernel::CompileJit(fe.module, "sum16", p, nullptr, dims);
  ASSERT_TRUE(jit.ok()) << jit.status().message();
  EXPECT_EQ((*jit)->schedule().hash(), naive->hash());
  ASSERT_EQ(warnings.size(), 1u) << "the fallback is a rules defect: said, once";
  EXPECT_THAT(warnings[0], HasSubstr("the default schedule of `sum16`"));
  EXPECT_THAT(warnings[0], HasSubstr("associativity"));
  // Each dump is given once, of the schedule compiled.
  for (DumpStage stage : {DumpStage::kStages, DumpStage::kSchedule}) {
    CompileRequest req;
    req.module = &fe.module;
    req.fn = "sum16";
    req.profile = p;
    req.dims = dims;
    std::vector<std::string> dumps;
    req.dump_after = stage;
    req.dump = [&](const std::string& text) { dumps.push_back(text); };
    auto built = compile_object(req, tmpdir("naive_fallback"));
    ASSERT_TRUE(built.ok()) << built.status().message();
    EXPECT_EQ(built->schedule.hash(), naive->hash());
    ASSERT_EQ(dumps.size(), 1u) << dump_stage_name(stage);
    if (stage == DumpStage::kSchedule) {
      auto dumped = Schedule::from_json(dumps[0]);
      ASSERT_TRUE(dumped.ok()) << dumped.status().message();
      EXPECT_EQ(dumped->hash(), naive->hash());
    }
  }
  set_log_sink(std::move(old));
}

}  // namespace
}  // namespace mlk
