// The directive registry's one table (see directives.h; the meaning of each
// directive is documented in docs/schedules.md, "Directives").
#include "scheduler/directives.h"

namespace mlk {

namespace {

using R = VarRole;

DirectiveForm form(std::vector<VarRole> vars, int min_factors = 0, int max_factors = -1) {
  return {std::move(vars), false, min_factors, max_factors < 0 ? min_factors : max_factors};
}

DirectiveForm variadic() { return {{}, true, 0, 0}; }

// `n` stages placed by the directive, for n in [lo, hi], each with `factors` factors.
std::vector<DirectiveForm> stage_forms(int lo, int hi, int factors) {
  std::vector<DirectiveForm> forms;
  for (int n = lo; n <= hi; ++n) forms.push_back(form(std::vector<VarRole>(n, VarRole::kStage), factors));
  return forms;
}

}  // namespace

const std::vector<DirectiveKind>& directive_kinds() {
  static const std::vector<DirectiveKind> kinds = {
      {"split", {form({R::kRead, R::kNew, R::kNew}, 1)}, AtRole::kNone, false, false, apply::split},
      // A third factor (1) asks for full tiles: see apply::tile.
      {"tile", {form({R::kRead, R::kRead, R::kNew, R::kNew, R::kNew, R::kNew}, 2, 3)}, AtRole::kNone, false, false,
       apply::tile},
      {"fuse", {form({R::kRead, R::kRead, R::kNew})}, AtRole::kNone, false, false, apply::fuse},
      {"reorder", {variadic()}, AtRole::kNone, false, false, apply::reorder},
      {"vectorize", {form({R::kRead}, 0, 1)}, AtRole::kNone, false, false, apply::vectorize},
      {"unroll", {form({R::kRead}, 0, 1)}, AtRole::kNone, false, false, apply::unroll},
      {"parallel", {form({R::kRead})}, AtRole::kNone, false, false, apply::parallel},
      {"compute_root", {form({})}, AtRole::kNone, false, false, apply::compute_root},
      {"compute_inline", {form({})}, AtRole::kNone, false, false, apply::compute_inline},
      {"store_root", {form({})}, AtRole::kNone, false, false, apply::store_root},
      {"compute_at", {form({})}, AtRole::kStageLoop, false, true, apply::compute_at},
      {"store_at", {form({})}, AtRole::kStageLoop, false, true, apply::store_at},
      {"rfactor", {form({R::kReduction, R::kName}, 1)}, AtRole::kNone, false, false, apply::rfactor},
      {"rfactor_vector", {form({R::kReduction, R::kName}, 1)}, AtRole::kNone, false, false, apply::rfactor_vector},
      // A reduction in parallel chunks of a reduction variable, vectorised (apply::rfactor_par).
      {"rfactor_par", {form({R::kReduction, R::kName}, 2)}, AtRole::kNone, false, false, apply::rfactor_par},
      // An update computed atomically, so that a reduction variable may be vectorised (a dot product).
      {"atomic", {form({})}, AtRole::kNone, false, false, apply::atomic},
      {"gpu_blocks", {variadic()}, AtRole::kNone, true, false, apply::gpu_blocks},
      {"gpu_threads", {variadic()}, AtRole::kNone, true, false, apply::gpu_threads},
      {"gpu_single_thread", {form({})}, AtRole::kNone, true, false, apply::gpu_single_thread},
      {"gpu_tile",
       {form({R::kRead, R::kNew, R::kNew}, 1), form({R::kRead, R::kRead, R::kNew, R::kNew, R::kNew, R::kNew}, 2)},
       AtRole::kNone, true, false, apply::gpu_tile},
      {"stage_shared", {form({})}, AtRole::kInputShared, true, true, apply::stage_shared},
      {"pack", {form({R::kOperand}, 0, 1)}, AtRole::kStageLoop, false, true, apply::pack},
      // A matmul's result materialised in full register tiles (apply::result_tiles).
      {"result_tiles", {form({}, 3), form({R::kOperand}, 3)}, AtRole::kNone, false, false, apply::result_tiles},
      // A product of BF16 operands in AMX tiles (apply::amx_tiles).
      {"amx_tiles", {form({R::kOperand}, 1)}, AtRole::kNone, false, false, apply::amx_tiles},
      // The product with V of an attention chain, the chain per block of rows (apply::attention_tiles).
      {"attention_tiles", stage_forms(2, 8, 6), AtRole::kNone, false, false, apply::attention_tiles},
  };
  return kinds;
}

const DirectiveKind* find_directive(std::string_view op) {
  for (const auto& k : directive_kinds())
    if (k.op == op) return &k;
  return nullptr;
}

}  // namespace mlk
