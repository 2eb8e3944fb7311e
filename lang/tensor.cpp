#include "lang/tensor.h"

#include <cmath>
#include <cstring>

#include "base/status.h"

namespace mlk {

HostTensor::HostTensor(DType t, std::vector<int64_t> s) : dtype(t), shape(std::move(s)) {
  bytes.assign(static_cast<size_t>(numel()) * elem_size(), 0);
}

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string HostTensor::shape_str() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// IEEE binary16 conversions in integer arithmetic (clang 14 has no _Float16
// on x86-64, and the fuzz build uses clang). Round to nearest even.
uint16_t float_to_half_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t ax = x & 0x7FFFFFFF;
  if (ax >= 0x7F800000) return sign | (ax > 0x7F800000 ? 0x7E00 : 0x7C00);  // NaN (quiet), Inf
  if (ax >= 0x477FF000) return sign | 0x7C00;  // >= 65520 rounds to Inf
  if (ax < 0x38800000) {                        // below 2^-14: subnormal or zero
    float a;
    std::memcpy(&a, &ax, 4);
    return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f));  // units of 2^-24, exact scaling
  }
  uint32_t r = ax - 0x38000000;  // rebias the exponent from 127 to 15
  r += 0x0FFF + ((r >> 13) & 1);
  return sign | static_cast<uint16_t>(r >> 13);
}

float half_bits_to_float(uint16_t b) {
  const uint32_t sign = static_cast<uint32_t>(b & 0x8000) << 16;
  const uint32_t exp = (b >> 10) & 0x1F, mant = b & 0x3FF;
  uint32_t u;
  if (exp == 0) {
    float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) u = sign | 0x7F800000 | (mant << 13);
  else u = sign | ((exp + 112) << 23) | (mant << 13);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t float_to_bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7FFF + ((u >> 16) & 1);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

float bf16_bits_to_float(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

namespace {

template <typename T>
T wrap(double v) {
  if (!std::isfinite(v)) return 0;
  // Two's-complement wrap through int64/uint64 arithmetic.
  long double m = std::fmod(std::trunc(static_cast<long double>(v)), 18446744073709551616.0L);
  if (m < 0) m += 18446744073709551616.0L;
  uint64_t u = static_cast<uint64_t>(m);
  return static_cast<T>(u);
}

}  // namespace

double round_to(DType t, double v) {
  switch (t) {
    case DType::F64: return v;
    case DType::F32: return static_cast<float>(v);
    case DType::F16: return half_bits_to_float(float_to_half_bits(static_cast<float>(v)));
    case DType::BF16: return bf16_bits_to_float(float_to_bf16_bits(static_cast<float>(v)));
    case DType::I8: return wrap<int8_t>(v);
    case DType::I16: return wrap<int16_t>(v);
    case DType::I32: return wrap<int32_t>(v);
    case DType::I64: return static_cast<double>(wrap<int64_t>(v));
    case DType::U8: return wrap<uint8_t>(v);
    case DType::Bool: return v != 0 ? 1 : 0;
  }
  return v;
}

double HostTensor::get(int64_t i) const {
  const uint8_t* p = bytes.data() + static_cast<size_t>(i) * elem_size();
  switch (dtype) {
    case DType::F64: { double x; std::memcpy(&x, p, 8); return x; }
    case DType::F32: { float x; std::memcpy(&x, p, 4); return x; }
    case DType::F16: { uint16_t x; std::memcpy(&x, p, 2); return half_bits_to_float(x); }
    case DType::BF16: { uint16_t x; std::memcpy(&x, p, 2); return bf16_bits_to_float(x); }
    case DType::I8: return static_cast<int8_t>(*p);
    case DType::I16: { int16_t x; std::memcpy(&x, p, 2); return x; }
    case DType::I32: { int32_t x; std::memcpy(&x, p, 4); return x; }
    case DType::I64: { int64_t x; std::memcpy(&x, p, 8); return static_cast<double>(x); }
    case DType::U8: return *p;
    case DType::Bool: return *p ? 1 : 0;
  }
  return 0;
}

void HostTensor::set(int64_t i, double v) {
  uint8_t* p = bytes.data() + static_cast<size_t>(i) * elem_size();
  switch (dtype) {
    case DType::F64: std::memcpy(p, &v, 8); return;
    case DType::F32: { float x = static_cast<float>(v); std::memcpy(p, &x, 4); return; }
    case DType::F16: { uint16_t x = float_to_half_bits(static_cast<float>(v)); std::memcpy(p, &x, 2); return; }
    case DType::BF16: { uint16_t x = float_to_bf16_bits(static_cast<float>(v)); std::memcpy(p, &x, 2); return; }
    case DType::I8: { int8_t x = wrap<int8_t>(v); std::memcpy(p, &x, 1); return; }
    case DType::I16: { int16_t x = wrap<int16_t>(v); std::memcpy(p, &x, 2); return; }
    case DType::I32: { int32_t x = wrap<int32_t>(v); std::memcpy(p, &x, 4); return; }
    case DType::I64: { int64_t x = wrap<int64_t>(v); std::memcpy(p, &x, 8); return; }
    case DType::U8: *p = wrap<uint8_t>(v); return;
    case DType::Bool: *p = v != 0; return;
  }
}

}  // namespace mlk
