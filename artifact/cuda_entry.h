// The CUDA half of an artifact's C wrapper (artifact/build.cpp writes the
// rest): C source text that makes CUDA artifacts take device memory
// (mlk_NAME_cuda, targets/abi.h) and run in the process's one CUDA context.
//
// What the generated C does: the driver (libcuda.so.1) is dlopen()ed on the
// first call and handed to Halide's CUDA runtime (halide_cuda_get_symbol);
// Halide's context and stream hooks (halide_set_cuda_acquire_context,
// halide_set_cuda_get_stream) return the caller's context and stream for
// the duration of one call (thread-local), else the primary context of the
// device; device tensors are wrapped (halide_cuda_wrap_device_ptr) and
// detached after the call, never freed or copied; Halide keeps the device
// allocations of its intermediates for reuse (halide_reuse_device_allocations).
#pragma once

#include <cstddef>
#include <string>

namespace mlk {

// File-scope C: includes, the hooks, mlkabi_cuda_begin(call) and
// mlkabi_cuda_end(). Goes after the wrapper's mlkabi_err and includes.
std::string cuda_wrapper_support();

// Statements run after the arguments are checked and before the Halide
// entry: the context for this call, and the device tensors wrapped. `n` is
// the number of parameters (b[n] is the output).
std::string cuda_wrapper_before(size_t n);

// Statements run after the Halide entry (its result in rc): the output
// copied to the host unless it lives on the device, device copies of host
// tensors freed, device tensors detached, the call's context dropped.
std::string cuda_wrapper_after(size_t n);

}  // namespace mlk
