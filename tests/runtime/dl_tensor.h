// Test helper: a host tensor of random values in [-2, 2) with its DLPack
// view (CPU, compact row-major), for the runtime's tests.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <random>
#include <vector>

#include "lang/tensor.h"
#include "runtime/boundary.h"

namespace mlk {

struct Dl {
  HostTensor t;
  DLTensor d{};
  Dl(DType dt, std::vector<int64_t> shape, uint64_t seed = 1) : t(dt, std::move(shape)) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(-2, 2);
    for (int64_t i = 0; i < t.numel(); ++i) t.set(i, u(rng));
    d.data = t.bytes.data();
    d.device = {kDLCPU, 0};
    d.ndim = static_cast<int32_t>(t.shape.size());
    d.dtype = rt::to_dl(dt);
    d.shape = t.shape.data();
  }
  Dl(const Dl&) = delete;
};

}  // namespace mlk
