// Reverse-mode autodiff (see grad.h). A node is active when it has a float
// dtype and depends on a `wrt` parameter; cotangents flow from the result
// back through active nodes only, in reverse topological order, each
// operand's contributions summed. Bool and integer values (comparisons,
// `where` conditions, indices) are constants of the derivative.
#include "lang/grad.h"

#include <map>
#include <set>

#include "lang/ir_build.h"
#include "lang/vjp_rules.h"

namespace mlk {
namespace {

void topo(const ir::NodeRef& n, std::set<const ir::Node*>& seen, std::vector<ir::NodeRef>& order) {
  if (!seen.insert(n.get()).second) return;
  for (const auto& o : n->operands) topo(o, seen, order);
  order.push_back(n);
}

void accumulate(std::map<const ir::Node*, ir::NodeRef>& ct, const ir::Node* n, const ir::NodeRef& c) {
  auto it = ct.find(n);
  if (it == ct.end()) ct[n] = c;
  else it->second = irb::add(it->second, c);
}

}  // namespace

GradResult grad_body(const ir::NodeRef& body, const std::vector<ir::Param>& params, const std::vector<int>& wrt,
                     const Facts& facts, const ir::NodeRef& seed) {
  std::set<int> wanted(wrt.begin(), wrt.end());
  std::vector<ir::NodeRef> order;
  std::set<const ir::Node*> seen;
  topo(body, seen, order);
  std::set<const ir::Node*> active;
  GradResult out;
  for (const auto& n : order) {
    bool depends = n->op == ir::Op::kParam && wanted.count(n->index);
    for (const auto& o : n->operands) depends = depends || active.count(o.get());
    if (!depends) continue;
    if (is_float(n->type.dtype)) {
      active.insert(n.get());
    } else if (n->op == ir::Op::kCast && out.why.empty()) {
      out.not_differentiable = n;
      out.why = std::string("it turns a value that depends on a `wrt` parameter into ") + dtype_name(n->type.dtype) +
                ", whose derivative is zero almost everywhere";
    }
  }
  if (out.not_differentiable) return out;
  std::map<const ir::Node*, ir::NodeRef> ct;
  std::map<int, ir::NodeRef> param_ct;
  if (active.count(body.get())) ct[body.get()] = seed ? seed : irb::lit(body->type, "1");
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const ir::NodeRef& n = *it;
    auto c = ct.find(n.get());
    if (c == ct.end() || !active.count(n.get())) continue;
    if (n->op == ir::Op::kParam) {
      auto p = param_ct.find(n->index);
      param_ct[n->index] = p == param_ct.end() ? c->second : irb::add(p->second, c->second);
      continue;
    }
    ad::Vjp v = ad::vjp_rule(n->op)(n, c->second, facts);
    if (!v.not_differentiable.empty()) {
      out.not_differentiable = n;
      out.why = v.not_differentiable;
      return out;
    }
    for (size_t i = 0; i < n->operands.size(); ++i)
      if (v.cts[i] && active.count(n->operands[i].get())) accumulate(ct, n->operands[i].get(), v.cts[i]);
  }
  for (int w : wrt) {
    auto p = param_ct.find(w);
    out.cotangents.push_back(p != param_ct.end() ? p->second : irb::zeros(params[w].type));
  }
  return out;
}

}  // namespace mlk
