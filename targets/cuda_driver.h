// The CUDA driver API, loaded on first use, and the one CUDA context of this
// process. mlk links no CUDA library: libcuda.so.1 is dlopen()ed the first
// time a CUDA kernel is called or measured, so a machine without an NVIDIA
// driver loads and runs every CPU kernel, and a CUDA call there fails with a
// Status naming the missing driver, never a crash.
//
// One context per process: every mlk CUDA kernel runs in the *primary
// context* of its device (cuDevicePrimaryCtxRetain), the context the CUDA
// runtime API and PyTorch use, so tensors of either are valid in mlk kernels
// and no artifact creates a context of its own (the artifacts' C entry uses
// the same primary context when called directly; targets/abi.h). The device
// is MLK_CUDA_DEVICE (default 0); its context is retained once and kept for
// the process's life. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace mlk::cuda {

// The driver entry points mlk uses (the _v2 ABI where one exists). CUresult
// is an int; CUcontext, CUstream and CUevent are opaque pointers; a device
// pointer is a uint64_t.
struct Driver {
  int (*init)(unsigned) = nullptr;
  int (*device_get)(int*, int) = nullptr;
  int (*device_get_count)(int*) = nullptr;
  int (*device_get_attribute)(int*, int, int) = nullptr;
  int (*primary_ctx_retain)(void**, int) = nullptr;
  int (*ctx_push)(void*) = nullptr;
  int (*ctx_pop)(void**) = nullptr;
  int (*ctx_synchronize)() = nullptr;
  int (*mem_alloc)(uint64_t*, size_t) = nullptr;
  int (*mem_free)(uint64_t) = nullptr;
  int (*memcpy_htod)(uint64_t, const void*, size_t) = nullptr;
  int (*memcpy_dtoh)(void*, uint64_t, size_t) = nullptr;
  int (*memset_d8)(uint64_t, unsigned char, size_t) = nullptr;
  int (*event_create)(void**, unsigned) = nullptr;
  int (*event_record)(void*, void*) = nullptr;
  int (*event_synchronize)(void*) = nullptr;
  int (*event_elapsed_time)(float*, void*, void*) = nullptr;
  int (*event_destroy)(void*) = nullptr;
  int (*stream_synchronize)(void*) = nullptr;
  int (*get_error_name)(int, const char**) = nullptr;
  int (*driver_get_version)(int*) = nullptr;
};

// The driver, loaded once (libcuda.so.1, else libcuda.so). Unsupported, with
// the loader's reason, where there is none; the result is cached.
Expected<const Driver*> driver();

// The device mlk kernels of this process run on: MLK_CUDA_DEVICE, default 0
// (read once). A malformed value is an error when a CUDA kernel is used.
Expected<int> process_device();

// The primary context of `device`, retained on first use and kept: the one
// context of the process (the top of this file). Needs driver().
Expected<void*> process_context(int device);

// "CUDA_ERROR_OUT_OF_MEMORY (2)" for a CUresult, for messages.
std::string error_name(int rc);

// Makes the process context current on this thread for a scope.
class ScopedContext {
 public:
  explicit ScopedContext(void* ctx);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;
  bool ok() const { return ok_; }

 private:
  bool ok_ = false;
};

}  // namespace mlk::cuda
