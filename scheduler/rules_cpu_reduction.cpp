// The CPU reduction rule: reductions and the parts of a softmax, at root
// (vectorised along their rows or across them, parallel) or fused into the
// output's row loop; row reductions optionally vectorised themselves
// (rfactor_vector), full reductions optionally rfactored.
#include "scheduler/rules.h"
#include "scheduler/rules_attention.h"
#include "scheduler/rules_common.h"

namespace mlk {

namespace {

using namespace rules;

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
  // partial results side by side.
  bool vred = s.reduces_innermost && s.rvars == 1 && k[Knob::kVred];
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
  if (r == 0) {
    int64_t rf = k[Knob::kRfactor];
    if (rf > 0 && s.rvars == 1) ds.push_back(D("rfactor", {"r0", "u"}, {rf}));
    return;
  }
  ds.push_back(D("vectorize", {a(r - 1)}, {vector_clip(lanes, ext(s, r - 1))}));
  if (r >= 2) par_outer(r, -1, true, ds);
  if (!s.reduces_innermost) {
    std::vector<std::string> order = {a(r - 1)};
    for (int i = 0; i < s.rvars; ++i) order.push_back("r" + std::to_string(i));
    for (int i = r - 2; i >= 0; --i) order.push_back(a(i));
    ds.push_back(D("reorder", order, {}, 0));
    ds.push_back(D("vectorize", {a(r - 1)}, {vector_clip(lanes, ext(s, r - 1))}, 0));
  }
  if (r >= 2) par_outer(r, 0, true, ds);
}

// Both seed plans fuse rows (a softmax's exponentials into a row buffer
// where the row fuses) and vectorise row reductions.
std::vector<std::pair<Knob, int64_t>> seed(const RuleContext&, const StageInfo&, int) {
  return {{Knob::kFuse, 1}, {Knob::kVred, 1}};
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
