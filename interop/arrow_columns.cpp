// Column types and element access for the Arrow reader (interop/arrow_columns.h).
#include "interop/arrow_columns.h"

#include <arrow/extension_type.h>
#include <arrow/util/bit_util.h>

#include <cstring>

namespace mlk::arrow_ipc::detail {
namespace {

// Whether `f` holds BF16 values: the extension type mlk.bfloat16 on uint16,
// registered or (as Arrow reads an unregistered one) named in the metadata.
bool is_bf16_field(const arrow::Field& f) {
  const arrow::DataType& t = *f.type();
  if (t.id() == arrow::Type::EXTENSION) {
    const auto& ext = static_cast<const arrow::ExtensionType&>(t);
    return ext.extension_name() == kBF16Extension && ext.storage_type()->id() == arrow::Type::UINT16;
  }
  if (t.id() != arrow::Type::UINT16 || f.metadata() == nullptr) return false;
  auto name = f.metadata()->Get("ARROW:extension:name");
  return name.ok() && *name == kBF16Extension;
}

// Whether field `f` (a column, or the element field of a FixedSizeList) holds
// values of dtype `t`.
bool element_matches(DType t, const arrow::Field& f) {
  if (t == DType::BF16) return is_bf16_field(f);
  auto want = arrow_type_of(t);
  return want != nullptr && f.type()->Equals(*want);
}

bool dictionary_encoded(const arrow::DataType& type) {
  return type.id() == arrow::Type::DICTIONARY ||
         (type.id() == arrow::Type::FIXED_SIZE_LIST &&
          static_cast<const arrow::FixedSizeListType&>(type).value_type()->id() == arrow::Type::DICTIONARY);
}

}  // namespace

std::shared_ptr<arrow::DataType> arrow_type_of(DType t) {
  switch (t) {
    case DType::I32: return arrow::int32();
    case DType::I64: return arrow::int64();
    case DType::F16: return arrow::float16();
    case DType::F32: return arrow::float32();
    case DType::F64: return arrow::float64();
    case DType::Bool: return arrow::boolean();
    case DType::BF16: return arrow::uint16();
    default: return nullptr;
  }
}

std::optional<DType> index_dtype(const arrow::DataType& type) {
  if (type.id() != arrow::Type::DICTIONARY) return std::nullopt;
  switch (static_cast<const arrow::DictionaryType&>(type).index_type()->id()) {
    case arrow::Type::INT8: return DType::I8;
    case arrow::Type::INT16: return DType::I16;
    case arrow::Type::INT32: return DType::I32;
    default: return std::nullopt;
  }
}

// "" when `type` is what Category column `c` reads: dictionary-encoded with
// int8, int16 or int32 indices (the value type is free), else the message.
static std::string category_mismatch(const ColumnDecl& c, const arrow::DataType& type) {
  if (type.id() == arrow::Type::DICTIONARY && index_dtype(type)) return "";
  return "column `" + c.name + "`: declared " + type_text(c) + ", the stream has " + type.ToString() +
         " (a Category column is dictionary-encoded with int8, int16 or int32 indices)";
}

std::string field_mismatch(const ColumnDecl& c, const arrow::Field& f) {
  const auto& type = *f.type();
  std::string col = "column `" + c.name + "`: ";
  if (c.category) {
    std::string why = category_mismatch(c, type);
    if (!why.empty()) return why;
    if (c.nullable && !f.nullable()) return col + "declared nullable, the stream's field is non-nullable";
    return "";
  }
  if (dictionary_encoded(type))
    return col + "dictionary-encoded columns are refused (the stream has " + type.ToString() + ")";
  bool same = false;
  if (c.list_size || c.any_list_size) {
    if (type.id() == arrow::Type::FIXED_SIZE_LIST) {
      const auto& l = static_cast<const arrow::FixedSizeListType&>(type);
      same = (c.any_list_size || l.list_size() == *c.list_size) && element_matches(c.dtype, *l.value_field());
    }
  } else {
    same = element_matches(c.dtype, f);
  }
  if (!same)
    return col + "declared " + type_text(c) + ", the stream has " + type.ToString() +
           (c.dtype == DType::BF16 ? std::string(" (a BF16 column is uint16 with field metadata ARROW:extension:name = ") +
                                         kBF16Extension + ")"
                                   : "");
  if (c.nullable && !f.nullable()) return col + "declared nullable, the stream's field is non-nullable";
  return "";
}

long double load_value(DType t, const uint8_t* values, int64_t i) {
  switch (t) {
    case DType::I8: return static_cast<int8_t>(values[i]);
    case DType::I16: { int16_t v; std::memcpy(&v, values + 2 * i, 2); return v; }
    case DType::I32: { int32_t v; std::memcpy(&v, values + 4 * i, 4); return v; }
    case DType::I64: { int64_t v; std::memcpy(&v, values + 8 * i, 8); return v; }
    case DType::F16: { uint16_t v; std::memcpy(&v, values + 2 * i, 2); return half_bits_to_float(v); }
    case DType::BF16: { uint16_t v; std::memcpy(&v, values + 2 * i, 2); return bf16_bits_to_float(v); }
    case DType::F32: { float v; std::memcpy(&v, values + 4 * i, 4); return v; }
    case DType::Bool: return arrow::bit_util::GetBit(values, static_cast<uint64_t>(i)) ? 1 : 0;
    default: { double v; std::memcpy(&v, values + 8 * i, 8); return v; }
  }
}

void copy_elements(DType t, const uint8_t* values, int64_t first, int64_t count, uint8_t* out) {
  if (count <= 0) return;
  if (t == DType::Bool) {
    for (int64_t k = 0; k < count; ++k)
      out[k] = arrow::bit_util::GetBit(values, static_cast<uint64_t>(first + k)) ? 1 : 0;
    return;
  }
  const size_t es = static_cast<size_t>(dtype_bits(t) / 8);
  std::memcpy(out, values + static_cast<size_t>(first) * es, static_cast<size_t>(count) * es);
}

bool viewable(DType t) { return t != DType::Bool; }

void widen_codes(DType index, const uint8_t* values, int64_t first, int64_t count, uint8_t* out) {
  for (int64_t k = 0; k < count; ++k) {
    const int32_t v = static_cast<int32_t>(load_value(index, values, first + k));
    std::memcpy(out + 4 * k, &v, 4);
  }
}

std::vector<std::string> dictionary_text(const arrow::Array& dict) {
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(dict.length()));
  for (int64_t k = 0; k < dict.length(); ++k) {
    if (dict.IsNull(k)) {
      out.push_back("null");
    } else if (dict.type_id() == arrow::Type::STRING) {
      out.push_back(static_cast<const arrow::StringArray&>(dict).GetString(k));
    } else if (dict.type_id() == arrow::Type::LARGE_STRING) {
      out.push_back(static_cast<const arrow::LargeStringArray&>(dict).GetString(k));
    } else {
      auto sc = dict.GetScalar(k);
      out.push_back(sc.ok() ? (*sc)->ToString() : "?");
    }
  }
  return out;
}

}  // namespace mlk::arrow_ipc::detail
