// The GPU rule: every stage but the output at root, each definition mapped
// to blocks and threads with gpu_tile; a matmul optionally tiled with its
// input tiles staged in shared memory. Operands stay inline.
#include "scheduler/rules.h"
#include "scheduler/rules_common.h"

namespace mlk {

namespace {

using namespace rules;

void schedule(const RuleContext&, const StageInfo& s, const KnobValues& k, Schedule& sched) {
  std::vector<Directive>& ds = sched.stages[s.name];
  const int r = s.rank;
  if (s.kind != Kind::kOutput) ds.push_back(D("compute_root"));
  if (s.kind == Kind::kMatmul && r >= 2 && k[Knob::kSmem] && !s.direct_inputs.empty()) {
    // Block tiles of the output, the k loop split into tiles whose slices of
    // the inputs are staged in shared memory per block.
    int64_t t = k[Knob::kTile];
    ds.push_back(D("gpu_tile", {a(r - 1), a(r - 2), "bx", "by", "tx", "ty"}, {t, t}));
    ds.push_back(D("gpu_tile", {a(r - 1), a(r - 2), "bx", "by", "tx", "ty"}, {t, t}, 0));
    ds.push_back(D("split", {"r0", "ko", "ki"}, {t}, 0));
    std::vector<std::string> order = {"ki", "tx", "ty", "ko", "bx", "by"};
    for (int i = r - 3; i >= 0; --i) order.push_back(a(i));
    ds.push_back(D("reorder", order, {}, 0));
    for (const auto& in : s.direct_inputs) ds.push_back(At("stage_shared", in, "ko"));
    return;
  }
  int defs = s.rvars > 0 ? 2 : 1;  // the pure definition and the update
  for (int u = -1; u < defs - 1; ++u) {
    if (r == 0) {
      ds.push_back(D("gpu_single_thread", {}, {}, u));
    } else if (r == 1) {
      ds.push_back(D("gpu_tile", {a(0), "bx", "tx"}, {k[Knob::kTx] * k[Knob::kTy]}, u));
    } else {
      ds.push_back(D("gpu_tile", {a(r - 1), a(r - 2), "bx", "by", "tx", "ty"}, {k[Knob::kTx], k[Knob::kTy]}, u));
    }
  }
}

}  // namespace

const Rule kGpuRule = {"gpu",
                       true,
                       {StageInfo::Kind::kReduction, StageInfo::Kind::kMatmul, StageInfo::Kind::kSoftmaxMax,
                        StageInfo::Kind::kSoftmaxExp, StageInfo::Kind::kSoftmaxSum, StageInfo::Kind::kOutput},
                       schedule};

}  // namespace mlk
