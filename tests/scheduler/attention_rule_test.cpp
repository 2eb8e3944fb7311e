// The fused attention rule (scheduler/rules_attention.h): which stage tables
// it recognises, the knob `flash` and its seeds, and its schedules against
// the reference interpreter at odd shapes (1, 7, 13, 129; heads of odd
// size), with a causal and a padding mask, in F32 and F64.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "lang/compare.h"
#include "lang/frontend.h"
#include "lang/interpreter.h"
#include "scheduler/kernel.h"
#include "scheduler/rules.h"
#include "scheduler/rules_attention.h"
#include "targets/detect.h"
#include "tests/scheduler/stage_tables.h"

namespace mlk {
namespace {

using testing_support::ops;
using testing_support::profile;

// Scaled dot-product attention over heads already split ([B, H, S, E]),
// causal (`causal`) or with a padding mask by key (`padded`), and a
// variant whose probabilities are also read outside the chain (`leaky`).
const char* kSource = R"(
public fn causal [B, H, S, E](q: Tensor[$T, [B, H, S, E]], k: Tensor[$T, [B, H, S, E]], v: Tensor[$T, [B, H, S, E]])
    -> Tensor[$T, [B, H, S, E]] =
  let s = matmul(q, transpose(k, [0, 1, 3, 2])) * 0.125
  let row = iota(I32, [B, H, S, S], axis=2)
  let col = iota(I32, [B, H, S, S], axis=3)
  matmul(softmax(where(col <= row, s, full($T, [B, H, S, S], -1e30)), axis=3), v)

public fn padded [B, H, S, E](q: Tensor[$T, [B, H, S, E]], k: Tensor[$T, [B, H, S, E]], v: Tensor[$T, [B, H, S, E]],
                              mask: Tensor[I64, [B, S]]) -> Tensor[$T, [B, H, S, E]] =
  let s = matmul(q, transpose(k, [0, 1, 3, 2]))
  let keep = broadcast(mask != 0, [B, H, S, S], axes=[0, 3])
  matmul(softmax(where(keep, s, full($T, [B, H, S, S], -1e30)), axis=3), v)

public fn leaky [B, H, S, E](q: Tensor[$T, [B, H, S, E]], k: Tensor[$T, [B, H, S, E]], v: Tensor[$T, [B, H, S, E]])
    -> Tensor[$T, [B, H, S, E]] =
  let p = softmax(matmul(q, transpose(k, [0, 1, 3, 2])), axis=3)
  matmul(p, v) + broadcast(sum(p, axes=[3]), [B, H, S, E], axes=[0, 1, 2])
)";

std::string source(DType t) {
  std::string src = kSource;
  for (size_t p = src.find("$T"); p != std::string::npos; p = src.find("$T")) src.replace(p, 2, dtype_name(t));
  return src;
}

const DimEnv kMade = {{"B", 2}, {"H", 3}, {"S", 64}, {"E", 32}};

std::vector<StageInfo> table(const std::string& fn, const DimEnv& d = kMade) {
  auto fe = compile_source("attn.tl", source(DType::F32));
  EXPECT_TRUE(fe.ok()) << fe.rendered();
  auto st = stage_infos_for(fe.module, fn, d);
  EXPECT_TRUE(st.ok()) << st.status().message();
  return st.ok() ? *st : std::vector<StageInfo>{};
}

const StageInfo& named(const std::vector<StageInfo>& t, const std::string& n) {
  return *std::find_if(t.begin(), t.end(), [&](const StageInfo& s) { return s.name == n; });
}

TEST(AttentionRule, RecognisesTheChainFromScoresToTheProductWithV) {
  for (const char* fn : {"causal", "padded"}) {
    SCOPED_TRACE(fn);
    auto t = table(fn);
    auto chain = rules::attention_chain(t, named(t, "matmul1"));
    ASSERT_FALSE(chain.empty());
    EXPECT_EQ(chain.front(), "matmul0");
    std::sort(chain.begin() + 1, chain.end());
    EXPECT_EQ(chain, (std::vector<std::string>{"matmul0", "operand1", "softmax_exp0", "softmax_max0", "softmax_sum0"}));
    EXPECT_TRUE(rules::attention_chain(t, named(t, "matmul0")).empty());  // the scores end no chain
    // `flash` is searched on the product with V alone; plan 0 fuses, plan 1 does not.
    KnobSpace space = knob_space(t, profile("cpu_avx512"));
    EXPECT_TRUE(space["matmul1"].count("flash"));
    EXPECT_FALSE(space["matmul0"].count("flash"));
    auto seeds = seed_knobs(t, profile("cpu_avx512"));
    ASSERT_EQ(seeds.size(), 2u);
    EXPECT_EQ(seeds[0]["matmul1"]["flash"], 1);
    EXPECT_EQ(seeds[1]["matmul1"]["flash"], 0);
  }
}

TEST(AttentionRule, ProbabilitiesReadOutsideTheChainAreNotFused) {
  auto t = table("leaky");
  for (const StageInfo& s : t) EXPECT_TRUE(rules::attention_chain(t, s).empty()) << s.name;
  EXPECT_FALSE(knob_space(t, profile("cpu_avx512"))["matmul1"].count("flash"));
}

TEST(AttentionRule, EveryChainStageIsComputedPerBlockOfQueryRows) {
  auto t = table("padded");
  Knobs k = {{"matmul1", {{"flash", 1}, {"tm", 12}, {"tn", 2}}}};
  Schedule s = schedule_from_knobs(t, k, profile("cpu_avx512"));
  // The product with V in 12 x 2 register tiles, 16 row tiles (192 rows) to
  // a block; the chain placed per block.
  EXPECT_EQ(ops(s.stages["matmul1"]),
            "attention_tiles:matmul0:operand1:softmax_sum0:softmax_exp0:softmax_max0:32:12:16:32:12:16 "
            "vectorize:a3:16 unroll:a2:12 reorder:a3:a2:r0@u0 vectorize:a3:16@u0 unroll:a3:2@u0 unroll:a2:12@u0");
  // The scores: 12 rows by 2 vectors of keys (12 x 2 + 2 + 1 <= 32 registers) per tile.
  EXPECT_EQ(ops(s.stages["matmul0"]),
            "vectorize:a3:16 unroll:a2:12 reorder:a3:a2:r0@u0 vectorize:a3:16@u0 unroll:a3:2@u0 unroll:a2:12@u0");
  EXPECT_EQ(ops(s.stages["softmax_max0"]), "rfactor_vector:r0:u:16");
  EXPECT_EQ(ops(s.stages["softmax_exp0"]), "vectorize:a3:16");
  EXPECT_EQ(ops(s.stages["operand1"]), "vectorize:a3:16");
  // k transposed (a view) materialised contiguous at root.
  EXPECT_EQ(ops(s.stages["operand0"]), "compute_root vectorize:a3:16 fuse:a1:a0:pb parallel:pb");
  EXPECT_TRUE(validate_schedule(s, t, false).ok()) << validate_schedule(s, t, false).message();
}

TEST(AttentionRule, TheValidatorNamesWhatAttentionTilesNeed) {
  auto t = table("padded");
  auto msg = [&](const std::string& stage, std::vector<std::string> vars) {
    Schedule s;
    s.stages[stage] = {{"attention_tiles", std::move(vars), {32, 12, 16, 32, 12, 4}, "", "", -1}};
    return validate_schedule(s, t, false).message();
  };
  EXPECT_EQ(msg("softmax_max0", {"matmul0", "softmax_exp0"}),
            "schedule: stage `softmax_max0` directive 0 `attention_tiles(matmul0, softmax_exp0, 32, 12, 16, 32, 12, 4)`: "
            "only a matmul stage of rank >= 3 has attention tiles");
  EXPECT_EQ(msg("matmul1", {"softmax_max0", "matmul0"}),
            "schedule: stage `matmul1` directive 0 `attention_tiles(softmax_max0, matmul0, 32, 12, 16, 32, 12, 4)`: the "
            "first stage, `softmax_max0`, must be a matmul (the scores)");
  EXPECT_EQ(msg("matmul1", {"matmul0", "load_q"}),
            "schedule: stage `matmul1` directive 0 `attention_tiles(matmul0, load_q, 32, 12, 16, 32, 12, 4)`: `load_q` "
            "is not another computed stage");
  EXPECT_EQ(msg("matmul1", {"matmul0"}),
            "schedule: stage `matmul1` directive 0 `attention_tiles(matmul0, 32, 12, 16, 32, 12, 4)`: wrong number of "
            "variables");
}

HostTensor random_tensor(DType t, std::vector<int64_t> shape, std::mt19937& rng) {
  HostTensor x(t, std::move(shape));
  std::uniform_real_distribution<double> u(-2, 2);
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, u(rng));
  return x;
}

// Compiles `fn` with the fused schedule of the rule's seed made at kMade
// (`tm` rows per block) and compares it with the interpreter at odd shapes.
void check(const std::string& fn, DType t, int64_t tm) {
  SCOPED_TRACE(fn + " " + dtype_name(t) + " tm=" + std::to_string(tm));
  auto fe = compile_source("attn.tl", source(t));
  ASSERT_TRUE(fe.ok()) << fe.rendered();
  auto stages = stage_infos_for(fe.module, fn, kMade);
  ASSERT_TRUE(stages.ok());
  const Profile host = host_profile();
  Knobs k = seed_knobs(*stages, host).at(0);
  ASSERT_EQ(k["matmul1"]["flash"], 1);
  k["matmul1"]["tm"] = tm;
  Schedule s = schedule_from_knobs(*stages, k, host);
  auto kernel = Kernel::CompileJit(fe.module, fn, host_profile(), &s);
  ASSERT_TRUE(kernel.ok()) << kernel.status().message() << "\n" << s.to_json();
  std::mt19937 rng(11);
  const std::vector<DimEnv> shapes = {{{"B", 1}, {"H", 1}, {"S", 1}, {"E", 1}},   {{"B", 2}, {"H", 3}, {"S", 7}, {"E", 5}},
                                      {{"B", 1}, {"H", 2}, {"S", 129}, {"E", 32}}, {{"B", 3}, {"H", 1}, {"S", 13}, {"E", 7}},
                                      {{"B", 1}, {"H", 2}, {"S", 64}, {"E", 64}}};
  for (const DimEnv& d : shapes) {
    SCOPED_TRACE("S=" + std::to_string(d.at("S")) + " E=" + std::to_string(d.at("E")));
    std::vector<int64_t> shape = {d.at("B"), d.at("H"), d.at("S"), d.at("E")};
    std::vector<HostTensor> in = {random_tensor(t, shape, rng), random_tensor(t, shape, rng),
                                  random_tensor(t, shape, rng)};
    if (fn == "padded") {
      HostTensor mask(DType::I64, {d.at("B"), d.at("S")});
      for (int64_t i = 0; i < mask.numel(); ++i) mask.set(i, (i % d.at("S")) < (d.at("S") + 1) / 2 + i % 3 ? 1 : 0);
      in.push_back(mask);
    }
    auto want = interpret(fe.module, fn, in, d);
    ASSERT_TRUE(want.ok()) << want.status().message();
    auto got = (*kernel)->Run(in, d);
    ASSERT_TRUE(got.ok()) << got.status().message();
    Status cmp = compare(*want, *got, tolerance_for(t, d.at("S") * d.at("E")));
    EXPECT_TRUE(cmp.ok()) << cmp.message();
  }
}

TEST(AttentionRule, FusedSchedulesMatchTheInterpreterAtOddShapes) {
  for (DType t : {DType::F32, DType::F64})
    for (const char* fn : {"causal", "padded"})
      for (int64_t tm : {4, 12}) check(fn, t, tm);
}

}  // namespace
}  // namespace mlk
