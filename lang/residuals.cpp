// The vjp split (see residuals.h): a walk of the backward that stops at
// forward nodes, then a rebuild in which each kept forward node is a
// parameter.
#include "lang/residuals.h"

#include <map>
#include <set>

#include "base/status.h"

namespace mlk {
namespace {

bool kept(ir::Op op) {
  switch (op) {
    case ir::Op::kMatmul:
    case ir::Op::kSum:
    case ir::Op::kMean:
    case ir::Op::kReduceMax:
    case ir::Op::kReduceMin:
    case ir::Op::kSoftmax:
      return true;
    default:
      return false;
  }
}

void forward_nodes(const ir::NodeRef& n, std::set<const ir::Node*>& out, std::vector<ir::NodeRef>& order) {
  if (!out.insert(n.get()).second) return;
  for (const auto& o : n->operands) forward_nodes(o, out, order);
  order.push_back(n);
}

class Splitter {
 public:
  Splitter(const std::set<const ir::Node*>& fwd, int params) : fwd_(fwd), params_(params) {}

  // Pass 1: the forward nodes the backward under `n` reads and keeps.
  void collect(const ir::NodeRef& n) {
    if (!seen_.insert(n.get()).second) return;
    if (fwd_.count(n.get())) {
      if (n->op == ir::Op::kParam || n->op == ir::Op::kLiteral) return;
      if (kept(n->op)) {
        keep_.insert(n.get());
        return;
      }
    }
    for (const auto& o : n->operands) collect(o);
  }

  // Pass 2: `n` for the backward fn: kept forward nodes and the seed become
  // parameters, the rest rebuilt over their rebuilt operands.
  ir::NodeRef rebuild(const ir::NodeRef& n) {
    auto it = memo_.find(n.get());
    if (it != memo_.end()) return it->second;
    ir::NodeRef out;
    auto r = residual_index_.find(n.get());
    if (r != residual_index_.end()) {
      out = param(n->type, params_ + r->second);
    } else if (n->op == ir::Op::kParam && !fwd_.count(n.get())) {
      // Autodiff makes no parameter node but the seed, one past the forward's.
      MLK_CHECK(n->index == params_, "vjp split: a parameter node that is not the seed");
      out = param(n->type, params_ + static_cast<int>(residual_index_.size()));
    } else {
      std::vector<ir::NodeRef> ops;
      for (const auto& o : n->operands) ops.push_back(rebuild(o));
      if (ops == n->operands) {
        out = n;
      } else {
        ir::Node c = *n;
        c.operands = std::move(ops);
        out = ir::make(std::move(c));
      }
    }
    return memo_[n.get()] = out;
  }

  static ir::NodeRef param(const ir::Type& t, int index) {
    ir::Node p;
    p.op = ir::Op::kParam;
    p.type = t;
    p.index = index;
    return ir::make(std::move(p));
  }

  const std::set<const ir::Node*>& keep() const { return keep_; }
  void number(const std::vector<ir::NodeRef>& residuals) {
    for (size_t i = 0; i < residuals.size(); ++i) residual_index_[residuals[i].get()] = static_cast<int>(i);
  }

 private:
  const std::set<const ir::Node*>& fwd_;
  int params_;
  std::set<const ir::Node*> seen_, keep_;
  std::map<const ir::Node*, int> residual_index_;
  std::map<const ir::Node*, ir::NodeRef> memo_;
};

}  // namespace

VjpSplit split_vjp(const ir::NodeRef& body, const std::vector<ir::NodeRef>& cotangents, int params) {
  std::set<const ir::Node*> fwd;
  std::vector<ir::NodeRef> order;
  forward_nodes(body, fwd, order);
  Splitter s(fwd, params);
  for (const auto& c : cotangents) s.collect(c);
  VjpSplit out;
  for (const auto& n : order)
    if (s.keep().count(n.get())) out.residuals.push_back(n);
  s.number(out.residuals);
  for (const auto& c : cotangents) out.cotangents.push_back(s.rebuild(c));
  return out;
}

}  // namespace mlk
