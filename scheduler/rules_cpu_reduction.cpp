// The CPU reduction rule: reductions and the parts of a softmax, at root
// (vectorised along their rows or across them, parallel) or fused into the
// output's row loop; row reductions optionally vectorised themselves
// (rfactor_vector), reductions with few rows in parallel chunks (rfactor_par).
#include <algorithm>

#include "scheduler/rules.h"
#include "scheduler/rules_attention.h"
#include "scheduler/rules_common.h"

namespace mlk {

namespace {

using namespace rules;

// A reduction the cores cannot share by its result's rows
// (spread_reduction; rules-14) in parallel chunks of its first reduction
// variable long enough for two chunks per core (else its longest), each
// chunk vectorised along the result's innermost axis, or for a scalar along
// the innermost reduced axis.
void spread(const RuleContext& c, const StageInfo& s, std::vector<Directive>& ds) {
  const int64_t cores = c.profile.cores > 0 ? c.profile.cores : 4;
  int pick = -1;
  for (int i = 0; i < s.rvars && pick < 0; ++i)
    if (s.rextents[i] >= 2 * cores) pick = i;
  if (pick < 0)
    for (int i = 0; i < s.rvars; ++i)
      if (pick < 0 || s.rextents[i] > s.rextents[pick]) pick = i;
  // Two tasks per core, fewer where the variable is shorter, more where a
  // chunk would exceed the largest factor a schedule takes.
  const int64_t e = std::max<int64_t>(s.rextents[pick], 1);
  const int64_t tasks = std::max<int64_t>(std::min<int64_t>(e, 2 * cores), (e + 65535) / 65536);
  const int64_t inner = s.rank >= 1 ? ext(s, s.rank - 1) : std::max<int64_t>(s.rextents.back(), 1);
  const int64_t lanes = vector_clip(c.lanes, inner);
  ds.push_back(D("rfactor_par", {"r" + std::to_string(pick), "u"}, {(e + tasks - 1) / tasks, lanes}));
}

void schedule(const RuleContext& c, const StageInfo& s, const KnobValues& k, Schedule& sched) {
  if (schedule_attention_member(c, s, sched)) return;
  std::vector<Directive>& ds = sched.stages[s.name];
  const StageInfo* out = c.output;
  const int r = s.rank, lanes = c.lanes;
  if (s.kind == Kind::kSoftmaxExp) {
    // 2: inlined, the exponentials are computed where their readers are
    // (always legal; twice for a softmax, in its sum and its output). 1: per
    // output row into a row buffer, computed once; inlined where the row
    // cannot be fused (rules-9; before: at root). 0: at root.
    int64_t mode = k[Knob::kFuse] == 0 ? 0 : k[Knob::kFuse] == 1 && row_fused(c, s) ? 1 : 2;
    if (mode == 2) {
      ds.push_back(D("compute_inline"));
      return;
    }
    if (mode == 1) ds.push_back(At("compute_at", "output", output_row_loop(c)));
    else ds.push_back(D("compute_root"));
    if (r >= 1) ds.push_back(D("vectorize", {a(r - 1)}, {vector_clip(lanes, ext(s, r - 1))}));
    if (mode == 0 && r >= 2) par_outer(r, -1, true, ds);
    return;
  }
  // A reduction along the innermost axis, vectorised by reducing `lanes`
  // partial results side by side (a sum to a scalar that spreads across the
  // cores is vectorised by rfactor_par instead).
  const bool spreads = k[Knob::kRfactor] == 1 && spread_reduction(s);
  bool vred = s.reduces_innermost && s.rvars == 1 && k[Knob::kVred] && !spreads;
  if (k[Knob::kFuse] && row_fused(c, s)) {
    ds.push_back(At("compute_at", "output", output_row_loop(c)));
    if (vred) ds.push_back(D("rfactor_vector", {"r0", "u"}, {lanes}));
    return;
  }
  if (vred) {
    ds.push_back(D("compute_root"));
    if (r >= 2) par_outer(r, -1, true, ds);
    ds.push_back(D("rfactor_vector", {"r0", "u"}, {lanes}));
    // The update, which does the work, is parallel too, over the same outer
    // axes (at rank 2 only a0: fusing in a1 would remove the loop that
    // rfactor_vector computes the partial sums at).
    if (r >= 1) par_outer(r, 0, true, ds);
    return;
  }
  ds.push_back(D("compute_root"));
  if (r >= 1) ds.push_back(D("vectorize", {a(r - 1)}, {vector_clip(lanes, ext(s, r - 1))}));
  if (spreads) return spread(c, s, ds);
  if (r == 0) return;
  if (r >= 2) par_outer(r, -1, true, ds);
  if (!s.reduces_innermost) {
    // The input in memory order: the last reduction variable (the input's
    // innermost reduced axis) innermost but for the result's own.
    std::vector<std::string> order = {a(r - 1)};
    for (int i = s.rvars - 1; i >= 0; --i) order.push_back("r" + std::to_string(i));
    for (int i = r - 2; i >= 0; --i) order.push_back(a(i));
    ds.push_back(D("reorder", order, {}, 0));
    ds.push_back(D("vectorize", {a(r - 1)}, {vector_clip(lanes, ext(s, r - 1))}, 0));
  }
  if (r >= 2) par_outer(r, 0, true, ds);
}

// Both seed plans fuse rows (a softmax's exponentials into a row buffer
// where the row fuses), vectorise row reductions and spread reductions
// with few rows across the cores.
std::vector<std::pair<Knob, int64_t>> seed(const RuleContext&, const StageInfo&, int) {
  return {{Knob::kFuse, 1}, {Knob::kVred, 1}, {Knob::kRfactor, 1}};
}

}  // namespace

const Rule kCpuReductionRule = {"cpu reduction",
                                false,
                                {StageInfo::Kind::kReduction, StageInfo::Kind::kSoftmaxMax, StageInfo::Kind::kSoftmaxExp,
                                 StageInfo::Kind::kSoftmaxSum},
                                schedule,
                                nullptr,
                                seed};

}  // namespace mlk
