// The rules for what a gradient computes (rules-14): reductions with few
// rows in parallel chunks (rfactor_par), transposed `a` operands in square
// tiles, every product of an output's sum in tiles, and a materialised
// operand that the other readers of its value read too. Each: the schedule
// the seeds make, and the JIT against the interpreter at odd shapes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "lang/compare.h"
#include "lang/frontend.h"
#include "lang/interpreter.h"
#include "scheduler/kernel.h"
#include "scheduler/rules.h"
#include "targets/detect.h"
#include "tests/scheduler/stage_tables.h"

namespace mlk {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing_support::ops;
using testing_support::profile;

Directive D0(const std::string& op) { return {op, {}, {}, "", "", -1}; }

const char* kSrc = R"(
public fn total [B, H, S](a: Tensor[F32, [B, H, S, S]], b: Tensor[F32, [B, H, S, S]]) -> Scalar[F32] =
  sum(a * b, axes=[0, 1, 2, 3])
public fn columns [B, S, F](x: Tensor[F32, [B, S, F]]) -> Tensor[F32, [F]] =
  sum(x * x, axes=[0, 1])
public fn flat [N](x: Tensor[F32, [N]]) -> Scalar[F32] =
  sum(x, axes=[0])
public fn biggest [B, H, S](a: Tensor[F32, [B, H, S, S]]) -> Scalar[F32] =
  reduce_max(a, axes=[0, 1, 2, 3])
public fn planes [A, B, C, D](x: Tensor[F32, [A, B, C, D]]) -> Tensor[F32, [C, D]] =
  sum(x, axes=[0, 1])
public fn weight_grad [N, I, O](x: Tensor[F32, [N, I]], g: Tensor[F32, [N, O]]) -> Tensor[F32, [I, O]] =
  matmul(transpose(tanh(x), [1, 0]), g)
public fn two_terms [N, K, M](a: Tensor[F32, [N, K]], w: Tensor[F32, [K, M]], b: Tensor[F32, [N, K]], v: Tensor[F32, [K, M]]) -> Tensor[F32, [N, M]] =
  matmul(a, w) + matmul(b, v)
public fn linear_grads [N, I, O](x: Tensor[F32, [N, I]], w: Tensor[F32, [O, I]], g: Tensor[F32, [N, O]]) -> (Tensor[F32, [N, I]], Tensor[F32, [I, O]]) =
  let dy = tanh(g)
  (matmul(dy, w), matmul(transpose(x, [1, 0]), dy))
public fn shared [N, K, M](x: Tensor[F32, [N, K]], w: Tensor[F32, [K, M]]) -> Tensor[F32, [N, M]] =
  let h = tanh(x) * x
  matmul(h, w) + broadcast(sum(h, axes=[1]), [N, M], axes=[0])
)";

struct Program {
  FrontendResult fe;
  Program() : fe(compile_source("backward.tl", kSrc)) { EXPECT_TRUE(fe.ok()) << fe.rendered(); }
};

const Program& program() {
  static const Program p;
  return p;
}

// The default (untuned) schedule of `fn` at `dims` on `p`: the first seed.
Schedule seed_schedule(const std::string& fn, const DimEnv& dims, const Profile& p, std::vector<StageInfo>* table) {
  auto t = stage_infos_for(program().fe.module, fn, dims, p.halide_target);
  EXPECT_TRUE(t.ok()) << t.status().message();
  if (!t.ok()) return {};
  if (table) *table = *t;
  return schedule_from_knobs(*t, untuned_knobs(*t, p), p);
}

// `fn` under the default schedule for this machine against the interpreter, at
// each of `shapes` (inputs drawn from sin so that no sum cancels).
void check_against_interpreter(const std::string& fn, const std::vector<DimEnv>& shapes) {
  for (const DimEnv& dims : shapes) {
    std::string where = fn;
    for (const auto& [n, v] : dims) where += " " + n + "=" + std::to_string(v);
    SCOPED_TRACE(where);
    Schedule s = seed_schedule(fn, dims, host_profile(), nullptr);
    auto k = Kernel::CompileJit(program().fe.module, fn, host_profile(), &s, dims);
    ASSERT_TRUE(k.ok()) << k.status().message() << "\n" << s.to_json();
    const ir::Function* f = program().fe.module.find(fn);
    ASSERT_NE(f, nullptr);
    std::vector<HostTensor> in;
    int64_t longest = 1;
    for (size_t i = 0; i < f->params.size(); ++i) {
      std::vector<int64_t> shape;
      for (const Dim& d : f->params[i].type.shape) shape.push_back(d.eval(dims).value());
      HostTensor t(DType::F32, shape);
      for (int64_t j = 0; j < t.numel(); ++j) t.set(j, std::sin(0.37 * static_cast<double>(j) + static_cast<double>(i)));
      longest = std::max(longest, t.numel());
      in.push_back(t);
    }
    auto want = interpret_all(program().fe.module, fn, in, dims);
    ASSERT_TRUE(want.ok()) << want.status().message();
    auto got = (*k)->RunAll(in, dims);
    ASSERT_TRUE(got.ok()) << got.status().message();
    ASSERT_EQ(got->size(), want->size());
    for (size_t i = 0; i < got->size(); ++i) {
      Status cmp = compare((*want)[i], (*got)[i], tolerance_for(DType::F32, longest));
      EXPECT_TRUE(cmp.ok()) << "result " << i << ": " << cmp.message();
    }
  }
}

// A sum to a scalar (a scale's gradient over [B, H, S, S]) ran on one core,
// its innermost loop the input's outermost axis (4.8 ms at 8 x 4 x 128 x
// 128); now in parallel chunks of B, each in memory order, vectorised.
TEST(BackwardRules, ASumToAScalarRunsInParallelChunks) {
  Profile p = profile("cpu_avx512");  // 4 cores: chunks for 8 tasks
  Schedule s = seed_schedule("total", {{"B", 8}, {"H", 4}, {"S", 128}}, p, nullptr);
  EXPECT_EQ(ops(s.stages["reduction0"]), "compute_root rfactor_par:r0:u:1:16");
  // B = 3 and H = 5 are too short for two chunks per core: the first long enough, S.
  s = seed_schedule("total", {{"B", 3}, {"H", 5}, {"S", 67}}, p, nullptr);
  EXPECT_EQ(ops(s.stages["reduction0"]), "compute_root rfactor_par:r2:u:9:16");
  // Too little work to share: serial, as before.
  s = seed_schedule("total", {{"B", 2}, {"H", 2}, {"S", 16}}, p, nullptr);
  EXPECT_EQ(ops(s.stages["reduction0"]), "compute_root");
  // The naive schedule (rfactor 0) neither.
  auto t = stage_infos_for(program().fe.module, "total", {{"B", 8}, {"H", 4}, {"S", 128}}, p.halide_target);
  ASSERT_TRUE(t.ok());
  EXPECT_THAT(ops(schedule_from_knobs(*t, default_knobs(*t, p), p).stages["reduction0"]), Not(HasSubstr("rfactor")));
  check_against_interpreter("total", {{{"B", 3}, {"H", 5}, {"S", 67}}, {{"B", 8}, {"H", 4}, {"S", 33}}});
}

// One reduction variable: chunks of it, each vectorised along it; a chunk
// is never longer than the largest factor a schedule takes (65536).
TEST(BackwardRules, AFlatSumAndAMaxRunInParallelChunks) {
  Profile p = profile("cpu_avx512");
  Schedule s = seed_schedule("flat", {{"N", 100003}}, p, nullptr);
  EXPECT_EQ(ops(s.stages["reduction0"]), "compute_root rfactor_par:r0:u:12501:16");
  std::vector<StageInfo> t;
  s = seed_schedule("flat", {{"N", 1 << 20}}, p, &t);
  EXPECT_EQ(ops(s.stages["reduction0"]), "compute_root rfactor_par:r0:u:65536:16");
  EXPECT_TRUE(validate_schedule(s, t, false).ok());
  // The validator refuses what the rules never make: a chunk past the
  // largest factor, a vector width that is not a power of two, a var the
  // stage does not have.
  auto refused = [&](Directive d) {
    Schedule bad;
    bad.stages["reduction0"] = {D0("compute_root"), d};
    return validate_schedule(bad, t, false).message();
  };
  EXPECT_EQ(refused({"rfactor_par", {"r0", "u"}, {70000, 16}, "", "", -1}),
            "schedule: stage `reduction0` directive 1 `rfactor_par(r0, u, 70000, 16)`: factor 70000 must be in [1, "
            "65536]");
  EXPECT_EQ(refused({"rfactor_par", {"r0", "u"}, {4096, 9}, "", "", -1}),
            "schedule: stage `reduction0` directive 1 `rfactor_par(r0, u, 4096, 9)`: the vector width 9 is not a "
            "power of two (Halide 21 aborts on predicated loads of some other widths)");
  EXPECT_EQ(refused({"rfactor_par", {"a0", "u"}, {4096, 16}, "", "", -1}),
            "schedule: stage `reduction0` directive 1 `rfactor_par(a0, u, 4096, 16)`: unknown variable `a0` of stage "
            "`reduction0`");
  s = seed_schedule("biggest", {{"B", 8}, {"H", 4}, {"S", 128}}, p, nullptr);
  EXPECT_EQ(ops(s.stages["reduction0"]), "compute_root rfactor_par:r0:u:1:16");
  check_against_interpreter("flat", {{{"N", 100003}}, {{"N", 40000}}});
  check_against_interpreter("biggest", {{{"B", 3}, {"H", 5}, {"S", 67}}});
}

// A reduction over outer axes with many rows of result stays parallel over
// them, and visits its input in memory order: the last reduction variable
// innermost after the vectorised axis (before rules-14, r0 was).
TEST(BackwardRules, AReductionOverOuterAxesReadsItsInputInMemoryOrder) {
  Schedule s = seed_schedule("planes", {{"A", 8}, {"B", 16}, {"C", 64}, {"D", 64}}, profile("cpu_avx512"), nullptr);
  EXPECT_EQ(ops(s.stages["reduction0"]),
            "compute_root vectorize:a1:16 parallel:a0 reorder:a1:r1:r0:a0@u0 vectorize:a1:16@u0 parallel:a0@u0");
  check_against_interpreter("planes", {{{"A", 3}, {"B", 5}, {"C", 17}, {"D", 67}}});
}

// A bias gradient (a sum over the rows of [B, S, F]) has one row of result:
// its update ran on one core. Chunks of S (B = 3 is short), F vectorised.
TEST(BackwardRules, ABiasGradientRunsInParallelChunks) {
  Schedule s = seed_schedule("columns", {{"B", 3}, {"S", 129}, {"F", 97}}, profile("cpu_avx2"), nullptr);
  EXPECT_EQ(ops(s.stages["reduction0"]), "compute_root vectorize:a0:8 rfactor_par:r1:u:17:8");
  check_against_interpreter("columns", {{{"B", 3}, {"S", 129}, {"F", 97}}, {{"B", 8}, {"S", 64}, {"F", 33}}});
}

// transpose(tanh(x)) as a product's `a`: materialised in the product's
// order a vector at a time along its rows, each vector was gathered from
// `lanes` rows of x; now in square tiles (vectors along one side, unrolled
// along the other), which Halide transposes in registers.
TEST(BackwardRules, ATransposedOperandIsMaterialisedInSquareTiles) {
  std::vector<StageInfo> t;
  Schedule s = seed_schedule("weight_grad", {{"N", 1024}, {"I", 256}, {"O", 1024}}, profile("cpu_avx512"), &t);
  auto op = std::find_if(t.begin(), t.end(), [](const StageInfo& x) { return x.name == "operand0"; });
  ASSERT_NE(op, t.end());
  EXPECT_TRUE(op->transposed);
  EXPECT_EQ(ops(s.stages["operand0"]), "compute_root tile:a1:a0:to:so:ti:si:16:16 vectorize:ti unroll:si parallel:so");
  check_against_interpreter("weight_grad", {{{"N", 67}, {"I", 37}, {"O", 41}}, {{"N", 5}, {"I", 3}, {"O", 129}}});
}

// An output that adds two products (a gradient's terms): one owns the
// output's tiles; the other was a root product with an unpacked b at a
// fifth of the rate. Now it is materialised in result tiles too.
TEST(BackwardRules, EveryProductOfAnOutputsSumIsTiled) {
  Schedule s = seed_schedule("two_terms", {{"N", 1024}, {"K", 256}, {"M", 256}}, profile("cpu_avx512"), nullptr);
  const std::string m0 = ops(s.stages["matmul0"]), m1 = ops(s.stages["matmul1"]);
  EXPECT_EQ((m0.rfind("result_tiles", 0) == 0) + (m1.rfind("result_tiles", 0) == 0), 1) << m0 << "\n" << m1;
  EXPECT_EQ((m0.rfind("compute_at@output", 0) == 0) + (m1.rfind("compute_at@output", 0) == 0), 1) << m0 << "\n" << m1;
  check_against_interpreter("two_terms", {{{"N", 67}, {"K", 37}, {"M", 41}}, {{"N", 13}, {"K", 131}, {"M", 97}}});
}

// h = tanh(x) * x is a product's `a` and a sum's input: the sum reads the
// product's operand stage (materialised by the seed), so h is computed once,
// not once more inlined into the sum.
TEST(BackwardRules, AProductsOperandIsReadByTheOtherReadersOfItsValue) {
  std::vector<StageInfo> t;
  Schedule s = seed_schedule("shared", {{"N", 256}, {"K", 256}, {"M", 256}}, profile("cpu_avx512"), &t);
  auto op = std::find_if(t.begin(), t.end(), [](const StageInfo& x) { return x.name == "operand0"; });
  ASSERT_NE(op, t.end());
  EXPECT_THAT(op->readers, ::testing::Contains("reduction0"));
  EXPECT_THAT(ops(s.stages["operand0"]), HasSubstr("compute_root"));
  check_against_interpreter("shared", {{{"N", 67}, {"K", 37}, {"M", 41}}, {{"N", 1}, {"K", 129}, {"M", 3}}});
}

// tanh(g) is the `a` of dX = dY w and the `b` of dW = x^T dY: one operand
// stage, materialised (only an operand that is never an `a` is left to the
// product's pack, which would read it inline in the other product's tiles).
TEST(BackwardRules, AnOperandThatIsAnAAndABIsMaterialised) {
  std::vector<StageInfo> t;
  Schedule s = seed_schedule("linear_grads", {{"N", 1024}, {"I", 256}, {"O", 256}}, profile("cpu_avx512"), &t);
  int shared = 0;
  for (const StageInfo& m : t)
    if (m.kind == StageInfo::Kind::kMatmul && (m.operands.at(0) == "operand0" || m.operands.at(1) == "operand0"))
      ++shared;
  EXPECT_EQ(shared, 2);
  EXPECT_THAT(ops(s.stages["operand0"]), HasSubstr("compute_root"));
  check_against_interpreter("linear_grads", {{{"N", 67}, {"I", 37}, {"O", 41}}});
}

}  // namespace
}  // namespace mlk
