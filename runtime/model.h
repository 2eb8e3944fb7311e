// A model served from its real weights: a .tl program, its binding
// (a file, runtime/binding.h, or derived from the program's entry fn and its
// record parameters, runtime/derived_binding.h) and a safetensors file of weights, run on the
// Runtime's kernels (tuned artifacts from the cache, else the default
// schedule compiled by the JIT). docs/tutorial-serve-a-model.md walks through
// one (examples/minilm/).
//
// Contracts:
// - Load() checks every bound weight once, before anything runs: the key
//   exists in the file, its dtype is the parameter's, its rank and every
//   extent fit the parameter's type (dims bound across the instance's
//   weights and the step's "dims"; the refinements over those dims hold).
//   Every tensor of the file is bound by some step or listed as "unused";
//   an "unused" key exists and is bound by no step. Errors name the key, the
//   step (and instance), the parameter and the axis or dimension.
// - The weights file is mapped once and its tensors are passed to the
//   kernels in place; a tensor is copied, once, at load, only when the file
//   does not align its data to the element size. Nothing is copied per call.
// - Prepare() checks every step of a call through the kernels' boundary
//   checks (runtime/boundary.h) and allocates the intermediate results before
//   any kernel runs; Run() then runs the steps in order, the last into the
//   caller's output. A Model is immutable after Load and thread-safe; a Call
//   belongs to one caller at a time.
// - A model asks the runtime for kernels that read weights packed
//   (Runtime::KernelRequest::pack_weights; the JIT's builds, not tuned
//   artifacts). A kernel whose products read weights packed
//   (Kernel::packed_params) gets the step's weights packed once, by the
//   first Prepare that needs them (one copy per weight and packed shape,
//   whatever the call's shape), when every such parameter is a weight the
//   binding holds; its calls then read the packed copy (a value passed per
//   call is packed within each call; so is everything where packing fails,
//   e.g. for want of memory). The weights file is never written: a model
//   holds its weights immutable. $MLK_PACK_WEIGHTS=off (read at Load) asks
//   for kernels without packs (half the weights' F32 bytes saved).
#pragma once

#include <dlpack/dlpack.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "base/status.h"
#include "lang/ir.h"
#include "runtime/binding.h"
#include "runtime/runtime.h"

namespace mlk::rt {

class Model {
 public:
  // Where the binding comes from: the `binding` file when one is named;
  // else derived from the program (runtime/derived_binding.h) when `entry`
  // or `rename` is given, or when no `<program>.binding.json` exists; else
  // that file.
  struct Files {
    std::string program;  // the .tl file
    std::string binding;  // its binding (JSON); "" = see above
    std::string weights;  // the safetensors file
    std::string entry;    // the entry fn of a derived binding; "" = the only fn taking a record that no fn calls
    std::map<std::string, std::string> rename;  // record path prefix -> key prefix, for a derived binding
  };
  static Expected<std::shared_ptr<const Model>> Load(std::shared_ptr<Runtime> runtime, const Files& files,
                                                     const TargetPolicy& policy);
  ~Model();

  const Binding& binding() const { return binding_; }
  const std::vector<ModelInput>& inputs() const { return binding_.inputs; }
  // The fn of the last step, whose result the model returns.
  const ir::Function& result_fn() const;
  // Bytes the weights file maps, and bytes copied at load (unaligned tensors).
  size_t mapped_bytes() const;
  size_t copied_bytes() const { return copied_bytes_; }

  // One call, prepared: its kernels, its arguments and intermediate results.
  class Call;
  // `inputs` in the order of inputs(); nullptr for an input left out (only
  // one with `zeros_like`). Errors name the step, its instance and the
  // argument. `proven`: what checked handles proved of inputs (Proven::arg
  // indexes `inputs`; runtime/checked.h): a step given such an input skips
  // those refinements as a call does (runtime/boundary.h).
  Expected<std::shared_ptr<Call>> Prepare(const std::vector<const DLTensor*>& inputs,
                                          const std::vector<Proven>& proven = {}) const;
  // The shape the caller allocates for the result of `call` (the result
  // fn's dtype, compact row-major).
  static const std::vector<int64_t>& OutputShape(const Call& call);
  // Runs the prepared call into `out`. Not concurrently on one Call.
  Status Run(Call& call, DLTensor* out) const;
  // One line per step: which kernel ran it and why (Selection::reason),
  // each followed by the refinements its inputs' handles proved, one
  // indented line each (CheckedCall::skipped).
  static std::vector<std::string> Selections(const Call& call);

 private:
  struct Held;
  struct StepInstance;
  Model() = default;
  Status BindWeights(const std::string& weights_path);
  std::shared_ptr<Runtime> rt_;
  std::shared_ptr<const Program> program_;
  TargetPolicy policy_;
  Binding binding_;
  struct Weights;
  std::unique_ptr<Weights> weights_;
  std::vector<std::unique_ptr<Held>> held_;      // weights and constants, at stable addresses
  std::vector<StepInstance> instances_;          // every step's instances, in run order
  size_t copied_bytes_ = 0;
  // Weights packed once (docs/artifacts.md, "Packed weights"): each weight
  // of a step instance by its parameter and packed shape (the kernels of
  // every shape of a step share it), made by the first Prepare that needs
  // it; and per step instance and kernel the set that kernel reads (the
  // kernel held, so that its address is never another's). Packing runs
  // outside the lock; two Prepares racing on one weight may both pack it,
  // and the first to finish is kept.
  struct Packed {
    std::shared_ptr<const Kernel> kernel;
    std::shared_ptr<const PackedWeights> weights;
  };
  using WeightKey = std::tuple<const StepInstance*, int, std::vector<int64_t>>;
  Expected<const PackedWeights*> PackedFor(const StepInstance& in, const std::shared_ptr<const Kernel>& kernel,
                                           const std::vector<const DLTensor*>& args) const;
  bool pack_weights_ = true;  // $MLK_PACK_WEIGHTS is not "off" (at Load)
  mutable std::mutex packed_mu_;
  mutable std::map<std::pair<const StepInstance*, const Kernel*>, Packed> packed_;
  mutable std::map<WeightKey, std::shared_ptr<const PackedWeights::Weight>> weights_packed_;

 public:
  // Bytes of the weights packed so far (every kernel's copies).
  size_t packed_bytes() const;
};

}  // namespace mlk::rt
