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

// Elementwise ops, literals and constants: kLiteral, kNeg .. kCast, kIota,
// kFull (interpreter_ops.cpp). `shape` is the node's concrete shape; operands
// are the node's operands' values, in order.
Expected<Value> eval_elementwise(const ir::Node& n, const std::vector<const Value*>& args,
                                 const std::vector<int64_t>& shape);

// Reductions and structural ops: kSum .. kSlice (interpreter_structural.cpp).
// `env` evaluates the node's Dim attributes (repeats, slice bounds).
Expected<Value> eval_structural(const ir::Node& n, const std::vector<const Value*>& args,
                                const std::vector<int64_t>& shape, const DimEnv& env);

}  // namespace mlk::interp
