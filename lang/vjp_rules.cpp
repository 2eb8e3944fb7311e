// The VJP rules of the ops (see vjp_rules.h), one function per VJP entry of
// lang/ops.def. Policies where the derivative is not unique:
//   relu, abs at 0: 0 (the subgradient PyTorch uses);
//   max/min of equal operands: the cotangent is split evenly between them;
//   reduce_max/reduce_min ties: split evenly among the tied elements;
//   comparisons, `where` conditions, integer values: constants (no cotangent);
//   cast of a value that depends on a `wrt` parameter to a non-float dtype:
//     not differentiable (a diagnostic), since its derivative is 0 almost
//     everywhere and silently dropping it hides mistakes.
#include "lang/vjp_rules.h"

#include <algorithm>
#include <numeric>

#include "base/status.h"
#include "lang/ir_build.h"
#include "lang/ops.h"

namespace mlk::ad {
namespace {

using ir::NodeRef;
using ir::Op;
using namespace irb;

Vjp one(NodeRef ct) { return {{std::move(ct)}, ""}; }

NodeRef zeros_like(const NodeRef& x) { return zeros(x->type); }
NodeRef ones_like(const NodeRef& x) { return lit(x->type, "1"); }

// Never called: the pass seeds parameters itself and never differentiates a
// node without operands or of a non-float dtype.
Vjp vjp_const(const NodeRef& y, const NodeRef&, const Facts&) {
  MLK_CHECK(y == nullptr, "vjp_const: a constant, Bool-valued or call node was differentiated");
  return {};
}
Vjp vjp_bool(const NodeRef& y, const NodeRef& g, const Facts& f) { return vjp_const(y, g, f); }
Vjp vjp_call(const NodeRef& y, const NodeRef& g, const Facts& f) { return vjp_const(y, g, f); }

Vjp vjp_arith(const NodeRef& y, const NodeRef& g, const Facts&) {
  const auto& o = y->operands;
  switch (y->op) {
    case Op::kNeg: return one(neg(g));
    case Op::kAdd: return {{g, g}, ""};
    case Op::kSub: return {{g, neg(g)}, ""};
    case Op::kMul: return {{mul(g, o[1]), mul(g, o[0])}, ""};
    case Op::kDiv: return {{div(g, o[1]), neg(div(mul(g, y), o[1]))}, ""};
    default: MLK_CHECK(false, "vjp_arith: not an arithmetic op");
  }
  return {};
}

Vjp vjp_unary(const NodeRef& y, const NodeRef& g, const Facts&) {
  const NodeRef& x = y->operands[0];
  switch (y->op) {
    case Op::kExp: return one(mul(g, y));
    case Op::kLog: return one(div(g, x));
    case Op::kSqrt: return one(div(scale(g, "0.5"), y));
    case Op::kRsqrt: return one(mul(scale(g, "-0.5"), mul(y, mul(y, y))));
    case Op::kTanh: return one(mul(g, sub(ones_like(y), mul(y, y))));
    case Op::kSigmoid: return one(mul(g, mul(y, sub(ones_like(y), y))));
    case Op::kAbs:
      return one(where(binary(Op::kGt, x, zeros_like(x)), g,
                       where(binary(Op::kLt, x, zeros_like(x)), neg(g), zeros_like(g))));
    case Op::kRelu: return one(where(binary(Op::kGt, x, zeros_like(x)), g, zeros_like(g)));
    case Op::kErf: return one(mul(scale(g, "1.1283791670955126"), unary(Op::kExp, neg(mul(x, x)))));
    default: MLK_CHECK(false, "vjp_unary: not a unary op");
  }
  return {};
}

// max/min: the operand that wins gets g, ties split evenly; pow as PyTorch.
Vjp vjp_binary_fn(const NodeRef& y, const NodeRef& g, const Facts&) {
  const NodeRef &a = y->operands[0], &b = y->operands[1];
  if (y->op == Op::kPow) {
    NodeRef ga = mul(g, mul(b, binary(Op::kPow, a, sub(b, ones_like(b)))));
    ga = where(binary(Op::kEq, b, zeros_like(b)), zeros_like(g), ga);
    NodeRef gb = mul(g, mul(y, unary(Op::kLog, a)));
    NodeRef a0 = binary(Op::kAnd, binary(Op::kEq, a, zeros_like(a)), binary(Op::kGe, b, zeros_like(b)));
    return {{ga, where(a0, zeros_like(g), gb)}, ""};
  }
  Op wins = y->op == Op::kMax ? Op::kGt : Op::kLt;
  NodeRef tie = binary(Op::kEq, a, b);
  NodeRef half = scale(g, "0.5");
  return {{where(binary(wins, a, b), g, where(tie, half, zeros_like(g))),
           where(binary(wins, b, a), g, where(tie, half, zeros_like(g)))},
          ""};
}

Vjp vjp_where(const NodeRef& y, const NodeRef& g, const Facts&) {
  const NodeRef& c = y->operands[0];
  return {{nullptr, where(c, g, zeros_like(g)), where(c, zeros_like(g), g)}, ""};
}

Vjp vjp_cast(const NodeRef& y, const NodeRef& g, const Facts&) {
  const NodeRef& x = y->operands[0];
  if (!is_float(x->type.dtype)) return {{nullptr}, ""};
  return one(cast(g, x->type.dtype));
}

// The axes of `x` that `y` (a reduction) keeps, in order.
std::vector<int64_t> kept_axes(const NodeRef& y) {
  std::vector<int64_t> kept;
  for (size_t ax = 0; ax < y->operands[0]->type.shape.size(); ++ax)
    if (std::find(y->ints.begin(), y->ints.end(), static_cast<int64_t>(ax)) == y->ints.end())
      kept.push_back(static_cast<int64_t>(ax));
  return kept;
}

Vjp vjp_reduce(const NodeRef& y, const NodeRef& g, const Facts&) {
  const NodeRef& x = y->operands[0];
  auto kept = kept_axes(y);
  auto spread = [&](const NodeRef& v) { return broadcast(v, x->type.shape, kept); };
  if (y->op == Op::kSum) return one(spread(g));
  if (y->op == Op::kMean) {
    Dim count = Dim::constant(1);
    for (int64_t ax : y->ints) count = count * x->type.shape[ax];
    NodeRef n = count.is_constant() ? lit(g->type, std::to_string(count.constant_value()))
                                    : reduce(Op::kSum, ones_like(x), y->ints);
    return one(spread(div(g, n)));
  }
  // reduce_max / reduce_min: the elements equal to the result share g.
  NodeRef hit = binary(Op::kEq, x, spread(y));
  NodeRef ties = reduce(Op::kSum, where(hit, ones_like(x), zeros_like(x)), y->ints);
  return one(where(hit, spread(div(g, ties)), zeros_like(x)));
}

// broadcast: sum over the new axes, then undo the axis order.
Vjp vjp_broadcast(const NodeRef& y, const NodeRef& g, const Facts&) {
  const NodeRef& x = y->operands[0];
  std::vector<int64_t> summed;
  for (size_t ax = 0; ax < y->type.shape.size(); ++ax)
    if (std::find(y->ints.begin(), y->ints.end(), static_cast<int64_t>(ax)) == y->ints.end())
      summed.push_back(static_cast<int64_t>(ax));
  NodeRef s = reduce(Op::kSum, g, summed);
  // s has x's axes in the order of their output axes; perm[i] = rank of ints[i].
  std::vector<int64_t> perm;
  for (int64_t a : y->ints) {
    int64_t rank = 0;
    for (int64_t b : y->ints) rank += b < a;
    perm.push_back(rank);
  }
  NodeRef t = transpose(s, perm);
  return one(t->type.shape == x->type.shape ? t : reshape(t, x->type.shape));
}

Vjp vjp_matmul(const NodeRef& y, const NodeRef& g, const Facts&) {
  const NodeRef &a = y->operands[0], &b = y->operands[1];
  NodeRef ga = matmul(g, swap_last(b));
  size_t ra = a->type.shape.size(), rb = b->type.shape.size();
  NodeRef gb;
  if (rb > 2 || ra == 2) {
    gb = matmul(swap_last(a), g);
  } else {  // a: [P.., M, K], b: [K, N]: fold the batch into the rows
    Dim rows = Dim::constant(1);
    for (size_t ax = 0; ax + 1 < ra; ++ax) rows = rows * a->type.shape[ax];
    NodeRef a2 = reshape(a, {rows, a->type.shape[ra - 1]});
    NodeRef g2 = reshape(g, {rows, g->type.shape[ra - 1]});
    gb = matmul(swap_last(a2), g2);
  }
  return {{ga, gb}, ""};
}

Vjp vjp_transpose(const NodeRef& y, const NodeRef& g, const Facts&) {
  std::vector<int64_t> inv(y->ints.size());
  for (size_t k = 0; k < y->ints.size(); ++k) inv[y->ints[k]] = static_cast<int64_t>(k);
  return one(transpose(g, inv));
}

Vjp vjp_reshape(const NodeRef& y, const NodeRef& g, const Facts&) {
  return one(reshape(g, y->operands[0]->type.shape));
}

// softmax: y * (g - sum(g * y) along the axis).
Vjp vjp_softmax(const NodeRef& y, const NodeRef& g, const Facts&) {
  int64_t axis = y->ints[0];
  std::vector<int64_t> others;
  for (size_t ax = 0; ax < y->type.shape.size(); ++ax)
    if (static_cast<int64_t>(ax) != axis) others.push_back(static_cast<int64_t>(ax));
  NodeRef s = broadcast(reduce(Op::kSum, mul(g, y), {axis}), y->type.shape, others);
  return one(mul(y, sub(g, s)));
}

Dim product(const Shape& s, size_t from, size_t to) {
  Dim p = Dim::constant(1);
  for (size_t i = from; i < to; ++i) p = p * s[i];
  return p;
}

// gather as scatter-add: the cotangent of the table is a one-hot contraction,
// table_ct[p, v, s] = sum over i of (idx[i] == v) * g[p, i, s].
Vjp vjp_gather(const NodeRef& y, const NodeRef& g, const Facts&) {
  const NodeRef &table = y->operands[0], &idx = y->operands[1];
  const Shape& ts = table->type.shape;
  size_t axis = static_cast<size_t>(y->ints[0]), ri = idx->type.shape.size();
  Dim p = product(ts, 0, axis), v = ts[axis], s = product(ts, axis + 1, ts.size());
  Dim i = product(idx->type.shape, 0, ri);
  NodeRef flat_idx = reshape(cast(idx, DType::I64), {i});
  NodeRef hit = binary(Op::kEq, broadcast(flat_idx, {v, i}, {1}), iota(DType::I64, {v, i}, 0));
  NodeRef onehot = cast(hit, table->type.dtype);  // [V, I]
  NodeRef ct;
  if (axis == 0) {
    ct = matmul(onehot, reshape(g, {i, s}));  // [V, S]
  } else {
    ct = matmul(broadcast(onehot, {p, v, i}, {1, 2}), reshape(g, {p, i, s}));  // [P, V, S]
  }
  return {{reshape(ct, ts), nullptr}, ""};
}

// repeat_interleave: the R copies of each slice sum back.
Vjp vjp_repeat(const NodeRef& y, const NodeRef& g, const Facts&) {
  const NodeRef& x = y->operands[0];
  size_t axis = static_cast<size_t>(y->ints[0]);
  Shape split = x->type.shape;
  split.insert(split.begin() + axis + 1, y->dims[0]);
  return one(reduce(Op::kSum, reshape(g, split), {static_cast<int64_t>(axis) + 1}));
}

Vjp vjp_concat(const NodeRef& y, const NodeRef& g, const Facts&) {
  int64_t axis = y->ints[0];
  Vjp out;
  Dim start;
  for (const NodeRef& x : y->operands) {
    const Dim& len = x->type.shape[axis];
    out.cts.push_back(x->type.shape == g->type.shape ? g : slice(g, axis, start, len));
    start = start + len;
  }
  return out;
}

// slice: g padded with zeros before and after; a pad whose extent may or may
// not be 0 cannot be built (the IR has no empty tensors).
Vjp vjp_slice(const NodeRef& y, const NodeRef& g, const Facts& facts) {
  const NodeRef& x = y->operands[0];
  int64_t axis = y->ints[0];
  const Dim &start = y->dims[0], &len = y->dims[1];
  Dim after = x->type.shape[axis] - start - len;
  std::vector<NodeRef> all;
  const Dim* pads[] = {&start, &after};
  for (const Dim* pad : pads) {
    if (pad == &after) all.push_back(g);
    bool zero = facts.prove({Pred::Op::kEq, *pad, Dim()});
    if (!zero && !facts.prove({Pred::Op::kGe, *pad, Dim::constant(1)}))
      return {{}, "its gradient pads with `" + pad->str() +
                      "` zeros, and the facts in scope prove neither that this is 0 nor that it is at least 1"};
    if (zero) continue;
    ir::Type t = x->type;
    t.shape[axis] = *pad;
    all.push_back(zeros(t));
  }
  NodeRef c = concat(all, axis);
  return one(c->type.shape == x->type.shape ? c : reshape(c, x->type.shape));
}

constexpr VjpRule kRules[] = {
#define MLK_OP(ID, NAME, ARITY, CALL, RULE, VERIFY, KERNEL, VJP, ...) VJP,
#include "lang/ops.def"
#undef MLK_OP
};
static_assert(sizeof(kRules) / sizeof(kRules[0]) == ir::kOpCount, "one VJP rule per op of lang/ops.def");

}  // namespace

VjpRule vjp_rule(Op op) { return kRules[static_cast<size_t>(op)]; }

}  // namespace mlk::ad
