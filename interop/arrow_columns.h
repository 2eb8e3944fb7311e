// Column types and element access for the Arrow reader: which Arrow field a
// declared column accepts, and how its elements are loaded and copied.
// Internal to mlk_arrow: it includes Arrow C++, and only the reader's
// translation units (interop/arrow_*.cpp) include it.
//
// The Arrow types of the column dtypes (docs/interop/arrow.md, "The
// declaration"): I32 int32, I64 int64, F16 halffloat, F32 float, F64 double,
// Bool bool (bit-packed; unpacked into one byte per value, so never viewed in
// place), BF16 the extension type `mlk.bfloat16` on storage uint16 (the
// bfloat16 bits, little-endian), which Arrow has no type for: a uint16 field
// whose metadata has ARROW:extension:name = mlk.bfloat16, or that extension
// type where a producer registered it. A plain uint16 field is not BF16.
#pragma once

#include <arrow/api.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "interop/arrow_reader.h"

namespace mlk::arrow_ipc::detail {

inline constexpr const char* kBF16Extension = "mlk.bfloat16";

// Arrow's type for the values of a column of dtype `t` (BF16: its storage,
// uint16), or nullptr for a dtype no column has.
std::shared_ptr<arrow::DataType> arrow_type_of(DType t);

// "" when the stream's field `f` is the declared column's type (the list size
// too, unless any_list_size; the nullability is not compared: a nullable field
// is fine for a non-nullable column whose rows hold no null, which the value
// check enforces), else the message: dictionary-encoded fields, another type,
// and a nullable column against a non-nullable field.
std::string field_mismatch(const ColumnDecl& c, const arrow::Field& f);

// The element at physical index `i` of a value buffer of dtype `t` (a bit
// index for Bool), as a number.
long double load_value(DType t, const uint8_t* values, int64_t i);

// Copies `count` elements of dtype `t` starting at physical index `first` of
// `values` to `out` (HostTensor layout: Bool one byte per value).
void copy_elements(DType t, const uint8_t* values, int64_t first, int64_t count, uint8_t* out);

// The dtype of a dictionary type's indices when a Category column reads
// them (int8 I8, int16 I16, int32 I32), else nullopt.
std::optional<DType> index_dtype(const arrow::DataType& type);

// Copies `count` codes of index dtype `index` (I8, I16, I32) from physical
// index `first` of `values` to `out` as int32 (a Category's tensor).
void widen_codes(DType index, const uint8_t* values, int64_t first, int64_t count, uint8_t* out);

// A dictionary's values as text (ColumnDecl::category: Column::dictionary).
std::vector<std::string> dictionary_text(const arrow::Array& dict);

// Whether a column of dtype `t` can be viewed in the stream's memory (false
// for Bool: Arrow packs it in bits).
bool viewable(DType t);

}  // namespace mlk::arrow_ipc::detail
