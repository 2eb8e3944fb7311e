// The GPU cost model (autotune/gpu_cost_model.h): the occupancy calculation
// against hand-computed values, distinct and sensibly ordered estimates for
// real GEMM 4096^3 candidates assembled by ptxas, bytes by dtype, and a CUDA
// tuning run here that says it did not measure.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "autotune/gpu_cost_model.h"
#include "autotune/tuner.h"
#include "scheduler/kernel.h"
#include "artifact/build.h"
#include "targets/detect.h"
#include "targets/toolchain.h"
#include "tests/test_support.h"

namespace mlk::tune {
namespace {

Profile sm90() {
  auto p = find_profile("cuda_sm90");
  EXPECT_TRUE(p.ok());
  return p.ok() ? *p : Profile{};
}

TEST(GpuCostModel, OccupancyIsTheCudaCalculation) {
  const Profile p = sm90();  // 65536 registers, 233472 shared bytes per SM, 1024 threads per block
  // 256 threads, 32 registers: 8 blocks of 8 warps fill all 64 warp slots.
  EXPECT_DOUBLE_EQ(occupancy(256, 32, 0, p), 1.0);
  // 128 registers: 4096 per warp, 32768 per block: 2 blocks, 16 of 64 warps.
  EXPECT_DOUBLE_EQ(occupancy(256, 128, 0, p), 0.25);
  // 40000 shared bytes per block: 5 blocks, 40 warps.
  EXPECT_DOUBLE_EQ(occupancy(256, 32, 40000, p), 0.625);
  // 8 threads (one warp) per block: at most 32 blocks, so 32 of 64 warps.
  EXPECT_DOUBLE_EQ(occupancy(8, 16, 0, p), 0.5);
  // Blocks that cannot launch.
  EXPECT_EQ(occupancy(2048, 32, 0, p), 0);
  EXPECT_EQ(occupancy(256, 32, 49153, p), 0);
}

TEST(GpuCostModel, PtxasKernelsAreReadFromTheManifest) {
  auto k = ptxas_kernels(R"({"ptxas": {"kernels": [{"kernel": "kernel_f_s0", "registers": 40, "shared_bytes": 2048,
                             "spill_stores": 8, "spill_loads": 4}]}})");
  ASSERT_EQ(k.size(), 1u);
  EXPECT_EQ(k[0].name, "kernel_f_s0");
  EXPECT_EQ(k[0].registers, 40);
  EXPECT_EQ(k[0].shared_bytes, 2048);
  EXPECT_EQ(k[0].spill_bytes, 12);
  EXPECT_TRUE(ptxas_kernels(R"({"ptxas": {"status": "skipped: ptxas not found"}})").empty());
  EXPECT_TRUE(ptxas_kernels("not json").empty());
}

// The matmul stage's name in the stage table of `sgemm`.
std::string matmul_stage(const std::vector<StageInfo>& stages) {
  for (const auto& s : stages)
    if (s.kind == StageInfo::Kind::kMatmul) return s.name;
  return "";
}

TEST(GpuCostModel, DistinctGemmCandidatesGetDistinctSensiblyOrderedEstimates) {
  auto tk = find_cuda_toolkit();
  if (!tk || tk->ptxas.empty()) {
    if (std::getenv("MLK_NO_CUDA_TOOLKIT")) GTEST_SKIP() << "MLK_NO_CUDA_TOOLKIT is set: no ptxas report to read";
    FAIL() << "ptxas not found: install the CUDA toolkit, or set MLK_NO_CUDA_TOOLKIT=1";
  }
  const ir::Module m = testing_support::sgemm_module();
  const Profile p = sm90();
  const DimEnv dims{{"M", 4096}, {"K", 4096}, {"N", 4096}};
  auto stages = stage_infos_for(m, "sgemm", dims);
  ASSERT_TRUE(stages.ok()) << stages.status().message();
  const std::string mm = matmul_stage(*stages);
  ASSERT_FALSE(mm.empty());
  struct Candidate {
    std::string name;
    std::map<std::string, int64_t> knobs;
    double ms = 0;
  };
  std::vector<Candidate> cands = {{"smem tile 16", {{"smem", 1}, {"tile", 16}}},
                                  {"smem tile 8", {{"smem", 1}, {"tile", 8}}},
                                  {"no smem, 32x8 threads", {{"smem", 0}, {"tx", 32}, {"ty", 8}}},
                                  {"no smem, 8x1 threads", {{"smem", 0}, {"tx", 8}, {"ty", 1}}}};
  for (auto& c : cands) {
    Knobs k = default_knobs(*stages, p);
    for (const auto& [name, v] : c.knobs) k[mm][name] = v;
    const Schedule s = schedule_from_knobs(*stages, k, p);
    const std::string dir = testing_support::scratch_dir("mlk_gpu_cost_model_test", std::to_string(&c - cands.data()));
    auto built = build_artifact({&m, "sgemm", "", p, dims, s, dir});
    ASSERT_TRUE(built.ok()) << c.name << ": " << built.status().message();
    auto kernels = ptxas_kernels(built->manifest_json);
    ASSERT_FALSE(kernels.empty()) << c.name;
    for (const auto& kk : kernels) EXPECT_GT(kk.registers, 0) << c.name;
    c.ms = predict_gpu(*stages, k, p, 4, kernels).ms;
    EXPECT_GT(c.ms, 0) << c.name;
  }
  std::set<double> distinct;
  for (const auto& c : cands) distinct.insert(c.ms);
  EXPECT_EQ(distinct.size(), cands.size()) << "every candidate its own estimate";
  // Shared-memory tiles beat direct loads; a one-warp block (8 of 32 lanes
  // per warp) is the slowest; larger tiles reuse more.
  EXPECT_LT(cands[0].ms, cands[1].ms);
  EXPECT_LT(cands[1].ms, cands[2].ms);
  EXPECT_LT(cands[2].ms, cands[3].ms);
  // And 4096^3 on the CUDA cores is tens of milliseconds at the very least.
  EXPECT_GT(cands[0].ms, 1.0);
}

TEST(GpuCostModel, HalfTheBytesForF16MakeAMemoryBoundKernelFaster) {
  const ir::Module m = testing_support::load_example("norms.tl");
  const Profile p = sm90();
  auto stages = stage_infos_for(m, "rmsnorm", {{"B", 8}, {"S", 4096}, {"D", 4096}});
  ASSERT_TRUE(stages.ok()) << stages.status().message();
  const Knobs k = default_knobs(*stages, p);
  const std::vector<PtxasKernel> kernels = {{"", 32, 0, 0}};
  const double f32 = predict_gpu(*stages, k, p, 4, kernels).ms, f16 = predict_gpu(*stages, k, p, 2, kernels).ms;
  EXPECT_LT(f16, f32);
  EXPECT_GT(f16, 0.5 * f32 * 0.9);  // memory-bound: about half, launches aside
  // Register pressure that halves occupancy below the latency-hiding point costs time.
  const std::vector<PtxasKernel> heavy = {{"", 255, 0, 0}};
  EXPECT_GT(predict_gpu(*stages, k, p, 4, heavy).ms, f32);
}

TEST(GpuCostModel, CudaTuningHereIsLabelledNotMeasuredAndRanksByEstimates) {
  if (!detect_cuda().devices.empty()) GTEST_SKIP() << "a CUDA device is present: tuning measures there";
  const ir::Module m = testing_support::sgemm_module();
  TuneOptions o;
  o.trials = 4;
  o.progress = false;
  auto r = tune_function(m, "sgemm", sm90(), {{"M", 512}, {"K", 512}, {"N", 512}}, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->measured);
  EXPECT_THAT(r->reference, ::testing::HasSubstr("ranked by the GPU cost model"));
  if (!detect_cuda().driver_loaded) EXPECT_THAT(r->reference, ::testing::HasSubstr("libcuda.so.1"));
  std::set<double> estimates;
  for (const auto& t : r->log)
    if (t.m.ok()) estimates.insert(t.m.median_ms);
  EXPECT_GE(estimates.size(), 2u) << "the candidates are told apart";
  EXPECT_EQ(r->best_ms, *estimates.begin());
}

}  // namespace
}  // namespace mlk::tune
