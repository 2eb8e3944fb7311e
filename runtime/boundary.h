// The runtime's boundary: DLPack tensors checked against a fn's signature
// before any kernel touches them (interop-facts.md B1, "Reject on import").
//
// Contract: check_call() either returns the concrete dimensions and the
// checked host pointers, or an error naming the argument (by parameter name
// and position), the axis and the rule broken. It reads only the DLTensor
// records, never the data, and writes nothing.
//
// Rules, in the order they are checked, per argument and then the output:
//   device  a CPU kernel: kDLCPU. A CUDA kernel: kDLCUDA on the device of the
//           process's CUDA context (targets/cuda_driver.h), used in place, or
//           host memory (kDLCPU, kDLCUDAHost), copied to the device and back
//           within the call. Anything else is refused, naming the argument.
//   dtype   exactly the declared dtype, lanes 1 (no promotion)
//   rank    ndim equals the declared rank; shape non-NULL when ndim > 0
//   extent  every extent >= 0 and <= 2^31 - 1 (Halide buffers index in int32)
//   layout  compact row-major: strides NULL (DLPack <= 1.1) or equal to the
//           row-major strides, ignoring axes of extent 1
//   data    non-NULL unless the tensor is empty; data + byte_offset aligned to
//           the element size
//   dims    every symbol consistent across arguments, the refinements hold
//           (lang/bind.h, same messages as `mlk run`), but for those a
//           checked handle proved (`proven`, below): a refinement of the fn
//           is not evaluated again when (a) its text is one a handle passed
//           as argument i proved (whitespace aside), (b) the call binds
//           every dimension it names to the value the handle bound, and (c)
//           argument i still has the dtype and shape it was checked with.
//           Each one skipped is a line of CheckedCall::skipped. Every other
//           rule runs for a handle's tensor as for any other.
//   output  the result's dtype and concrete shape, compact, and no byte in
//           common with any argument (a fn with several results: one output
//           per result, none sharing a byte with an argument or another)
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lang/bind.h"
#include "lang/dtype.h"
#include "lang/ir.h"
#include "base/status.h"

namespace mlk::rt {

// DLPack's dtype of an mlk dtype (Bool as UInt 8, as torch 1.13 exports it).
DLDataType to_dl(DType t);
// "float32", "bfloat16", "uint8", ... for messages; "code 7 bits 8 lanes 1" otherwise.
std::string dl_dtype_name(DLDataType t);

// Where a kernel runs, for the device rule.
struct Placement {
  bool cuda = false;       // a CUDA artifact
  int device = 0;          // its context's device (cuda only)
  std::string profile;     // for messages ("host", "cuda_sm90")
  bool any_device = false; // skip the device rule (dims and shapes only; the run checks it)
};

// What a checked handle (runtime/checked.h) proved about argument `arg` of
// a call: `refinements`, as the language prints them, for the values `dims`,
// of a tensor of `dtype` and `shape`.
struct Proven {
  size_t arg = 0;
  std::vector<std::string> refinements;
  DimEnv dims;
  DLDataType dtype{};
  std::vector<int64_t> shape;
};

struct CheckedCall {
  DimEnv dims;                      // every dimension variable of the fn
  std::vector<bool> on_device;      // per argument: its data is CUDA device memory
  bool out_on_device = false;
  std::vector<void*> args;          // data + byte_offset per argument
  std::vector<std::vector<int64_t>> shapes;
  void* out = nullptr;               // the first result's (as outs[0])
  std::vector<int64_t> out_shape;    // the first result's (as out_shapes[0])
  std::vector<void*> outs;                       // one per result (when outputs were given)
  std::vector<std::vector<int64_t>> out_shapes;  // one per result
  std::vector<bool> outs_on_device;              // one per result (when outputs were given)
  // One line per refinement a handle proved and the call did not check
  // again: "refinement `D mod H = 0` of `w`: proven by its handle
  // (mlk.check), not checked again".
  std::vector<std::string> skipped;
};

// `given`: dims the caller fixes (the fn's unbound dims must be here).
// `out` may be null to check only the arguments (then out_shape is still
// computed: the shape the caller must allocate).
// `where`: the kernel's placement (default: a CPU kernel).
// `proven`: what the handles among the arguments proved (the dims rule).
Expected<CheckedCall> check_call(const ir::Function& f, const std::vector<const DLTensor*>& args, const DLTensor* out,
                                 const DimEnv& given, const Placement& where = {},
                                 const std::vector<Proven>& proven = {});
// The same with one output per result of `f` (`outs` empty: the arguments
// only). The one-output form refuses a fn with several results.
Expected<CheckedCall> check_call_all(const ir::Function& f, const std::vector<const DLTensor*>& args,
                                     const std::vector<const DLTensor*>& outs, const DimEnv& given,
                                     const Placement& where = {}, const std::vector<Proven>& proven = {});

}  // namespace mlk::rt
