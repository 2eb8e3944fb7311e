// DLPack tensors as the runtime takes and gives them: the versioned DLPack
// 1.x record (declared here when the build's dlpack.h, Debian's
// libdlpack-dev with DLPACK_VERSION 60, predates it), a consumed tensor that
// calls its producer's deleter exactly once, and host buffers the runtime
// allocates for results and exports with a deleter of its own.
// docs/interop/pytorch.md ("DLPack") states the protocol as the Python
// module speaks it; this file holds what does not need Python.
//
// Contracts:
// - ConsumedTensor owns a DLManagedTensor or DLManagedTensorVersioned from
//   the moment Adopt() is called, also when Adopt() returns an error: the
//   deleter (which may be NULL) runs exactly once, when the ConsumedTensor is
//   destroyed or, on an error, before Adopt() returns. The deleter runs on
//   the destroying thread; a caller holding Python-made tensors destroys
//   them with the GIL held (numpy 1.x's deleter does not take it).
// - Exported tensors (export_legacy / export_versioned) are compact
//   row-major with non-NULL strides, byte_offset 0 and data aligned to 64
//   bytes; shape and strides live in the manager context; the buffer lives
//   until the last holder (the HostBuffer's shared_ptr or an export not yet
//   deleted) lets go. Their deleters touch no Python state and are safe on
//   any thread, without the GIL.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "lang/dtype.h"

#ifndef DLPACK_MAJOR_VERSION  // dlpack.h before 1.0: the 1.x records, with the layout of dlpack.h 1.x
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
#endif

namespace mlk::rt {

// The DLPack version the runtime reads and writes: any 1.x on import (1.2
// and later require non-NULL strides), 1.0 on export.
constexpr uint32_t kDLPackMajor = 1;
constexpr uint32_t kDLPackExportMinor = 0;

// A producer's tensor, consumed: see the contract above. Move-only.
class ConsumedTensor {
 public:
  // `what` names the tensor in errors ("argument 0 `x` of `rmsnorm`").
  // A NULL record is an error (nothing to delete). A versioned record whose
  // major version is not 1 is deleted unread and refused; so is one of 1.2
  // or later with NULL strides and ndim > 0.
  static Expected<ConsumedTensor> Adopt(DLManagedTensor* m, const std::string& what);
  static Expected<ConsumedTensor> Adopt(DLManagedTensorVersioned* m, const std::string& what);

  ConsumedTensor(ConsumedTensor&& o) noexcept;
  ConsumedTensor& operator=(ConsumedTensor&& o) noexcept;
  ConsumedTensor(const ConsumedTensor&) = delete;
  ConsumedTensor& operator=(const ConsumedTensor&) = delete;
  ~ConsumedTensor();

  const DLTensor* tensor() const { return tensor_; }
  bool versioned() const { return versioned_ != nullptr; }
  // The producer's READ_ONLY flag (versioned records only; the legacy record
  // has no flags, so it is writable).
  bool read_only() const { return read_only_; }
  // InvalidArgument naming `what` when the tensor is read-only: for outputs.
  Status CheckWritable(const std::string& what) const;

 private:
  ConsumedTensor() = default;
  void Release();
  DLManagedTensor* legacy_ = nullptr;
  DLManagedTensorVersioned* versioned_ = nullptr;
  const DLTensor* tensor_ = nullptr;
  bool read_only_ = false;
};

// A host buffer the runtime allocates for a result: `dtype` elements in the
// compact row-major `shape`, uninitialised, 64-byte aligned.
class HostBuffer {
 public:
  static Expected<std::shared_ptr<HostBuffer>> Allocate(DType dtype, std::vector<int64_t> shape);
  ~HostBuffer();
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  void* data() const { return data_; }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  size_t nbytes() const { return nbytes_; }
  // A DLTensor viewing the buffer (strides NULL: compact), valid while it lives.
  DLTensor view() const;

 private:
  HostBuffer() = default;
  void* data_ = nullptr;
  DType dtype_ = DType::F32;
  std::vector<int64_t> shape_;
  size_t nbytes_ = 0;
};

// New DLPack records viewing `buf` (zero-copy), each holding a reference to
// it until its deleter runs. Bool buffers export as kDLUInt 8 (what torch
// 1.13 imports). `read_only` sets the READ_ONLY flag.
DLManagedTensor* export_legacy(std::shared_ptr<HostBuffer> buf);
DLManagedTensorVersioned* export_versioned(std::shared_ptr<HostBuffer> buf, bool read_only = false);

// For leak tests: HostBuffers alive, and exports whose deleter has not run.
int64_t live_host_buffers();
int64_t live_exports();

}  // namespace mlk::rt
