#include "autotune/measure_cuda.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "artifact/build.h"
#include "targets/cuda_driver.h"
#include "artifact/loaded.h"

namespace mlk::tune {

namespace {

using Verdict = Measurement::Verdict;

Measurement failed(Verdict v, std::string detail) {
  Measurement m;
  m.verdict = v;
  m.detail = std::move(detail);
  return m;
}

// Device copies of a call's tensors, freed with it.
struct DeviceCall {
  const cuda::Driver* d = nullptr;
  std::vector<uint64_t> ptrs;
  std::vector<mlk_tensor_t> args;
  mlk_tensor_t out{};
  std::vector<uint8_t> on_device;
  ~DeviceCall() {
    for (uint64_t p : ptrs)
      if (p) d->mem_free(p);
  }
  Status upload(const std::vector<HostTensor>& inputs, HostTensor& result) {
    for (size_t i = 0; i <= inputs.size(); ++i) {
      const HostTensor& t = i < inputs.size() ? inputs[i] : result;
      uint64_t p = 0;
      const size_t n = std::max<size_t>(1, t.bytes.size());
      if (int rc = d->mem_alloc(&p, n); rc != 0) return Status::IOError("cuMemAlloc: " + cuda::error_name(rc));
      ptrs.push_back(p);
      if (i < inputs.size() && !t.bytes.empty())
        if (int rc = d->memcpy_htod(p, t.bytes.data(), t.bytes.size()); rc != 0)
          return Status::IOError("cuMemcpyHtoD: " + cuda::error_name(rc));
      mlk_tensor_t m{reinterpret_cast<void*>(p), abi_dtype(t.dtype), static_cast<int32_t>(t.shape.size()),
                     t.shape.data(), nullptr};
      (i < inputs.size() ? args.emplace_back(m) : out) = m;
      on_device.push_back(1);
    }
    return Status::Ok();
  }
};

}  // namespace

Runnable cuda_measurable(const Profile& p) {
  if (!p.is_gpu()) return {false, p.name + " is not a CUDA profile"};
  auto d = cuda::driver();
  if (!d.ok()) return {false, d.status().message()};
  auto dev = cuda::process_device();
  if (!dev.ok()) return {false, dev.status().message()};
  const CudaInfo info = detect_cuda();
  if (*dev >= static_cast<int>(info.devices.size()))
    return {false, "no CUDA device " + std::to_string(*dev) + (info.why_not.empty() ? "" : ": " + info.why_not)};
  const CudaDevice& g = info.devices[*dev];
  if (g.compute_capability < p.compute_capability)
    return {false, "cuda:" + std::to_string(*dev) + " (" + g.name + ") has compute capability " +
                       std::to_string(g.compute_capability) + ", below " + p.name + "'s " +
                       std::to_string(p.compute_capability)};
  return {true, "cuda:" + std::to_string(*dev) + " (" + g.name + ")"};
}

Measurement measure_cuda(const MeasureSetup& setup, const Profile& p, const Schedule& schedule,
                         const std::string& scratch) {
  auto drv = cuda::driver();
  if (!drv.ok()) return failed(Verdict::kError, drv.status().message());
  auto dev = cuda::process_device();
  if (!dev.ok()) return failed(Verdict::kError, dev.status().message());
  auto ctx = cuda::process_context(*dev);
  if (!ctx.ok()) return failed(Verdict::kError, ctx.status().message());
  const auto t0 = std::chrono::steady_clock::now();
  BuildRequest req{setup.module, setup.fn, "", p, setup.dims, schedule, scratch};
  auto built = build_artifact(req);
  auto art = built.ok() ? LoadedArtifact::Load(built->dir) : Expected<std::unique_ptr<LoadedArtifact>>(built.status());
  std::error_code ec;
  std::filesystem::remove_all(scratch, ec);  // loaded: the library stays mapped
  if (!art.ok()) return failed(Verdict::kError, art.status().message());
  Measurement m;
  m.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  cuda::ScopedContext scope(*ctx);
  const cuda::Driver* d = *drv;
  auto run = [&](DeviceCall& c, const DimEnv& dims) {
    mlk_cuda_call_t call{*dev, 0, *ctx, nullptr, c.on_device.data()};
    return (*art)->CallCuda(c.args, c.out, dims, setup.fn, call);
  };
  // Verification: every case, as the CPU worker checks it.
  for (const VerifyCase& vc : setup.verify) {
    if (vc.references.size() != 1) return failed(Verdict::kError, "CUDA artifacts take fns with one result");
    const HostTensor& want = vc.references[0];
    HostTensor got(want.dtype, want.shape);
    DeviceCall c{d};
    Status st = c.upload(vc.inputs, got);
    if (st.ok()) st = run(c, vc.dims);
    if (st.ok() && d->ctx_synchronize() != 0) st = Status::Internal("the kernel failed on the GPU");
    if (st.ok() && !got.bytes.empty())
      if (int rc = d->memcpy_dtoh(got.bytes.data(), c.ptrs.back(), got.bytes.size()); rc != 0)
        st = Status::IOError("cuMemcpyDtoH: " + cuda::error_name(rc));
    if (!st.ok()) return failed(Verdict::kError, vc.name + ": " + st.message());
    Status cmp = compare(want, got, vc.tols[0]);
    if (!cmp.ok()) return failed(Verdict::kWrong, vc.name + ": " + cmp.message());
    ErrorStats e = error_stats(want, got);
    m.max_abs_error = std::max(m.max_abs_error, e.max_abs);
    m.max_rel_error = std::max(m.max_rel_error, e.max_rel);
  }
  // Timing on the first input set, resident on the device.
  if (setup.timing.empty()) return failed(Verdict::kError, "no timing inputs");
  HostTensor out;
  {
    auto shape = concrete_shape(setup.module->find(setup.fn)->result_type.shape, setup.dims);
    if (!shape.ok()) return failed(Verdict::kError, shape.status().message());
    out = HostTensor(setup.module->find(setup.fn)->result_type.dtype, *shape);
  }
  DeviceCall c{d};
  if (Status st = c.upload(setup.timing[0], out); !st.ok()) return failed(Verdict::kError, st.message());
  void *start = nullptr, *stop = nullptr;
  if (d->event_create(&start, 0) != 0 || d->event_create(&stop, 0) != 0)
    return failed(Verdict::kError, "cuEventCreate failed");
  Status st = Status::Ok();
  for (int w = 0; w < 2 && st.ok(); ++w) st = run(c, setup.dims);  // warm-up: the driver JITs the PTX here
  double spent_ms = 0;
  while (st.ok() && static_cast<int>(m.times_ms.size()) < setup.max_reps &&
         (static_cast<int>(m.times_ms.size()) < setup.min_reps || spent_ms < setup.min_time_s * 1000)) {
    d->event_record(start, nullptr);
    st = run(c, setup.dims);
    d->event_record(stop, nullptr);
    float ms = 0;
    if (st.ok() && (d->event_synchronize(stop) != 0 || d->event_elapsed_time(&ms, start, stop) != 0))
      st = Status::Internal("timing with CUDA events failed");
    m.times_ms.push_back(ms);
    spent_ms += ms;
    if (setup.cutoff_ms > 0 && ms > setup.cutoff_ms) break;  // cannot win
  }
  d->event_destroy(start);
  d->event_destroy(stop);
  if (!st.ok()) return failed(Verdict::kError, st.message());
  std::vector<double> sorted = m.times_ms;
  std::sort(sorted.begin(), sorted.end());
  m.median_ms = sorted[sorted.size() / 2];
  m.verdict = Verdict::kOk;
  m.detail = "measured on the GPU with CUDA events, " + std::to_string(setup.verify.size()) + " cases verified";
  return m;
}

}  // namespace mlk::tune
