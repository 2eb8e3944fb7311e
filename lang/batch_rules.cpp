// The batching rules of the ops (see batch_rules.h), one function per BATCH
// entry of lang/ops.def. The batch axis is kept at axis 0 of every batched
// value, so a rule shifts the op's axes by one; matmul with one side batched
// folds into a (batched) matmul without copying the other side where the
// shapes allow it.
#include "lang/batch_rules.h"

#include "base/status.h"
#include "lang/ir_build.h"
#include "lang/ops.h"

namespace mlk::vm {
namespace {

using ir::NodeRef;
using ir::Op;

Shape with_batch(const Shape& s, const Dim& b) {
  Shape out = {b};
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

std::vector<int64_t> shifted(const std::vector<int64_t>& axes) {
  std::vector<int64_t> out;
  for (int64_t a : axes) out.push_back(a + 1);
  return out;
}

// `n` rebuilt with `ops` as operands, its type and axes given the batch axis.
NodeRef rebuilt(const NodeRef& n, std::vector<NodeRef> ops, const Dim& b, std::vector<int64_t> ints) {
  ir::Node c = *n;
  c.operands = std::move(ops);
  c.type.shape = with_batch(n->type.shape, b);
  c.ints = std::move(ints);
  return ir::make(std::move(c));
}

std::vector<NodeRef> all_lifted(const std::vector<BVal>& ops, const Dim& b) {
  std::vector<NodeRef> out;
  for (const BVal& v : ops) out.push_back(lifted(v, b));
  return out;
}

NodeRef batch_const(const NodeRef& n, const std::vector<BVal>&, const Dim&) {
  MLK_CHECK(n == nullptr, "batch_const: a node without operands or a call was batched");
  return nullptr;
}
NodeRef batch_call(const NodeRef& n, const std::vector<BVal>& ops, const Dim& b) { return batch_const(n, ops, b); }

// Elementwise ops (and where, cast): every operand lifted.
NodeRef batch_elementwise(const NodeRef& n, const std::vector<BVal>& ops, const Dim& b) {
  return rebuilt(n, all_lifted(ops, b), b, n->ints);
}

NodeRef batch_reduce(const NodeRef& n, const std::vector<BVal>& ops, const Dim& b) {
  return rebuilt(n, {ops[0].node}, b, shifted(n->ints));
}

// softmax, repeat_interleave, concat, slice: one axis, shifted.
NodeRef batch_axis(const NodeRef& n, const std::vector<BVal>& ops, const Dim& b) {
  return rebuilt(n, all_lifted(ops, b), b, shifted(n->ints));
}

NodeRef batch_broadcast(const NodeRef& n, const std::vector<BVal>& ops, const Dim& b) {
  std::vector<int64_t> axes = {0};
  for (int64_t a : n->ints) axes.push_back(a + 1);
  return rebuilt(n, {ops[0].node}, b, axes);
}

NodeRef batch_transpose(const NodeRef& n, const std::vector<BVal>& ops, const Dim& b) {
  std::vector<int64_t> perm = {0};
  for (int64_t a : n->ints) perm.push_back(a + 1);
  return rebuilt(n, {ops[0].node}, b, perm);
}

NodeRef batch_reshape(const NodeRef& n, const std::vector<BVal>& ops, const Dim& b) {
  return rebuilt(n, {ops[0].node}, b, {});
}

// matmul: a batched `a` with a rank-2 `b` is already a matmul ([B, .., M, K] x
// [K, N]); a rank-2 `a` with a batched rank-2 `b` folds the batch into b's
// columns (one matmul, nothing broadcast); otherwise both sides carry the
// same batch dims, the unbatched one (or a rank-2 `b` under a higher-rank
// `a`) broadcast to them.
NodeRef batch_matmul(const NodeRef& n, const std::vector<BVal>& ops, const Dim& b) {
  const BVal &a = ops[0], &r = ops[1];
  size_t rb = r.node->type.shape.size() - (r.batched ? 1 : 0);
  if (!r.batched && rb == 2) return irb::matmul(a.node, r.node);
  if (!a.batched && a.node->type.shape.size() == 2 && rb == 2) {
    // a: [M, K], b: [B, K, N]: one matmul with the batch folded into the
    // columns, [M, K] x [K, B*N], then [M, B, N] back to [B, M, N].
    const Shape& bs = r.node->type.shape;
    NodeRef cols = irb::reshape(irb::transpose(r.node, {1, 0, 2}), {bs[1], b * bs[2]});
    NodeRef prod = irb::reshape(irb::matmul(a.node, cols), {a.node->type.shape[0], b, bs[2]});
    return irb::transpose(prod, {1, 0, 2});
  }
  NodeRef la = lifted(a, b);
  NodeRef lr = lifted(r, b);
  const Shape& as = la->type.shape;
  if (lr->type.shape.size() < as.size()) {  // b was [K, N] under a batched [P.., M, K]
    Shape s(as.begin(), as.end() - 2);
    const Shape& bs = lr->type.shape;
    s.push_back(bs[bs.size() - 2]);
    s.push_back(bs.back());
    std::vector<int64_t> axes = {0};
    for (size_t k = 1; k < bs.size(); ++k) axes.push_back(static_cast<int64_t>(s.size() - bs.size() + k));
    lr = irb::broadcast(lr, s, axes);
  }
  (void)n;
  return irb::matmul(la, lr);
}

// gather: a batched table gathers along its shifted axis; a batched index
// alone gathers once and moves the batch axis to the front; both batched
// flatten the batch into the table's axis, with indices offset per batch
// (an index outside [0, V) is made -1, so that the run-time check still fires).
NodeRef batch_gather(const NodeRef& n, const std::vector<BVal>& ops, const Dim& b) {
  const BVal &t = ops[0], &i = ops[1];
  int64_t axis = n->ints[0];
  if (t.batched && !i.batched) return irb::gather(t.node, i.node, axis + 1);
  if (!t.batched) {
    NodeRef g = irb::gather(t.node, i.node, axis);  // [P.., B, I.., S..]
    std::vector<int64_t> perm = {axis};
    for (int64_t k = 0; k < static_cast<int64_t>(g->type.shape.size()); ++k)
      if (k != axis) perm.push_back(k);
    return irb::transpose(g, perm);
  }
  const Shape& ts = t.node->type.shape;  // [B, P.., V, S..]
  int64_t r = static_cast<int64_t>(ts.size());
  std::vector<int64_t> perm = {0, axis + 1};
  for (int64_t k = 1; k < r; ++k)
    if (k != axis + 1) perm.push_back(k);
  NodeRef tt = irb::transpose(t.node, perm);  // [B, V, P.., S..]
  const Dim& v = ts[axis + 1];
  Shape flat = {b * v};
  flat.insert(flat.end(), tt->type.shape.begin() + 2, tt->type.shape.end());
  NodeRef table = irb::reshape(tt, flat);
  NodeRef idx = irb::cast(i.node, DType::I64);
  ir::Type it = idx->type;
  std::vector<int64_t> none;
  NodeRef vv = irb::broadcast(irb::extent_value(v, DType::I64), it.shape, none);
  NodeRef inside = irb::binary(Op::kAnd, irb::binary(Op::kGe, idx, irb::zeros(it)), irb::binary(Op::kLt, idx, vv));
  NodeRef offset = irb::add(idx, irb::mul(irb::iota(DType::I64, it.shape, 0), vv));
  NodeRef fixed = irb::where(inside, offset, irb::lit(it, "-1"));
  NodeRef g = irb::gather(table, fixed, 0);  // [B, I.., P.., S..]
  int64_t ri = static_cast<int64_t>(it.shape.size()) - 1, np = axis;
  std::vector<int64_t> back = {0};
  for (int64_t k = 0; k < np; ++k) back.push_back(1 + ri + k);
  for (int64_t k = 0; k < ri; ++k) back.push_back(1 + k);
  for (int64_t k = 1 + ri + np; k < static_cast<int64_t>(g->type.shape.size()); ++k) back.push_back(k);
  return irb::transpose(g, back);
}

constexpr BatchRule kRules[] = {
#define MLK_OP(ID, NAME, ARITY, CALL, RULE, VERIFY, KERNEL, VJP, BATCH) BATCH,
#include "lang/ops.def"
#undef MLK_OP
};
static_assert(sizeof(kRules) / sizeof(kRules[0]) == ir::kOpCount, "one batching rule per op of lang/ops.def");

}  // namespace

NodeRef lifted(const BVal& v, const Dim& b) { return v.batched ? v.node : irb::lead(v.node, b); }

BatchRule batch_rule(Op op) { return kRules[static_cast<size_t>(op)]; }

}  // namespace mlk::vm
