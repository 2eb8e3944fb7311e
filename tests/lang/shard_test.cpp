// `shard` without MPI: the plans the SPMD lowering makes (steps, collectives,
// per-shard types), and every plan of tests/transforms/shard_f64.tl run on a
// simulated mesh (the kernels through the reference interpreter, the
// collectives done here by hand) against the unsharded fn. Also the block
// helpers the per-rank runner uses (spmd/blocks.h).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "spmd/blocks.h"
#include "lang/frontend.h"
#include "lang/interpreter.h"

#ifndef MLK_SOURCE_DIR
#define MLK_SOURCE_DIR "."
#endif

namespace mlk {
namespace {

using K = ir::Collective::Kind;

const ir::Module& module() {
  static const ir::Module m = [] {
    auto fe = compile_file(std::string(MLK_SOURCE_DIR) + "/tests/transforms/shard_f64.tl");
    EXPECT_TRUE(fe.ok());
    if (!fe.ok()) return ir::Module{};
    EXPECT_TRUE(fe->ok()) << fe->rendered();
    return fe->module;
  }();
  return m;
}

const DimEnv kAll = {{"M", 8}, {"K", 12}, {"N", 8}, {"D", 6}, {"C", 5}, {"V", 7}};

// kAll restricted to the dimensions of `fn` (the interpreter refuses others).
DimEnv dims_of(const ir::Module& m, const std::string& fn) {
  DimEnv out;
  for (const auto& d : m.find(fn)->dim_vars) out[d] = kAll.at(d);
  return out;
}

std::vector<HostTensor> inputs_for(const ir::Function& fn, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<HostTensor> out;
  for (const auto& p : fn.params) {
    auto shape = concrete_shape(p.type.shape, kAll);
    EXPECT_TRUE(shape.ok());
    HostTensor t(p.type.dtype, *shape);
    int64_t bound = p.name == "labels" ? kAll.at("C") : kAll.at("V");
    for (int64_t i = 0; i < t.numel(); ++i) t.set(i, is_float(p.type.dtype) ? u(rng) : static_cast<double>(rng() % bound));
    out.push_back(std::move(t));
  }
  return out;
}

// Collective `c` across the simulated ranks' values `v` (indexed by rank).
void apply(const ir::ShardPlan& p, const ir::Collective& c, std::vector<HostTensor>& v) {
  if (c.kind == K::kNone) return;
  int64_t n = p.ranks();
  std::vector<std::vector<int64_t>> coords;
  for (int64_t r = 0; r < n; ++r) coords.push_back(spmd::mesh_coords(p.mesh, r));
  std::vector<HostTensor> next = v;
  for (int64_t r = 0; r < n; ++r) {
    std::vector<int64_t> group;  // ranks agreeing with r off c.axes, in row-major order along them
    for (int64_t s = 0; s < n; ++s) {
      bool same = true;
      for (size_t k = 0; k < p.mesh.size(); ++k)
        if (!std::count(c.axes.begin(), c.axes.end(), static_cast<int>(k))) same = same && coords[s][k] == coords[r][k];
      if (same) group.push_back(s);
    }
    if (c.kind == K::kAllGather) {
      std::vector<HostTensor> blocks;
      for (int64_t s : group) blocks.push_back(v[s]);
      next[r] = spmd::concat_blocks(blocks, c.dim);
      continue;
    }
    for (int64_t i = 0; i < v[r].numel(); ++i) {
      double acc = v[group[0]].get(i);
      for (size_t g = 1; g < group.size(); ++g) {
        double x = v[group[g]].get(i);
        acc = c.kind == K::kAllReduceSum ? acc + x : c.kind == K::kAllReduceMax ? std::max(acc, x) : std::min(acc, x);
      }
      next[r].set(i, acc);
    }
  }
  v = next;
}

// The plan of `fn` on a simulated mesh; every rank's assembled result.
std::vector<HostTensor> simulate(const ir::Module& m, const ir::ShardPlan& p, const std::vector<HostTensor>& in) {
  int64_t n = p.ranks();
  std::vector<std::vector<HostTensor>> args(n);
  for (int64_t r = 0; r < n; ++r)
    for (size_t j = 0; j < in.size(); ++j)
      args[r].push_back(spmd::local_block(in[j], p.param_layout[j], p.mesh, spmd::mesh_coords(p.mesh, r)));
  std::vector<HostTensor> out(n);
  for (const auto& step : p.steps) {
    for (int64_t r = 0; r < n; ++r) {
      auto v = interpret(m, step.kernel, args[r], dims_of(m, step.kernel));
      EXPECT_TRUE(v.ok()) << step.kernel << ": " << v.status().message();
      if (!v.ok()) return {};
      out[r] = *v;
    }
    for (const auto& c : step.after) apply(p, c, out);
    for (int64_t r = 0; r < n; ++r) args[r].push_back(out[r]);
  }
  for (size_t d = 0; d < p.result_layout.size(); ++d)
    if (p.result_layout[d] >= 0) apply(p, {K::kAllGather, {p.result_layout[d]}, static_cast<int64_t>(d)}, out);
  return out;
}

TEST(Shard, EveryPlanOnASimulatedMeshMatchesTheUnshardedFn) {
  const ir::Module& m = module();
  ASSERT_GE(m.shards.size(), 10u);
  for (const auto& p : m.shards) {
    SCOPED_TRACE(p.fn);
    const ir::Function* f = m.find(p.fn);
    ASSERT_NE(f, nullptr);
    auto in = inputs_for(*f, 17);
    auto want = interpret(m, p.fn, in, dims_of(m, p.fn));
    ASSERT_TRUE(want.ok()) << want.status().message();
    auto got = simulate(m, p, in);
    ASSERT_EQ(got.size(), static_cast<size_t>(p.ranks()));
    for (int64_t r = 0; r < p.ranks(); ++r) {
      ASSERT_EQ(got[r].shape, want->shape) << "rank " << r;
      for (int64_t i = 0; i < want->numel(); ++i)
        ASSERT_NEAR(got[r].get(i), want->get(i), 1e-12 + 1e-12 * std::fabs(want->get(i))) << "rank " << r << " @" << i;
    }
  }
}

const ir::ShardPlan& plan(const std::string& fn) {
  const ir::ShardPlan* p = module().find_shard(fn);
  EXPECT_NE(p, nullptr) << fn;
  static const ir::ShardPlan none;
  return p ? *p : none;
}

std::vector<K> kinds(const ir::ShardPlan& p) {
  std::vector<K> out;
  for (const auto& s : p.steps)
    for (const auto& c : s.after) out.push_back(c.kind);
  return out;
}

TEST(Shard, PlansHaveTheCollectivesTheRulesRequire) {
  EXPECT_EQ(kinds(plan("mm_k")), std::vector<K>{K::kAllReduceSum});
  EXPECT_EQ(plan("mm_k").steps[0].why, "`matmul` contracting `K`, sharded over `x`");
  EXPECT_EQ(kinds(plan("mm_rows")), std::vector<K>{});
  EXPECT_EQ(plan("mm_rows").result_layout, (std::vector<int>{0, -1}));
  ASSERT_EQ(kinds(plan("mm_rows_gathered")), std::vector<K>{K::kAllGather});
  EXPECT_EQ(plan("mm_rows_gathered").steps[0].after[0].dim, 0);
  // Softmax along the sharded axis, its result replicated: max, sum, then gather.
  EXPECT_EQ(kinds(plan("sm")), (std::vector<K>{K::kAllReduceMax, K::kAllReduceSum, K::kAllGather}));
  EXPECT_EQ(plan("sm").steps.size(), 3u);
  EXPECT_EQ(kinds(plan("row_max")), std::vector<K>{K::kAllReduceMax});
  EXPECT_EQ(kinds(plan("mean_s")), std::vector<K>{K::kAllReduceSum});
  // A two-axis mesh: the contraction all-reduced over `k` only.
  const auto& p2 = plan("mm_2d");
  ASSERT_EQ(kinds(p2), std::vector<K>{K::kAllReduceSum});
  EXPECT_EQ(p2.steps[0].after[0].axes, std::vector<int>{1});
  EXPECT_EQ(p2.ranks(), 4);
}

TEST(Shard, KernelsAreOrdinaryFnsAtPerShardShapes) {
  const ir::Function* k = module().find("mm_k__step0");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->params[0].type.str(), "Tensor[F64, [M, K / 2]]");
  EXPECT_EQ(k->params[1].type.str(), "Tensor[F64, [K / 2, N]]");
  EXPECT_EQ(k->result_type.str(), "Tensor[F64, [M, N]]");
  const ir::Function* s1 = module().find("sm__step1");
  ASSERT_NE(s1, nullptr);
  ASSERT_EQ(s1->params.size(), 2u);  // the block, then the all-reduced maxima
  EXPECT_EQ(s1->params[1].type.str(), "Tensor[F64, [M]]");
  // The shard fn itself has the source's global signature.
  EXPECT_EQ(module().find("mm_k")->params[0].type.str(), "Tensor[F64, [M, K]]");
}

TEST(ShardBlocks, BlocksConcatenateBackAlongEachDimension) {
  HostTensor t(DType::F32, {4, 6});
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, static_cast<double>(i));
  for (int64_t dim : {0, 1}) {
    std::vector<HostTensor> blocks;
    for (int64_t b = 0; b < 2; ++b) blocks.push_back(spmd::block_of(t, dim, 2, b));
    EXPECT_EQ(blocks[1].shape, dim == 0 ? (std::vector<int64_t>{2, 6}) : (std::vector<int64_t>{4, 3}));
    EXPECT_EQ(blocks[1].get(0), dim == 0 ? 12.0 : 3.0);
    HostTensor back = spmd::concat_blocks(blocks, dim);
    EXPECT_EQ(back.shape, t.shape);
    EXPECT_EQ(back.bytes, t.bytes);
  }
  EXPECT_EQ(spmd::mesh_coords({{"r", 2}, {"k", 3}}, 5), (std::vector<int64_t>{1, 2}));
}

}  // namespace
}  // namespace mlk
