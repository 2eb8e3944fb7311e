// The CPU elementwise rule: the output (the elementwise chain inlined into
// it) vectorised along its innermost axis and parallel, and matmul operands
// inline or materialised at root in the layout the matmul reads.
#include "scheduler/rules.h"
#include "scheduler/rules_attention.h"
#include "scheduler/rules_common.h"

namespace mlk {

namespace {

using namespace rules;

void schedule(const RuleContext& c, const StageInfo& s, const KnobValues& k, Schedule& sched) {
  if (s.pair_copy) return;  // its product's rule materialises it
  if (schedule_attention_member(c, s, sched)) return;
  std::vector<Directive>& ds = sched.stages[s.name];
  const int r = s.rank, lanes = c.lanes;
  if (s.kind == Kind::kOperand) {
    // mat = 1: materialised at root in the matmul's reading order (its own
    // innermost axis contiguous), vectorised and parallel; else inline.
    if (!k[Knob::kMat]) return;
    ds.push_back(D("compute_root"));
    ds.push_back(D("vectorize", {a(r - 1)}, {vector_clip(lanes, ext(s, r - 1))}));
    par_outer(r, -1, true, ds);
    return;
  }
  if (r == 0) return;
  int64_t vec = lanes * k[Knob::kVec];
  if (r == 1) {
    if (k[Knob::kPar]) {
      ds.push_back(D("split", {a(0), "po", "pi"}, {clip(16384, ext(s, 0))}));
      ds.push_back(D("parallel", {"po"}));
      ds.push_back(D("vectorize", {"pi"}, {vector_clip(vec, ext(s, 0))}));
    } else {
      ds.push_back(D("vectorize", {a(0)}, {vector_clip(vec, ext(s, 0))}));
    }
    return;
  }
  ds.push_back(D("vectorize", {a(r - 1)}, {vector_clip(vec, ext(s, r - 1))}));
  if (k[Knob::kPar]) {
    if (r >= 3 && k[Knob::kFuseOuter]) {
      ds.push_back(D("fuse", {a(1), a(0), "pf"}));
      ds.push_back(D("parallel", {"pf"}));
    } else {
      ds.push_back(D("parallel", {a(0)}));
    }
  }
}

// Whether `s` is the second operand (b) of a matmul: the GEMM seeds pack it
// per column panel, straight from the view, so a materialised copy is waste.
bool packed_b(const RuleContext& c, const StageInfo& s) {
  for (const StageInfo& m : c.stages)
    if (m.kind == Kind::kMatmul && m.operands.size() == 2 && m.operands[1] == s.name) return true;
  return false;
}

// Plan 0 materialises operands (but a packed b), plan 1 reads them inline;
// both widen the output's vectors.
std::vector<std::pair<Knob, int64_t>> seed(const RuleContext& c, const StageInfo& s, int plan) {
  return {{Knob::kMat, plan == 0 && !packed_b(c, s) ? 1 : 0}, {Knob::kVec, 2}};
}

}  // namespace

const Rule kCpuElementwiseRule = {
    "cpu elementwise", false, {StageInfo::Kind::kOutput, StageInfo::Kind::kOperand}, schedule, nullptr, seed};

}  // namespace mlk
