// Builders of typed IR nodes (see ir_build.h).
#include "lang/ir_build.h"

#include <algorithm>

#include "base/status.h"

namespace mlk::irb {
namespace {

NodeRef node(ir::Op op, ir::Type t, std::vector<NodeRef> operands, std::vector<int64_t> ints = {},
             std::vector<Dim> dims = {}) {
  ir::Node n;
  n.op = op;
  n.type = std::move(t);
  n.operands = std::move(operands);
  n.ints = std::move(ints);
  n.dims = std::move(dims);
  return ir::make(std::move(n));
}

bool is_compare(ir::Op op) { return op >= ir::Op::kEq && op <= ir::Op::kGe; }

}  // namespace

NodeRef lit(const ir::Type& t, const std::string& text) {
  ir::Node n;
  n.op = ir::Op::kLiteral;
  n.type = t;
  n.literal = text;
  return ir::make(std::move(n));
}

NodeRef zeros(const ir::Type& t) { return lit(t, t.dtype == DType::Bool ? "false" : "0"); }

NodeRef unary(ir::Op op, const NodeRef& x) { return node(op, x->type, {x}); }

NodeRef binary(ir::Op op, const NodeRef& a, const NodeRef& b) {
  MLK_CHECK(a->type.dtype == b->type.dtype && a->type.shape.size() == b->type.shape.size(),
            "irb::binary: operands differ in dtype or rank");
  ir::Type t = a->type;
  if (is_compare(op)) t.dtype = DType::Bool;
  return node(op, t, {a, b});
}

NodeRef add(const NodeRef& a, const NodeRef& b) { return binary(ir::Op::kAdd, a, b); }
NodeRef sub(const NodeRef& a, const NodeRef& b) { return binary(ir::Op::kSub, a, b); }
NodeRef mul(const NodeRef& a, const NodeRef& b) { return binary(ir::Op::kMul, a, b); }
NodeRef div(const NodeRef& a, const NodeRef& b) { return binary(ir::Op::kDiv, a, b); }
NodeRef neg(const NodeRef& x) { return unary(ir::Op::kNeg, x); }
NodeRef scale(const NodeRef& x, const std::string& factor) { return mul(x, lit(x->type, factor)); }

NodeRef where(const NodeRef& c, const NodeRef& a, const NodeRef& b) { return node(ir::Op::kWhere, a->type, {c, a, b}); }

NodeRef cast(const NodeRef& x, DType t) {
  if (x->type.dtype == t) return x;
  return node(ir::Op::kCast, {t, x->type.shape}, {x});
}

NodeRef reduce(ir::Op op, const NodeRef& x, std::vector<int64_t> axes) {
  std::sort(axes.begin(), axes.end());
  if (axes.empty()) return x;
  Shape kept;
  for (size_t ax = 0; ax < x->type.shape.size(); ++ax)
    if (!std::binary_search(axes.begin(), axes.end(), static_cast<int64_t>(ax))) kept.push_back(x->type.shape[ax]);
  return node(op, {x->type.dtype, kept}, {x}, axes);
}

NodeRef broadcast(const NodeRef& x, const Shape& shape, const std::vector<int64_t>& axes) {
  MLK_CHECK(axes.size() == x->type.shape.size(), "irb::broadcast: one output axis per input axis");
  return node(ir::Op::kBroadcast, {x->type.dtype, shape}, {x}, axes);
}

NodeRef matmul(const NodeRef& a, const NodeRef& b) {
  Shape s = a->type.shape;
  s.back() = b->type.shape.back();
  return node(ir::Op::kMatmul, {a->type.dtype, s}, {a, b});
}

NodeRef matmul_f32(const NodeRef& a, const NodeRef& b) {
  Shape s = a->type.shape;
  s.back() = b->type.shape.back();
  return node(ir::Op::kMatmul, {DType::F32, s}, {a, b});
}

NodeRef transpose(const NodeRef& x, const std::vector<int64_t>& perm) {
  bool identity = true;
  for (size_t k = 0; k < perm.size(); ++k) identity = identity && perm[k] == static_cast<int64_t>(k);
  if (identity) return x;
  Shape s;
  for (int64_t p : perm) s.push_back(x->type.shape[p]);
  return node(ir::Op::kTranspose, {x->type.dtype, s}, {x}, perm);
}

NodeRef swap_last(const NodeRef& x) {
  std::vector<int64_t> perm;
  int64_t r = static_cast<int64_t>(x->type.shape.size());
  for (int64_t k = 0; k < r; ++k) perm.push_back(k);
  std::swap(perm[r - 1], perm[r - 2]);
  return transpose(x, perm);
}

NodeRef reshape(const NodeRef& x, const Shape& shape) {
  if (x->type.shape == shape) return x;
  return node(ir::Op::kReshape, {x->type.dtype, shape}, {x});
}

NodeRef softmax(const NodeRef& x, int64_t axis) { return node(ir::Op::kSoftmax, x->type, {x}, {axis}); }

NodeRef gather(const NodeRef& table, const NodeRef& idx, int64_t axis) {
  const Shape& t = table->type.shape;
  Shape s(t.begin(), t.begin() + axis);
  s.insert(s.end(), idx->type.shape.begin(), idx->type.shape.end());
  s.insert(s.end(), t.begin() + axis + 1, t.end());
  return node(ir::Op::kGather, {table->type.dtype, s}, {table, idx}, {axis});
}

NodeRef concat(const std::vector<NodeRef>& xs, int64_t axis) {
  if (xs.size() == 1) return xs[0];
  ir::Type t = xs[0]->type;
  for (size_t i = 1; i < xs.size(); ++i) t.shape[axis] = t.shape[axis] + xs[i]->type.shape[axis];
  return node(ir::Op::kConcat, t, xs, {axis});
}

NodeRef slice(const NodeRef& x, int64_t axis, const Dim& start, const Dim& len) {
  ir::Type t = x->type;
  t.shape[axis] = len;
  return node(ir::Op::kSlice, t, {x}, {axis}, {start, len});
}

NodeRef iota(DType t, const Shape& shape, int64_t axis) { return node(ir::Op::kIota, {t, shape}, {}, {axis}); }

NodeRef lead(const NodeRef& x, const Dim& b) {
  Shape s = {b};
  s.insert(s.end(), x->type.shape.begin(), x->type.shape.end());
  std::vector<int64_t> axes;
  for (size_t k = 0; k < x->type.shape.size(); ++k) axes.push_back(static_cast<int64_t>(k) + 1);
  return broadcast(x, s, axes);
}

NodeRef extent_value(const Dim& d, DType t) {
  if (d.is_constant()) return lit({t, {}}, std::to_string(d.constant_value()));
  return reduce(ir::Op::kSum, lit({t, {d}}, "1"), {0});
}

}  // namespace mlk::irb
