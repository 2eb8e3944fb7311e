// The default schedule: a reasonable floor, not a tuned result.
#include "scheduler/lower.h"

namespace mlk::lower {

void apply_default_schedule(Pipeline& p, const Halide::Target& target) {
  for (Stage& s : p.stages) {
    Halide::Func& f = s.func;
    const int rank = static_cast<int>(s.vars.size());
    if (s.kind != Stage::Kind::kOutput) f.compute_root();
    if (rank == 0) continue;
    const int vw = std::max(1, target.natural_vector_size(f.types()[0]));
    const Halide::Var& inner = s.vars.front();
    const Halide::Var& outer = s.vars.back();
    f.vectorize(inner, vw, Halide::TailStrategy::GuardWithIf);
    if (rank >= 2) f.parallel(outer);
    if (s.rvars.empty()) continue;
    // Updates: a matmul or a reduction along an outer axis keeps the
    // contiguous pure dimension innermost (vectorised); a reduction along the
    // innermost axis keeps its reduction loop innermost (sequential reads).
    Halide::Stage u = f.update();
    if (s.kind == Stage::Kind::kMatmul || !s.reduces_innermost) {
      std::vector<Halide::VarOrRVar> order = {inner};
      for (const auto& r : s.rvars) order.push_back(r);
      for (int i = 1; i < rank; ++i) order.push_back(s.vars[i]);
      u.reorder(order);
      u.vectorize(inner, vw, Halide::TailStrategy::GuardWithIf);
    }
    if (rank >= 2) u.parallel(outer);
  }
}

}  // namespace mlk::lower
