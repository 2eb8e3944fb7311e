// The per-op IR verifier (see ir_verify.h): one rule per VERIFY entry of
// lang/ops.def, dispatched by op. The rules check what holds for every node
// the checker builds, exactly: dtypes, ranks, attribute ranges, and extents
// where the result copies them from an operand. Extents the checker proved
// equal under refinements (binary operands, matmul's inner axis) are compared
// by rank only, since proving them needs the facts in scope.
#include "lang/ir_verify.h"

#include <algorithm>
#include <cstdio>
#include <unordered_set>
#include <vector>

#include "lang/ops.h"

namespace mlk::ir {
namespace {

using Rule = Status (*)(const Node&);

size_t rank(const NodeRef& n) { return n->type.shape.size(); }
size_t rank(const Node& n) { return n.type.shape.size(); }

Status bad(const Node& n, const std::string& what) {
  return Status::Internal(std::string("ir verifier: `") + op_name(n.op) + "` node of type " + n.type.str() + ": " + what);
}

// An `ints` entry that must be an axis of a rank-r value.
bool axis_ok(int64_t a, size_t r) { return a >= 0 && static_cast<size_t>(a) < r; }

Status one_axis(const Node& n, size_t r) {
  if (n.ints.size() != 1 || !axis_ok(n.ints[0], r)) return bad(n, "needs one axis in [0, " + std::to_string(r) + ")");
  return Status::Ok();
}

Status same_dtype(const Node& n, const NodeRef& o) {
  if (n.type.dtype != o->type.dtype)
    return bad(n, std::string("has dtype ") + dtype_name(n.type.dtype) + " but its operand " + dtype_name(o->type.dtype));
  return Status::Ok();
}

Status verify_param(const Node& n) {
  if (n.index < 0) return bad(n, "has a negative parameter index");
  return Status::Ok();
}

Status verify_literal(const Node& n) {
  if (n.literal.empty()) return bad(n, "has no literal text");
  return Status::Ok();
}

Status verify_same(const Node& n) {
  if (!(n.type == n.operands[0]->type)) return bad(n, "must have its operand's type " + n.operands[0]->type.str());
  return Status::Ok();
}

Status binary_operands(const Node& n) {
  const Type &a = n.operands[0]->type, &b = n.operands[1]->type;
  if (a.dtype != b.dtype || a.shape.size() != b.shape.size())
    return bad(n, "has operands of different dtype or rank: " + a.str() + " and " + b.str());
  if (n.type.shape != a.shape) return bad(n, "must have its first operand's shape " + shape_str(a.shape));
  return Status::Ok();
}

Status verify_binary(const Node& n) {
  MLK_RETURN_IF_ERROR(binary_operands(n));
  return same_dtype(n, n.operands[0]);
}

Status verify_compare(const Node& n) {
  MLK_RETURN_IF_ERROR(binary_operands(n));
  if (n.type.dtype != DType::Bool) return bad(n, "a comparison must be Bool");
  return Status::Ok();
}

Status verify_where(const Node& n) {
  const Type &c = n.operands[0]->type, &a = n.operands[1]->type, &b = n.operands[2]->type;
  if (c.dtype != DType::Bool) return bad(n, "needs a Bool condition, found " + c.str());
  if (a.dtype != b.dtype || a.shape.size() != b.shape.size() || c.shape.size() != a.shape.size())
    return bad(n, "has operands of different dtype or rank: " + c.str() + ", " + a.str() + ", " + b.str());
  if (!(n.type == a)) return bad(n, "must have its first branch's type " + a.str());
  return Status::Ok();
}

Status verify_cast(const Node& n) {
  if (n.type.shape != n.operands[0]->type.shape) return bad(n, "must keep its operand's shape");
  return Status::Ok();
}

Status verify_reduce(const Node& n) {
  const Type& in = n.operands[0]->type;
  MLK_RETURN_IF_ERROR(same_dtype(n, n.operands[0]));
  if (n.ints.empty()) return bad(n, "reduces no axis");
  Shape kept;
  for (size_t k = 0; k < n.ints.size(); ++k)
    if (!axis_ok(n.ints[k], in.shape.size()) || (k > 0 && n.ints[k] <= n.ints[k - 1]))
      return bad(n, "needs ascending distinct axes of its rank-" + std::to_string(in.shape.size()) + " operand");
  for (size_t ax = 0; ax < in.shape.size(); ++ax)
    if (!std::count(n.ints.begin(), n.ints.end(), static_cast<int64_t>(ax))) kept.push_back(in.shape[ax]);
  if (n.type.shape != kept) return bad(n, "must have the unreduced extents " + shape_str(kept));
  if (n.op == Op::kMean && !is_float(n.type.dtype)) return bad(n, "a mean must be of a float dtype");
  return Status::Ok();
}

Status verify_broadcast(const Node& n) {
  MLK_RETURN_IF_ERROR(same_dtype(n, n.operands[0]));
  if (n.ints.size() != rank(n.operands[0])) return bad(n, "needs one output axis per operand axis");
  for (size_t k = 0; k < n.ints.size(); ++k)
    if (!axis_ok(n.ints[k], rank(n)) || std::count(n.ints.begin(), n.ints.end(), n.ints[k]) != 1)
      return bad(n, "needs distinct output axes in [0, " + std::to_string(rank(n)) + ")");
  return Status::Ok();
}

Status verify_matmul(const Node& n) {
  const Type &a = n.operands[0]->type, &b = n.operands[1]->type;
  size_t ra = a.shape.size(), rb = b.shape.size();
  if (ra < 2 || rb < 2 || (rb > 2 && rb != ra) || a.dtype != b.dtype)
    return bad(n, "has operands " + a.str() + " and " + b.str() + ", which do not multiply");
  // A widening product (ir::Node): 16-bit float operands, an F32 result.
  const bool widening = n.type.dtype == DType::F32 && (a.dtype == DType::BF16 || a.dtype == DType::F16);
  if (!widening) MLK_RETURN_IF_ERROR(same_dtype(n, n.operands[0]));
  if (rank(n) != ra || n.type.shape[ra - 2] != a.shape[ra - 2] || n.type.shape[ra - 1] != b.shape[rb - 1])
    return bad(n, "must be [.., M, N] for operands " + a.str() + " and " + b.str());
  return Status::Ok();
}

Status verify_transpose(const Node& n) {
  const Shape& in = n.operands[0]->type.shape;
  MLK_RETURN_IF_ERROR(same_dtype(n, n.operands[0]));
  std::vector<int64_t> sorted = n.ints;
  std::sort(sorted.begin(), sorted.end());
  for (size_t k = 0; k < sorted.size(); ++k)
    if (sorted[k] != static_cast<int64_t>(k)) sorted.clear();
  if (sorted.size() != in.size() || rank(n) != in.size()) return bad(n, "needs a permutation of its operand's axes");
  for (size_t k = 0; k < in.size(); ++k)
    if (n.type.shape[k] != in[n.ints[k]]) return bad(n, "must have its operand's extents permuted");
  return Status::Ok();
}

Status verify_reshape(const Node& n) { return same_dtype(n, n.operands[0]); }

Status verify_softmax(const Node& n) {
  MLK_RETURN_IF_ERROR(verify_same(n));
  if (!is_float(n.type.dtype)) return bad(n, "must be of a float dtype");
  return one_axis(n, rank(n));
}

Status verify_gather(const Node& n) {
  const Type &t = n.operands[0]->type, &idx = n.operands[1]->type;
  MLK_RETURN_IF_ERROR(same_dtype(n, n.operands[0]));
  MLK_RETURN_IF_ERROR(one_axis(n, t.shape.size()));
  if (!is_integer(idx.dtype)) return bad(n, "needs an integer index operand, found " + idx.str());
  if (rank(n) != t.shape.size() - 1 + idx.shape.size()) return bad(n, "has the wrong rank for its operands");
  return Status::Ok();
}

Status along_axis(const Node& n, size_t dims) {
  MLK_RETURN_IF_ERROR(same_dtype(n, n.operands[0]));
  if (rank(n) != rank(n.operands[0])) return bad(n, "must keep its operand's rank");
  MLK_RETURN_IF_ERROR(one_axis(n, rank(n)));
  if (n.dims.size() != dims) return bad(n, "needs " + std::to_string(dims) + " dimension attribute(s)");
  for (size_t ax = 0; ax < rank(n); ++ax)
    if (static_cast<int64_t>(ax) != n.ints[0] && n.type.shape[ax] != n.operands[0]->type.shape[ax])
      return bad(n, "must keep its operand's extents off the axis");
  return Status::Ok();
}

Status verify_repeat(const Node& n) { return along_axis(n, 1); }

Status verify_slice(const Node& n) {
  MLK_RETURN_IF_ERROR(along_axis(n, 2));
  if (n.type.shape[n.ints[0]] != n.dims[1]) return bad(n, "must have the slice's length along its axis");
  return Status::Ok();
}

Status verify_concat(const Node& n) {
  if (n.operands.empty()) return bad(n, "concatenates nothing");
  for (const auto& o : n.operands) {
    MLK_RETURN_IF_ERROR(same_dtype(n, o));
    if (rank(o) != rank(n)) return bad(n, "has an operand of another rank: " + o->type.str());
  }
  return one_axis(n, rank(n));
}

Status verify_iota(const Node& n) {
  if (n.type.dtype == DType::Bool) return bad(n, "must be of a numeric dtype");
  return one_axis(n, rank(n));
}

Status verify_call(const Node& n) {
  if (n.callee.empty()) return bad(n, "names no callee");
  return Status::Ok();
}

// The rule of each op, by ir::Op.
constexpr Rule kRules[] = {
#define MLK_OP(ID, NAME, ARITY, CALL, RULE, VERIFY, ...) VERIFY,
#include "lang/ops.def"
#undef MLK_OP
};
static_assert(sizeof(kRules) / sizeof(kRules[0]) == kOpCount, "one verifier rule per op");

// What only the enclosing function and module can tell.
Status verify_in_context(const Module& m, const Function& f, const Node& n) {
  if (n.op == Op::kParam) {
    if (static_cast<size_t>(n.index) >= f.params.size() || !(f.params[n.index].type == n.type))
      return bad(n, "is not parameter " + std::to_string(n.index) + " of `" + f.name + "`");
  } else if (n.op == Op::kCall) {
    // A callee whose body had errors is left out of the module (its callers
    // are checked against its signature alone); nothing to compare then.
    const Function* g = m.find(n.callee);
    if (!g) return Status::Ok();
    if (!g->more_results.empty()) return bad(n, "calls `" + g->name + "`, which has several results");
    if (g->params.size() != n.operands.size() || g->dim_vars.size() != n.dims.size() ||
        g->result_type.dtype != n.type.dtype || g->result_type.shape.size() != rank(n))
      return bad(n, "does not match the signature of `" + g->name + "`");
    for (size_t k = 0; k < n.operands.size(); ++k)
      if (g->params[k].type.dtype != n.operands[k]->type.dtype || g->params[k].type.shape.size() != rank(n.operands[k]))
        return bad(n, "passes " + n.operands[k]->type.str() + " as parameter `" + g->params[k].name + "` of `" + g->name + "`");
  }
  return Status::Ok();
}

}  // namespace

Status verify_node(const Node& n) {
  if (static_cast<size_t>(n.op) >= kOpCount) return Status::Internal("ir verifier: a node of no op");
  const OpInfo& info = op_info(n.op);
  if (info.arity != kVariadic && n.operands.size() != info.arity)
    return bad(n, "has " + std::to_string(n.operands.size()) + " operand(s), but the op takes " + std::to_string(info.arity));
  for (const auto& o : n.operands)
    if (!o) return bad(n, "has a null operand");
  for (const Dim& d : n.type.shape)
    if (d.overflowed()) return bad(n, "has an overflowed extent");
  return kRules[static_cast<size_t>(n.op)](n);
}

Status verify_module(const Module& m) {
  for (const Function& f : m.functions) {
    std::unordered_set<const Node*> seen;
    std::vector<const Node*> todo;
    for (const Result& r : f.results()) {
      if (!r.body) return Status::Internal("ir verifier: `" + f.name + "` has no body");
      if (seen.insert(r.body.get()).second) todo.push_back(r.body.get());
    }
    while (!todo.empty()) {
      const Node* n = todo.back();
      todo.pop_back();
      Status s = verify_node(*n);
      if (s.ok()) s = verify_in_context(m, f, *n);
      if (!s.ok()) return Status::Internal("in `" + f.name + "`: " + s.message());
      for (const auto& o : n->operands)
        if (seen.insert(o.get()).second) todo.push_back(o.get());
    }
    for (const Result& r : f.results())
      if (r.body->type.dtype != r.type.dtype || rank(*r.body) != r.type.shape.size())
        return Status::Internal("ir verifier: a body of `" + f.name + "` is " + r.body->type.str() +
                                ", not of its result type " + r.type.str());
  }
  return Status::Ok();
}

bool ir_verification_enabled() {
#if !defined(NDEBUG) || defined(MLK_VERIFY_IR)
  return true;
#else
  return false;
#endif
}

void debug_verify(const Module& m, const char* after) {
  if (!ir_verification_enabled()) return;
  Status s = verify_module(m);
  if (!s.ok()) std::fprintf(stderr, "after %s: %s\n", after, s.message().c_str());
  MLK_CHECK(s.ok(), "the IR verifier rejected a module (see above)");
}

}  // namespace mlk::ir
