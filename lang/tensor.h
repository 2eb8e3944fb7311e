// HostTensor: a concrete, row-major tensor in host memory, the currency of the
// reference interpreter, `mlk run` and the tests.
//
// Elements are stored in the dtype's own representation: F16 and BF16 as
// their 16-bit patterns, Bool as one byte holding 0 or 1, all little-endian
// (the host's order). get()/set() convert through double; set() rounds to
// the dtype (round to nearest even for floats, two's-complement wrap for
// integers, non-zero to 1 for Bool).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lang/dtype.h"

namespace mlk {

struct HostTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  HostTensor() = default;
  HostTensor(DType t, std::vector<int64_t> s);  // zero-filled

  int64_t numel() const;
  size_t elem_size() const { return static_cast<size_t>(dtype_bits(dtype) / 8); }
  double get(int64_t i) const;
  void set(int64_t i, double v);
  std::string shape_str() const;  // "[2, 3]"
};

// `v` rounded to what dtype `t` can hold, by the rules of HostTensor::set().
double round_to(DType t, double v);

uint16_t float_to_half_bits(float f);
float half_bits_to_float(uint16_t h);
uint16_t float_to_bf16_bits(float f);
float bf16_bits_to_float(uint16_t h);

}  // namespace mlk
