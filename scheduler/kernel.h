// A compiled kernel for one function of a checked module, runnable on host
// tensors. The Halide-free face of scheduler/: callers never see Halide.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lang/bind.h"
#include "lang/ir.h"
#include "base/status.h"
#include "lang/tensor.h"
#include "scheduler/compile.h"
#include "scheduler/schedule.h"
#include "targets/abi.h"
#include "targets/detect.h"

namespace mlk {

class Kernel {
 public:
  ~Kernel();
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;

  // Through the compile driver (scheduler/compile.h): lowers `fn` (callees
  // inlined), applies `schedule` (or the default schedule of `profile`'s
  // rules, with extents estimated from `estimates`) and compiles it with
  // Halide's JIT for the profile's Halide target. `profile` is a CPU profile
  // this machine runs (the caller checks, targets/detect.h can_run): this
  // machine's own (host_profile()) unless the caller chose another, e.g.
  // `--target cpu_avx2` on an AVX-512 machine, whose schedule is then the
  // AVX2 profile's. `dump` receives the `dump_after` dump.
  static Expected<std::unique_ptr<Kernel>> CompileJit(const ir::Module& m, const std::string& fn,
                                                      const Profile& profile = host_profile(),
                                                      const Schedule* schedule = nullptr,
                                                      const DimEnv& estimates = {},
                                                      DumpStage dump_after = DumpStage::kNone,
                                                      const std::function<void(const std::string&)>& dump = {});

  // The schedule it was compiled with.
  const Schedule& schedule() const;

  // Checks the inputs against the signature (dtypes, ranks, dims, refinements;
  // see bind_dims), allocates the output and runs. Run-time failures (a
  // gather index out of range) are InvalidArgument. Not thread-safe.
  Expected<HostTensor> Run(const std::vector<HostTensor>& inputs, const DimEnv& given);
  // The same, writing into `out`, which is reallocated only when its dtype or
  // shape is not the result's (so repeated runs reuse one buffer).
  Status RunInto(const std::vector<HostTensor>& inputs, const DimEnv& given, HostTensor& out);
  // Every result of a fn with several (or one): one realization of the
  // pipeline, so that stages the results share are computed once. Run and
  // RunInto refuse a fn with several results.
  Expected<std::vector<HostTensor>> RunAll(const std::vector<HostTensor>& inputs, const DimEnv& given);
  Status RunAllInto(const std::vector<HostTensor>& inputs, const DimEnv& given, std::vector<HostTensor>& outs);

  // The same on caller-owned memory described as the C ABI describes it
  // (targets/abi.h): the caller has checked dtypes, ranks, extents and
  // refinements (runtime/boundary.h) and gives every dimension in `dims`.
  // No copy is made; strides NULL means compact row-major. Not thread-safe.
  Status Call(const std::vector<mlk_tensor_t>& args, mlk_tensor_t& out, const DimEnv& dims);
  // The same with one output tensor per result, in order.
  Status CallAll(const std::vector<mlk_tensor_t>& args, const std::vector<mlk_tensor_t>& outs, const DimEnv& dims);

  const ir::Function& function() const;

 private:
  struct Impl;
  explicit Kernel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The stages of `fn` as a schedule sees them, extents estimated from `dims`.
Expected<std::vector<StageInfo>> stage_infos_for(const ir::Module& m, const std::string& fn, const DimEnv& dims,
                                                 const std::string& halide_target = "");

// The naive schedule of `fn` for `profile` (every knob at its default,
// scheduler/rules.h default_knobs): the tuner's fixed baseline, which
// `--schedule naive` builds; the default schedule is the rules' seed.
Expected<Schedule> naive_schedule_for(const ir::Module& m, const std::string& fn, const Profile& profile,
                                      const DimEnv& dims);

// Checks that each input has its parameter's dtype (names the parameter).
Status check_input_dtypes(const ir::Function& f, const std::vector<HostTensor>& inputs);

}  // namespace mlk
