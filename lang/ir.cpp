#include "lang/ir.h"

#include <set>

#include "base/status.h"
#include "lang/ops.h"

namespace mlk::ir {

std::string Type::str() const {
  return std::string("Tensor[") + dtype_name(dtype) + ", " + shape_str(shape) + "]";
}

NodeRef make(Node n) {
  size_t want = op_info(n.op).arity;
  MLK_CHECK(want == kVariadic || n.operands.size() == want, "ir::make: wrong operand count");
  for (const auto& o : n.operands) MLK_CHECK(o != nullptr, "ir::make: null operand");
  for (const Dim& d : n.type.shape) MLK_CHECK(!d.overflowed(), "ir::make: overflowed dimension");
  if (n.op == Op::kCall) MLK_CHECK(!n.callee.empty(), "ir::make: call without callee");
  return std::make_shared<const Node>(std::move(n));
}

std::vector<std::string> Function::unbound_dims() const {
  std::set<std::string> bound;
  for (const Param& p : params)
    for (const Dim& d : p.type.shape)
      // Only a bare variable as an extent binds it at run time.
      if (d.terms().size() == 1 && d.terms()[0].coef == 1 && d.terms()[0].atoms.size() == 1 &&
          !d.terms()[0].atoms[0].quot)
        bound.insert(d.terms()[0].atoms[0].key);
  std::vector<std::string> out;
  for (const auto& v : dim_vars)
    if (!bound.count(v)) out.push_back(v);
  return out;
}

std::vector<Result> Function::results() const {
  std::vector<Result> r = {{result_type, body}};
  r.insert(r.end(), more_results.begin(), more_results.end());
  return r;
}

const Function* Module::find(const std::string& name) const {
  for (const auto& f : functions)
    if (f.name == name) return &f;
  return nullptr;
}

const ShardPlan* Module::find_shard(const std::string& name) const {
  for (const auto& p : shards)
    if (p.fn == name) return &p;
  return nullptr;
}

const char* collective_name(Collective::Kind k) {
  switch (k) {
    case Collective::Kind::kNone: return "none";
    case Collective::Kind::kAllReduceSum: return "all_reduce(sum)";
    case Collective::Kind::kAllReduceMax: return "all_reduce(max)";
    case Collective::Kind::kAllReduceMin: return "all_reduce(min)";
    case Collective::Kind::kAllGather: return "all_gather";
  }
  return "?";
}

}  // namespace mlk::ir
