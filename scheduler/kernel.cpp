// Running JIT-compiled pipelines; they are compiled by the compile driver
// (scheduler/compile.h).
#include "scheduler/kernel.h"
#include "targets/halide_error.h"

#include "scheduler/compile.h"
#include "scheduler/jit_pipeline.h"
#include "scheduler/rules.h"
#include "targets/detect.h"

namespace mlk {

struct Kernel::Impl {
  ir::Module module;  // keeps the function (and its callees) alive
  const ir::Function* fn = nullptr;
  JitPipelinePtr jit;
};

Kernel::Kernel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Kernel::~Kernel() = default;
const ir::Function& Kernel::function() const { return *impl_->fn; }
const Schedule& Kernel::schedule() const { return impl_->jit->schedule; }

Status check_input_dtypes(const ir::Function& f, const std::vector<HostTensor>& inputs) {
  if (inputs.size() != f.params.size())
    return Status::InvalidArgument("`" + f.name + "` takes " + std::to_string(f.params.size()) + " inputs, got " +
                                   std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].dtype != f.params[i].type.dtype)
      return Status::InvalidArgument("`" + f.params[i].name + "` must be " + dtype_name(f.params[i].type.dtype) +
                                     ", got " + dtype_name(inputs[i].dtype));
  return Status::Ok();
}

Expected<std::vector<StageInfo>> stage_infos_for(const ir::Module& m, const std::string& fn, const DimEnv& dims,
                                                 const std::string& halide_target) {
  auto p = lower::lower_function(m, fn, lower::options_for(halide_target));
  if (!p.ok()) return p.status();
  return lower::stage_infos(*p, dims);
}

Expected<Schedule> naive_schedule_for(const ir::Module& m, const std::string& fn, const Profile& profile,
                                      const DimEnv& dims) {
  auto infos = stage_infos_for(m, fn, dims, profile.halide_target);
  if (!infos.ok()) return infos.status();
  return schedule_from_knobs(*infos, default_knobs(*infos, profile), profile);
}

Expected<std::unique_ptr<Kernel>> Kernel::CompileJit(const ir::Module& m, const std::string& fn,
                                                     const Profile& profile, const Schedule* schedule,
                                                     const DimEnv& estimates, DumpStage dump_after,
                                                     const std::function<void(const std::string&)>& dump) {
  auto impl = std::make_unique<Impl>();
  impl->module = m;
  CompileRequest req;
  req.module = &impl->module;
  req.fn = fn;
  if (profile.is_gpu())
    return Status::Unsupported("the JIT compiles for CPU profiles, not `" + profile.name +
                               "` (a CUDA profile's kernels are built ahead of time: `mlk build`)");
  req.profile = profile;  // its rules and its Halide target ("host": this machine's)
  req.schedule = schedule;
  req.dims = estimates;
  req.dump_after = dump_after;
  req.dump = dump;
  auto jit = compile_jit(req);
  if (!jit.ok()) return jit.status();
  impl->fn = impl->module.find(fn);
  impl->jit = std::move(jit).value();
  return std::unique_ptr<Kernel>(new Kernel(std::move(impl)));
}

namespace {

Halide::Buffer<> wrap(const HostTensor& t) {
  std::vector<int> sizes(t.shape.rbegin(), t.shape.rend());
  return Halide::Buffer<>(lower::storage_type(t.dtype), const_cast<uint8_t*>(t.bytes.data()), sizes);
}

// A Halide view of C ABI memory: dimensions innermost first, strides in
// elements (compact row-major when the tensor gives none).
Halide::Buffer<> wrap(const mlk_tensor_t& t, DType dt) {
  std::vector<halide_dimension_t> d(static_cast<size_t>(t.rank));
  int64_t stride = 1;
  for (int32_t i = t.rank - 1; i >= 0; --i) {
    const int64_t s = t.strides ? t.strides[i] : stride;
    d[static_cast<size_t>(t.rank - 1 - i)] = halide_dimension_t(0, static_cast<int32_t>(t.shape[i]), static_cast<int32_t>(s));
    stride *= t.shape[i];
  }
  return Halide::Buffer<>(lower::storage_type(dt), t.data, t.rank, d.data());
}

}  // namespace

Status Kernel::Call(const std::vector<mlk_tensor_t>& args, mlk_tensor_t& out, const DimEnv& dims) {
  std::vector<mlk_tensor_t> outs = {out};
  return CallAll(args, outs, dims);
}

Status Kernel::CallAll(const std::vector<mlk_tensor_t>& args, const std::vector<mlk_tensor_t>& outs,
                       const DimEnv& dims) {
  const ir::Function& f = *impl_->fn;
  const std::vector<ir::Result> results = f.results();
  if (args.size() != f.params.size())
    return Status::InvalidArgument("`" + f.name + "` takes " + std::to_string(f.params.size()) + " tensors, got " +
                                   std::to_string(args.size()));
  if (outs.size() != results.size())
    return Status::InvalidArgument("`" + f.name + "` has " + std::to_string(results.size()) + " results, got " +
                                   std::to_string(outs.size()) + " output tensors");
  try {
    for (size_t i = 0; i < args.size(); ++i) impl_->jit->lowered.inputs[i].set(wrap(args[i], f.params[i].type.dtype));
    for (auto& [name, prm] : impl_->jit->lowered.dim_params) {
      auto it = dims.find(name);
      if (it == dims.end()) return Status::InvalidArgument("`" + f.name + "`: no value for dimension `" + name + "`");
      prm.set(static_cast<int32_t>(it->second));
    }
    std::vector<Halide::Buffer<>> bufs;
    for (size_t i = 0; i < outs.size(); ++i) bufs.push_back(wrap(outs[i], results[i].type.dtype));
    impl_->jit->pipeline.realize(Halide::Realization(std::move(bufs)), impl_->jit->target);
  } catch (const Halide::Error& e) {
    return Status::InvalidArgument(std::string("`") + f.name + "` failed at run time: " + clean_runtime_error(e.what()));
  }
  return Status::Ok();
}

Expected<HostTensor> Kernel::Run(const std::vector<HostTensor>& inputs, const DimEnv& given) {
  HostTensor out;
  MLK_RETURN_IF_ERROR(RunInto(inputs, given, out));
  return out;
}

Status Kernel::RunInto(const std::vector<HostTensor>& inputs, const DimEnv& given, HostTensor& out) {
  std::vector<HostTensor> outs(1);
  outs[0] = std::move(out);
  Status s = RunAllInto(inputs, given, outs);
  out = std::move(outs[0]);
  return s;
}

Expected<std::vector<HostTensor>> Kernel::RunAll(const std::vector<HostTensor>& inputs, const DimEnv& given) {
  std::vector<HostTensor> outs(impl_->fn->results().size());
  MLK_RETURN_IF_ERROR(RunAllInto(inputs, given, outs));
  return outs;
}

Status Kernel::RunAllInto(const std::vector<HostTensor>& inputs, const DimEnv& given, std::vector<HostTensor>& outs) {
  const ir::Function& f = *impl_->fn;
  const std::vector<ir::Result> results = f.results();
  if (outs.size() != results.size())
    return Status::InvalidArgument("`" + f.name + "` has " + std::to_string(results.size()) +
                                   " results; run it with as many outputs (Kernel::RunAll)");
  MLK_RETURN_IF_ERROR(check_input_dtypes(f, inputs));
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& t : inputs) shapes.push_back(t.shape);
  auto env = bind_dims(f, shapes, given);
  if (!env.ok()) return env.status();
  for (size_t i = 0; i < results.size(); ++i) {
    auto out_shape = concrete_shape(results[i].type.shape, *env);
    if (!out_shape.ok()) return out_shape.status();
    HostTensor& out = outs[i];
    // A default-made `out` already has the shape of a scalar, [], but no bytes.
    if (out.dtype != results[i].type.dtype || out.shape != *out_shape ||
        out.bytes.size() != static_cast<size_t>(out.numel()) * out.elem_size())
      out = HostTensor(results[i].type.dtype, *out_shape);
  }
  try {
    for (size_t i = 0; i < inputs.size(); ++i) impl_->jit->lowered.inputs[i].set(wrap(inputs[i]));
    for (auto& [name, prm] : impl_->jit->lowered.dim_params) prm.set(static_cast<int32_t>(env->at(name)));
    std::vector<Halide::Buffer<>> bufs;
    for (const HostTensor& out : outs) bufs.push_back(wrap(out));
    impl_->jit->pipeline.realize(Halide::Realization(std::move(bufs)), impl_->jit->target);
  } catch (const Halide::Error& e) {
    return Status::InvalidArgument(std::string("`") + f.name + "` failed at run time: " + clean_runtime_error(e.what()));
  }
  return Status::Ok();
}

}  // namespace mlk
