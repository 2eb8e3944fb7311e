// The rules and the two registries: each rule on its own (a stage table and
// knobs in, the schedule out), the directive and knob registries, and a pin
// on every schedule the rules produce for the examples (kScheduleSpaceVersion
// must change exactly when that pin does).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <array>
#include <fstream>
#include <functional>
#include <sstream>
#include <nlohmann/json.hpp>

#include "autotune/cost_model.h"
#include "base/sha256.h"
#include "lang/compare.h"
#include "lang/frontend.h"
#include "lang/interpreter.h"
#include "scheduler/directives.h"
#include "scheduler/kernel.h"
#include "scheduler/rules.h"
#include "tests/scheduler/stage_tables.h"

namespace mlk {
namespace {

using ::testing::HasSubstr;

// Every schedule the rules make for the fns of `files` (under examples/), on every profile but
// `host` (its width is the machine's), at the shapes `sizes` (every dim that
// value; 0: unknown), for the default knobs, the seeds and every single-knob
// change of the default within the knob space: visit(fn, n, profile,
// stages, knobs, schedule) for each, then space(fn, n, profile, stages) once
// per fn, shape and profile.
using Visit = std::function<void(const std::string&, int64_t, const Profile&, const std::vector<StageInfo>&,
                                 const Knobs&, const Schedule&)>;
using Space = std::function<void(const std::string&, int64_t, const Profile&, const std::vector<StageInfo>&)>;
const std::vector<std::string> kPinnedExamples = {"attention.tl", "embedding.tl", "mlp.tl", "norms.tl", "softmax.tl"};
void for_each_produced_schedule(const std::vector<int64_t>& sizes, const Visit& visit, const Space& space = nullptr,
                                const std::vector<std::string>& files = kPinnedExamples) {
  for (const std::string& file : files) {
    auto fe = compile_file(std::string(MLK_SOURCE_DIR) + "/examples/" + file);
    EXPECT_TRUE(fe.ok() && fe->ok()) << file;
    if (!fe.ok() || !fe->ok()) continue;
    for (const auto& f : fe->module.functions) {
      for (int64_t n : sizes) {
        DimEnv dims;
        if (n > 0)
          for (const auto& d : f.dim_vars) dims[d] = n;
        auto stages = stage_infos_for(fe->module, f.name, dims);
        if (!stages.ok()) continue;
        for (const Profile& p : all_profiles()) {
          if (p.name == "host") continue;
          std::vector<Knobs> all = {default_knobs(*stages, p)};
          for (const Knobs& k : seed_knobs(*stages, p)) all.push_back(k);
          for (const auto& [stage, ks] : knob_space(*stages, p))
            for (const auto& [name, values] : ks)
              for (int64_t v : values) {
                Knobs k = all[0];
                k[stage][name] = v;
                all.push_back(k);
              }
          for (const Knobs& k : all) visit(f.name, n, p, *stages, k, schedule_from_knobs(*stages, k, p));
          if (space) space(f.name, n, p, *stages);
        }
      }
    }
  }
}

// The pinned lines: one per schedule at shapes unknown, 7 and 64, its knobs
// and hash. MLK_RULES_DUMP=FILE writes them (with the cost model's
// prediction) to FILE.
std::string produced_schedules(bool with_cost) {
  std::string lines;
  for_each_produced_schedule(
      {0, 7, 64},
      [&](const std::string& fn, int64_t n, const Profile& p, const std::vector<StageInfo>& stages, const Knobs& k,
          const Schedule& s) {
        std::string line = fn + " " + std::to_string(n) + " " + p.name + " " + nlohmann::json(k).dump() + " " + s.hash();
        if (with_cost) {
          char buf[64];
          std::snprintf(buf, sizeof buf, " %.17g", tune::predict_ms(stages, k, p));
          line += buf;
        }
        lines += line + "\n";
      },
      [&](const std::string&, int64_t, const Profile& p, const std::vector<StageInfo>& stages) {
        lines += "space " + nlohmann::json(knob_space(stages, p)).dump() + "\n";
      });
  return lines;
}

// Halide 21 aborts inside LLVM on predicated loads of some widths that are
// not powers of two (a MiniLM layer of 5 tokens vectorised by 5), which
// validation refuses (scheduler/schedule.cpp): every schedule the rules make
// passes it, at odd small extents too, MiniLM's fns included.
TEST(Rules, EverySchedulePassesValidationAtOddExtents) {
  int checked = 0;
  for_each_produced_schedule(
      {3, 5, 9, 13},
      [&](const std::string& fn, int64_t n, const Profile& p, const std::vector<StageInfo>& stages, const Knobs&,
          const Schedule& s) {
        ++checked;
        Status v = validate_schedule(s, stages, p.is_gpu());
        EXPECT_TRUE(v.ok()) << fn << " at " << n << " on " << p.name << ": " << v.message();
      },
      nullptr, {"attention.tl", "embedding.tl", "mlp.tl", "norms.tl", "softmax.tl", "minilm/minilm.tl"});
  EXPECT_GT(checked, 1000);
}

TEST(Rules, ProducedSchedulesAreThoseOfTheScheduleSpaceVersion) {
  if (const char* dump = std::getenv("MLK_RULES_DUMP")) {
    std::ofstream out(dump);
    out << produced_schedules(true);
  }
  const std::string digest = sha256_hex(produced_schedules(false));
  EXPECT_EQ(std::string(kScheduleSpaceVersion) + " " + digest, "rules-15 c4ea51461a4fcee42bea3c5783cb7d23ea13ce598a5efa0349d6607c459394d4");
}

using testing_support::ops;
using testing_support::profile;
using testing_support::stage;
using Kind = StageInfo::Kind;

// sgemm at 64x64x64: load_a, load_b, matmul0, output.
std::vector<StageInfo> sgemm_table() {
  StageInfo mm = stage("matmul0", Kind::kMatmul, {64, 64}, {64});
  mm.direct_inputs = {"load_a", "load_b"};
  return {stage("load_a", Kind::kInput, {64, 64}), stage("load_b", Kind::kInput, {64, 64}), mm,
          stage("output", Kind::kOutput, {64, 64})};
}

TEST(Rules, CpuMatmulTilesAndVectorisesByTheProfilesWidth) {
  for (auto [name, lanes] : {std::pair{"cpu_avx2", 8}, std::pair{"cpu_avx512", 16}}) {
    Profile p = profile(name);
    auto t = sgemm_table();
    Knobs k = {{"matmul0", {{"tn", 2}, {"tm", 4}}}};
    Schedule s = schedule_from_knobs(t, k, p);
    const std::string l = std::to_string(lanes), tn = std::to_string(2 * lanes);
    EXPECT_EQ(ops(s.stages["matmul0"]),
              "compute_root vectorize:a1:" + l + " parallel:a0 tile:a1:a0:no:mo:ni:mi:" + tn +
                  ":4@u0 reorder:ni:mi:r0:no:mo@u0 vectorize:ni:" + l + "@u0 unroll:mi@u0 parallel:mo@u0")
        << name;
    // With at_output the rule schedules the output too: the classic GEMM.
    k["matmul0"]["at_output"] = 1;
    s = schedule_from_knobs(t, k, p);
    EXPECT_EQ(ops(s.stages["output"]), "tile:a1:a0:no:mo:ni:mi:" + tn + ":4:1 vectorize:ni:" + l + " unroll:mi parallel:mo");
    EXPECT_THAT(ops(s.stages["matmul0"]), HasSubstr("compute_at@output.no"));
    EXPECT_TRUE(validate_schedule(s, t, false).ok());
  }
}

// The other way to a width Halide 21 aborts on: vectorising a whole pure
// variable whose extent is not a power of two.
TEST(Rules, AWholeVectorizeOfAnExtentThatIsNotAPowerOfTwoIsRefused) {
  auto fe = compile_file(std::string(MLK_SOURCE_DIR) + "/examples/mlp.tl");
  ASSERT_TRUE(fe.ok() && fe->ok());
  auto t = stage_infos_for(fe->module, "sgemm", {{"M", 5}, {"K", 8}, {"N", 5}});
  ASSERT_TRUE(t.ok());
  auto bad = Schedule::from_json(R"({"stages": {"output": [{"op": "vectorize", "vars": ["a1"]}]}})");
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(validate_schedule(*bad, *t, false).message(),
            "schedule: stage `output` directive 0 `vectorize(a1)`: it vectorises all of `a1`, whose extent 5 is not a "
            "power of two; give a factor that is");
  auto t8 = stage_infos_for(fe->module, "sgemm", {{"M", 8}, {"K", 8}, {"N", 8}});
  ASSERT_TRUE(t8.ok());
  EXPECT_TRUE(validate_schedule(*bad, *t8, false).ok());
}

TEST(Rules, CpuReductionVectorisesTheRow) {
  Profile p = profile("cpu_avx2");
  // rmsnorm's mean of squares over [B, S, D] along D, fused into the output's rows or at root.
  std::vector<StageInfo> t = {stage("load_x", Kind::kInput, {2, 3, 64}),
                              stage("reduction0", Kind::kReduction, {2, 3}, {64}, true),
                              stage("output", Kind::kOutput, {2, 3, 64})};
  Schedule s = schedule_from_knobs(t, {{"reduction0", {{"fuse", 0}, {"vred", 1}}}}, p);
  // At root, the update (the reduction itself) is parallel over the rows as
  // its initialisation is (rules-9; before, every row was reduced on one thread).
  EXPECT_EQ(ops(s.stages["reduction0"]), "compute_root parallel:a0 rfactor_vector:r0:u:8 parallel:a0@u0");
  s = schedule_from_knobs(t, {{"reduction0", {{"fuse", 1}, {"vred", 1}}}}, p);
  // B = 2 feeds the cores only with the output's outer axes fused (fuse_outer): its row loop is `pf`.
  EXPECT_EQ(ops(s.stages["reduction0"]), "compute_at@output.pf rfactor_vector:r0:u:8");
  EXPECT_THAT(ops(s.stages["output"]), HasSubstr("fuse:a1:a0:pf"));
  s = schedule_from_knobs(t, {{"reduction0", {{"fuse", 1}, {"vred", 1}}}, {"output", {{"fuse_outer", 0}}}}, p);
  EXPECT_EQ(ops(s.stages["reduction0"]), "compute_at@output.a1 rfactor_vector:r0:u:8");
  // Without vred: vectorised across rows; the extent, 3, clips the width to
  // a power of two, 2 (rules-10: Halide 21 aborts on some other widths).
  s = schedule_from_knobs(t, {{"reduction0", {{"fuse", 0}}}}, p);
  EXPECT_EQ(ops(s.stages["reduction0"]), "compute_root vectorize:a1:2 parallel:a0 parallel:a0@u0");
  EXPECT_TRUE(validate_schedule(s, t, false).ok());
}

// The schedule of `fn` at `dims` (AVX2) with its reduction0 at root,
// vectorised (vred), every other knob at its default.
Schedule root_vred_schedule(const ir::Module& m, const std::string& fn, const DimEnv& dims) {
  Profile p = profile("cpu_avx2");
  auto t = stage_infos_for(m, fn, dims);
  EXPECT_TRUE(t.ok()) << t.status().message();
  if (!t.ok()) return {};
  Knobs k = default_knobs(*t, p);
  k["reduction0"]["fuse"] = 0;
  k["reduction0"]["vred"] = 1;
  return schedule_from_knobs(*t, k, p);
}

// rmsnorm's row reduction at root, vectorised, its update parallel over the
// rows (rules-9), against the interpreter at odd shapes.
TEST(Rules, ARootRowReductionWithAParallelUpdateAgreesWithTheInterpreter) {
  auto fe = compile_file(std::string(MLK_SOURCE_DIR) + "/examples/norms.tl");
  ASSERT_TRUE(fe.ok());
  const DimEnv dims = {{"B", 3}, {"S", 5}, {"D", 67}};
  Schedule s = root_vred_schedule(fe->module, "rmsnorm", dims);
  ASSERT_THAT(ops(s.stages["reduction0"]), HasSubstr("rfactor_vector:r0:u:8 parallel:a0@u0"));
  auto kernel = Kernel::CompileJit(fe->module, "rmsnorm", host_profile(), &s, dims);
  ASSERT_TRUE(kernel.ok()) << kernel.status().message();
  for (auto [b, d] : {std::pair<int64_t, int64_t>{1, 1}, {3, 67}, {7, 129}}) {
    HostTensor x(DType::F32, {b, 5, d}), w(DType::F32, {d}), eps(DType::F32, {});
    for (int64_t i = 0; i < x.numel(); ++i) x.set(i, std::sin(0.37 * static_cast<double>(i)) * 3);
    for (int64_t i = 0; i < d; ++i) w.set(i, 0.5 + 0.01 * static_cast<double>(i));
    eps.set(0, 1e-5);
    auto got = (*kernel)->Run({x, w, eps}, {});
    ASSERT_TRUE(got.ok()) << got.status().message();
    auto want = interpret(fe->module, "rmsnorm", {x, w, eps}, {});
    ASSERT_TRUE(want.ok());
    Status cmp = compare(*want, *got, tolerance_for(DType::F32, d));
    EXPECT_TRUE(cmp.ok()) << b << "x5x" << d << ": " << cmp.message();
  }
}

// The same at rank 3: the update's two outer axes fused and parallel, the
// partial sums computed per innermost row.
TEST(Rules, ARank3RootRowReductionWithAFusedParallelUpdateAgreesWithTheInterpreter) {
  auto fe = compile_source("r3.tl",
                           "public fn f [A, B, C, D](x: Tensor[F32, [A, B, C, D]]) -> Tensor[F32, [A, B, C, D]] =\n"
                           "  x * broadcast(sum(x * x, axes=[3]), [A, B, C, D], axes=[0, 1, 2])");
  ASSERT_TRUE(fe.ok()) << fe.rendered();
  const DimEnv dims = {{"A", 2}, {"B", 3}, {"C", 5}, {"D", 19}};
  Schedule s = root_vred_schedule(fe.module, "f", dims);
  ASSERT_THAT(ops(s.stages["reduction0"]), HasSubstr("rfactor_vector:r0:u:8 fuse:a1:a0:pbu@u0 parallel:pbu@u0"));
  auto kernel = Kernel::CompileJit(fe.module, "f", host_profile(), &s, dims);
  ASSERT_TRUE(kernel.ok()) << kernel.status().message();
  for (auto [a, d] : {std::pair<int64_t, int64_t>{1, 1}, {2, 19}, {3, 33}}) {
    HostTensor x(DType::F32, {a, 3, 5, d});
    for (int64_t i = 0; i < x.numel(); ++i) x.set(i, std::cos(0.29 * static_cast<double>(i)));
    auto got = (*kernel)->Run({x}, {});
    ASSERT_TRUE(got.ok()) << got.status().message();
    auto want = interpret(fe.module, "f", {x}, {});
    ASSERT_TRUE(want.ok());
    Status cmp = compare(*want, *got, tolerance_for(DType::F32, d));
    EXPECT_TRUE(cmp.ok()) << a << "x3x5x" << d << ": " << cmp.message();
  }
}

// A softmax's max is read by its exponentials and those by the sum and the
// output: all of them row-fuse together (rules-8; before, only stages that
// the output alone reads did, so the max and the sum stayed at root, a row
// at a time on one thread). A stage whose reader stays at root stays at
// root too. The fused seed agrees with the interpreter at odd shapes.
TEST(Rules, ASoftmaxRowFusesItsMaxExponentialsAndSum) {
  auto fe = compile_file(std::string(MLK_SOURCE_DIR) + "/examples/softmax.tl");
  ASSERT_TRUE(fe.ok());
  Profile p = profile("cpu_avx512");
  auto t = stage_infos_for(fe->module, "softmax_builtin", {{"N", 64}, {"C", 256}});
  ASSERT_TRUE(t.ok()) << t.status().message();
  std::vector<Knobs> seeds = seed_knobs(*t, p);
  ASSERT_FALSE(seeds.empty());
  Schedule s = schedule_from_knobs(*t, seeds[0], p);
  EXPECT_THAT(ops(s.stages["softmax_max0"]), HasSubstr("compute_at@output.a0"));
  // The exponentials once per row, into a row buffer (rules-9; inlined, as
  // before, each was computed twice: in the sum and in the output).
  EXPECT_EQ(ops(s.stages["softmax_exp0"]), "compute_at@output.a0 vectorize:a1:16");
  EXPECT_THAT(ops(s.stages["softmax_sum0"]), HasSubstr("compute_at@output.a0"));
  EXPECT_TRUE(validate_schedule(s, *t, false).ok());
  // The exponentials at root: the max cannot be computed per output row.
  Knobs k = seeds[0];
  k["softmax_exp0"]["fuse"] = 0;
  Schedule mixed = schedule_from_knobs(*t, k, p);
  EXPECT_THAT(ops(mixed.stages["softmax_max0"]), HasSubstr("compute_root"));
  EXPECT_THAT(ops(mixed.stages["softmax_sum0"]), HasSubstr("compute_at@output.a0"));
  for (const Schedule* sched : {&s, &mixed}) {
    auto kernel = Kernel::CompileJit(fe->module, "softmax_builtin", host_profile(), sched, {{"N", 64}, {"C", 256}});
    ASSERT_TRUE(kernel.ok()) << kernel.status().message();
    for (auto [n, c] : {std::pair<int64_t, int64_t>{1, 1}, {7, 129}, {129, 7}, {13, 4099}}) {
      HostTensor x(DType::F32, {n, c});
      for (int64_t i = 0; i < x.numel(); ++i) x.set(i, std::sin(0.37 * static_cast<double>(i)) * 6);
      auto got = (*kernel)->Run({x}, {});
      ASSERT_TRUE(got.ok()) << got.status().message();
      auto want = interpret(fe->module, "softmax_builtin", {x}, {});
      ASSERT_TRUE(want.ok());
      Status cmp = compare(*want, *got, tolerance_for(DType::F32, c));
      EXPECT_TRUE(cmp.ok()) << n << "x" << c << ": " << cmp.message();
    }
  }
}

TEST(Rules, CpuElementwiseVectorisesTheOutputAndMaterialisesOperands) {
  Profile p = profile("cpu_avx512");
  std::vector<StageInfo> t = {stage("operand0", Kind::kOperand, {64, 32}), stage("output", Kind::kOutput, {1, 4, 64})};
  Schedule s = schedule_from_knobs(t, {{"operand0", {{"mat", 1}}}, {"output", {{"vec", 2}, {"par", 1}}}}, p);
  EXPECT_EQ(ops(s.stages["operand0"]), "compute_root vectorize:a1:16 parallel:a0");
  // a0 = 1 < 8: fuse_outer defaults to on.
  EXPECT_EQ(ops(s.stages["output"]), "vectorize:a2:32 fuse:a1:a0:pf parallel:pf");
  s = schedule_from_knobs(t, {{"operand0", {{"mat", 0}}}, {"output", {{"vec", 1}, {"par", 0}}}}, p);
  EXPECT_EQ(s.stages.count("operand0"), 0u);
  EXPECT_EQ(ops(s.stages["output"]), "vectorize:a2:16");
}

TEST(Rules, GpuMapsEveryDefinitionToBlocksAndThreads) {
  Profile p = profile("cuda_sm90");
  auto t = sgemm_table();
  Schedule s = schedule_from_knobs(t, default_knobs(t, p), p);
  EXPECT_EQ(ops(s.stages["matmul0"]),
            "compute_root gpu_tile:a1:a0:bx:by:tx:ty:32:8 gpu_tile:a1:a0:bx:by:tx:ty:32:8@u0");
  EXPECT_EQ(ops(s.stages["output"]), "gpu_tile:a1:a0:bx:by:tx:ty:32:8");
  Knobs k = default_knobs(t, p);
  k["matmul0"]["smem"] = 1;
  s = schedule_from_knobs(t, k, p);
  EXPECT_THAT(ops(s.stages["matmul0"]), HasSubstr("stage_shared@load_a.ko stage_shared@load_b.ko"));
  EXPECT_TRUE(validate_schedule(s, t, true).ok());
  EXPECT_EQ(rule_for(t[0], p), nullptr);
  EXPECT_EQ(rule_for(t[2], p), &kGpuRule);
  EXPECT_EQ(rule_for(t[2], profile("cpu_avx2")), &kCpuMatmulRule);
}

TEST(Rules, LoweredStagesNameTheirInputsByStageNameEveryTime) {
  auto fe = compile_file(std::string(MLK_SOURCE_DIR) + "/examples/mlp.tl");
  ASSERT_TRUE(fe.ok() && fe->ok());
  for (int i = 0; i < 2; ++i) {  // a second lowering in one process gets uniquified Func names
    auto t = stage_infos_for(fe->module, "sgemm", {});
    ASSERT_TRUE(t.ok());
    EXPECT_EQ((*t)[2].direct_inputs, (std::vector<std::string>{"load_a", "load_b"}));
  }
}

TEST(ScheduleDirectiveRegistry, UnknownDirectivesAreRefusedWithTheirName) {
  EXPECT_EQ(find_directive("vectorise"), nullptr);
  Schedule s;
  s.stages["output"].push_back(Directive{"vectorise", {"a1"}, {}, "", "", -1});
  Status st = validate_schedule(s, sgemm_table(), false);
  EXPECT_EQ(st.message(), "schedule: stage `output` directive 0 `vectorise(a1)`: unknown directive `vectorise`");
}

TEST(ScheduleDirectiveRegistry, TheValidatorChecksEachKindsForms) {
  auto t = sgemm_table();
  auto msg = [&](Directive d, bool gpu = true) {
    Schedule s;
    s.stages[d.op == "rfactor" ? "matmul0" : "output"].push_back(d);
    return validate_schedule(s, t, gpu).message();
  };
  EXPECT_EQ(msg({"gpu_tile", {"a1", "a0", "bx", "by"}, {8, 8}, "", "", -1}),
            "schedule: stage `output` directive 0 `gpu_tile(a1, a0, bx, by, 8, 8)`: wrong number of variables");
  EXPECT_EQ(msg({"gpu_tile", {"a1", "bx", "tx"}, {8, 8}, "", "", -1}),
            "schedule: stage `output` directive 0 `gpu_tile(a1, bx, tx, 8, 8)`: wrong number of factors");
  EXPECT_EQ(msg({"vectorize", {"a1"}, {8, 2}, "", "", -1}),
            "schedule: stage `output` directive 0 `vectorize(a1, 8, 2)`: wrong number of factors");
  EXPECT_EQ(msg({"rfactor", {"a0", "u"}, {4}, "", "", -1}),
            "schedule: stage `matmul0` directive 0 `rfactor(a0, u, 4)`: rfactor needs a reduction variable (r0, r1, ...)");
  EXPECT_EQ(msg({"stage_shared", {}, {}, "matmul0", "a0", -1}),
            "schedule: stage `output` directive 0 `stage_shared()`: `matmul0` is not an input stage (load_<param>)");
  EXPECT_EQ(msg({"compute_at", {}, {}, "output", "", -1}),
            "schedule: stage `output` directive 0 `compute_at()`: needs at_stage and at_var");
  // Names a form introduces are known to later directives of the stage.
  Schedule s;
  s.stages["output"] = {{"gpu_tile", {"a1", "bx", "tx"}, {8}, "", "", -1}, {"reorder", {"tx", "bx", "a0"}, {}, "", "", -1}};
  EXPECT_TRUE(validate_schedule(s, t, true).ok());
  EXPECT_THAT(validate_schedule(s, t, false).message(), HasSubstr("a GPU directive, but the target profile is a CPU profile"));
}

TEST(ScheduleDirectiveRegistry, EveryKindHasAFormAnApplierAndADocsRow) {
  std::ifstream in(std::string(MLK_SOURCE_DIR) + "/docs/schedules.md");
  std::stringstream docs;
  docs << in.rdbuf();
  EXPECT_EQ(directive_kinds().size(), 25u);
  for (const auto& k : directive_kinds()) {
    EXPECT_EQ(find_directive(k.op), &k);
    EXPECT_FALSE(k.forms.empty()) << k.op;
    EXPECT_NE(k.apply, nullptr) << k.op;
    EXPECT_EQ(k.placement, k.at != AtRole::kNone) << k.op;
    EXPECT_THAT(docs.str(), HasSubstr("| `" + std::string(k.op) + "` |")) << k.op;
  }
}

TEST(RulesKnobRegistry, UnknownKnobsAreRefusedWithTheirName) {
  auto t = sgemm_table();
  Profile cpu = profile("cpu_avx2");
  EXPECT_THAT(find_knob("tiles", false).status().message(), HasSubstr("unknown knob `tiles` for CPU profiles"));
  EXPECT_FALSE(find_knob("smem", false).ok());  // a GPU knob
  EXPECT_TRUE(find_knob("smem", true).ok());
  EXPECT_TRUE(check_knobs(t, default_knobs(t, cpu), cpu).ok());
  EXPECT_EQ(check_knobs(t, {{"matmul0", {{"tiles", 2}}}}, cpu).message(),
            "knobs: stage `matmul0`: unknown knob `tiles` for CPU profiles (knobs: mat, vec, par, fuse_outer, tn, tm, "
            "unroll, at_output, result, pack, kc, mc, flash, amx, fuse, vred, rfactor)");
  EXPECT_EQ(check_knobs(t, {{"matmul0", {{"tn", 5}}}}, cpu).message(),
            "knobs: stage `matmul0`: knob `tn` = 5 is not one of its choices");
  EXPECT_EQ(check_knobs(t, {{"output", {{"tn", 2}}}}, cpu).message(),
            "knobs: stage `output`: knob `tn` does not apply to this stage");
  EXPECT_EQ(check_knobs(t, {{"matmul9", {}}}, cpu).message(), "knobs: unknown stage `matmul9`");
}

TEST(RulesKnobRegistry, EveryKnobHasADefaultAmongItsChoicesForEveryProfile) {
  const std::vector<Kind> kinds = {Kind::kReduction, Kind::kMatmul,     Kind::kSoftmaxMax, Kind::kSoftmaxExp,
                                   Kind::kSoftmaxSum, Kind::kOutput, Kind::kInput,      Kind::kOperand};
  for (const Profile& p : all_profiles()) {
    int knobs = 0;
    for (const auto& d : knob_decls()) {
      EXPECT_EQ(&knob_decl(d.id), &d);
      if (d.gpu != p.is_gpu()) continue;
      ++knobs;
      for (Kind k : kinds) {
        const auto& choices = d.choices(k);
        if (choices.empty()) continue;
        for (int64_t e : {0, 1, 64}) {
          StageInfo s = stage("s", k, {e, e, e}, {e});
          int64_t v = d.default_value(s, p);
          EXPECT_NE(std::find(choices.begin(), choices.end(), v), choices.end()) << d.name << " on " << p.name;
        }
      }
    }
    EXPECT_GT(knobs, 0) << p.name;
  }
}

// Issue 51: what runs untuned is the rules' first seed, not the naive
// schedule (every knob at its default, 15-45x slower on a transformer
// layer), and a kernel compiled at one shape runs at every valid one, as
// the runtime's JIT runs it (compiled once per fn, at the first call's
// shape): attention's products, softmax and head reshapes at odd shapes,
// smaller and larger than the estimates, against the interpreter.
TEST(Rules, TheDefaultScheduleIsTheFirstSeedAndRunsAtEveryShape) {
  auto fe = compile_file(std::string(MLK_SOURCE_DIR) + "/examples/attention.tl");
  ASSERT_TRUE(fe.ok() && fe->ok());
  const DimEnv at = {{"B", 2}, {"S", 64}, {"D", 64}, {"H", 4}};
  auto t = stage_infos_for(fe->module, "attention", at);
  ASSERT_TRUE(t.ok()) << t.status().message();
  const Profile p = host_profile();
  std::vector<Knobs> seeds = seed_knobs(*t, p);
  ASSERT_FALSE(seeds.empty());
  EXPECT_EQ(untuned_knobs(*t, p), seeds[0]);
  EXPECT_NE(untuned_knobs(*t, p), default_knobs(*t, p));
  EXPECT_EQ(untuned_knobs(*t, profile("cuda_sm80")), default_knobs(*t, profile("cuda_sm80")))
      << "no seeds on GPU profiles: the naive schedule is the default";
  auto kernel = Kernel::CompileJit(fe->module, "attention", p, nullptr, at);
  ASSERT_TRUE(kernel.ok()) << kernel.status().message();
  EXPECT_EQ((*kernel)->schedule().hash(), schedule_from_knobs(*t, seeds[0], p).hash());
  auto naive = naive_schedule_for(fe->module, "attention", p, at);
  ASSERT_TRUE(naive.ok()) << naive.status().message();
  EXPECT_EQ(naive->hash(), schedule_from_knobs(*t, default_knobs(*t, p), p).hash());
  EXPECT_NE(naive->hash(), (*kernel)->schedule().hash());
  for (auto [b, s, d, h] : {std::array<int64_t, 4>{2, 64, 64, 4}, {1, 1, 4, 4}, {3, 7, 12, 3}, {1, 130, 96, 2}}) {
    std::vector<HostTensor> in;
    for (int i = 0; i < 3; ++i) {
      HostTensor x(DType::F32, {b, s, d});
      for (int64_t j = 0; j < x.numel(); ++j) x.set(j, std::sin(0.37 * static_cast<double>(j) + i));
      in.push_back(std::move(x));
    }
    HostTensor scale(DType::F32, {});
    scale.set(0, 0.125);
    in.push_back(std::move(scale));
    auto got = (*kernel)->Run(in, {{"H", h}});
    ASSERT_TRUE(got.ok()) << b << "x" << s << "x" << d << "/" << h << ": " << got.status().message();
    auto want = interpret(fe->module, "attention", in, {{"H", h}});
    ASSERT_TRUE(want.ok()) << want.status().message();
    Status cmp = compare(*want, *got, tolerance_for(DType::F32, s));
    EXPECT_TRUE(cmp.ok()) << b << "x" << s << "x" << d << "/" << h << ": " << cmp.message();
  }
}

// A row reduction read by an output that a matmul computes per register
// tile stays at root: that output has no row loop (the seed fused the sum
// at `a0`, which Halide refused, so the default of this common epilogue fell
// back to the naive schedule). Now the seed compiles, and computes the fn.
TEST(Rules, ARowReductionBesideAMatmulOwningTheOutputStaysAtRoot) {
  auto fe = compile_source("t.tl",
                           "public fn mm_rowsum [M, K, N](a: Tensor[F32, [M, K]], b: Tensor[F32, [K, N]]) "
                           "-> Tensor[F32, [M, N]] =\n"
                           "  matmul(a, b) + broadcast(sum(a, axes=[1]), [M, N], axes=[0])\n");
  ASSERT_TRUE(fe.ok()) << fe.rendered();
  const DimEnv at = {{"M", 64}, {"K", 48}, {"N", 64}};
  auto t = stage_infos_for(fe.module, "mm_rowsum", at);
  ASSERT_TRUE(t.ok()) << t.status().message();
  const Profile p = host_profile();
  const Schedule seed = schedule_from_knobs(*t, untuned_knobs(*t, p), p);
  ASSERT_THAT(ops(seed.stages.at("matmul0")), HasSubstr("compute_at@output")) << "the matmul owns the output";
  EXPECT_THAT(ops(seed.stages.at("reduction0")), HasSubstr("compute_root"));
  auto kernel = Kernel::CompileJit(fe.module, "mm_rowsum", p, &seed, at);
  ASSERT_TRUE(kernel.ok()) << kernel.status().message();
  for (auto [m, k, n] : {std::array<int64_t, 3>{64, 48, 64}, {7, 5, 33}}) {
    HostTensor a(DType::F32, {m, k}), b(DType::F32, {k, n});
    for (int64_t i = 0; i < a.numel(); ++i) a.set(i, std::sin(0.3 * static_cast<double>(i)));
    for (int64_t i = 0; i < b.numel(); ++i) b.set(i, std::cos(0.7 * static_cast<double>(i)));
    auto got = (*kernel)->Run({a, b}, {});
    ASSERT_TRUE(got.ok()) << got.status().message();
    auto want = interpret(fe.module, "mm_rowsum", {a, b}, {});
    ASSERT_TRUE(want.ok());
    Status cmp = compare(*want, *got, tolerance_for(DType::F32, k));
    EXPECT_TRUE(cmp.ok()) << m << "x" << k << "x" << n << ": " << cmp.message();
  }
}

}  // namespace
}  // namespace mlk
