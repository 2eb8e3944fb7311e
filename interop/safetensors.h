// A strict reader (zero-copy, mmap) and atomic writer for the safetensors format.
//
// Format (interop-facts.md B2): u64 little-endian N, N bytes of UTF-8 JSON, then
// the data buffer. The reader enforces every reference rejection R1..R10 and,
// beyond the reference, rejects: duplicate keys anywhere in the header, unknown
// or missing fields in an entry, non-string __metadata__ values (and a null
// __metadata__), negative or non-integer numbers, and a header that does not
// begin with `{` (leading whitespace is rejected; trailing 0x20 padding is
// accepted). Every error is a non-OK Status whose message names the rule in plain
// words, the tensor where there is one, and the file path where there is one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace mlk::safetensors {

// Every dtype named by the format, in the reference's declaration order.
enum class DType : uint8_t {
  BOOL, F4, F6_E2M3, F6_E3M2, U8, I8, F8_E5M2, F8_E4M3, F8_E8M0, F8_E4M3FNUZ,
  F8_E5M2FNUZ, I16, U16, F16, BF16, I32, U32, F32, C64, F64, I64, U64,
};

// The spelling used in headers, e.g. "BF16".
std::string_view dtype_name(DType dtype);
// Inverse of dtype_name; nullopt for an unknown spelling (case-sensitive).
std::optional<DType> parse_dtype(std::string_view name);
// Bits per element: 4 for F4, 6 for F6_*, 64 for C64, and so on.
int dtype_bits(DType dtype);
// Byte alignment a typed pointer to one element needs (C64: 4, sub-byte: 1).
size_t dtype_alignment(DType dtype);

// One tensor of an open File. `data` points into the File's storage and lives as
// long as the File (moving the File keeps it valid). `aligned` is true iff `data`
// is a multiple of dtype_alignment(dtype); when false, copy before typed access.
struct TensorView {
  std::string name;
  DType dtype = DType::U8;
  std::vector<int64_t> shape;  // row-major (C order), every dim >= 0; {} = rank 0
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  bool aligned = false;
};

// A validated safetensors file. Move-only; immutable once built.
class File {
 public:
  // Maps `path` read-only and validates it. The caller must not truncate or
  // rewrite the file while the File lives (that would fault on access).
  [[nodiscard]] static Expected<File> Open(const std::string& path);
  // Validates an in-memory file, taking ownership of the bytes.
  [[nodiscard]] static Expected<File> FromBytes(std::vector<uint8_t> bytes);

  File(File&&) noexcept;
  File& operator=(File&&) noexcept;
  ~File();

  // All tensors, sorted by name (bytewise).
  const std::vector<TensorView>& tensors() const { return tensors_; }
  // The tensor called `name`, or nullptr.
  const TensorView* find(std::string_view name) const;
  // The optional __metadata__ object; empty when absent.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  struct Storage;  // owns the bytes: an mmap or a vector; heap-held so views survive moves
  File();
  // Validates storage's bytes; `where` (a path, or empty) prefixes error messages.
  static Expected<File> Parse(std::unique_ptr<Storage> storage, const std::string& where);

  std::unique_ptr<Storage> storage_;
  std::vector<TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A tensor to write; `data` is borrowed for the duration of the call and must
// hold exactly the little-endian, row-major bytes that dtype and shape imply.
struct TensorToWrite {
  std::string name;
  DType dtype = DType::U8;
  std::vector<int64_t> shape;
  std::span<const uint8_t> data;
};

// Serializes to bytes that File::FromBytes accepts: tensors ordered by
// descending dtype_alignment then name, contiguous offsets from 0, header padded
// with 0x20 so the data buffer starts at a multiple of 8 (hence every tensor is
// aligned when the buffer is). `__metadata__` is written only when non-empty.
// InvalidArgument for duplicate or reserved names, non-UTF-8 strings, negative
// dims, sizes that overflow or are not whole bytes, or data of the wrong size.
[[nodiscard]] Expected<std::vector<uint8_t>> Serialize(
    const std::vector<TensorToWrite>& tensors,
    const std::map<std::string, std::string>& metadata = {});

// Writes what Serialize would produce to `path` atomically: a temporary file in
// the same directory is written, fsynced, renamed over `path`, and the directory
// is fsynced. On failure `path` is untouched and the temporary file removed.
[[nodiscard]] Status Write(const std::string& path, const std::vector<TensorToWrite>& tensors,
                           const std::map<std::string, std::string>& metadata = {});

}  // namespace mlk::safetensors
