// Internal to the reference interpreter (lang/interpreter.cpp): the value
// representation and the per-op kernels. Not for use outside lang/interpreter*.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lang/bind.h"
#include "lang/dtype.h"
#include "lang/ir.h"
#include "base/status.h"

namespace mlk::interp {

// A concrete row-major value. Float dtypes live in `f` as doubles already
// rounded to the dtype; integer dtypes and Bool live in `i`, already wrapped to
// the dtype (Bool as 0/1), so integer arithmetic is exact, I64 included.
// Exactly one of the two vectors holds numel() elements; the other is empty.
struct Value {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<double> f;
  std::vector<int64_t> i;

  Value() = default;
  Value(DType t, std::vector<int64_t> s);  // zero-filled; numel must be <= 2^31 (caller checks)
  bool floating() const { return is_float(dtype); }
  int64_t numel() const { return static_cast<int64_t>(floating() ? f.size() : i.size()); }
  double as_double(int64_t k) const { return floating() ? f[k] : static_cast<double>(i[k]); }
  // Copies element `from` of `src` (same dtype) to element `to`.
  void copy_from(int64_t to, const Value& src, int64_t from) {
    if (floating()) f[to] = src.f[from];
    else i[to] = src.i[from];
  }
};

// Two's-complement wrap of `v` to the integer dtype `t` (Bool: v != 0).
int64_t wrap_int(DType t, uint64_t v);
// Float to integer dtype: truncates toward zero, then wraps; NaN and +-inf
// give 0; to Bool: v != 0.
int64_t float_to_int(DType t, double v);
// Integer (or Bool) to float dtype `t`, rounded once (to nearest even).
double int_to_float(DType t, int64_t v);

// The kernels, one per row of lang/ops.def's KERNEL column: `n` is the node,
// `args` its operands' values in order, `shape` its concrete shape and `env`
// evaluates its Dim attributes (repeats, slice bounds). A failure the input
// values cause (a gather index out of range) is InvalidArgument; a node that
// breaks its op's invariants is an internal error.
using Args = std::vector<const Value*>;
using Shape64 = std::vector<int64_t>;
using Kernel = Expected<Value> (*)(const ir::Node& n, const Args& args, const Shape64& shape, const DimEnv& env);

// The kernel of `op` (lang/ops.def's KERNEL column); null for kParam and
// kCall, which the interpreter's driver evaluates.
Kernel kernel_of(ir::Op op);

// interpreter_ops.cpp: literals, constants and elementwise ops.
Expected<Value> kernel_literal(const ir::Node& n, const Args& args, const Shape64& shape, const DimEnv& env);  // kLiteral, kFull
Expected<Value> kernel_iota(const ir::Node& n, const Args& args, const Shape64& shape, const DimEnv& env);
Expected<Value> kernel_cast(const ir::Node& n, const Args& args, const Shape64& shape, const DimEnv& env);
Expected<Value> kernel_where(const ir::Node& n, const Args& args, const Shape64& shape, const DimEnv& env);
Expected<Value> kernel_unary(const ir::Node& n, const Args& args, const Shape64& shape, const DimEnv& env);
Expected<Value> kernel_binary(const ir::Node& n, const Args& args, const Shape64& shape, const DimEnv& env);

// interpreter_structural.cpp: reductions and structural ops.
Expected<Value> kernel_reduce(const ir::Node& n, const Args& args, const Shape64& shape, const DimEnv& env);
Expected<Value> kernel_broadcast(const ir::Node& n, const Args& args, const Shape64& shape, const DimEnv& env);
Expected<Value> kernel_matmul(const ir::Node& n, const Args& args, const Shape64& shape, const DimEnv& env);
Expected<Value> kernel_transpose(const ir::Node& n, const Args& args, const Shape64& shape, const DimEnv& env);
Expected<Value> kernel_reshape(const ir::Node& n, const Args& args, const Shape64& shape, const DimEnv& env);
Expected<Value> kernel_softmax(const ir::Node& n, const Args& args, const Shape64& shape, const DimEnv& env);
Expected<Value> kernel_gather(const ir::Node& n, const Args& args, const Shape64& shape, const DimEnv& env);
Expected<Value> kernel_repeat_interleave(const ir::Node& n, const Args& args, const Shape64& shape, const DimEnv& env);
Expected<Value> kernel_concat(const ir::Node& n, const Args& args, const Shape64& shape, const DimEnv& env);
Expected<Value> kernel_slice(const ir::Node& n, const Args& args, const Shape64& shape, const DimEnv& env);

}  // namespace mlk::interp
