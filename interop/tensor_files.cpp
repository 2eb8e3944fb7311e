#include "interop/tensor_files.h"

#include <cstring>
#include <optional>

#include "interop/safetensors.h"

namespace mlk {
namespace {

std::optional<DType> from_st(safetensors::DType t) {
  using S = safetensors::DType;
  switch (t) {
    case S::BOOL: return DType::Bool;
    case S::U8: return DType::U8;
    case S::I8: return DType::I8;
    case S::I16: return DType::I16;
    case S::I32: return DType::I32;
    case S::I64: return DType::I64;
    case S::F16: return DType::F16;
    case S::BF16: return DType::BF16;
    case S::F32: return DType::F32;
    case S::F64: return DType::F64;
    default: return std::nullopt;
  }
}

safetensors::DType to_st(DType t) {
  using S = safetensors::DType;
  switch (t) {
    case DType::Bool: return S::BOOL;
    case DType::U8: return S::U8;
    case DType::I8: return S::I8;
    case DType::I16: return S::I16;
    case DType::I32: return S::I32;
    case DType::I64: return S::I64;
    case DType::F16: return S::F16;
    case DType::BF16: return S::BF16;
    case DType::F32: return S::F32;
    case DType::F64: return S::F64;
  }
  return S::U8;
}

}  // namespace

Expected<std::map<std::string, HostTensor>> read_safetensors(const std::string& path) {
  auto file = safetensors::File::Open(path);
  if (!file.ok()) return file.status();
  std::map<std::string, HostTensor> out;
  for (const auto& v : file->tensors()) {
    auto dt = from_st(v.dtype);
    if (!dt)
      return Status::InvalidArgument(path + ": tensor \"" + v.name + "\" has dtype " +
                                     std::string(safetensors::dtype_name(v.dtype)) + ", which .tl has no type for");
    HostTensor t(*dt, v.shape);
    MLK_CHECK(t.bytes.size() == v.nbytes, "safetensors view size disagrees with its shape");
    if (v.nbytes) std::memcpy(t.bytes.data(), v.data, v.nbytes);
    if (*dt == DType::Bool)
      for (auto& b : t.bytes) b = b != 0;
    out.emplace(v.name, std::move(t));
  }
  return out;
}

Status write_safetensors(const std::string& path, const std::map<std::string, HostTensor>& tensors) {
  std::vector<safetensors::TensorToWrite> w;
  for (const auto& [name, t] : tensors)
    w.push_back({name, to_st(t.dtype), t.shape, std::span<const uint8_t>(t.bytes.data(), t.bytes.size())});
  return safetensors::Write(path, w);
}

}  // namespace mlk
