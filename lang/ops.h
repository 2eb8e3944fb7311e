// The op registry's face: what lang/ops.def declares about each op, as data
// (name, operand count, how it is written in .tl). Consumers that attach
// functions to ops (checker rules, verifier, interpreter kernels, the Halide
// lowering) build their own tables from ops.def or key them by ir::Op.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "lang/ir.h"

namespace mlk::ir {

inline constexpr size_t kVariadic = static_cast<size_t>(-1);

// How an op appears in source.
enum class OpCall {
  kBuiltin,   // called by name: `softmax(x, axis=1)`
  kOperator,  // written as an operator: `a + b`, `-x`
  kInternal,  // built by the checker itself (parameters, literals, calls of fns)
};

struct OpInfo {
  Op op;
  const char* name;
  size_t arity;  // operand count, or kVariadic
  OpCall call;
};

inline constexpr size_t kOpCount = 0
#define MLK_OP(ID, ...) +1
#include "lang/ops.def"
#undef MLK_OP
    ;

// The registry row of `op`.
const OpInfo& op_info(Op op);

// The builtin called `name` (a kBuiltin op), or nullopt.
std::optional<Op> builtin_op(const std::string& name);

}  // namespace mlk::ir
