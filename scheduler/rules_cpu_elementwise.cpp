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
    // innermost axis contiguous; a transposed `a` in its source's order),
    // vectorised and parallel; else inline.
    if (!k[Knob::kMat]) return;
    ds.push_back(D("compute_root"));
    if (s.transposed && r >= 2) {
      // A transposed `a` (rules-14) in square tiles of a vector's width,
      // vectorised along one side and unrolled along the other, so that
      // Halide reads and writes whole vectors and transposes in registers
      // (docs/schedules.md says what it replaced); parallel over the tile
      // rows, or over the batch axes as other operands are.
      const int64_t tx = vector_clip(lanes, ext(s, r - 1)), ty = vector_clip(lanes, ext(s, r - 2));
      ds.push_back(D("tile", {a(r - 1), a(r - 2), "to", "so", "ti", "si"}, {tx, ty}));
      ds.push_back(D("vectorize", {"ti"}));
      ds.push_back(D("unroll", {"si"}));
      if (r == 2) ds.push_back(D("parallel", {"so"}));
      else par_outer(r, -1, true, ds);
      return;
    }
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

// Whether `s` is only ever the second operand (b) of a matmul: the GEMM
// seeds pack it per column panel, straight from the view, so a materialised
// copy is waste. An operand that is also some product's `a` (a cotangent,
// read by dX = dY w^T as `a` and by dW = x^T dY as `b`) is materialised.
bool packed_b(const RuleContext& c, const StageInfo& s) {
  bool b = false;
  for (const StageInfo& m : c.stages) {
    if (m.kind != Kind::kMatmul || m.operands.empty()) continue;
    if (m.operands[0] == s.name) return false;
    b = b || (m.operands.size() == 2 && m.operands[1] == s.name);
  }
  return b;
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
