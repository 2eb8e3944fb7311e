// OpenBLAS as a benchmark peer for fns that are one F32 matrix product of
// their parameters. The library is loaded at run time (dlopen of
// libopenblas.so.0, Debian's libopenblas0 / libopenblas-dev), so mlk has no
// link-time dependency on it and reports its absence instead of failing.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lang/bind.h"
#include "lang/ir.h"
#include "base/status.h"
#include "lang/tensor.h"

namespace mlk::bench {

// C[b] = A[b] x op(B[b]) for b < batch, row-major, where op is the identity
// or a transpose of B's last two axes.
struct MatmulShape {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool trans_b = false;
  int a_param = 0, b_param = 1;  // parameter indices
};

// The shape when the body of `f` is `matmul(A, B)` or
// `matmul(A, transpose(B, [.., last, last-1]))` with A and B F32 parameters of
// rank 2 or 3 (rank 3: the leading axis is a batch); nullopt otherwise.
std::optional<MatmulShape> match_matmul(const ir::Function& f, const DimEnv& env);

// One call of the product into `out` (already of the result's shape and
// dtype), through cblas_sgemm, once per batch. Unsupported when OpenBLAS
// cannot be loaded (the message says how to install it).
using MatmulFn = std::function<Status(const std::vector<HostTensor>& inputs, HostTensor& out)>;
Expected<MatmulFn> openblas_matmul(const MatmulShape& s);

// "OpenBLAS 0.3.21 (libopenblas.so.0)" or why it is not available.
std::string openblas_description();

}  // namespace mlk::bench
