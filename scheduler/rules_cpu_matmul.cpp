// The CPU matmul rule: the product at root with a register-tiled update
// (optionally cache-blocked), or, with at_output, the classic Halide GEMM:
// the output tiled into register tiles and the product computed per tile.
#include "scheduler/rules.h"
#include "scheduler/rules_common.h"

namespace mlk {

namespace {

using namespace rules;

// Register-tiled GEMM: the output tiled into (tm rows) x (tn vectors); the
// product computed per tile with the k loop outside the unrolled tile, so
// the accumulators stay in registers.
void gemm_at_output(const StageInfo& mm, const KnobValues& k, int lanes, std::vector<Directive>& mm_ds,
                    std::vector<Directive>& out_ds) {
  const int r = mm.rank;
  int64_t tn = clip(lanes * k[Knob::kTn], ext(mm, r - 1)), tm = clip(k[Knob::kTm], ext(mm, r - 2));
  out_ds.push_back(D("tile", {a(r - 1), a(r - 2), "no", "mo", "ni", "mi"}, {tn, tm}));
  out_ds.push_back(D("vectorize", {"ni"}, {clip(lanes, tn)}));
  out_ds.push_back(D("unroll", {"mi"}));
  if (r > 2) {
    out_ds.push_back(D("fuse", {"mo", a(r - 3), "mf"}));
    out_ds.push_back(D("parallel", {"mf"}));
  } else {
    out_ds.push_back(D("parallel", {"mo"}));
  }
  mm_ds.push_back(At("compute_at", "output", "no"));
  mm_ds.push_back(D("vectorize", {a(r - 1)}, {clip(lanes, tn)}));
  mm_ds.push_back(D("unroll", {a(r - 2)}));
  mm_ds.push_back(D("reorder", {a(r - 1), a(r - 2), "r0"}, {}, 0));
  mm_ds.push_back(D("vectorize", {a(r - 1)}, {clip(lanes, tn)}, 0));
  mm_ds.push_back(D("unroll", {a(r - 1)}, {}, 0));
  mm_ds.push_back(D("unroll", {a(r - 2)}, {}, 0));
}

void schedule(const RuleContext& c, const StageInfo& s, const KnobValues& k, Schedule& out) {
  std::vector<Directive>& ds = out.stages[s.name];
  if (&s == c.output_owner) return gemm_at_output(s, k, c.lanes, ds, out.stages["output"]);
  const int r = s.rank, lanes = c.lanes;
  int64_t tn = clip(lanes * k[Knob::kTn], ext(s, r - 1)), tm = clip(k[Knob::kTm], ext(s, r - 2));
  ds.push_back(D("compute_root"));
  ds.push_back(D("vectorize", {a(r - 1)}, {clip(lanes, ext(s, r - 1))}));
  par_outer(r, -1, false, ds);
  ds.push_back(D("tile", {a(r - 1), a(r - 2), "no", "mo", "ni", "mi"}, {tn, tm}, 0));
  // Cache blocking (kc > 0): the k loop split into blocks of kc, and the
  // rows into blocks of mc register tiles; per row block and k block, the
  // kc x (lanes * tn) slice of b stays in cache across the row block's
  // tiles, and the accumulators live in the result between k blocks.
  const int64_t kc = k[Knob::kKc], mc = k[Knob::kMc];
  std::vector<std::string> order;
  std::string par = r >= 4 ? "" : r > 2 ? a(0) : "mo";  // "": batch axes fused below
  if (kc > 0 && mc > 0) {
    ds.push_back(D("split", {"r0", "rko", "rki"}, {kc}, 0));
    ds.push_back(D("split", {"mo", "mco", "mt"}, {mc}, 0));
    order = {"ni", "mi", "rki", "mt", "no", "rko", "mco"};
    if (r == 2) par = "mco";
  } else {
    order = {"ni", "mi", "r0", "no", "mo"};
  }
  for (int i = r - 3; i >= 0; --i) order.push_back(a(i));
  ds.push_back(D("reorder", order, {}, 0));
  ds.push_back(D("vectorize", {"ni"}, {clip(lanes, tn)}, 0));
  if (k[Knob::kUnroll]) ds.push_back(D("unroll", {"mi"}, {}, 0));
  if (par.empty()) {
    ds.push_back(D("fuse", {a(1), a(0), "pbu"}, {}, 0));
    ds.push_back(D("parallel", {"pbu"}, {}, 0));
  } else {
    ds.push_back(D("parallel", {par}, {}, 0));
  }
}

bool owns_output(const RuleContext& c, const StageInfo& s, const KnobValues& k) {
  return matmul_at_output(s, c.output) && k[Knob::kAtOutput];
}

// Register tiles: lanes * tn columns by tm rows of accumulators, within the
// 32 (AVX-512) or 16 (AVX2) vector registers, per output tile. (Cache
// blocking, kc and mc, is left to the search: measured on the two-core EPYC
// it did not beat these at 512x4096x4096; docs/benchmarks.md.)
std::vector<std::pair<Knob, int64_t>> seed(const RuleContext& c, const StageInfo&, int plan) {
  const bool wide = c.lanes >= 16;
  const int64_t tm = wide ? (plan == 0 ? 8 : 6) : (plan == 0 ? 6 : 4);
  const int64_t tn = wide ? (plan == 0 ? 3 : 4) : (plan == 0 ? 2 : 3);
  return {{Knob::kAtOutput, 1}, {Knob::kTm, tm}, {Knob::kTn, tn}, {Knob::kKc, 0}, {Knob::kMc, 0}};
}

}  // namespace

const Rule kCpuMatmulRule = {"cpu matmul", false, {StageInfo::Kind::kMatmul}, schedule, owns_output, seed};

}  // namespace mlk
