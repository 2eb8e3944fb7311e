// Builders of typed IR nodes for passes that construct IR after the checker
// (autodiff, vmap): each computes the result type from its operands and goes
// through ir::make(). Preconditions (operand dtypes, ranks, axes in range)
// are the caller's; a broken one is an internal error, never a user's.
#pragma once

#include <string>
#include <vector>

#include "lang/ir.h"

namespace mlk::irb {

using ir::NodeRef;

NodeRef lit(const ir::Type& t, const std::string& text);  // every element `text`
NodeRef zeros(const ir::Type& t);
NodeRef unary(ir::Op op, const NodeRef& x);
// Elementwise binary op (arithmetic, comparison, logic, max/min/pow): the
// type of `a` (Bool for comparisons). Shapes must be proven equal.
NodeRef binary(ir::Op op, const NodeRef& a, const NodeRef& b);
NodeRef add(const NodeRef& a, const NodeRef& b);
NodeRef sub(const NodeRef& a, const NodeRef& b);
NodeRef mul(const NodeRef& a, const NodeRef& b);
NodeRef div(const NodeRef& a, const NodeRef& b);
NodeRef neg(const NodeRef& x);
NodeRef scale(const NodeRef& x, const std::string& factor);  // x * literal
NodeRef where(const NodeRef& c, const NodeRef& a, const NodeRef& b);
NodeRef cast(const NodeRef& x, DType t);
// Reduction over `axes` (any order; sorted here).
NodeRef reduce(ir::Op op, const NodeRef& x, std::vector<int64_t> axes);
// out[j..] = x[j(axes[0]), ..]: input axis i goes to output axis axes[i].
NodeRef broadcast(const NodeRef& x, const Shape& shape, const std::vector<int64_t>& axes);
NodeRef matmul(const NodeRef& a, const NodeRef& b);
// The widening product of 16-bit float operands: an F32 result (ir::Node).
NodeRef matmul_f32(const NodeRef& a, const NodeRef& b);
NodeRef transpose(const NodeRef& x, const std::vector<int64_t>& perm);
NodeRef swap_last(const NodeRef& x);  // transpose of the last two axes
NodeRef reshape(const NodeRef& x, const Shape& shape);
NodeRef softmax(const NodeRef& x, int64_t axis);
NodeRef gather(const NodeRef& table, const NodeRef& idx, int64_t axis);
NodeRef concat(const std::vector<NodeRef>& xs, int64_t axis);
NodeRef slice(const NodeRef& x, int64_t axis, const Dim& start, const Dim& len);
NodeRef iota(DType t, const Shape& shape, int64_t axis);
// `x` with a new leading axis of extent `b` (a broadcast).
NodeRef lead(const NodeRef& x, const Dim& b);
// A Scalar of dtype `t` holding the extent `d` (a literal when constant,
// else the sum of `d` ones, since a dimension is not a value in the IR).
NodeRef extent_value(const Dim& d, DType t);

}  // namespace mlk::irb
