// A strict reader of Arrow IPC streams (the `.arrows` format) against a
// declared schema, delivering one HostTensor per column.
//
// This header is Arrow-free: the declaration and the result are plain data.
// The implementation (interop/arrow_reader.cpp and arrow_columns.cpp, the
// code that includes Arrow C++) uses the reference implementation, libarrow from the
// pinned pyarrow wheel, and adds the checks docs/interop/arrow.md lists:
//   - framing: every message starts with the continuation marker FFFFFFFF, a
//     metadata size that is a non-negative multiple of 8 and fits, a body
//     length that is a non-negative multiple of 8 and fits; after the
//     end-of-stream marker nothing follows; metadata version V5 only;
//   - messages: one Schema first, then RecordBatch messages (and, for
//     Category columns, their dictionaries before the first batch; a
//     dictionary that changes, by a delta or a replacement, is refused);
//     tensors and compressed bodies are refused;
//   - the schema equals the declaration exactly: column names and order,
//     types (FixedSizeList with its size), little-endian; a column declared
//     nullable needs a nullable field, a non-nullable one takes either (its
//     rows may then hold no null: the value check names the first);
//   - every batch passes Arrow's full validation (ValidateFull);
//   - values: no null in a non-nullable column nor in the elements of a
//     FixedSizeList, and every refinement holds on every valid row.
// Batches are concatenated along the rows. Every failure is a non-OK Status
// (InvalidArgument, IOError for an unreadable file) whose message starts with
// the source's name and says what is wrong and where (the message and its
// byte offset, the column, the row); nothing partial is delivered, and no
// input makes the reader crash (Arrow's exceptions are caught too).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "lang/dtype.h"
#include "lang/tensor.h"

struct ArrowArrayStream;  // the Arrow C stream interface (arrow/c/abi.h)

namespace mlk::arrow_ipc {

// A comparison every value of a column must pass: `value OP bound`. For a
// FixedSizeList column it applies to every element. `bound_name` is how the
// bound is written in messages when it is not a literal (a dim, e.g. "D");
// empty prints the number.
struct Refinement {
  enum class Op { kEq, kNe, kLt, kLe, kGt, kGe };
  Op op = Op::kGe;
  double bound = 0;
  std::string bound_name;
  // A bound that is a dimension the reader resolves (bound_name is then the
  // same name): from SchemaDecl::dims, a list size the stream binds, or the
  // row count. One it cannot resolve refuses the stream.
  std::string bound_dim;
};

// "=", "!=", "<", "<=", ">", ">=".
const char* op_text(Refinement::Op op);

// One declared column. `dtype` is one of I32, I64, F16, BF16, F32, F64, Bool
// (Arrow's types for them: interop/arrow_columns.h; BF16 is the extension
// type mlk.bfloat16 on uint16, Bool is unpacked to a byte per value); with
// `list_size` the column is FixedSizeList[dtype, list_size] (size >= 1);
// with `any_list_size` (and no list_size) it is a FixedSizeList of dtype of
// whatever size the stream has, for a size that is a dim bound later
// (written FixedSizeList[F16, *]).
struct ColumnDecl {
  std::string name;
  DType dtype = DType::F32;
  std::optional<int64_t> list_size;
  bool any_list_size = false;
  // With any_list_size: the dimension the stream's list size binds (every
  // column naming it must have the same size; SchemaDecl::dims may fix it).
  std::string list_dim;
  bool nullable = false;
  std::vector<Refinement> refinements;
  // Category[I32, K]: a dictionary-encoded field (indices int8, int16 or
  // int32, widened to the I32 codes; any value type) with one dictionary per
  // stream. `dtype` is then I32 and there is no list size. `categories`
  // fixes the dictionary's size; else `category_dim` (if set) is bound to it,
  // and a value SchemaDecl::dims already has must match.
  bool category = false;
  std::optional<int64_t> categories;
  std::string category_dim;
};

// The declared type as mlk writes it: "I32", "FixedSizeList[F16, 384]".
std::string type_text(const ColumnDecl& c);
// "session_len >= 1", "x <= D".
std::string rule_text(const ColumnDecl& c, const Refinement& r);

struct SchemaDecl {
  std::vector<ColumnDecl> columns;
  // The dimension the row count binds (empty: none), and dimensions known
  // before reading: a row count or list size that differs is refused.
  std::string rows_dim;
  std::map<std::string, int64_t> dims;
};

// InvalidArgument for a declaration the reader cannot check against: no
// columns, an empty or repeated name, another dtype, a list size below 1 (or
// both a list size and any_list_size), a Category that is not I32 or has a
// list size.
Status validate_decl(const SchemaDecl& decl);

struct ReadOptions {
  // Compressed record batch bodies (LZ4 frame, ZSTD) are refused unless set.
  bool allow_compressed_bodies = false;
  // Columns whose layout allows it are not copied but viewed (Column::view):
  // one batch, no null, values aligned to their element size, not Bool.
  bool zero_copy = false;
};

// One column of the table: `values` has shape [rows] or [rows, list_size] and
// the declared dtype. For a nullable column `valid` is a Bool tensor [rows]
// (1 where the row has a value) and the values of null rows are zero; for a
// non-nullable column `valid` is empty.
struct Column {
  std::string name;
  HostTensor values;  // with a view: dtype and shape only, no bytes
  std::optional<HostTensor> valid;
  // With ReadOptions::zero_copy, where the layout allows: the values in the
  // stream's own memory (row-major, values.shape), alive while Table::owner is.
  const uint8_t* view = nullptr;
  // A Category column's dictionary, each value as text (a string as it is,
  // anything else as Arrow prints the scalar, "null" for a null); code c
  // names dictionary[c]. Empty for other columns.
  std::optional<std::vector<std::string>> dictionary;
  const uint8_t* data() const { return view != nullptr ? view : values.bytes.data(); }
};

struct Table {
  int64_t rows = 0;
  int64_t batches = 0;            // record batches in the stream
  std::vector<Column> columns;    // in declaration order
  // SchemaDecl::dims with the dimensions the stream bound (rows_dim, list_dim).
  std::map<std::string, int64_t> dims;
  // Keeps the stream's memory (its batches) alive for the columns' views.
  std::shared_ptr<const void> owner;
  const Column* find(std::string_view name) const;
};

// Reads and checks the stream in `bytes` (used in place when 8-byte aligned,
// else copied once into aligned memory; the columns are one more copy).
// `source` names it in messages (a path, or "<stream>").
Expected<Table> read_stream(std::span<const uint8_t> bytes, const SchemaDecl& decl, const std::string& source,
                            const ReadOptions& options = {});

// The same on the file at `path`, read once into aligned memory (the columns
// are then its one copy); IOError when it cannot be read.
Expected<Table> read_stream_file(const std::string& path, const SchemaDecl& decl,
                                 const ReadOptions& options = {});

// Makes the declaration from the stream's column names (in the stream's
// order) when the Schema message has been read and framed; its error refuses
// the stream as it is (the reader prefixes nothing).
using DeclareFn = std::function<Expected<SchemaDecl>(const std::vector<std::string>& column_names)>;

// read_stream_file with the declaration made by `declare`; the schema is
// then compared with it exactly as with a fixed declaration.
Expected<Table> read_stream_file(const std::string& path, const DeclareFn& declare, const ReadOptions& options = {});

// The same checks on a stream of the Arrow C stream interface (a pyarrow
// Table's or RecordBatchReader's `__arrow_c_stream__`, any C++ producer):
// the schema against `decl`, every batch validated in full, the values. The
// stream is consumed (released) whatever the outcome. There is no framing,
// so compression does not occur; a Category column's dictionary must be the
// same in every batch. `source` names it in messages.
Expected<Table> read_c_stream(struct ArrowArrayStream* stream, const SchemaDecl& decl, const std::string& source,
                              const ReadOptions& options = {});

// The Arrow C++ version the reader is linked against, e.g. "26.0.1".
std::string arrow_version();

}  // namespace mlk::arrow_ipc
