// Inlining of calls (see inline.h): one memoised rebuild per call instance.
#include "lang/inline.h"

namespace mlk {
namespace {

class Inliner {
 public:
  Inliner(const ir::Module& m, Provenance& prov) : m_(m), prov_(prov) {}

  // Rebuilds `n` under `dims` (callee variable -> caller Dim) and `args`
  // (parameter index -> caller node); `memo` is per call instance.
  std::optional<ir::NodeRef> rebuild(const ir::NodeRef& n, const std::map<std::string, Dim>& dims,
                                     const std::vector<ir::NodeRef>* args,
                                     std::map<const ir::Node*, ir::NodeRef>& memo, int depth) {
    auto it = memo.find(n.get());
    if (it != memo.end()) return it->second;
    if (n->op == ir::Op::kParam && args) return memo[n.get()] = (*args)[n->index];
    std::vector<ir::NodeRef> ops;
    for (const auto& o : n->operands) {
      auto r = rebuild(o, dims, args, memo, depth);
      if (!r) return std::nullopt;
      ops.push_back(*r);
    }
    ir::NodeRef out;
    if (n->op == ir::Op::kCall) {
      const ir::Function* callee = m_.find(n->callee);
      if (!callee || depth > 256) {
        missing_ = n->callee;
        return std::nullopt;
      }
      std::map<std::string, Dim> inner;
      for (size_t i = 0; i < callee->dim_vars.size(); ++i) inner[callee->dim_vars[i]] = n->dims[i].subst(dims);
      std::map<const ir::Node*, ir::NodeRef> callee_memo;
      auto r = rebuild(callee->body, inner, &ops, callee_memo, depth + 1);
      if (!r) return std::nullopt;
      out = *r;
    } else if (!args && dims.empty() && ops == n->operands) {
      out = n;  // the outermost body: nothing to substitute
    } else {
      ir::Node c = *n;
      c.operands = ops;
      for (Dim& d : c.type.shape) d = d.subst(dims);
      for (Dim& d : c.dims) d = d.subst(dims);
      out = ir::make(std::move(c));
      auto p = prov_.find(n);
      if (p != prov_.end()) prov_[out] = p->second;
    }
    return memo[n.get()] = out;
  }

  std::string missing_;

 private:
  const ir::Module& m_;
  Provenance& prov_;
};

}  // namespace

std::optional<ir::NodeRef> inline_calls(const ir::Module& m, const ir::Function& fn, Provenance& prov,
                                        std::string& missing) {
  Inliner in(m, prov);
  std::map<const ir::Node*, ir::NodeRef> memo;
  auto r = in.rebuild(fn.body, {}, nullptr, memo, 0);
  missing = in.missing_;
  return r;
}

std::optional<std::vector<ir::NodeRef>> inline_results(const ir::Module& m, const ir::Function& fn,
                                                        Provenance& prov, std::string& missing) {
  Inliner in(m, prov);
  std::map<const ir::Node*, ir::NodeRef> memo;
  std::vector<ir::NodeRef> out;
  for (const ir::Result& r : fn.results()) {
    auto b = in.rebuild(r.body, {}, nullptr, memo, 0);
    if (!b) {
      missing = in.missing_;
      return std::nullopt;
    }
    out.push_back(*b);
  }
  return out;
}

}  // namespace mlk
