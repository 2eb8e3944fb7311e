#include "lang/ir.h"

#include <set>

#include "base/status.h"

namespace mlk::ir {

const char* op_name(Op op) {
  switch (op) {
    case Op::kParam: return "param";
    case Op::kLiteral: return "literal";
    case Op::kNeg: return "neg";
    case Op::kNot: return "not";
    case Op::kAdd: return "add";
    case Op::kSub: return "sub";
    case Op::kMul: return "mul";
    case Op::kDiv: return "div";
    case Op::kEq: return "eq";
    case Op::kNe: return "ne";
    case Op::kLt: return "lt";
    case Op::kLe: return "le";
    case Op::kGt: return "gt";
    case Op::kGe: return "ge";
    case Op::kAnd: return "and";
    case Op::kOr: return "or";
    case Op::kExp: return "exp";
    case Op::kLog: return "log";
    case Op::kSqrt: return "sqrt";
    case Op::kRsqrt: return "rsqrt";
    case Op::kTanh: return "tanh";
    case Op::kSigmoid: return "sigmoid";
    case Op::kAbs: return "abs";
    case Op::kRelu: return "relu";
    case Op::kErf: return "erf";
    case Op::kMax: return "max";
    case Op::kMin: return "min";
    case Op::kPow: return "pow";
    case Op::kWhere: return "where";
    case Op::kCast: return "cast";
    case Op::kSum: return "sum";
    case Op::kMean: return "mean";
    case Op::kReduceMax: return "reduce_max";
    case Op::kReduceMin: return "reduce_min";
    case Op::kBroadcast: return "broadcast";
    case Op::kMatmul: return "matmul";
    case Op::kTranspose: return "transpose";
    case Op::kReshape: return "reshape";
    case Op::kSoftmax: return "softmax";
    case Op::kGather: return "gather";
    case Op::kRepeatInterleave: return "repeat_interleave";
    case Op::kConcat: return "concat";
    case Op::kSlice: return "slice";
    case Op::kIota: return "iota";
    case Op::kFull: return "full";
    case Op::kCall: return "call";
  }
  return "?";
}

std::string Type::str() const {
  return std::string("Tensor[") + dtype_name(dtype) + ", " + shape_str(shape) + "]";
}

namespace {

size_t arity(Op op) {
  switch (op) {
    case Op::kParam: case Op::kLiteral: case Op::kIota: case Op::kFull: return 0;
    case Op::kAdd: case Op::kSub: case Op::kMul: case Op::kDiv: case Op::kEq: case Op::kNe:
    case Op::kLt: case Op::kLe: case Op::kGt: case Op::kGe: case Op::kAnd: case Op::kOr:
    case Op::kMax: case Op::kMin: case Op::kPow: case Op::kMatmul: case Op::kGather: return 2;
    case Op::kWhere: return 3;
    case Op::kConcat: case Op::kCall: return SIZE_MAX;  // variadic
    default: return 1;
  }
}

}  // namespace

NodeRef make(Node n) {
  size_t want = arity(n.op);
  MLK_CHECK(want == SIZE_MAX || n.operands.size() == want, "ir::make: wrong operand count");
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

const Function* Module::find(const std::string& name) const {
  for (const auto& f : functions)
    if (f.name == name) return &f;
  return nullptr;
}

}  // namespace mlk::ir
