// Element types of .tl tensors and their properties.
#pragma once

#include <optional>
#include <string_view>

namespace mlk {

enum class DType { F16, BF16, F32, F64, I8, I16, I32, I64, U8, Bool };

const char* dtype_name(DType t);
std::optional<DType> parse_dtype(std::string_view s);
bool is_float(DType t);
bool is_integer(DType t);  // I8..I64 and U8 (not Bool)
bool is_signed(DType t);   // floats and I*
int dtype_bits(DType t);   // Bool is 8 bits in memory
// Whether the dtype can hold the literal value `v`. `is_integral` tells
// whether the literal was written without `.` or exponent.
bool literal_fits(DType t, double v, bool is_integral);

}  // namespace mlk
