// Helpers the rules share (see rules_common.h).
#include "scheduler/rules_common.h"

#include "scheduler/rules.h"

#include <algorithm>

namespace mlk::rules {

std::string a(int i) { return "a" + std::to_string(i); }

Directive D(std::string op, std::vector<std::string> vars, std::vector<int64_t> factors, int update) {
  Directive d;
  d.op = std::move(op);
  d.vars = std::move(vars);
  d.factors = std::move(factors);
  d.update = update;
  return d;
}

Directive At(std::string op, std::string stage, std::string var) {
  Directive d;
  d.op = std::move(op);
  d.at_stage = std::move(stage);
  d.at_var = std::move(var);
  return d;
}

int64_t clip(int64_t factor, int64_t extent) { return extent > 0 ? std::max<int64_t>(1, std::min(factor, extent)) : factor; }

int64_t vector_clip(int64_t lanes, int64_t extent) {
  const int64_t most = clip(lanes, extent);
  int64_t w = 1;
  while (w * 2 <= most) w *= 2;
  return w;
}

int64_t ext(const StageInfo& s, int i) { return i >= 0 && i < static_cast<int>(s.extents.size()) ? s.extents[i] : 0; }

const StageInfo* output_of(const std::vector<StageInfo>& stages) {
  for (const auto& s : stages)
    if (s.kind == Kind::kOutput) return &s;
  return nullptr;
}

bool is_reduction_like(Kind k) { return k == Kind::kReduction || k == Kind::kSoftmaxMax || k == Kind::kSoftmaxSum; }

bool matmul_at_output(const StageInfo& s, const StageInfo* out) {
  // Computed per output tile, the product exists nowhere else: only the
  // output may read it (a LayerNorm's reductions of it rule this out).
  if (!out || (!s.readers.empty() && s.readers != std::vector<std::string>{out->name})) return false;
  return s.kind == Kind::kMatmul && out->rank == s.rank && out->extents == s.extents && s.rank >= 2;
}

bool matmul_result_tiles(const StageInfo& s, const StageInfo* out) {
  return s.kind == Kind::kMatmul && s.rank >= 2 && s.rvars == 1 && !matmul_at_output(s, out);
}

KnobValues knob_values(const RuleContext& c, const StageInfo& s) {
  const std::map<std::string, int64_t>* set = nullptr;
  if (c.knobs) {
    auto it = c.knobs->find(s.name);
    if (it != c.knobs->end()) set = &it->second;
  }
  return KnobValues(set, s, c.profile);
}

std::string output_row_loop(const RuleContext& c) {
  const StageInfo& out = *c.output;
  KnobValues k = knob_values(c, out);
  if (out.rank == 3 && k[Knob::kPar] && k[Knob::kFuseOuter]) return "pf";
  return a(out.rank - 2);
}

bool row_shaped(const StageInfo& s, const StageInfo* out) {
  if (!out || out->rank < 2) return false;
  if (is_reduction_like(s.kind)) return s.reduces_innermost && s.rank == out->rank - 1;
  if (s.kind == Kind::kSoftmaxExp) return s.rank == out->rank;
  return false;
}

namespace {

const StageInfo* find_stage(const std::vector<StageInfo>& stages, const std::string& name) {
  for (const auto& s : stages)
    if (s.name == name) return &s;
  return nullptr;
}

// Every reader of `s` is the output or, when `fused` says so, a row-shaped
// stage whose readers are such in turn (the table is a DAG; depth bounds it).
template <typename Fused>
bool readers_in_row(const StageInfo& s, const StageInfo* out, const std::vector<StageInfo>& stages, Fused fused,
                    int depth = 0) {
  if (depth > 16) return false;
  for (const auto& r : s.readers) {
    if (out && r == out->name) continue;
    const StageInfo* rs = find_stage(stages, r);
    if (!rs || !row_shaped(*rs, out) || !fused(*rs) || !readers_in_row(*rs, out, stages, fused, depth + 1))
      return false;
  }
  return true;
}

}  // namespace

bool row_fusable_in(const StageInfo& s, const std::vector<StageInfo>& stages) {
  const StageInfo* out = output_of(stages);
  return row_shaped(s, out) && readers_in_row(s, out, stages, [](const StageInfo&) { return true; });
}

bool row_fused(const RuleContext& c, const StageInfo& s) {
  const StageInfo* out = c.output;
  // An output that a matmul computes per register tile (its owner) has no
  // row loop left: its loops are the tiles' (Halide refused compute_at at
  // a0 there, so `matmul(a, b) + broadcast(sum(a, ...))` fell back to the
  // naive schedule). Such a row stage stays at root.
  if (c.output_owner) return false;
  return row_shaped(s, out) &&
         readers_in_row(s, out, c.stages, [&](const StageInfo& r) { return knob_values(c, r)[Knob::kFuse] != 0; });
}

// The product per register tile (tn columns, tm rows): initialisation and
// update vectorised and unrolled, the k loop outside the tile. Factored
// unrolls: exact in full tiles, guarded in the small-shape case.
void register_tile(const StageInfo& mm, int64_t tn, int64_t tm, int lanes, std::vector<Directive>& mm_ds) {
  const int r = mm.rank;
  mm_ds.push_back(D("vectorize", {a(r - 1)}, {vector_clip(lanes, tn)}));
  mm_ds.push_back(D("unroll", {a(r - 2)}, {tm}));
  if (mm.pairs) {
    // The pair innermost and vectorised with the columns: each vector of
    // accumulators takes a dot product of lanes BF16 pairs.
    mm_ds.push_back(D("reorder", {"r0", a(r - 1), a(r - 2), "r1"}, {}, 0));
    mm_ds.push_back(D("atomic", {}, {}, 0));
    mm_ds.push_back(D("vectorize", {"r0"}, {}, 0));
  } else {
    mm_ds.push_back(D("reorder", {a(r - 1), a(r - 2), "r0"}, {}, 0));
  }
  mm_ds.push_back(D("vectorize", {a(r - 1)}, {vector_clip(lanes, tn)}, 0));
  mm_ds.push_back(D("unroll", {a(r - 1)}, {std::max<int64_t>(1, tn / vector_clip(lanes, tn))}, 0));
  mm_ds.push_back(D("unroll", {a(r - 2)}, {tm}, 0));
}

void par_outer(int r, int update, bool rank3, std::vector<Directive>& ds) {
  if (r >= 4 || (r == 3 && rank3)) {
    const std::string fused = update < 0 ? "pb" : "pbu";
    ds.push_back(D("fuse", {a(1), a(0), fused}, {}, update));
    ds.push_back(D("parallel", {fused}, {}, update));
  } else {
    ds.push_back(D("parallel", {a(0)}, {}, update));
  }
}

bool spread_reduction(const StageInfo& s) {
  if (s.kind != Kind::kReduction || s.rvars < 1 || (s.rank >= 1 && s.reduces_innermost)) return false;
  // Unknown extents (0) could hide many rows; a result row under 16 values
  // would put several tasks' partials in one cache line.
  if (std::count(s.extents.begin(), s.extents.end(), 0) > 0 || (s.rank >= 1 && s.extents.back() < 16)) return false;
  int64_t outer = 1, work = 1;
  for (int i = 0; i + 1 < s.rank; ++i) outer *= s.extents[i];
  for (int64_t e : s.extents) work *= e;
  for (int64_t e : s.rextents) work *= std::max<int64_t>(e, 1);
  return outer < 16 && work >= (1 << 15);
}

}  // namespace mlk::rules
