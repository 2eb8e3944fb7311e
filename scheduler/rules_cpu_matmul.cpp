// The CPU matmul rule: the product at root with a register-tiled update
// (optionally cache-blocked), or, with at_output, the classic Halide GEMM:
// the output tiled into register tiles and the product computed per tile.
#include "scheduler/rules.h"

#include <algorithm>

#include "scheduler/rules_attention.h"
#include "scheduler/rules_common.h"

namespace mlk {

namespace {

using namespace rules;

// Register-tiled GEMM: the output tiled into (tm rows) x (tn vectors), in
// full tiles where the shape allows (tiles shifted inwards at the edges, so
// the per-tile product has a constant size and lives in registers; small
// shapes fall back to guarded tiles); the product computed per tile with the
// k loop outside the unrolled tile. With `pack`, the column panels are the
// outer loop and b's panel (k x tn vectors, including a view such as a
// transposed weight) is copied once per panel into a contiguous buffer that
// every row tile of the panel then streams.
void gemm_at_output(const StageInfo& mm, const KnobValues& k, int lanes, int b_rank, std::vector<Directive>& mm_ds,
                    std::vector<Directive>& out_ds) {
  const int r = mm.rank;
  const bool pack = k[Knob::kPack] != 0 && mm.operands.size() == 2 && !mm.pairs;
  // A b shared by the whole batch (a weight) is packed once per column panel
  // for every batch element: the batch axes run inside the panel loop.
  const bool shared = pack && r > 2 && b_rank == 2;
  int64_t tn = clip(lanes * k[Knob::kTn], ext(mm, r - 1)), tm = clip(k[Knob::kTm], ext(mm, r - 2));
  out_ds.push_back(D("tile", {a(r - 1), a(r - 2), "no", "mo", "ni", "mi"}, {tn, tm, 1}));
  out_ds.push_back(D("vectorize", {"ni"}, {vector_clip(lanes, tn)}));
  out_ds.push_back(D("unroll", {"mi"}));
  // The parallel loop: row tiles, or with `pack` column panels (fused with
  // the batch axis, if any, unless b is shared).
  const std::string outer = pack ? "no" : "mo";
  if (pack) {
    std::vector<std::string> order = {"ni", "mi", "mo"};
    if (!shared) order.push_back("no");
    for (int i = r - 3; i >= 0; --i) order.push_back(a(i));
    if (shared) order.push_back("no");
    out_ds.push_back(D("reorder", order));
  }
  if (r > 2 && !shared) {
    out_ds.push_back(D("fuse", {outer, a(r - 3), "mf"}));
    out_ds.push_back(D("parallel", {"mf"}));
  } else {
    out_ds.push_back(D("parallel", {outer}));
  }
  mm_ds.push_back(At("compute_at", "output", pack ? "mo" : "no"));
  if (pack) {
    Directive p = At("pack", "output", r > 2 && !shared ? "mf" : "no");
    p.vars = {mm.operands[1]};
    p.factors = {vector_clip(lanes, tn)};
    mm_ds.push_back(p);
  }
  register_tile(mm, tn, tm, lanes, mm_ds);
}

// A matmul whose consumer is not the output tile by tile (an intermediate
// of a block, or one a LayerNorm reads): its result materialised through
// `result_tiles` (the same tiling, packing and register tile as above).
void gemm_result_tiles(const StageInfo& mm, const KnobValues& k, int lanes, std::vector<Directive>& mm_ds) {
  const int r = mm.rank;
  const bool pack = k[Knob::kPack] != 0 && mm.operands.size() == 2 && !mm.pairs;
  int64_t tn = clip(lanes * k[Knob::kTn], ext(mm, r - 1)), tm = clip(k[Knob::kTm], ext(mm, r - 2));
  Directive d = D("result_tiles", {}, {tn, tm, vector_clip(lanes, tn)});
  if (pack) d.vars = {mm.operands[1]};
  mm_ds.push_back(d);
  register_tile(mm, tn, tm, lanes, mm_ds);
}


// The pair copies a pair-form product reads (StageInfo::pairs), at root:
// a's rows vectorised along k, b's pairs along the pair and the columns
// (one vector of lanes * 2 BF16 values); parallel over the outer axis, for
// a over its two outer axes fused where it has three or more (its batch and
// rows: at batch 1 the batch axis alone left one core idle; par_outer). b's
// column axis is vectorised: fused with its outer axis it ran 1.5x slower.
void materialise_pair_copies(const RuleContext& c, const StageInfo& mm, Schedule& out, bool b_too = true) {
  for (size_t i = 0; i < (b_too ? mm.operands.size() : 1); ++i) {
    const StageInfo* o = nullptr;
    for (const StageInfo& x : c.stages)
      if (x.name == mm.operands[i]) o = &x;
    if (!o || !o->pair_copy) continue;
    std::vector<Directive>& ds = out.stages[o->name];
    if (!ds.empty()) continue;  // a copy several products read: scheduled by the first
    const int r = o->rank;
    ds.push_back(D("compute_root"));
    if (i == 0) {
      ds.push_back(D("vectorize", {a(r - 1)}, {vector_clip(2 * c.lanes, ext(*o, r - 1))}));
    } else {
      ds.push_back(D("vectorize", {a(r - 1)}, {2}));
      ds.push_back(D("vectorize", {a(r - 2)}, {vector_clip(c.lanes, ext(*o, r - 2))}));
    }
    if (i == 0) par_outer(r, -1, true, ds);
    else if (r >= 2) ds.push_back(D("parallel", {a(0)}));
  }
}

// A product lowered for AMX tiles (StageInfo::amx): the hardware's tile is
// the register tile, so its one knob is whether to use it (`amx`). In
// tiles: a's copy at root; b's pairs packed per column panel of the widest
// of 256, 192, ..., 16 columns that divides the columns (rounded up to 16)
// into whole panels, at least as many as the profile's cores where the
// columns allow (4 for a profile of any machine's cores; 16 columns when
// unknown). Without: both copies and the product at root.
void amx_tiles(const RuleContext& c, const StageInfo& s, const KnobValues& k, Schedule& out) {
  materialise_pair_copies(c, s, out, /*b_too=*/k[Knob::kAmx] == 0);
  if (k[Knob::kAmx] == 0) {
    std::vector<Directive>& ds = out.stages[s.name];
    ds.push_back(D("compute_root"));
    ds.push_back(D("vectorize", {a(s.rank - 1)}, {vector_clip(c.lanes, ext(s, s.rank - 1))}));
    return par_outer(s.rank, -1, false, ds);
  }
  const int64_t n = (ext(s, s.rank - 1) + 15) / 16 * 16, cores = c.profile.cores > 0 ? c.profile.cores : 4;
  int64_t panel = 16;
  for (int64_t p : {256, 192, 128, 96, 64, 48, 32, 16})
    if (n > 0 && n % p == 0 && (n / p >= cores || p == 16)) {
      panel = p;
      break;
    }
  Directive d = D("amx_tiles", {s.operands.at(1)}, {panel});
  out.stages[s.name].push_back(d);
}

void schedule(const RuleContext& c, const StageInfo& s, const KnobValues& k, Schedule& out) {
  if (k[Knob::kFlash] && ends_attention(s, c.stages)) return schedule_attention_owner(c, s, k, out);
  if (schedule_attention_member(c, s, out)) return;
  if (s.amx) return amx_tiles(c, s, k, out);
  if (s.pairs) materialise_pair_copies(c, s, out);
  std::vector<Directive>& ds = out.stages[s.name];
  int b_rank = 0;
  for (const StageInfo& o : c.stages)
    if (s.operands.size() == 2 && o.name == s.operands[1]) b_rank = o.rank;
  if (&s == c.output_owner) return gemm_at_output(s, k, c.lanes, b_rank, ds, out.stages["output"]);
  // A pair-form product always in result tiles: at root, its parallel
  // atomic update would be left to Halide's race analysis (atomic stores).
  if ((k[Knob::kResult] && matmul_result_tiles(s, c.output)) || s.pairs) return gemm_result_tiles(s, k, c.lanes, ds);
  // One of several products the output adds up (a gradient's terms) that
  // does not own the output's tiles: materialised in result tiles too
  // (rules-14; docs/schedules.md says what it replaced).
  if (k[Knob::kAtOutput] && c.output_owner && c.output_owner != &s && matmul_at_output(s, c.output))
    return gemm_result_tiles(s, k, c.lanes, ds);
  const int r = s.rank, lanes = c.lanes;
  int64_t tn = clip(lanes * k[Knob::kTn], ext(s, r - 1)), tm = clip(k[Knob::kTm], ext(s, r - 2));
  ds.push_back(D("compute_root"));
  ds.push_back(D("vectorize", {a(r - 1)}, {vector_clip(lanes, ext(s, r - 1))}));
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
  ds.push_back(D("vectorize", {"ni"}, {vector_clip(lanes, tn)}, 0));
  if (k[Knob::kUnroll]) ds.push_back(D("unroll", {"mi"}, {}, 0));
  if (par.empty()) {
    ds.push_back(D("fuse", {a(1), a(0), "pbu"}, {}, 0));
    ds.push_back(D("parallel", {"pbu"}, {}, 0));
  } else {
    ds.push_back(D("parallel", {par}, {}, 0));
  }
}

bool owns_output(const RuleContext& c, const StageInfo& s, const KnobValues& k) {
  return !s.amx && matmul_at_output(s, c.output) && k[Knob::kAtOutput] && !(k[Knob::kFlash] && ends_attention(s, c.stages));
}

// Register tiles derived from the machine: tm x tn accumulator vectors, tn
// vectors of b and one broadcast of a live at once within the vector
// registers (32 with AVX-512, 16 with AVX2), best first by FMAs per load
// (tm * tn / (tm + tn)); ties to the wider tile.
std::vector<std::pair<int64_t, int64_t>> register_tiles(int registers) {
  std::vector<std::pair<int64_t, int64_t>> tiles;  // (tm, tn)
  for (int64_t tn : knob_decl(Knob::kTn).choices(Kind::kMatmul))
    for (int64_t tm : knob_decl(Knob::kTm).choices(Kind::kMatmul))
      if (tm * tn + tn + 1 <= registers) tiles.push_back({tm, tn});
  auto score = [](const std::pair<int64_t, int64_t>& t) {
    return static_cast<double>(t.first * t.second) / static_cast<double>(t.first + t.second);
  };
  std::stable_sort(tiles.begin(), tiles.end(), [&](const auto& x, const auto& y) {
    return score(x) != score(y) ? score(x) > score(y) : x.second > y.second;
  });
  return tiles;
}

// Pack b when a column panel of it (k x tn vectors) would not stay in a
// quarter of the L2 cache next to a's rows, when b is a view (a transposed
// weight) that a tile would otherwise read with a stride, or when all of b
// is more than half the L2: unpacked, every row tile sweeps all of b, one
// row of k per page (a 1024 x 384 x 1536 product ran at 0.44x OpenBLAS so,
// 0.9x packed: docs/benchmarks.md, K25).
bool pack_pays(const RuleContext& c, const StageInfo& s, int64_t tn) {
  if (s.pairs || s.amx) return false;  // its b is already a pair copy
  if (s.operands.size() != 2 || s.rextents.empty()) return false;
  const bool view = std::find(s.direct_inputs.begin(), s.direct_inputs.end(), s.operands[1]) == s.direct_inputs.end();
  const int64_t panel = s.rextents[0] * c.lanes * tn * 4;
  const int64_t l2 = static_cast<int64_t>(c.profile.l2_kib > 0 ? c.profile.l2_kib : 1024) * 1024;
  const int64_t all_of_b = s.rextents[0] * ext(s, s.rank - 1) * 4;
  return view || panel > l2 / 4 || all_of_b > l2 / 2;
}

// Plan 0: the best register tile, plan 1 the second; both tile the result
// (at the output, or materialised) and pack where it pays. The product
// with V of an attention chain is fused with it in plan 0 only, so that
// the tuner measures both.
std::vector<std::pair<Knob, int64_t>> seed(const RuleContext& c, const StageInfo& s, int plan) {
  auto tiles = register_tiles(c.lanes >= 16 ? 32 : 16);
  // No wider than the columns (rounded up to vectors): a narrow product (an
  // attention head of 32) takes more rows instead.
  const int64_t n = ext(s, s.rank - 1);
  if (n > 0) {
    const int64_t most = std::max<int64_t>(1, (n + c.lanes - 1) / c.lanes);
    std::vector<std::pair<int64_t, int64_t>> fit;
    for (const auto& t : tiles)
      if (t.second <= most) fit.push_back(t);
    if (!fit.empty()) tiles = fit;
  }
  const auto [tm, tn] = tiles[std::min<size_t>(plan, tiles.size() - 1)];
  return {{Knob::kAtOutput, 1}, {Knob::kResult, 1}, {Knob::kTm, tm}, {Knob::kTn, tn},
          {Knob::kPack, pack_pays(c, s, tn) ? 1 : 0}, {Knob::kKc, 0}, {Knob::kMc, 0},
          {Knob::kFlash, plan == 0 ? 1 : 0}, {Knob::kAmx, 1}};
}

}  // namespace

const Rule kCpuMatmulRule = {"cpu matmul", false, {StageInfo::Kind::kMatmul}, schedule, owns_output, seed};

}  // namespace mlk
