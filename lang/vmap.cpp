// vmap (see vmap.h): every node rebuilt by its op's batching rule
// (lang/batch_rules.h) once any operand carries the batch axis; values that do
// not depend on a mapped parameter are shared unchanged.
#include "lang/vmap.h"

#include <map>

#include "lang/batch_rules.h"
#include "lang/ir_build.h"

namespace mlk {
namespace {

class Vmap {
 public:
  Vmap(const std::vector<ir::Param>& params, const std::vector<std::optional<int64_t>>& in_axes, const Dim& b)
      : params_(params), in_axes_(in_axes), b_(b) {}

  vm::BVal value(const ir::NodeRef& n) {
    auto it = memo_.find(n.get());
    if (it != memo_.end()) return it->second;
    vm::BVal out;
    if (n->op == ir::Op::kParam) {
      out = param(n->index);
    } else {
      std::vector<vm::BVal> ops;
      bool any = false;
      for (const auto& o : n->operands) {
        ops.push_back(value(o));
        any = any || ops.back().batched;
      }
      if (!any) {
        out = {n, false};
      } else {
        out = {vm::batch_rule(n->op)(n, ops, b_), true};
      }
    }
    return memo_[n.get()] = out;
  }

 private:
  vm::BVal param(int index) {
    ir::Node p;
    p.op = ir::Op::kParam;
    p.type = params_[index].type;
    p.index = index;
    ir::NodeRef node = ir::make(std::move(p));
    const auto& axis = in_axes_[index];
    if (!axis) return {node, false};
    std::vector<int64_t> perm = {*axis};
    for (int64_t k = 0; k < static_cast<int64_t>(node->type.shape.size()); ++k)
      if (k != *axis) perm.push_back(k);
    return {irb::transpose(node, perm), true};
  }

  const std::vector<ir::Param>& params_;
  const std::vector<std::optional<int64_t>>& in_axes_;
  Dim b_;
  std::map<const ir::Node*, vm::BVal> memo_;
};

}  // namespace

ir::NodeRef vmap_body(const ir::NodeRef& body, const std::vector<ir::Param>& params,
                      const std::vector<std::optional<int64_t>>& in_axes, int64_t out_axis, const Dim& batch) {
  Vmap v(params, in_axes, batch);
  ir::NodeRef r = vm::lifted(v.value(body), batch);
  std::vector<int64_t> perm;
  for (int64_t k = 0; k < static_cast<int64_t>(r->type.shape.size()); ++k)
    perm.push_back(k < out_axis ? k + 1 : k == out_axis ? 0 : k);
  return irb::transpose(r, perm);
}

}  // namespace mlk
