// Comparing a computed tensor against the reference interpreter's, with the
// per-dtype tolerances of the numerics policy (docs/numerics.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lang/dtype.h"
#include "base/status.h"
#include "lang/tensor.h"

namespace mlk {

// An element passes when |actual - expected| <= atol + rtol * |expected|
// (NaN matches only NaN; an infinity only the same infinity).
struct Tolerance {
  double rtol = 0, atol = 0;
  // The F32 results of a fn made under a precision policy (judged_dtype,
  // lang/precision.h): where one product's result feeds another's operands,
  // another order of summation may round an operand to the neighbouring
  // 16-bit value, and where the fn then divides by a small difference (a
  // LayerNorm of a row whose deviation is small) that one rounding may
  // carry an element past the envelope. Then at most one element in
  // kPolicyOutlierRate (at least one) may lie outside it, each within
  // kPolicyOutlierFactor times it: a wrong schedule misses by more, or in
  // more places.
  bool policy_outliers = false;
};
constexpr int64_t kPolicyOutlierRate = 10000;
constexpr double kPolicyOutlierFactor = 8;

// The tolerance for results of dtype `t`. `reduction_length` is the number of
// terms a result element accumulates (K of a matmul, the reduced extent of a
// sum or mean; 1 for elementwise results). For F32 a reduction gets rtol 1e-4
// and atol 1e-5 * sqrt(K) instead of rtol 1e-5 / atol 1e-6; F64 atol also
// scales by sqrt(K). Integers and Bool are exact (0, 0).
Tolerance tolerance_for(DType t, int64_t reduction_length = 1);

// Absolute tolerance for F64 results that went through `erf`: the compiled
// erf is a polynomial approximation, good to about 1e-7.
constexpr double kF64ErfAtol = 1e-6;

// OK when `actual` has the dtype and shape of `expected` and every element
// passes `tol` (but for the outliers tol.policy_outliers allows). Otherwise
// InvalidArgument for a dtype, shape or malformed tensor, and Corruption for
// differing values, naming the first mismatch by its multi-index, both
// values and the number of mismatches:
//   "2 of 6 elements differ (rtol 1e-05, atol 1e-06); first at [1, 0]:
//    expected 1.5, got 1.625"
// and under policy_outliers what they may be:
//   "... atol 0.01; the policy allows 1 within 8x); first at ..."
Status compare(const HostTensor& expected, const HostTensor& actual, Tolerance tol);

struct ErrorStats {
  double max_abs = 0, max_rel = 0;
};
// The largest |actual - expected| and |actual - expected| / |expected|
// (expected != 0) between two tensors of one dtype and shape (zeros
// otherwise); elements where both are NaN or the same infinity count as 0,
// a NaN against a number as an infinite difference.
ErrorStats error_stats(const HostTensor& expected, const HostTensor& actual);

// "[1, 0, 3]": the multi-index of flat element `flat` of a row-major tensor of
// shape `shape` (extents >= 1, 0 <= flat < the element count).
std::string multi_index_str(const std::vector<int64_t>& shape, int64_t flat);

}  // namespace mlk
