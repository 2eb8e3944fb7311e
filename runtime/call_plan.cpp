#include "runtime/call_plan.h"

#include <cstdint>

namespace mlk::rt {

namespace {

std::vector<int64_t> row_major(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t step = 1;
  for (size_t a = shape.size(); a-- > 0;) {
    s[a] = step;
    step *= shape[a];
  }
  return s;
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  return n;
}

// The per-call rules of check_call for a tensor of a planned signature:
// layout (strides NULL or row-major but on axes of extent 1) and data
// (non-NULL unless empty, aligned to the element size).
bool layout_and_data_hold(const DLTensor& t, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                          int64_t elem_bytes, int64_t count) {
  if (t.strides)
    for (size_t a = 0; a < shape.size(); ++a)
      if (shape[a] != 1 && t.strides[a] != strides[a]) return false;
  if (count == 0) return true;
  const auto p = reinterpret_cast<uintptr_t>(t.data) + t.byte_offset;
  return t.data != nullptr && p % static_cast<uintptr_t>(elem_bytes) == 0;
}

bool same_dtype(DLDataType a, DLDataType b) { return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes; }

}  // namespace

CallPlan::CallPlan(std::shared_ptr<Runtime> rt, std::shared_ptr<const Program> prog, const std::string& fn, TargetPolicy policy)
    : rt_(std::move(rt)),
      prog_(std::move(prog)),
      fn_(prog_->module.find(fn)),
      in_scope_(fn_ && fn_->more_results.empty() && fn_->unbound_dims().empty()),
      policy_(std::move(policy)) {}

bool CallPlan::matches(const Step& s, const DLTensor* const* args, size_t n) {
  if (n != s.dtypes.size()) return false;
  for (size_t i = 0; i < n; ++i) {
    const DLTensor& t = *args[i];
    if (!same_dtype(t.dtype, s.dtypes[i]) || t.device.device_type != s.devices[i].device_type ||
        t.device.device_id != s.devices[i].device_id || t.ndim != static_cast<int32_t>(s.shapes[i].size()))
      return false;
    if (t.ndim > 0 && !t.shape) return false;
    for (int32_t a = 0; a < t.ndim; ++a)
      if (t.shape[a] != s.shapes[i][a]) return false;
  }
  return true;
}

Expected<std::shared_ptr<const CallPlan::Step>> CallPlan::Plan(const DLTensor* const* args, size_t n) {
  if (!fn_ || !fn_->is_public) return Status::NotFound("no public fn to plan");
  if (!in_scope_)
    return Status::Unsupported("`" + fn_->name + "` has several results or dims no argument binds");
  for (size_t i = 0; i < n; ++i)
    if (!args[i]) return Status::InvalidArgument("a NULL argument");
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = steps_.size(); i-- > 0;) {
      if (!matches(*steps_[i], args, n)) continue;
      std::shared_ptr<const Step> hit = steps_[i];
      if (i + 1 != steps_.size()) {  // the most recently used goes last
        steps_.erase(steps_.begin() + static_cast<std::ptrdiff_t>(i));
        steps_.push_back(hit);
      }
      if (!hit->kernel) return Status::Unsupported("`" + fn_->name + "` runs on CUDA");
      return hit;
    }
  }
  const std::vector<const DLTensor*> v(args, args + n);
  auto c = check_call(*fn_, v, nullptr, {});  // a CPU kernel's rules, the device rule included
  if (!c.ok()) return c.status();
  auto k = rt_->GetKernel(prog_, fn_->name, policy_, c->dims);
  if (!k.ok()) return k.status();
  auto step = std::make_shared<Step>();
  for (const DLTensor* t : v) {
    step->dtypes.push_back(t->dtype);
    step->devices.push_back(t->device);
    step->shapes.emplace_back(t->shape, t->shape + t->ndim);
    step->strides.push_back(row_major(step->shapes.back()));
    step->elem_bytes.push_back((t->dtype.bits * t->dtype.lanes + 7) / 8);
    step->counts.push_back(numel(step->shapes.back()));
  }
  if (!(*k)->on_cuda()) step->kernel = *k;  // else remembered as Unsupported
  step->call = std::move(*c);
  step->out_dtype = to_dl(fn_->result_type.dtype);
  step->out_strides = row_major(step->call.out_shape);
  step->out_count = numel(step->call.out_shape);
  std::lock_guard<std::mutex> lock(mu_);
  steps_.push_back(step);
  if (steps_.size() > kMaxSteps) steps_.erase(steps_.begin());
  if (!step->kernel) return Status::Unsupported("`" + fn_->name + "` runs on CUDA");
  return std::shared_ptr<const Step>(step);
}

Status CallPlan::Run(const Step& step, const DLTensor* const* args, size_t n, DLTensor* out) const {
  if (!step.kernel) return Status::Unsupported("a step without a CPU kernel");
  auto full = [&] { return step.kernel->Run(std::vector<const DLTensor*>(args, args + n), out); };
  if (n != step.shapes.size() || !out) return full();
  if (n > Kernel::kMaxPlannedArgs) return full();
  void* ptrs[Kernel::kMaxPlannedArgs];
  const std::vector<int64_t>& oshape = step.call.out_shape;
  const int64_t ocount = step.out_count;
  if (!same_dtype(out->dtype, step.out_dtype) || out->device.device_type != kDLCPU ||
      out->ndim != static_cast<int32_t>(oshape.size()) || (out->ndim > 0 && !out->shape))
    return full();
  for (size_t a = 0; a < oshape.size(); ++a)
    if (out->shape[a] != oshape[a]) return full();
  const int64_t obytes = (step.out_dtype.bits * step.out_dtype.lanes + 7) / 8;
  if (!layout_and_data_hold(*out, oshape, step.out_strides, obytes, ocount)) return full();
  const auto o_begin = reinterpret_cast<uintptr_t>(out->data) + out->byte_offset;
  const auto o_end = o_begin + static_cast<uintptr_t>(ocount * obytes);
  for (size_t i = 0; i < n; ++i) {
    const DLTensor& t = *args[i];
    const int64_t count = step.counts[i];
    if (!layout_and_data_hold(t, step.shapes[i], step.strides[i], step.elem_bytes[i], count)) return full();
    const auto begin = reinterpret_cast<uintptr_t>(t.data) + t.byte_offset;
    const auto end = begin + static_cast<uintptr_t>(count * step.elem_bytes[i]);
    if (count > 0 && ocount > 0 && begin < o_end && o_begin < end) return full();  // shares a byte with the output
    ptrs[i] = reinterpret_cast<void*>(begin);
  }
  ++planned_runs_;
  return step.kernel->RunChecked(step.call, ptrs, n, reinterpret_cast<void*>(o_begin));
}

}  // namespace mlk::rt
