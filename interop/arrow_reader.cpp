// The strict Arrow IPC stream reader (interop/arrow_reader.h); with
// interop/arrow_columns.cpp (the column types), the code that includes Arrow C++.
//
// The stream is walked message by message here (framing checks with byte
// offsets), each message is decoded by Arrow (arrow::ipc::Message::Open
// verifies the flatbuffer; ReadSchema and ReadRecordBatch decode), every batch
// is validated in full, and the columns are copied into HostTensors only when
// every check of every batch has passed.
#include "interop/arrow_reader.h"

#include <arrow/api.h>
#include <arrow/c/bridge.h>
#include <arrow/io/file.h>
#include <arrow/ipc/api.h>
#include <arrow/util/bit_util.h>
#include <arrow/util/config.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <set>

#include "base/files.h"
#include "interop/arrow_columns.h"

namespace mlk::arrow_ipc {
namespace {

using detail::arrow_type_of;
using detail::copy_elements;
using detail::field_mismatch;
using detail::load_value;

Status Bad(const std::string& source, const std::string& what) { return Status::InvalidArgument(source + ": " + what); }

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08X", v);
  return buf;
}

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;  // little-endian host (x86-64, aarch64)
}

const char* message_type_name(arrow::ipc::MessageType t) {
  switch (t) {
    case arrow::ipc::MessageType::SCHEMA: return "Schema";
    case arrow::ipc::MessageType::DICTIONARY_BATCH: return "DictionaryBatch";
    case arrow::ipc::MessageType::RECORD_BATCH: return "RecordBatch";
    case arrow::ipc::MessageType::TENSOR: return "Tensor";
    case arrow::ipc::MessageType::SPARSE_TENSOR: return "SparseTensor";
    default: return "an unknown message type";
  }
}

// The flatbuffer field `slot` of the table at `table` inside [base, base+size):
// its address, or nullptr when the field is absent (or out of bounds, which a
// verified flatbuffer never is).
const uint8_t* fb_field(const uint8_t* base, size_t size, const uint8_t* table, int slot) {
  if (table < base || table + 4 > base + size) return nullptr;
  int32_t soffset;
  std::memcpy(&soffset, table, 4);
  const uint8_t* vtable = table - soffset;
  if (vtable < base || vtable + 4 > base + size) return nullptr;
  uint16_t vt_size;
  std::memcpy(&vt_size, vtable, 2);
  size_t entry = 4 + 2 * static_cast<size_t>(slot);
  if (entry + 2 > vt_size || vtable + entry + 2 > base + size) return nullptr;
  uint16_t off;
  std::memcpy(&off, vtable + entry, 2);
  if (off == 0 || table + off >= base + size) return nullptr;
  return table + off;
}

// The codec of the RecordBatch's `compression` field (slot 3), or nullopt when
// the body is not compressed. BodyCompression{codec: int8 (0 LZ4_FRAME, 1 ZSTD)}.
std::optional<std::string> body_compression(const arrow::ipc::Message& m) {
  const auto& meta = m.metadata();
  const uint8_t* base = meta->data();
  size_t size = static_cast<size_t>(meta->size());
  const uint8_t* header = static_cast<const uint8_t*>(m.header());
  const uint8_t* field = fb_field(base, size, header, 3);
  if (field == nullptr) return std::nullopt;
  if (field + 4 > base + size) return std::string("an unreadable codec");
  uint32_t rel = load_u32(field);
  const uint8_t* comp = field + rel;
  const uint8_t* codec = fb_field(base, size, comp, 0);
  int c = codec == nullptr ? 0 : static_cast<int8_t>(*codec);
  return std::string(c == 0 ? "LZ4_FRAME" : c == 1 ? "ZSTD" : "codec " + std::to_string(c));
}

std::string column_list(const arrow::Schema& s) {
  std::string out;
  for (const auto& f : s.fields()) out += (out.empty() ? "" : ", ") + f->name();
  return out.empty() ? "none" : out;
}

// The stream's schema against the declaration: names, order, types, sizes,
// nullability, byte order. A FixedSizeList of any size gets the stream's.
Status check_schema(SchemaDecl& decl, const arrow::Schema& s, const std::string& where) {
  if (s.endianness() != arrow::Endianness::Little) return Bad(where, "the schema is big-endian; only little-endian streams are read");
  std::string mismatches;
  int bad = 0;
  for (size_t i = 0; i < decl.columns.size(); ++i) {
    const ColumnDecl& c = decl.columns[i];
    if (i >= static_cast<size_t>(s.num_fields()) || s.field(static_cast<int>(i))->name() != c.name) {
      if (s.GetAllFieldsByName(c.name).empty())
        return Bad(where, "the stream has no column `" + c.name + "` (declared column " + std::to_string(i) +
                              "); its columns: " + column_list(s));
      return Bad(where, "column order differs: declared column " + std::to_string(i) + " is `" + c.name +
                            "`, the stream's columns are " + column_list(s));
    }
    std::string why = field_mismatch(c, *s.field(static_cast<int>(i)));
    if (!why.empty()) {  // every column that differs is named, not only the first
      mismatches += (mismatches.empty() ? "" : "; ") + why;
      ++bad;
      continue;
    }
    if (c.any_list_size) {
      const int64_t size = static_cast<const arrow::FixedSizeListType&>(*s.field(static_cast<int>(i))->type()).list_size();
      if (!c.list_dim.empty()) {
        if (auto it = decl.dims.find(c.list_dim); it != decl.dims.end() && it->second != size)
          return Bad(where, "column `" + c.name + "`: declared FixedSizeList[" + dtype_name(c.dtype) + ", " + c.list_dim +
                                "] with " + c.list_dim + " = " + std::to_string(it->second) + ", the stream has " +
                                s.field(static_cast<int>(i))->type()->ToString());
        decl.dims[c.list_dim] = size;
      }
      decl.columns[i].list_size = size;
      decl.columns[i].any_list_size = false;
    }
  }
  if (bad > 1) return Bad(where, std::to_string(bad) + " columns differ from the declaration: " + mismatches);
  if (bad == 1) return Bad(where, mismatches);
  if (static_cast<size_t>(s.num_fields()) > decl.columns.size())
    return Bad(where, "the stream has an undeclared column `" + s.field(static_cast<int>(decl.columns.size()))->name() +
                          "` (column " + std::to_string(decl.columns.size()) + ")");
  return Status::Ok();
}

std::string format_value(double v, bool integral) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  if (integral) std::snprintf(buf, sizeof buf, "%.0f", v);
  else std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

bool passes(long double v, Refinement::Op op, long double b) {
  switch (op) {
    case Refinement::Op::kEq: return v == b;
    case Refinement::Op::kNe: return v != b;
    case Refinement::Op::kLt: return v < b;
    case Refinement::Op::kLe: return v <= b;
    case Refinement::Op::kGt: return v > b;
    case Refinement::Op::kGe: return v >= b;
  }
  return false;
}

// Where a column's values of one batch are: the (offset-adjusted) validity of
// its rows, its value buffer and the physical index of its first element.
struct ColumnSlice {
  const uint8_t* row_valid = nullptr;  // bit (row_offset + r); nullptr: all rows valid
  int64_t row_offset = 0;
  const uint8_t* elem_valid = nullptr;  // FixedSizeList elements: bit (first + k); nullptr: all valid
  const uint8_t* values = nullptr;
  int64_t first = 0;  // physical index of the first element of row 0
  int64_t width = 1;  // elements per row
  DType phys = DType::F32;  // the values' dtype in the stream: the column's, or a Category's index dtype
};

ColumnSlice slice_of(const ColumnDecl& c, const arrow::Array& a) {
  ColumnSlice s;
  // A bitmap with no null unset is no bitmap: the rows are all valid (a
  // nullable field whose batch holds no null is then read like a non-nullable one).
  s.row_valid = a.null_count() == 0 ? nullptr : a.null_bitmap_data();
  s.row_offset = a.offset();
  s.phys = c.category ? detail::index_dtype(*a.type()).value_or(DType::I32) : c.dtype;
  if (c.list_size) {
    const auto& list = static_cast<const arrow::FixedSizeListArray&>(a);
    const arrow::Array& child = *list.values();
    s.width = *c.list_size;
    s.elem_valid = child.null_count() == 0 ? nullptr : child.null_bitmap_data();
    s.values = child.data()->buffers[1] ? child.data()->buffers[1]->data() : nullptr;
    s.first = child.offset() + a.offset() * s.width;
  } else {
    s.values = a.data()->buffers[1] ? a.data()->buffers[1]->data() : nullptr;
    s.first = a.offset();
  }
  return s;
}

bool row_is_valid(const ColumnSlice& s, int64_t r) {
  return s.row_valid == nullptr || arrow::bit_util::GetBit(s.row_valid, static_cast<uint64_t>(s.row_offset + r));
}

// Nulls where none may be and failed refinements, on one batch whose first
// row is row `row0` of the table.
Status check_values(const ColumnDecl& c, const ColumnSlice& s, int64_t rows, int64_t row0, const std::string& where) {
  bool integral = is_integer(c.dtype);
  for (int64_t r = 0; r < rows; ++r) {
    bool valid = row_is_valid(s, r);
    if (!valid && !c.nullable)
      return Bad(where, "column `" + c.name + "` is declared non-nullable, but row " + std::to_string(row0 + r) + " is null");
    if (!valid || (c.refinements.empty() && s.elem_valid == nullptr)) continue;
    for (int64_t k = 0; k < s.width; ++k) {
      int64_t e = s.first + r * s.width + k;
      auto at = [&] { return "row " + std::to_string(row0 + r) + (c.list_size ? ", element " + std::to_string(k) : ""); };
      if (s.elem_valid != nullptr && !arrow::bit_util::GetBit(s.elem_valid, static_cast<uint64_t>(e)))
        return Bad(where, "column `" + c.name + "`: " + at() + " is null (the elements of a FixedSizeList column cannot be null)");
      if (c.refinements.empty()) continue;
      long double v = load_value(s.phys, s.values, e);
      for (const Refinement& ref : c.refinements)
        if (!passes(v, ref.op, static_cast<long double>(ref.bound)))
          return Bad(where, rule_text(c, ref) + " fails at " + at() + ": value " +
                                format_value(static_cast<double>(v), integral));
    }
  }
  return Status::Ok();
}

// A checked message: its decoded form and where it starts.
struct Framed {
  std::unique_ptr<arrow::ipc::Message> message;
  int64_t offset = 0;
  int index = 0;
};

// The stream's messages up to its end or end-of-stream marker, each framed and
// verified (the flatbuffer by Arrow), or the first framing error.
class MessageWalker {
 public:
  MessageWalker(std::shared_ptr<arrow::Buffer> data, std::string source) : data_(std::move(data)), src_(std::move(source)) {}

  // The next message; nullptr message at the end of the stream.
  Expected<Framed> next() {
    const int64_t n = data_->size();
    const uint8_t* p = data_->data();
    Framed f{nullptr, pos_, index_};
    if (done_ || pos_ == n) return f;
    std::string at = where();
    if (n - pos_ < 4) return Bad(src_, at + ": truncated: " + std::to_string(n - pos_) + " bytes where a continuation marker belongs");
    uint32_t marker = load_u32(p + pos_);
    if (marker != 0xFFFFFFFFu)
      return Bad(src_, at + ": bad continuation marker: expected FFFFFFFF, found " + hex32(marker));
    if (n - pos_ < 8) return Bad(src_, at + ": truncated: the metadata size is cut off");
    int32_t meta_size = static_cast<int32_t>(load_u32(p + pos_ + 4));
    if (meta_size == 0) {
      done_ = true;
      if (pos_ + 8 != n)
        return Bad(src_, std::to_string(n - pos_ - 8) + " bytes follow the end-of-stream marker at byte " + std::to_string(pos_));
      return f;
    }
    if (meta_size < 0 || meta_size % 8 != 0)
      return Bad(src_, at + ": metadata size " + std::to_string(meta_size) + " is not a positive multiple of 8");
    if (meta_size > n - pos_ - 8)
      return Bad(src_, at + ": truncated: metadata of " + std::to_string(meta_size) + " bytes, " +
                           std::to_string(n - pos_ - 8) + " bytes remain");
    auto meta = arrow::SliceBuffer(data_, pos_ + 8, meta_size);
    auto head = arrow::ipc::Message::Open(meta, nullptr);
    if (!head.ok()) return Bad(src_, at + ": invalid message metadata: " + head.status().message());
    int64_t body_len = (*head)->body_length();
    int64_t body_at = pos_ + 8 + meta_size;
    if (body_len < 0 || body_len % 8 != 0)
      return Bad(src_, at + ": body length " + std::to_string(body_len) + " is not a non-negative multiple of 8");
    if (body_len > n - body_at)
      return Bad(src_, at + ": truncated: a body of " + std::to_string(body_len) + " bytes, " +
                           std::to_string(n - body_at) + " bytes remain");
    auto full = arrow::ipc::Message::Open(meta, arrow::SliceBuffer(data_, body_at, body_len));
    if (!full.ok()) return Bad(src_, at + ": invalid message: " + full.status().message());
    if ((*full)->metadata_version() != arrow::ipc::MetadataVersion::V5)
      return Bad(src_, at + ": metadata version V" + std::to_string(static_cast<int>((*full)->metadata_version()) + 1) +
                           " is not supported (V5 is)");
    f.message = std::move(*full);
    pos_ = body_at + body_len;
    ++index_;
    return f;
  }

  std::string where() const { return "message " + std::to_string(index_) + " at byte " + std::to_string(pos_); }

 private:
  std::shared_ptr<arrow::Buffer> data_;
  std::string src_;
  int64_t pos_ = 0;
  int index_ = 0;
  bool done_ = false;
};

std::string message_at(const Framed& f) {
  return "message " + std::to_string(f.index) + " at byte " + std::to_string(f.offset);
}

// Decodes and fully validates one RecordBatch message (its values are
// checked once every batch is read: a bound may be the row count).
Expected<std::shared_ptr<arrow::RecordBatch>> read_batch(const Framed& f, const std::shared_ptr<arrow::Schema>& schema,
                                                         const std::string& src, const ReadOptions& options) {
  std::string at = message_at(f);
  if (auto codec = body_compression(*f.message); codec && !options.allow_compressed_bodies)
    return Bad(src, at + ": the record batch body is compressed (" + *codec + "); compressed bodies are refused");
  arrow::ipc::IpcReadOptions ro = arrow::ipc::IpcReadOptions::Defaults();
  ro.use_threads = false;
  auto batch = arrow::ipc::ReadRecordBatch(*f.message, schema, nullptr, ro);
  if (!batch.ok()) return Bad(src, at + ": invalid record batch: " + batch.status().message());
  if (arrow::Status v = (*batch)->ValidateFull(); !v.ok())
    return Bad(src, at + ": the record batch fails full validation: " + v.message());
  return *batch;
}

// Replays framed messages (the Schema, the dictionaries, the record batches)
// to Arrow's stream reader, which applies each dictionary batch to the record
// batches after it; `at` says which message was read last.
class Replay : public arrow::ipc::MessageReader {
 public:
  Replay(std::vector<Framed> messages, std::string* at) : m_(std::move(messages)), at_(at) {}
  arrow::Result<std::unique_ptr<arrow::ipc::Message>> ReadNextMessage() override {
    if (next_ == m_.size()) return std::unique_ptr<arrow::ipc::Message>();
    *at_ = message_at(m_[next_]);
    return std::move(m_[next_++].message);
  }

 private:
  std::vector<Framed> m_;
  size_t next_ = 0;
  std::string* at_;
};

// The record batches of a stream with dictionary-encoded columns (`messages`
// framed and checked by the walker, the Schema first), decoded by Arrow's
// stream reader and each validated in full. A dictionary that changes is
// caught after (bind_categories).
Expected<std::vector<std::shared_ptr<arrow::RecordBatch>>> read_replayed(std::vector<Framed> messages,
                                                                        const std::string& src) {
  std::string at = message_at(messages.front());
  arrow::ipc::IpcReadOptions ro = arrow::ipc::IpcReadOptions::Defaults();
  ro.use_threads = false;
  auto reader = arrow::ipc::RecordBatchStreamReader::Open(std::make_unique<Replay>(std::move(messages), &at), ro);
  if (!reader.ok()) return Bad(src, at + ": invalid schema: " + reader.status().message());
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
  for (;;) {
    std::shared_ptr<arrow::RecordBatch> b;
    if (arrow::Status st = (*reader)->ReadNext(&b); !st.ok())
      return Bad(src, at + ": invalid record batch: " + st.message());
    if (b == nullptr) return batches;
    if (arrow::Status v = b->ValidateFull(); !v.ok())
      return Bad(src, at + ": the record batch fails full validation: " + v.message());
    batches.push_back(std::move(b));
  }
}

bool has_dictionaries(const arrow::Schema& s) {
  for (const auto& f : s.fields())
    if (f->type()->id() == arrow::Type::DICTIONARY) return true;
  return false;
}

// The row dimension and the dimension bounds of the refinements, once every
// batch is read: a row count against a known row dimension, a bound that
// names a dimension nothing gives.
Status resolve_dims(SchemaDecl& decl, int64_t rows, const std::string& src) {
  if (!decl.rows_dim.empty()) {
    auto it = decl.dims.find(decl.rows_dim);
    const bool constant = decl.rows_dim.find_first_not_of("0123456789") == std::string::npos;
    if (it != decl.dims.end() && it->second != rows)
      return Bad(src, "the stream has " + std::to_string(rows) + " rows; " +
                          (constant ? "the Dataframe has " : "the row dimension " + decl.rows_dim + " is ") +
                          std::to_string(it->second));
    decl.dims[decl.rows_dim] = rows;
  }
  for (ColumnDecl& c : decl.columns)
    for (Refinement& r : c.refinements) {
      if (r.bound_dim.empty()) continue;
      auto it = decl.dims.find(r.bound_dim);
      if (it == decl.dims.end())
        return Bad(src, "the rule `" + rule_text(c, r) + "` names dimension " + r.bound_dim +
                            ", which neither the stream nor the other inputs give; give it a value (--dims " +
                            r.bound_dim + "=V)");
      r.bound = static_cast<double>(it->second);
    }
  return Status::Ok();
}

// Every batch's values against the declaration (after resolve_dims).
Status check_all_values(const SchemaDecl& decl, const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
                        const std::string& src) {
  int64_t row0 = 0;
  for (const auto& b : batches) {
    for (size_t i = 0; i < decl.columns.size(); ++i) {
      const arrow::Array& a = *b->column(static_cast<int>(i));
      MLK_RETURN_IF_ERROR(check_values(decl.columns[i], slice_of(decl.columns[i], a), a.length(), row0, src));
    }
    row0 += b->num_rows();
  }
  return Status::Ok();
}

// The dictionary of Category column `i` (the same in every batch: bind_categories).
std::vector<std::string> dictionary_of(size_t i, const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches) {
  const auto& a = static_cast<const arrow::DictionaryArray&>(*batches[0]->column(static_cast<int>(i)));
  return detail::dictionary_text(*a.dictionary());
}

// Each Category column's one dictionary: the same in every batch (a delta or
// a replacement makes a batch's differ: refused, naming the batch), its size
// against a constant or known dimension, then bound to category_dim. Before
// resolve_dims, so that a rule may name the dimension.
Status bind_categories(SchemaDecl& decl, const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
                       const std::string& src) {
  for (size_t i = 0; i < decl.columns.size(); ++i) {
    const ColumnDecl& c = decl.columns[i];
    if (!c.category) continue;
    std::shared_ptr<arrow::Array> first;
    for (size_t b = 0; b < batches.size(); ++b) {
      const auto& a = static_cast<const arrow::DictionaryArray&>(*batches[b]->column(static_cast<int>(i)));
      if (first == nullptr) first = a.dictionary();
      else if (!a.dictionary()->Equals(*first))
        return Bad(src, "column `" + c.name + "`: record batch " + std::to_string(b) + " has another dictionary (" +
                            std::to_string(a.dictionary()->length()) + " values) than record batch 0 (" +
                            std::to_string(first->length()) +
                            " values): a delta or a replacement; a Category column has one dictionary per stream");
    }
    const int64_t size = first == nullptr ? 0 : first->length();
    std::optional<int64_t> want = c.categories;
    if (!want && !c.category_dim.empty())
      if (auto it = decl.dims.find(c.category_dim); it != decl.dims.end()) want = it->second;
    if (want && *want != size)
      return Bad(src, "column `" + c.name + "`: declared " + type_text(c) +
                          (c.categories ? "" : " with " + c.category_dim + " = " + std::to_string(*want)) +
                          ", the stream's dictionary has " + std::to_string(size) + " values");
    if (!c.category_dim.empty()) decl.dims[c.category_dim] = size;
  }
  return Status::Ok();
}

// The values of column `i` in place, when the layout allows: one batch, no
// null (rows nor elements; a bitmap with every bit set is fine), aligned to
// the element size, not Bool (bit-packed).
const uint8_t* view_of(const ColumnDecl& c, size_t i, const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
                       size_t elem_size) {
  if (batches.size() != 1 || !detail::viewable(c.dtype)) return nullptr;
  const arrow::Array& a = *batches[0]->column(static_cast<int>(i));
  ColumnSlice s = slice_of(c, a);
  if (s.row_valid != nullptr || s.elem_valid != nullptr || s.values == nullptr || s.phys != c.dtype) return nullptr;
  const uint8_t* p = s.values + static_cast<size_t>(s.first) * elem_size;
  return reinterpret_cast<uintptr_t>(p) % elem_size == 0 ? p : nullptr;
}

// The checked batches into one HostTensor per column (or a view of it).
Table assemble(const SchemaDecl& decl, const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches, int64_t rows,
               bool zero_copy) {
  Table t;
  t.rows = rows;
  t.batches = static_cast<int64_t>(batches.size());
  if (zero_copy) t.owner = std::make_shared<std::vector<std::shared_ptr<arrow::RecordBatch>>>(batches);
  for (size_t i = 0; i < decl.columns.size(); ++i) {
    const ColumnDecl& c = decl.columns[i];
    Column col;
    col.name = c.name;
    if (c.category) col.dictionary = batches.empty() ? std::vector<std::string>{} : dictionary_of(i, batches);
    std::vector<int64_t> shape{rows};
    if (c.list_size) shape.push_back(*c.list_size);
    if (zero_copy && rows > 0) {
      col.values.dtype = c.dtype;
      col.values.shape = shape;
      col.view = view_of(c, i, batches, col.values.elem_size());
      if (col.view != nullptr) {
        if (c.nullable) {  // a view has no null row
          col.valid = HostTensor(DType::Bool, {rows});
          std::fill(col.valid->bytes.begin(), col.valid->bytes.end(), uint8_t{1});
        }
        t.columns.push_back(std::move(col));
        continue;
      }
    }
    col.values = HostTensor(c.dtype, shape);
    if (c.nullable) col.valid = HostTensor(DType::Bool, {rows});
    const size_t es = col.values.elem_size();
    int64_t row0 = 0;
    for (const auto& b : batches) {
      const arrow::Array& a = *b->column(static_cast<int>(i));
      ColumnSlice s = slice_of(c, a);
      uint8_t* out = col.values.bytes.data() + static_cast<size_t>(row0 * s.width) * es;
      const int64_t len = a.length();
      // A Category's int8 and int16 codes are widened to int32.
      auto copy = s.phys == c.dtype ? copy_elements : detail::widen_codes;
      if (s.row_valid == nullptr) copy(s.phys, s.values, s.first, len * s.width, out);
      for (int64_t r = 0; r < len && s.row_valid != nullptr; ++r)
        if (row_is_valid(s, r))
          copy(s.phys, s.values, s.first + r * s.width, s.width, out + static_cast<size_t>(r * s.width) * es);
      if (col.valid)
        for (int64_t r = 0; r < len; ++r) col.valid->bytes[static_cast<size_t>(row0 + r)] = row_is_valid(s, r) ? 1 : 0;
      row0 += len;
    }
    t.columns.push_back(std::move(col));
  }
  return t;
}

// The stream against `fixed`, or against what `declare` makes of its column
// names (exactly one of the two is given).
Expected<Table> read_checked(std::shared_ptr<arrow::Buffer> data, const SchemaDecl* fixed, const DeclareFn* declare,
                             const std::string& src, const ReadOptions& options) {
  SchemaDecl decl;
  if (fixed != nullptr) {
    decl = *fixed;
    MLK_RETURN_IF_ERROR(validate_decl(decl));
  }
  MessageWalker walker(std::move(data), src);
  std::shared_ptr<arrow::Schema> schema;
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
  std::vector<Framed> replay;  // with dictionary-encoded columns: every message, for read_replayed
  int64_t rows = 0;
  for (;;) {
    auto f = walker.next();
    if (!f.ok()) return f.status();
    if (f->message == nullptr) break;
    arrow::ipc::MessageType type = f->message->type();
    std::string at = message_at(*f);
    if (schema == nullptr && type != arrow::ipc::MessageType::SCHEMA)
      return Bad(src, at + ": the stream must begin with a Schema message, found " + message_type_name(type));
    if (type == arrow::ipc::MessageType::SCHEMA) {
      if (schema != nullptr) return Bad(src, at + ": a second Schema message");
      arrow::ipc::DictionaryMemo memo;
      auto s = arrow::ipc::ReadSchema(*f->message, &memo);
      if (!s.ok()) return Bad(src, at + ": invalid schema: " + s.status().message());
      if (declare != nullptr) {
        std::vector<std::string> names;
        for (const auto& field : (*s)->fields()) names.push_back(field->name());
        auto made = (*declare)(names);
        if (!made.ok()) return made.status();
        decl = std::move(*made);
        MLK_RETURN_IF_ERROR(validate_decl(decl));
      }
      MLK_RETURN_IF_ERROR(check_schema(decl, **s, src));
      schema = *s;
      if (has_dictionaries(*schema)) replay.push_back(std::move(*f));
      continue;
    }
    if (type == arrow::ipc::MessageType::DICTIONARY_BATCH && replay.empty())
      return Bad(src, at + ": dictionary batches are refused (dictionary-encoded columns are not read)");
    if (type != arrow::ipc::MessageType::RECORD_BATCH && type != arrow::ipc::MessageType::DICTIONARY_BATCH)
      return Bad(src, at + ": a " + message_type_name(type) + " message; only Schema and RecordBatch messages are read");
    if (auto codec = body_compression(*f->message);
        codec && !options.allow_compressed_bodies && type == arrow::ipc::MessageType::RECORD_BATCH && !replay.empty())
      return Bad(src, at + ": the record batch body is compressed (" + *codec + "); compressed bodies are refused");
    if (!replay.empty()) {
      replay.push_back(std::move(*f));
      continue;
    }
    auto b = read_batch(*f, schema, src, options);
    if (!b.ok()) return b.status();
    rows += (*b)->num_rows();
    batches.push_back(std::move(*b));
  }
  if (schema == nullptr) return Bad(src, "empty stream: no Schema message");
  if (!replay.empty()) {
    auto b = read_replayed(std::move(replay), src);
    if (!b.ok()) return b.status();
    batches = std::move(*b);
    for (const auto& x : batches) rows += x->num_rows();
  }
  MLK_RETURN_IF_ERROR(bind_categories(decl, batches, src));
  MLK_RETURN_IF_ERROR(resolve_dims(decl, rows, src));
  MLK_RETURN_IF_ERROR(check_all_values(decl, batches, src));
  Table t = assemble(decl, batches, rows, options.zero_copy);
  t.dims = decl.dims;
  return t;
}

// A C stream against `decl`: the schema, every batch in full, the values.
Expected<Table> read_c_checked(ArrowArrayStream* stream, const SchemaDecl& fixed, const std::string& src,
                               const ReadOptions& options) {
  SchemaDecl decl = fixed;
  auto reader = arrow::ImportRecordBatchReader(stream);  // takes ownership, releases on destruction
  MLK_RETURN_IF_ERROR(validate_decl(decl));
  if (!reader.ok()) return Bad(src, "not a readable Arrow C stream: " + reader.status().message());
  MLK_RETURN_IF_ERROR(check_schema(decl, *(*reader)->schema(), src));
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
  int64_t rows = 0;
  for (int index = 0;; ++index) {
    std::shared_ptr<arrow::RecordBatch> b;
    if (arrow::Status st = (*reader)->ReadNext(&b); !st.ok())
      return Bad(src, "batch " + std::to_string(index) + ": the producer failed: " + st.message());
    if (b == nullptr) break;
    if (arrow::Status v = b->ValidateFull(); !v.ok())
      return Bad(src, "batch " + std::to_string(index) + ": the record batch fails full validation: " + v.message());
    rows += b->num_rows();
    batches.push_back(std::move(b));
  }
  MLK_RETURN_IF_ERROR(bind_categories(decl, batches, src));
  MLK_RETURN_IF_ERROR(resolve_dims(decl, rows, src));
  MLK_RETURN_IF_ERROR(check_all_values(decl, batches, src));
  Table t = assemble(decl, batches, rows, options.zero_copy);
  t.dims = decl.dims;
  return t;
}

}  // namespace

const char* op_text(Refinement::Op op) {
  switch (op) {
    case Refinement::Op::kEq: return "=";
    case Refinement::Op::kNe: return "!=";
    case Refinement::Op::kLt: return "<";
    case Refinement::Op::kLe: return "<=";
    case Refinement::Op::kGt: return ">";
    case Refinement::Op::kGe: return ">=";
  }
  return "?";
}

std::string type_text(const ColumnDecl& c) {
  std::string t = dtype_name(c.dtype);
  if (c.list_size) t = "FixedSizeList[" + t + ", " + std::to_string(*c.list_size) + "]";
  if (c.any_list_size && !c.list_size) t = "FixedSizeList[" + t + ", " + (c.list_dim.empty() ? "*" : c.list_dim) + "]";
  if (c.category)
    t = "Category[" + t + ", " + (c.categories ? std::to_string(*c.categories) : c.category_dim.empty() ? "*" : c.category_dim) + "]";
  return t;
}

std::string rule_text(const ColumnDecl& c, const Refinement& r) {
  std::string bound = r.bound_name.empty() ? format_value(r.bound, r.bound == std::floor(r.bound)) : r.bound_name;
  return c.name + " " + op_text(r.op) + " " + bound;
}

Status validate_decl(const SchemaDecl& decl) {
  if (decl.columns.empty()) return Status::InvalidArgument("schema declaration: no columns");
  std::set<std::string> seen;
  for (const ColumnDecl& c : decl.columns) {
    if (c.name.empty()) return Status::InvalidArgument("schema declaration: a column without a name");
    if (!seen.insert(c.name).second)
      return Status::InvalidArgument("schema declaration: column `" + c.name + "` is declared twice");
    if (arrow_type_of(c.dtype) == nullptr)
      return Status::InvalidArgument("schema declaration: column `" + c.name + "` has type " + dtype_name(c.dtype) +
                                     "; columns are I32, I64, F16, BF16, F32, F64 or Bool, or a FixedSizeList of one");
    if (c.category && (c.list_size || c.any_list_size || c.dtype != DType::I32))
      return Status::InvalidArgument("schema declaration: column `" + c.name +
                                     "` is a Category: its codes are I32, without a list size");
    if (c.list_size && c.any_list_size)
      return Status::InvalidArgument("schema declaration: column `" + c.name + "` has both a list size and any list size");
    if (c.list_size && *c.list_size < 1)
      return Status::InvalidArgument("schema declaration: column `" + c.name + "` has list size " +
                                     std::to_string(*c.list_size) + "; it must be at least 1");
  }
  return Status::Ok();
}

const Column* Table::find(std::string_view name) const {
  for (const Column& c : columns)
    if (c.name == name) return &c;
  return nullptr;
}

// `bytes` in place when 8-byte aligned (Arrow's requirement), else one copy
// into 64-byte aligned memory.
static Expected<std::shared_ptr<arrow::Buffer>> aligned(std::span<const uint8_t> bytes, const std::string& src) {
  if (reinterpret_cast<uintptr_t>(bytes.data()) % 8 == 0)
    return std::make_shared<arrow::Buffer>(bytes.data(), static_cast<int64_t>(bytes.size()));
  auto buf = arrow::AllocateBuffer(static_cast<int64_t>(bytes.size()), 64);
  if (!buf.ok()) return Status::InvalidArgument(src + ": cannot allocate " + std::to_string(bytes.size()) + " bytes");
  if (!bytes.empty()) std::memcpy((*buf)->mutable_data(), bytes.data(), bytes.size());
  return std::shared_ptr<arrow::Buffer>(std::move(*buf));
}

// The whole file at `path` in one 64-byte aligned buffer (read, not copied).
static Expected<std::shared_ptr<arrow::Buffer>> read_aligned(const std::string& path) {
  auto file = arrow::io::ReadableFile::Open(path);
  if (!file.ok()) return Status::IOError("cannot read " + path + ": no such file or not readable");
  auto size = (*file)->GetSize();
  if (!size.ok()) return Status::IOError("cannot read " + path + ": " + size.status().message());
  auto buf = (*file)->Read(*size);
  if (!buf.ok() || (*buf)->size() != *size) return Status::IOError("error while reading " + path);
  return *buf;
}

static Expected<Table> read_guarded(std::span<const uint8_t> bytes, const std::shared_ptr<arrow::Buffer>* file,
                                    const SchemaDecl* fixed, const DeclareFn* declare, const std::string& source,
                                    const ReadOptions& options) {
  try {
    std::shared_ptr<arrow::Buffer> data;
    if (file != nullptr) {
      data = *file;
    } else {
      auto a = aligned(bytes, source);
      if (!a.ok()) return a.status();
      data = *a;
    }
    return read_checked(std::move(data), fixed, declare, source, options);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(source + ": the Arrow reader failed: " + e.what());
  } catch (...) {
    return Status::InvalidArgument(source + ": the Arrow reader failed with an unknown exception");
  }
}

Expected<Table> read_stream(std::span<const uint8_t> bytes, const SchemaDecl& decl, const std::string& source,
                            const ReadOptions& options) {
  return read_guarded(bytes, nullptr, &decl, nullptr, source, options);
}

Expected<Table> read_stream_file(const std::string& path, const SchemaDecl& decl, const ReadOptions& options) {
  auto data = read_aligned(path);
  if (!data.ok()) return data.status();
  return read_guarded({}, &*data, &decl, nullptr, path, options);
}

Expected<Table> read_stream_file(const std::string& path, const DeclareFn& declare, const ReadOptions& options) {
  auto data = read_aligned(path);
  if (!data.ok()) return data.status();
  return read_guarded({}, &*data, nullptr, &declare, path, options);
}

Expected<Table> read_c_stream(ArrowArrayStream* stream, const SchemaDecl& decl, const std::string& source,
                              const ReadOptions& options) {
  if (stream == nullptr || stream->release == nullptr)
    return Status::InvalidArgument(source + ": no Arrow C stream (null, or already released)");
  try {
    return read_c_checked(stream, decl, source, options);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(source + ": the Arrow reader failed: " + e.what());
  } catch (...) {
    return Status::InvalidArgument(source + ": the Arrow reader failed with an unknown exception");
  }
}

std::string arrow_version() { return ARROW_VERSION_STRING; }

}  // namespace mlk::arrow_ipc
