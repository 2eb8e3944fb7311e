// Products of BF16 operands in pair form (scheduler/lower.cpp,
// Lowerer::matmul_pairs) on targets with a BF16 dot product: the stage table
// a schedule sees, the code of the seed schedule (vdpbf16ps, checked in the
// assembly for a Sapphire Rapids target, which needs no such CPU), and the
// values against the interpreter where this machine has the instruction.
#include <unistd.h>

#include <cstdio>
#include <gtest/gtest.h>

#include <optional>

#include <fstream>
#include <random>
#include <sstream>

#include "lang/compare.h"
#include "lang/frontend.h"
#include "lang/interpreter.h"
#include "lang/precision.h"
#include "scheduler/kernel.h"
#include "tests/scheduler/assembly.h"
#include "scheduler/lower.h"
#include "scheduler/rules.h"
#include "targets/detect.h"
#include "targets/profile.h"

namespace mlk {
namespace {

using testing_asm::assembly;
using testing_asm::count;

const char* kProduct =
    "public fn f [M, K, N](a: Tensor[$T, [M, K]], b: Tensor[$T, [K, N]]) -> Tensor[$T, [M, N]] = matmul(a, b)\n";

std::string with_dtype(std::string src, const std::string& t) {
  for (size_t p = src.find("$T"); p != std::string::npos; p = src.find("$T")) src.replace(p, 2, t);
  return src;
}

const StageInfo* stage(const std::vector<StageInfo>& t, const std::string& name) {
  for (const StageInfo& s : t)
    if (s.name == name) return &s;
  return nullptr;
}

// A Zen 4 target: AVX512_BF16's vdpbf16ps, which the pair form uses there
// (no embedded profile names one; `host` on a Zen 4 is one).
Profile zen4() {
  auto p = find_profile("cpu_avx512_spr");
  EXPECT_TRUE(p.ok());
  Profile z = p.ok() ? *p : Profile{};
  z.name = "zen4";
  z.halide_target = "x86-64-linux-sse41-avx-avx2-fma-f16c-avx512-avx512_skylake-avx512_cannonlake-avx512_zen4";
  z.features = {"avx2", "fma", "avx512f", "avx512bf16"};
  return z;
}

std::string zen4_target() { return zen4().halide_target; }

TEST(Bf16Dot, OnlyBf16ProductsForATargetWithTheDotProductAreInPairs) {
  const DimEnv d = {{"M", 64}, {"K", 96}, {"N", 64}};
  auto bf = compile_source("p.tl", with_dtype(kProduct, "BF16"));
  auto f32 = compile_source("p.tl", with_dtype(kProduct, "F32"));
  ASSERT_TRUE(bf.ok() && f32.ok());
  auto t = stage_infos_for(bf.module, "f", d, zen4_target());
  ASSERT_TRUE(t.ok()) << t.status().message();
  const StageInfo* mm = stage(*t, "matmul0");
  ASSERT_NE(mm, nullptr);
  EXPECT_TRUE(mm->pairs);
  EXPECT_EQ(mm->rvars, 2);
  EXPECT_EQ(mm->rextents, (std::vector<int64_t>{2, 48}));
  ASSERT_EQ(mm->operands.size(), 2u);
  for (const std::string& o : mm->operands) {
    ASSERT_NE(stage(*t, o), nullptr) << o;
    EXPECT_TRUE(stage(*t, o)->pair_copy) << o;
  }
  EXPECT_EQ(stage(*t, mm->operands[1])->extents, (std::vector<int64_t>{48, 64, 2}));  // [K / 2, N, 2]
  // An AVX2 target, no target, or F32 operands: the plain product.
  for (const auto& [m, target] : {std::pair{&bf.module, std::string("x86-64-linux-avx2-fma-f16c")},
                                  std::pair{&bf.module, std::string()}, std::pair{&f32.module, zen4_target()}}) {
    auto plain = stage_infos_for(*m, "f", d, target);
    ASSERT_TRUE(plain.ok());
    EXPECT_FALSE(stage(*plain, "matmul0")->pairs) << target;
    EXPECT_EQ(stage(*plain, "matmul0")->rvars, 1) << target;
  }
}


TEST(Bf16Dot, TheSeedScheduleTakesDotProductsOfPairs) {
  auto spr = std::optional<Profile>(zen4());
  auto avx512 = find_profile("cpu_avx512");
  ASSERT_TRUE(avx512.ok());
  const DimEnv d = {{"M", 256}, {"K", 384}, {"N", 256}};
  // One vdpbf16ps per accumulator vector of the register tile (6 x 4) per pair of k.
  EXPECT_GE(count(assembly(with_dtype(kProduct, "BF16"), *spr, d), "vdpbf16ps"), 24);
  // Without the instruction in the target, nothing uses it; and on Sapphire
  // Rapids, which has it, the products read widened operands at the F32
  // FMAs' rate (lower.cpp, options_for: measured faster there).
  EXPECT_EQ(count(assembly(with_dtype(kProduct, "BF16"), *avx512, d), "vdpbf16ps"), 0);
  auto intel = find_profile("cpu_avx512_spr");
  ASSERT_TRUE(intel.ok());
  EXPECT_EQ(count(assembly(with_dtype(kProduct, "BF16"), *intel, d), "vdpbf16ps"), 0);
  EXPECT_FALSE(lower::options_for(intel->halide_target).bf16_pairs);
}

// An F32 product under the bf16 policy (lang/precision.h) is a widening
// product of BF16 operands: in pair form, with the same dot products, where
// the target has them.
TEST(Bf16Dot, TheBf16PolicyTakesDotProductsOfPairs) {
  auto spr = std::optional<Profile>(zen4());
  const DimEnv d = {{"M", 256}, {"K", 384}, {"N", 256}};
  auto fe = compile_source("p.tl", with_dtype(kProduct, "F32"));
  ASSERT_TRUE(fe.ok());
  const ir::Module widened = with_precision(fe.module, Precision::kBF16);
  auto t = stage_infos_for(widened, "f", d, spr->halide_target);
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_NE(stage(*t, "matmul0"), nullptr);
  EXPECT_TRUE(stage(*t, "matmul0")->pairs);
  EXPECT_GE(count(assembly(with_dtype(kProduct, "F32"), *spr, d, Precision::kBF16), "vdpbf16ps"), 24);
  EXPECT_EQ(count(assembly(with_dtype(kProduct, "F32"), *spr, d), "vdpbf16ps"), 0);  // f32: as written
}

// a's pair copy of a batched product runs parallel over its batch and rows
// fused: over the batch alone, a batch of one ran it on one core (the MiniLM
// layer at batch 1 under bf16, 3.8 -> 3.5 ms, docs/benchmarks.md).
TEST(Bf16Dot, APairCopyOfABatchOfOneRunsOnEveryCore) {
  auto spr = std::optional<Profile>(zen4());
  auto fe = compile_source("p.tl", "public fn f [B, S, K, N](x: Tensor[F32, [B, S, K]], w: Tensor[F32, [K, N]]) -> "
                                   "Tensor[F32, [B, S, N]] = matmul(x, w)\n");
  ASSERT_TRUE(fe.ok());
  const ir::Module widened = with_precision(fe.module, Precision::kBF16);
  auto t = stage_infos_for(widened, "f", {{"B", 1}, {"S", 128}, {"K", 384}, {"N", 384}}, spr->halide_target);
  ASSERT_TRUE(t.ok()) << t.status().message();
  const Schedule sched = schedule_from_knobs(*t, default_knobs(*t, *spr), *spr);
  const StageInfo* mm = stage(*t, "matmul0");
  ASSERT_TRUE(mm && mm->pairs && mm->operands.size() == 2);
  auto parallel_vars = [&](const std::string& name) {
    std::string out;
    for (const Directive& d : sched.stages.at(name))
      if (d.op == "parallel") out += (out.empty() ? "" : ",") + d.vars.at(0);
    return out;
  };
  EXPECT_EQ(parallel_vars(mm->operands[0]), "pb") << "a: batch and rows fused";
  EXPECT_EQ(parallel_vars(mm->operands[1]), "a0") << "b: its outer axis (pairs of k)";
}

HostTensor random_tensor(DType t, std::vector<int64_t> shape, std::mt19937& rng) {
  HostTensor x(t, std::move(shape));
  std::uniform_real_distribution<double> u(-2, 2);
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, u(rng));
  return x;
}

// Products in pair form against the interpreter, as this machine's JIT runs
// them under the seed schedule: plain, with a weight shared by a batch, and
// batched; K odd (a zero past its end), 1 and even.
TEST(Bf16Dot, PairProductsMatchTheInterpreter) {
  if (!lower::options_for("host").bf16_pairs) GTEST_SKIP() << "this CPU has no BF16 dot product (AVX512_BF16)";
  struct Case {
    std::string src;
    std::vector<std::vector<std::string>> shapes;  // of the inputs, by dimension name
  };
  const std::vector<Case> cases = {
      {with_dtype(kProduct, "BF16"), {{"M", "K"}, {"K", "N"}}},
      {"public fn f [B, M, K, N](a: Tensor[BF16, [B, M, K]], b: Tensor[BF16, [K, N]]) -> Tensor[BF16, [B, M, N]] =\n"
       "  matmul(a, b)\n",
       {{"B", "M", "K"}, {"K", "N"}}},
      {"public fn f [B, M, K, N](a: Tensor[BF16, [B, M, K]], b: Tensor[BF16, [B, K, N]]) -> Tensor[BF16, [B, M, N]] "
       "=\n  matmul(a, b)\n",
       {{"B", "M", "K"}, {"B", "K", "N"}}},
  };
  const std::vector<DimEnv> dims = {{{"B", 2}, {"M", 7}, {"K", 5}, {"N", 37}},
                                    {{"B", 1}, {"M", 1}, {"K", 1}, {"N", 1}},
                                    {{"B", 3}, {"M", 13}, {"K", 64}, {"N", 97}},
                                    {{"B", 2}, {"M", 96}, {"K", 131}, {"N", 64}}};
  std::mt19937 rng(11);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.src);
    auto fe = compile_source("p.tl", c.src);
    ASSERT_TRUE(fe.ok()) << fe.rendered();
    for (DimEnv d : dims) {
      if (c.shapes.size() == 2 && c.shapes[0].size() == 2) d.erase("B");
      SCOPED_TRACE("K=" + std::to_string(d.at("K")) + " M=" + std::to_string(d.at("M")));
      auto k = Kernel::CompileJit(fe.module, "f", host_profile(), nullptr, d);
      ASSERT_TRUE(k.ok()) << k.status().message();
      EXPECT_NE((*k)->schedule().to_json().find("atomic"), std::string::npos) << "not the pair form's schedule";
      std::vector<HostTensor> in;
      for (const auto& names : c.shapes) {
        std::vector<int64_t> shape;
        for (const auto& n : names) shape.push_back(d.at(n));
        in.push_back(random_tensor(DType::BF16, shape, rng));
      }
      auto want = interpret(fe.module, "f", in, d);
      ASSERT_TRUE(want.ok()) << want.status().message();
      auto got = (*k)->Run(in, d);
      ASSERT_TRUE(got.ok()) << got.status().message();
      Status cmp = compare(*want, *got, tolerance_for(DType::BF16, d.at("K")));
      EXPECT_TRUE(cmp.ok()) << cmp.message();
    }
  }
}

// Products under the bf16 and f16 policies as this machine's JIT runs them
// (pair form where the CPU has the BF16 dot product, operands rounded and
// multiplied in F32 elsewhere), against the interpreter of the same widened
// program at F32's tolerance (docs/numerics.md, "Precision policies"); and
// far enough from the program as written that the rounding is seen.
TEST(Bf16Dot, PolicyProductsMatchTheInterpreterOnThisMachine) {
  const std::string src =
      "public fn f [B, M, K, N](a: Tensor[F32, [B, M, K]], b: Tensor[F32, [K, N]]) -> Tensor[F32, [B, M, N]] =\n"
      "  matmul(a, b)\n";
  auto fe = compile_source("p.tl", src);
  ASSERT_TRUE(fe.ok()) << fe.rendered();
  std::mt19937 rng(3);
  for (Precision policy : {Precision::kBF16, Precision::kF16}) {
    const ir::Module m = with_precision(fe.module, policy);
    for (const DimEnv& d : {DimEnv{{"B", 2}, {"M", 7}, {"K", 131}, {"N", 37}},
                            DimEnv{{"B", 1}, {"M", 64}, {"K", 64}, {"N", 96}}}) {
      SCOPED_TRACE(std::string(precision_name(policy)) + " K=" + std::to_string(d.at("K")));
      auto k = Kernel::CompileJit(m, "f", host_profile(), nullptr, d);
      ASSERT_TRUE(k.ok()) << k.status().message();
      std::vector<HostTensor> in = {random_tensor(DType::F32, {d.at("B"), d.at("M"), d.at("K")}, rng),
                                    random_tensor(DType::F32, {d.at("K"), d.at("N")}, rng)};
      auto want = interpret(m, "f", in, d);
      auto as_written = interpret(fe.module, "f", in, d);
      auto got = (*k)->Run(in, d);
      ASSERT_TRUE(want.ok() && as_written.ok() && got.ok());
      ASSERT_EQ(got->dtype, DType::F32);
      Status cmp = compare(*want, *got, tolerance_for(DType::F32, d.at("K")));
      EXPECT_TRUE(cmp.ok()) << cmp.message();
      EXPECT_FALSE(compare(*as_written, *got, tolerance_for(DType::F32, d.at("K"))).ok())
          << "the compiled product did not round its operands";
    }
  }
}

}  // namespace
}  // namespace mlk
