// A fn's calls planned once per argument signature, for hot call paths (the
// Python module's fast path, python/fast_call.cpp). The first call of a
// signature (every argument's device, dtype and shape) is checked in full
// (check_call, runtime/boundary.h) and its kernel chosen (Runtime::GetKernel);
// a later call of the same signature checks only what can differ between
// two such calls: each argument's and the output's layout and data pointer,
// and that the output shares no byte with an argument. The rules that
// depend on the signature alone (device, dtype, rank, extents, the dims and
// refinements, the output's shape) hold for it because they held for the
// first. A call that breaks a per-call rule is run through Kernel::Run, so
// it gets the full check's error, word for word.
//
// Scope: CPU kernels of fns with one result whose dims the arguments bind
// (no unbound dims), without checked handles; Plan says Unsupported for the
// rest, and the caller takes its general path. Thread-safe.
#pragma once

#include <dlpack/dlpack.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "runtime/runtime.h"

namespace mlk::rt {

class CallPlan {
 public:
  // One planned signature: immutable once made.
  struct Step {
    std::vector<DLDataType> dtypes;
    std::vector<DLDevice> devices;
    std::vector<std::vector<int64_t>> shapes, strides;  // strides: compact row-major, in elements
    std::vector<int64_t> elem_bytes, counts;  // counts: elements per argument
    std::shared_ptr<const Kernel> kernel;  // null: a signature whose kernel runs on CUDA (Unsupported)
    CheckedCall call;  // the first call's check: dims, shapes, the result's shape
    DLDataType out_dtype{};
    std::vector<int64_t> out_strides;  // compact row-major
    int64_t out_count = 0;             // the result's elements
  };

  CallPlan(std::shared_ptr<Runtime> rt, std::shared_ptr<const Program> prog, const std::string& fn, TargetPolicy policy);

  // The fn planned (nullptr when the program has no public fn of that name).
  const ir::Function* fn() const { return fn_; }

  // The step of these arguments' signature, planned now or before. The full
  // check's error, or GetKernel's, when the first call of a signature fails;
  // Unsupported when the fn or its kernel is out of scope (above).
  Expected<std::shared_ptr<const Step>> Plan(const DLTensor* const* args, size_t n);
  // Runs `step`'s kernel on `args` (of its signature) into `out`.
  Status Run(const Step& step, const DLTensor* const* args, size_t n, DLTensor* out) const;

  // The most signatures kept (the least recently used is dropped beyond it).
  static constexpr size_t kMaxSteps = 16;
  // How many Run calls took the planned way (for tests and diagnostics).
  int64_t planned_runs() const { return planned_runs_.load(); }

 private:
  static bool matches(const Step& s, const DLTensor* const* args, size_t n);
  std::shared_ptr<Runtime> rt_;
  std::shared_ptr<const Program> prog_;
  const ir::Function* fn_ = nullptr;
  bool in_scope_ = false;  // one result, every dim bound by an argument (set once)
  TargetPolicy policy_;
  std::mutex mu_;
  std::vector<std::shared_ptr<const Step>> steps_;  // most recently used last
  mutable std::atomic<int64_t> planned_runs_{0};
};

}  // namespace mlk::rt
