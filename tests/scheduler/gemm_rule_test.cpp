// The CPU GEMM rule (scheduler/rules_cpu_matmul.cpp): register tiles derived
// from the profile, packing of b where it pays, full tiles with a guarded
// fallback; its schedules against the reference interpreter at odd shapes
// (1, 7, 129, primes) for every dtype a matmul accepts, for plain,
// transposed-weight and batched products.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "lang/compare.h"
#include "lang/frontend.h"
#include "lang/interpreter.h"
#include "scheduler/kernel.h"
#include "scheduler/rules.h"
#include "targets/detect.h"
#include "targets/profile.h"
#include "tests/scheduler/stage_tables.h"

namespace mlk {
namespace {

using ::testing::HasSubstr;
using Kind = StageInfo::Kind;

using testing_support::stage;

// sgemm's stage table at M x K x N; `view`: b is a view (operand0), as for
// `matmul(x, transpose(w, [1, 0]))`.
std::vector<StageInfo> gemm_table(int64_t m, int64_t k, int64_t n, bool view = false) {
  StageInfo mm = stage("matmul0", Kind::kMatmul, {m, n}, {k});
  mm.direct_inputs = view ? std::vector<std::string>{"load_a"} : std::vector<std::string>{"load_a", "load_b"};
  mm.operands = {"load_a", view ? "operand0" : "load_b"};
  std::vector<StageInfo> t = {stage("load_a", Kind::kInput, {m, k}), stage("load_b", Kind::kInput, {k, n})};
  if (view) t.push_back(stage("operand0", Kind::kOperand, {k, n}));
  t.push_back(mm);
  t.push_back(stage("output", Kind::kOutput, {m, n}));
  return t;
}

using testing_support::ops;
using testing_support::profile;

TEST(GemmRule, RegisterTilesFollowTheProfilesRegisters) {
  // AVX-512: 32 registers hold 6 x 4 (or 8 x 3) accumulators; AVX2: 16 hold 4 x 3 (or 6 x 2).
  for (auto [name, plan0, plan1] : {std::tuple{"cpu_avx512", "tm=6 tn=4", "tm=8 tn=3"},
                                    std::tuple{"cpu_avx2", "tm=4 tn=3", "tm=6 tn=2"}}) {
    auto seeds = seed_knobs(gemm_table(1024, 1024, 1024), profile(name));
    ASSERT_EQ(seeds.size(), 2u) << name;
    auto tile = [](Knobs& k) {
      return "tm=" + std::to_string(k["matmul0"]["tm"]) + " tn=" + std::to_string(k["matmul0"]["tn"]);
    };
    EXPECT_EQ(tile(seeds[0]), plan0) << name;
    EXPECT_EQ(tile(seeds[1]), plan1) << name;
    EXPECT_EQ(seeds[0]["matmul0"]["at_output"], 1) << name;
  }
}

TEST(GemmRule, PacksBWhereItsPanelOutgrowsTheCacheOrIsAView) {
  Profile p = profile("cpu_avx512");  // 1 MiB of L2
  auto pack = [&](const std::vector<StageInfo>& t) { return seed_knobs(t, p).at(0).at("matmul0").at("pack"); };
  EXPECT_EQ(pack(gemm_table(64, 256, 256)), 0);           // all of b 256 KiB: under half the L2
  EXPECT_EQ(pack(gemm_table(1024, 1024, 1024)), 1);       // a 256 KiB panel, but all of b 4 MiB: every row tile sweeps it
  EXPECT_EQ(pack(gemm_table(512, 4096, 4096)), 1);        // a 1 MiB panel
  EXPECT_EQ(pack(gemm_table(1024, 384, 1536, true)), 1);  // a transposed weight
}

TEST(GemmRule, PackedScheduleRunsColumnPanelsOutermost) {
  auto t = gemm_table(512, 4096, 4096);
  Knobs k = {{"matmul0", {{"at_output", 1}, {"pack", 1}, {"tm", 8}, {"tn", 3}}}};
  Schedule s = schedule_from_knobs(t, k, profile("cpu_avx512"));
  EXPECT_EQ(ops(s.stages["output"]),
            "tile:a1:a0:no:mo:ni:mi:48:8:1 vectorize:ni:16 unroll:mi reorder:ni:mi:mo:no parallel:no");
  EXPECT_EQ(ops(s.stages["matmul0"]),
            "compute_at@output.mo pack:load_b:16@output.no vectorize:a1:16 unroll:a0:8 reorder:a1:a0:r0@u0 "
            "vectorize:a1:16@u0 unroll:a1:3@u0 unroll:a0:8@u0");
  EXPECT_TRUE(validate_schedule(s, t, false).ok());
  // Without pack: row tiles outermost, b read in place.
  k["matmul0"]["pack"] = 0;
  s = schedule_from_knobs(t, k, profile("cpu_avx512"));
  EXPECT_EQ(ops(s.stages["output"]), "tile:a1:a0:no:mo:ni:mi:48:8:1 vectorize:ni:16 unroll:mi parallel:mo");
  EXPECT_THAT(ops(s.stages["matmul0"]), ::testing::StartsWith("compute_at@output.no vectorize"));
}

TEST(GemmRule, TheValidatorNamesWhatPackAndFullTilesNeed) {
  auto t = gemm_table(64, 64, 64);
  auto msg = [&](const std::string& stage, Directive d) {
    Schedule s;
    s.stages[stage] = {d};
    return validate_schedule(s, t, false).message();
  };
  EXPECT_EQ(msg("matmul0", {"pack", {"output"}, {}, "output", "a0", -1}),
            "schedule: stage `matmul0` directive 0 `pack(output)`: `output` is not an operand of stage `matmul0` "
            "(operands: load_a, load_b)");
  EXPECT_EQ(msg("output", {"pack", {"load_a"}, {}, "output", "a0", -1}),
            "schedule: stage `output` directive 0 `pack(load_a)`: `load_a` is not an operand of stage `output` (it "
            "reads none)");
  EXPECT_EQ(msg("output", {"tile", {"a1", "a0", "xo", "yo", "xi", "yi"}, {8, 8, 2}, "", "", -1}),
            "schedule: stage `output` directive 0 `tile(a1, a0, xo, yo, xi, yi, 8, 8, 2)`: the third factor (full "
            "tiles) must be 1");
  EXPECT_EQ(msg("matmul0", {"tile", {"a1", "a0", "xo", "yo", "xi", "yi"}, {8, 8, 1}, "", "", 0}),
            "schedule: stage `matmul0` directive 0 `tile(a1, a0, xo, yo, xi, yi, 8, 8, 1)`: full tiles apply only to "
            "the output stage's pure definition");
}

// --- against the interpreter ---

HostTensor random_tensor(DType t, std::vector<int64_t> shape, std::mt19937& rng) {
  HostTensor x(t, std::move(shape));
  std::uniform_real_distribution<double> u(-2, 2);
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, is_integer(t) ? static_cast<double>(static_cast<int>(rng() % 9) - 4) : u(rng));
  return x;
}

std::string subst_dtype(std::string src, DType t) {
  for (size_t p = src.find("$T"); p != std::string::npos; p = src.find("$T")) src.replace(p, 2, dtype_name(t));
  return src;
}

// Compiles `fn` of `src` with the GEMM rule's schedule for `knobs` made at
// the shape `made_for`, and compares it with the interpreter at each shape.
void check_gemm(const std::string& src, const Knobs& knobs, const DimEnv& made_for, const std::vector<DimEnv>& shapes,
                const std::function<std::vector<HostTensor>(const DimEnv&, std::mt19937&)>& inputs, DType t,
                const std::string& label) {
  SCOPED_TRACE(label);
  auto fe = compile_source("gemm.tl", src);
  ASSERT_TRUE(fe.ok()) << fe.rendered();
  auto stages = stage_infos_for(fe.module, "f", made_for, "host");  // as CompileJit lowers below
  ASSERT_TRUE(stages.ok()) << stages.status().message();
  const Profile host = host_profile();
  Schedule s = schedule_from_knobs(*stages, knobs, host);
  auto k = Kernel::CompileJit(fe.module, "f", host_profile(), &s);
  ASSERT_TRUE(k.ok()) << k.status().message() << "\n" << s.to_json();
  std::mt19937 rng(7);
  for (const DimEnv& d : shapes) {
    std::string where;
    for (const auto& [n, v] : d) where += n + "=" + std::to_string(v) + " ";
    SCOPED_TRACE(where);
    auto in = inputs(d, rng);
    auto want = interpret(fe.module, "f", in, d);
    ASSERT_TRUE(want.ok()) << want.status().message();
    auto got = (*k)->Run(in, d);
    ASSERT_TRUE(got.ok()) << got.status().message();
    Status cmp = compare(*want, *got, tolerance_for(t, d.at("K")));
    EXPECT_TRUE(cmp.ok()) << cmp.message();
  }
}

const std::vector<DimEnv> kOddShapes = {{{"M", 1}, {"K", 1}, {"N", 1}},      {{"M", 7}, {"K", 5}, {"N", 3}},
                                        {{"M", 129}, {"K", 67}, {"N", 37}}, {{"M", 13}, {"K", 131}, {"N", 97}},
                                        {{"M", 97}, {"K", 7}, {"N", 129}},  {{"M", 64}, {"K", 64}, {"N", 64}}};

Knobs gemm_knobs(int64_t pack, int64_t tm, int64_t tn) {
  return {{"matmul0", {{"at_output", 1}, {"pack", pack}, {"tm", tm}, {"tn", tn}}}};
}

TEST(GemmRule, PlainProductsMatchTheInterpreterAtOddShapes) {
  const std::string src =
      "public fn f [M, K, N](a: Tensor[$T, [M, K]], b: Tensor[$T, [K, N]]) -> Tensor[$T, [M, N]] = matmul(a, b)\n";
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64})
    for (int64_t pack : {0, 1}) {
      auto in = [&](const DimEnv& d, std::mt19937& rng) {
        return std::vector<HostTensor>{random_tensor(t, {d.at("M"), d.at("K")}, rng),
                                       random_tensor(t, {d.at("K"), d.at("N")}, rng)};
      };
      check_gemm(subst_dtype(src, t), gemm_knobs(pack, 6, 4), {{"M", 96}, {"K", 64}, {"N", 128}}, kOddShapes, in, t,
                 std::string(dtype_name(t)) + " pack=" + std::to_string(pack));
    }
}

TEST(GemmRule, TransposedWeightsAndBiasEpilogueMatchTheInterpreter) {
  // nn.Linear: x @ w^T + b, w in [out, in] layout; b packed from the view.
  const std::string src =
      "public fn f [M, K, N](x: Tensor[$T, [M, K]], w: Tensor[$T, [N, K]], b: Tensor[$T, [N]]) -> Tensor[$T, [M, N]] =\n"
      "  matmul(x, transpose(w, [1, 0])) + broadcast(b, [M, N], axes=[1])\n";
  for (DType t : {DType::F32, DType::F16})
    for (int64_t pack : {0, 1}) {
      auto in = [&](const DimEnv& d, std::mt19937& rng) {
        return std::vector<HostTensor>{random_tensor(t, {d.at("M"), d.at("K")}, rng),
                                       random_tensor(t, {d.at("N"), d.at("K")}, rng), random_tensor(t, {d.at("N")}, rng)};
      };
      check_gemm(subst_dtype(src, t), gemm_knobs(pack, 8, 3), {{"M", 128}, {"K", 96}, {"N", 96}}, kOddShapes, in, t,
                 std::string(dtype_name(t)) + " pack=" + std::to_string(pack));
    }
}

TEST(GemmRule, BatchedProductsMatchTheInterpreter) {
  const std::string src =
      "public fn f [B, M, K, N](a: Tensor[F32, [B, M, K]], b: Tensor[F32, [B, K, N]]) -> Tensor[F32, [B, M, N]] =\n"
      "  matmul(a, b)\n";
  std::vector<DimEnv> shapes;
  for (DimEnv d : kOddShapes) {
    d["B"] = d.at("M") % 3 + 1;
    shapes.push_back(d);
  }
  for (int64_t pack : {0, 1}) {
    auto in = [&](const DimEnv& d, std::mt19937& rng) {
      return std::vector<HostTensor>{random_tensor(DType::F32, {d.at("B"), d.at("M"), d.at("K")}, rng),
                                     random_tensor(DType::F32, {d.at("B"), d.at("K"), d.at("N")}, rng)};
    };
    check_gemm(src, gemm_knobs(pack, 4, 2), {{"B", 4}, {"M", 64}, {"K", 32}, {"N", 64}}, shapes, in, DType::F32,
               "batched pack=" + std::to_string(pack));
  }
}

TEST(GemmRule, MaterialisedResultTilesMatchTheInterpreter) {
  // The product is read by a reduction (a LayerNorm's mean) and by the
  // output, so it is not computed per output tile: result_tiles.
  const std::string src =
      "public fn f [M, K, N](a: Tensor[$T, [M, K]], b: Tensor[$T, [K, N]]) -> Tensor[$T, [M, N]] =\n"
      "  let y = matmul(a, b)\n"
      "  y - broadcast(mean(y, axes=[1]), [M, N], axes=[0])\n";
  for (DType t : {DType::F32, DType::F64})
    for (int64_t pack : {0, 1}) {
      auto in = [&](const DimEnv& d, std::mt19937& rng) {
        return std::vector<HostTensor>{random_tensor(t, {d.at("M"), d.at("K")}, rng),
                                       random_tensor(t, {d.at("K"), d.at("N")}, rng)};
      };
      Knobs k = {{"matmul0", {{"result", 1}, {"pack", pack}, {"tm", 6}, {"tn", 4}}}};
      check_gemm(subst_dtype(src, t), k, {{"M", 96}, {"K", 64}, {"N", 128}}, kOddShapes, in, t,
                 std::string(dtype_name(t)) + " pack=" + std::to_string(pack));
    }
}

TEST(GemmRule, ResultTilesOfTheSeedsAreThoseOfAProductNotAtTheOutput) {
  auto t = gemm_table(1024, 384, 1536);
  t.back().extents = {1024};  // the output is a row reduction of the product
  t.back().rank = 1;
  auto seeds = seed_knobs(t, profile("cpu_avx512"));
  ASSERT_FALSE(seeds.empty());
  EXPECT_EQ(seeds[0]["matmul0"]["at_output"], 0);  // not the output's shape
  EXPECT_EQ(seeds[0]["matmul0"]["result"], 1);
  Schedule s = schedule_from_knobs(t, seeds[0], profile("cpu_avx512"));
  EXPECT_THAT(ops(s.stages["matmul0"]), ::testing::StartsWith("result_tiles:load_b:64:6:16 vectorize:a1:16"));
  EXPECT_TRUE(validate_schedule(s, t, false).ok());
  Schedule bad;
  bad.stages["output"] = {{"result_tiles", {}, {64, 6, 16}, "", "", -1}};
  EXPECT_EQ(validate_schedule(bad, t, false).message(),
            "schedule: stage `output` directive 0 `result_tiles(64, 6, 16)`: only a matmul stage of rank >= 2 has "
            "result tiles");
}

TEST(GemmRule, BatchedInputsTimesASharedWeightMatchTheInterpreter) {
  // nn.Linear on [B, S, K] activations through a callee with dims of its own
  // (as examples/minilm does): b is one weight for the whole batch, packed
  // once per column panel with the batch inside. At the output, and
  // materialised (the LayerNorm-style row mean reads the product too).
  const std::string src =
      "fn linear [B, S, I, O](x: Tensor[F32, [B, S, I]], w: Tensor[F32, [O, I]]) -> Tensor[F32, [B, S, O]] =\n"
      "  matmul(x, transpose(w, [1, 0]))\n"
      "public fn f [B, M, K, N](x: Tensor[F32, [B, M, K]], w: Tensor[F32, [N, K]]) -> Tensor[F32, [B, M, N]] =\n"
      "  linear(x, w)\n"
      "public fn g [B, M, K, N](x: Tensor[F32, [B, M, K]], w: Tensor[F32, [N, K]]) -> Tensor[F32, [B, M, N]] =\n"
      "  let y = linear(x, w)\n"
      "  y - broadcast(mean(y, axes=[2]), [B, M, N], axes=[0, 1])\n";
  auto fe = compile_source("lin.tl", src);
  ASSERT_TRUE(fe.ok()) << fe.rendered();
  // The stage table speaks the caller's dimensions, so extents are known.
  auto st = stage_infos_for(fe.module, "f", {{"B", 2}, {"M", 64}, {"K", 32}, {"N", 48}});
  ASSERT_TRUE(st.ok());
  bool seen = false;
  for (const auto& s : *st) {
    if (s.name != "matmul0") continue;
    seen = true;
    EXPECT_EQ(s.extents, (std::vector<int64_t>{2, 64, 48}));
  }
  EXPECT_TRUE(seen);
  std::vector<DimEnv> shapes;
  for (DimEnv d : kOddShapes) {
    d["B"] = d.at("M") % 3 + 1;
    shapes.push_back(d);
  }
  auto in = [&](const DimEnv& d, std::mt19937& rng) {
    return std::vector<HostTensor>{random_tensor(DType::F32, {d.at("B"), d.at("M"), d.at("K")}, rng),
                                   random_tensor(DType::F32, {d.at("N"), d.at("K")}, rng)};
  };
  for (const char* fn : {"f", "g"}) {
    std::string one = src;  // check_gemm compiles fn `f`: rename the one under test
    if (std::string(fn) == "g") {
      one.replace(one.find("public fn f "), 12, "public fn h ");
      one.replace(one.find("public fn g "), 12, "public fn f ");
    }
    Knobs k = {{"matmul0", {{"at_output", 1}, {"result", 1}, {"pack", 1}, {"tm", 6}, {"tn", 4}}}};
    check_gemm(one, k, {{"B", 4}, {"M", 64}, {"K", 96}, {"N", 128}}, shapes, in, DType::F32, fn);
  }
}

}  // namespace
}  // namespace mlk
