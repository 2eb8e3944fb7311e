// The reference interpreter's elementwise kernels, literals and constants
// (kLiteral, kNeg .. kCast, kIota, kFull), by the rules of docs/numerics.md.
// Which op runs which kernel is lang/ops.def's KERNEL column.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "lang/interpreter_ops.h"
#include "lang/ops.h"
#include "lang/tensor.h"

namespace mlk::interp {

Value::Value(DType t, std::vector<int64_t> s) : dtype(t), shape(std::move(s)) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // extents are checked and the count capped by the caller
  if (floating()) f.assign(static_cast<size_t>(n), 0.0);
  else i.assign(static_cast<size_t>(n), 0);
}

int64_t wrap_int(DType t, uint64_t v) {
  switch (t) {
    case DType::I8: return static_cast<int8_t>(v);
    case DType::I16: return static_cast<int16_t>(v);
    case DType::I32: return static_cast<int32_t>(v);
    case DType::I64: return static_cast<int64_t>(v);
    case DType::U8: return static_cast<uint8_t>(v);
    case DType::Bool: return v != 0;
    default: break;
  }
  MLK_CHECK(false, "wrap_int of a float dtype");
  return 0;
}

int64_t float_to_int(DType t, double v) {
  if (t == DType::Bool) return v != 0;  // NaN != 0 is true
  if (!std::isfinite(v)) return 0;
  // Truncate, then reduce mod 2^64 exactly (a double's integer part is exact
  // in long double) before the two's-complement wrap.
  long double m = std::fmod(std::trunc(static_cast<long double>(v)), 18446744073709551616.0L);
  if (m < 0) m += 18446744073709551616.0L;
  return wrap_int(t, static_cast<uint64_t>(m));
}

double int_to_float(DType t, int64_t v) {
  if (t == DType::F64) return static_cast<double>(v);
  // One rounding to F32; F16/BF16 then round the (exact for |v| < 2^24) F32.
  return round_to(t, static_cast<double>(static_cast<float>(v)));
}

namespace {

using ir::Op;

// Floor division (toward -inf) with x / 0 = 0; MIN / -1 wraps to MIN.
int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return static_cast<int64_t>(0 - static_cast<uint64_t>(a));
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}

// max/min propagate NaN (IEEE maximum/minimum), so a NaN is never lost.
double fmax_nan(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : (a < b ? b : a); }
double fmin_nan(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : (b < a ? b : a); }

double float_unary(Op op, double x) {
  switch (op) {
    case Op::kNeg: return -x;
    case Op::kExp: return std::exp(x);
    case Op::kLog: return std::log(x);
    case Op::kSqrt: return std::sqrt(x);
    case Op::kRsqrt: return 1.0 / std::sqrt(x);
    case Op::kTanh: return std::tanh(x);
    case Op::kSigmoid: return 1.0 / (1.0 + std::exp(-x));
    case Op::kAbs: return std::fabs(x);
    case Op::kRelu: return fmax_nan(x, 0.0);
    case Op::kErf: return std::erf(x);
    default: break;
  }
  MLK_CHECK(false, "not a float unary op");
  return 0;
}

double float_binary(Op op, double a, double b) {
  switch (op) {
    case Op::kAdd: return a + b;
    case Op::kSub: return a - b;
    case Op::kMul: return a * b;
    case Op::kDiv: return a / b;
    case Op::kMax: return fmax_nan(a, b);
    case Op::kMin: return fmin_nan(a, b);
    case Op::kPow: return std::pow(a, b);
    case Op::kEq: return a == b;
    case Op::kNe: return a != b;
    case Op::kLt: return a < b;
    case Op::kLe: return a <= b;
    case Op::kGt: return a > b;
    case Op::kGe: return a >= b;
    default: break;
  }
  MLK_CHECK(false, "not a float binary op");
  return 0;
}

// Exact integer (and Bool) arithmetic in 64 bits; the caller wraps the result.
uint64_t int_binary(Op op, int64_t a, int64_t b) {
  uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  switch (op) {
    case Op::kAdd: return ua + ub;
    case Op::kSub: return ua - ub;
    case Op::kMul: return ua * ub;
    case Op::kDiv: return static_cast<uint64_t>(floor_div(a, b));
    case Op::kMax: return static_cast<uint64_t>(a < b ? b : a);
    case Op::kMin: return static_cast<uint64_t>(b < a ? b : a);
    case Op::kEq: return a == b;
    case Op::kNe: return a != b;
    case Op::kLt: return a < b;
    case Op::kLe: return a <= b;
    case Op::kGt: return a > b;
    case Op::kGe: return a >= b;
    case Op::kAnd: return (a != 0) && (b != 0);
    case Op::kOr: return (a != 0) || (b != 0);
    default: break;
  }
  MLK_CHECK(false, "not an integer binary op");
  return 0;
}

bool is_comparison(Op op) { return op >= Op::kEq && op <= Op::kGe; }

Value unary(const ir::Node& n, const Value& x, const std::vector<int64_t>& shape) {
  Value out(n.type.dtype, shape);
  MLK_CHECK(x.dtype == out.dtype && x.numel() == out.numel(), "unary operand differs");
  DType t = n.type.dtype;
  for (int64_t k = 0; k < out.numel(); ++k) {
    if (x.floating()) {
      out.f[k] = round_to(t, float_unary(n.op, x.f[k]));
      continue;
    }
    int64_t v = x.i[k];
    switch (n.op) {
      case Op::kNot: out.i[k] = v == 0; break;
      case Op::kNeg: out.i[k] = wrap_int(t, 0 - static_cast<uint64_t>(v)); break;
      case Op::kAbs: out.i[k] = wrap_int(t, v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v)); break;
      case Op::kRelu: out.i[k] = v < 0 ? 0 : v; break;
      default: out.i[k] = float_to_int(t, float_unary(n.op, static_cast<double>(v))); break;  // unreachable for checked IR
    }
  }
  return out;
}

Value binary(const ir::Node& n, const Value& a, const Value& b, const std::vector<int64_t>& shape) {
  MLK_CHECK(a.dtype == b.dtype && a.shape == b.shape && a.shape == shape, "binary operands differ");
  Value out(n.type.dtype, shape);
  DType t = n.type.dtype;
  for (int64_t k = 0; k < out.numel(); ++k) {
    if (a.floating()) {
      double r = float_binary(n.op, a.f[k], b.f[k]);
      if (is_comparison(n.op)) out.i[k] = r != 0;
      else out.f[k] = round_to(t, r);
    } else if (n.op == Op::kPow) {  // unreachable for checked IR (pow needs floats)
      out.i[k] = float_to_int(t, std::pow(static_cast<double>(a.i[k]), static_cast<double>(b.i[k])));
    } else {
      out.i[k] = wrap_int(t, int_binary(n.op, a.i[k], b.i[k]));
    }
  }
  return out;
}

Value cast(DType to, const Value& x, const std::vector<int64_t>& shape) {
  Value out(to, shape);
  MLK_CHECK(x.numel() == out.numel(), "cast operand size");
  for (int64_t k = 0; k < out.numel(); ++k) {
    if (x.floating() && out.floating()) out.f[k] = round_to(to, x.f[k]);
    else if (x.floating()) out.i[k] = float_to_int(to, x.f[k]);
    else if (out.floating()) out.f[k] = int_to_float(to, x.i[k]);
    else out.i[k] = wrap_int(to, static_cast<uint64_t>(x.i[k]));
  }
  return out;
}

// A literal's text (as the checker keeps it) filled into a value of dtype `t`.
Value literal(const std::string& text, DType t, const std::vector<int64_t>& shape) {
  Value out(t, shape);
  if (text == "true" || text == "false") {
    MLK_CHECK(t == DType::Bool, "Bool literal of a numeric dtype");
    std::fill(out.i.begin(), out.i.end(), text == "true");
    return out;
  }
  const char* end = text.data() + text.size();
  if (!out.floating()) {
    int64_t v = 0;
    auto [p, ec] = std::from_chars(text.data(), end, v);
    if (ec == std::errc() && p == end) {  // exact, even beyond 2^53
      std::fill(out.i.begin(), out.i.end(), wrap_int(t, static_cast<uint64_t>(v)));
      return out;
    }
  }
  char* stop = nullptr;
  double d = std::strtod(text.c_str(), &stop);
  MLK_CHECK(stop == text.c_str() + text.size() && !text.empty(), "malformed literal text");
  if (out.floating()) std::fill(out.f.begin(), out.f.end(), round_to(t, d));
  else std::fill(out.i.begin(), out.i.end(), float_to_int(t, d));
  return out;
}

// The largest whole number up to which `t` holds every whole number exactly.
int64_t exact_int_limit(DType t) {
  switch (t) {
    case DType::F16: return 2048;
    case DType::BF16: return 256;
    case DType::F32: return int64_t{1} << 24;
    case DType::F64: return int64_t{1} << 53;
    case DType::I8: return 127;
    case DType::I16: return 32767;
    case DType::I32: return 2147483647;
    case DType::I64: return std::numeric_limits<int64_t>::max();
    case DType::U8: return 255;
    case DType::Bool: return 1;
  }
  return 0;
}

Expected<Value> iota(const ir::Node& n, const std::vector<int64_t>& shape) {
  MLK_CHECK(n.ints.size() == 1 && n.ints[0] >= 0 && n.ints[0] < static_cast<int64_t>(shape.size()), "iota axis");
  size_t axis = static_cast<size_t>(n.ints[0]);
  DType t = n.type.dtype;
  int64_t last = shape[axis] - 1;
  if (last > exact_int_limit(t))
    return Status::InvalidArgument("`iota` along axis " + std::to_string(axis) + " has extent " +
                                   std::to_string(shape[axis]) + ", but its index " + std::to_string(last) +
                                   " does not fit in " + dtype_name(t) + ", which holds whole numbers only up to " +
                                   std::to_string(exact_int_limit(t)) + " exactly");
  int64_t inner = 1;
  for (size_t k = axis + 1; k < shape.size(); ++k) inner *= shape[k];
  Value out(t, shape);
  for (int64_t k = 0; k < out.numel(); ++k) {
    int64_t v = (k / inner) % shape[axis];
    if (out.floating()) out.f[k] = static_cast<double>(v);
    else out.i[k] = v;
  }
  return out;
}

}  // namespace

Expected<Value> kernel_literal(const ir::Node& n, const Args&, const Shape64& shape, const DimEnv&) {
  return literal(n.literal, n.type.dtype, shape);
}

Expected<Value> kernel_iota(const ir::Node& n, const Args&, const Shape64& shape, const DimEnv&) {
  return iota(n, shape);
}

Expected<Value> kernel_cast(const ir::Node& n, const Args& args, const Shape64& shape, const DimEnv&) {
  return cast(n.type.dtype, *args[0], shape);
}

Expected<Value> kernel_where(const ir::Node&, const Args& args, const Shape64& shape, const DimEnv&) {
  const Value &c = *args[0], &a = *args[1], &b = *args[2];
  MLK_CHECK(!c.floating() && c.numel() == a.numel() && a.shape == b.shape && a.shape == shape, "where operands");
  Value out = a;
  for (int64_t k = 0; k < out.numel(); ++k)
    if (!c.i[k]) out.copy_from(k, b, k);
  return out;
}

Expected<Value> kernel_unary(const ir::Node& n, const Args& args, const Shape64& shape, const DimEnv&) {
  return unary(n, *args[0], shape);
}

Expected<Value> kernel_binary(const ir::Node& n, const Args& args, const Shape64& shape, const DimEnv&) {
  return binary(n, *args[0], *args[1], shape);
}

Kernel kernel_of(ir::Op op) {
  static constexpr Kernel kKernels[] = {
#define none nullptr
#define MLK_OP(ID, NAME, ARITY, CALL, RULE, VERIFY, KERNEL, ...) KERNEL,
#include "lang/ops.def"
#undef MLK_OP
#undef none
  };
  static_assert(sizeof(kKernels) / sizeof(kKernels[0]) == ir::kOpCount, "one kernel slot per op");
  size_t i = static_cast<size_t>(op);
  MLK_CHECK(i < ir::kOpCount, "kernel_of: not an op");
  return kKernels[i];
}

}  // namespace mlk::interp
