#include "lang/dtype.h"

#include <cmath>

namespace mlk {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::F32: return "F32";
    case DType::F64: return "F64";
    case DType::I8: return "I8";
    case DType::I16: return "I16";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::U8: return "U8";
    case DType::Bool: return "Bool";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view s) {
  for (DType t : {DType::F16, DType::BF16, DType::F32, DType::F64, DType::I8, DType::I16, DType::I32,
                  DType::I64, DType::U8, DType::Bool})
    if (s == dtype_name(t)) return t;
  return std::nullopt;
}

bool is_float(DType t) { return t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::F64; }
bool is_integer(DType t) {
  return t == DType::I8 || t == DType::I16 || t == DType::I32 || t == DType::I64 || t == DType::U8;
}
bool is_signed(DType t) { return is_float(t) || (is_integer(t) && t != DType::U8); }

int dtype_bits(DType t) {
  switch (t) {
    case DType::F16: case DType::BF16: case DType::I16: return 16;
    case DType::F32: case DType::I32: return 32;
    case DType::F64: case DType::I64: return 64;
    case DType::I8: case DType::U8: case DType::Bool: return 8;
  }
  return 0;
}

bool literal_fits(DType t, double v, bool is_integral) {
  if (std::isnan(v)) return false;
  switch (t) {
    case DType::Bool: return false;  // Bool takes only `true` and `false`
    case DType::F16: return std::fabs(v) <= 65504.0;
    case DType::BF16: return std::fabs(v) <= 3.3895313892515355e38;
    case DType::F32: return std::fabs(v) <= 3.4028234663852886e38;
    case DType::F64: return std::isfinite(v);
    default: break;
  }
  if (!is_integral || v != std::floor(v)) return false;
  switch (t) {
    case DType::I8: return v >= -128 && v <= 127;
    case DType::I16: return v >= -32768 && v <= 32767;
    case DType::I32: return v >= -2147483648.0 && v <= 2147483647.0;
    case DType::I64: return v >= -9223372036854775808.0 && v < 9223372036854775808.0;
    case DType::U8: return v >= 0 && v <= 255;
    default: return false;
  }
}

}  // namespace mlk
