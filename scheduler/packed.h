// The layout of a weight packed in BF16 pairs (docs/artifacts.md, "Packed
// weights"; scheduler/lower.h, Pack): Halide-free, shared by the lowering,
// the JIT's runs, the algorithm's evaluator and the artifact's C wrapper
// (which writes the same arithmetic in C).
#pragma once

#include <cstdint>
#include <vector>

namespace mlk {

// A product's b of K rows and N columns packed as [1, k2, c, 2] (.tl order,
// dense): b[2 k2 + i, c] at [0, k2, c, i], where k2 counts pairs of rows, K
// rounded up to `k_quantum` (zeros past K), and c the columns, N rounded up
// to `n_quantum` (the last column repeated past N). AMX tiles take 32 and
// 16, the pair form 2 and 1. (The outer axis leaves room for column panels.)
inline std::vector<int64_t> packed_shape(int64_t k, int64_t n, int k_quantum, int n_quantum) {
  return {1, (k + k_quantum - 1) / k_quantum * k_quantum / 2, (n + n_quantum - 1) / n_quantum * n_quantum, 2};
}

}  // namespace mlk
