// Tolerance table and tensor comparison of the numerics policy.
#include "lang/compare.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

namespace mlk {
namespace {

// The element count, or -1 for a negative extent, an overflow or a byte
// size that does not match.
int64_t checked_numel(const HostTensor& t) {
  int64_t n = 1;
  for (int64_t d : t.shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
  if (static_cast<uint64_t>(n) > t.bytes.size() / t.elem_size() || t.bytes.size() != static_cast<size_t>(n) * t.elem_size())
    return -1;
  return n;
}

int64_t get_int(const HostTensor& t, int64_t k) {
  if (t.dtype != DType::I64) return static_cast<int64_t>(t.get(k));
  int64_t v;
  std::memcpy(&v, t.bytes.data() + k * 8, 8);
  return v;
}

std::string value_str(const HostTensor& t, int64_t k) {
  if (!is_float(t.dtype)) return std::to_string(get_int(t, k));
  double v = t.get(k);
  char buf[64];
  auto r = t.dtype == DType::F64 ? std::to_chars(buf, buf + sizeof buf, v)
                                 : std::to_chars(buf, buf + sizeof buf, static_cast<float>(v));
  return std::string(buf, r.ptr);
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

bool close(double e, double a, Tolerance tol) {
  if (std::isnan(e) || std::isnan(a)) return std::isnan(e) && std::isnan(a);
  if (std::isinf(e) || std::isinf(a)) return e == a;
  return std::fabs(a - e) <= tol.atol + tol.rtol * std::fabs(e);
}

bool close_int(int64_t e, int64_t a, Tolerance tol) {
  if (e == a) return true;
  long double d = static_cast<long double>(a) - static_cast<long double>(e);
  return std::fabs(d) <= tol.atol + tol.rtol * std::fabs(static_cast<long double>(e));
}

}  // namespace

std::string multi_index_str(const std::vector<int64_t>& shape, int64_t flat) {
  std::vector<int64_t> idx(shape.size());
  for (size_t k = shape.size(); k-- > 0;) {
    idx[k] = flat % shape[k];
    flat /= shape[k];
  }
  std::string s = "[";
  for (size_t k = 0; k < idx.size(); ++k) s += (k ? ", " : "") + std::to_string(idx[k]);
  return s + "]";
}

Tolerance tolerance_for(DType t, int64_t reduction_length) {
  double k = reduction_length > 1 ? static_cast<double>(reduction_length) : 1.0;
  bool reduction = reduction_length > 1;
  switch (t) {
    case DType::F64: return {1e-12, 1e-12 * std::sqrt(k)};
    case DType::F32: return reduction ? Tolerance{1e-4, 1e-5 * std::sqrt(k)} : Tolerance{1e-5, 1e-6};
    case DType::BF16: return {1e-2, 1e-2};
    case DType::F16: return {2e-3, 2e-3};
    default: return {0, 0};
  }
}

Status compare(const HostTensor& expected, const HostTensor& actual, Tolerance tol) {
  if (expected.dtype != actual.dtype)
    return Status::InvalidArgument(std::string("dtype differs: expected ") + dtype_name(expected.dtype) + ", got " +
                                   dtype_name(actual.dtype));
  if (expected.shape != actual.shape)
    return Status::InvalidArgument("shape differs: expected " + expected.shape_str() + ", got " + actual.shape_str());
  int64_t n = checked_numel(expected);
  for (const HostTensor* t : {&expected, &actual})
    if (checked_numel(*t) < 0)
      return Status::InvalidArgument(std::string("malformed ") + (t == &expected ? "expected" : "actual") +
                                     " tensor: " + dtype_name(t->dtype) + " " + t->shape_str() + " does not match its " +
                                     std::to_string(t->bytes.size()) + " bytes");
  int64_t bad = 0, far = 0, first = -1;
  const bool floating = is_float(expected.dtype);
  const Tolerance wide{tol.rtol * kPolicyOutlierFactor, tol.atol * kPolicyOutlierFactor};
  for (int64_t k = 0; k < n; ++k) {
    bool ok = floating ? close(expected.get(k), actual.get(k), tol)
                       : close_int(get_int(expected, k), get_int(actual, k), tol);
    if (ok) continue;
    if (first < 0) first = k;
    ++bad;
    if (!floating || !close(expected.get(k), actual.get(k), wide)) ++far;
  }
  if (bad == 0) return Status::Ok();
  const int64_t allowed = tol.policy_outliers && floating ? std::max<int64_t>(1, n / kPolicyOutlierRate) : 0;
  if (far == 0 && bad <= allowed) return Status::Ok();
  const std::string policy =
      allowed ? "; the policy allows " + std::to_string(allowed) + " within " + num(kPolicyOutlierFactor) + "x" : "";
  return Status::Corruption(std::to_string(bad) + " of " + std::to_string(n) + " elements differ (rtol " +
                            num(tol.rtol) + ", atol " + num(tol.atol) + policy + "); first at " +
                            multi_index_str(expected.shape, first) + ": expected " + value_str(expected, first) + ", got " +
                            value_str(actual, first));
}

ErrorStats error_stats(const HostTensor& expected, const HostTensor& actual) {
  ErrorStats e;
  if (expected.dtype != actual.dtype || expected.shape != actual.shape) return e;
  for (int64_t i = 0; i < expected.numel(); ++i) {
    double x = expected.get(i), y = actual.get(i);
    if ((std::isnan(x) && std::isnan(y)) || (std::isinf(x) && x == y)) continue;
    double d = std::fabs(y - x);
    if (std::isnan(d)) d = std::numeric_limits<double>::infinity();
    e.max_abs = std::max(e.max_abs, d);
    if (x != 0) e.max_rel = std::max(e.max_rel, d / std::fabs(x));
  }
  return e;
}

}  // namespace mlk
