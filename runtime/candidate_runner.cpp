#include "runtime/candidate_runner.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <random>

#include <nlohmann/json.hpp>

#include "artifact/loaded.h"
#include "base/json.h"
#include "targets/cuda_driver.h"
#include "targets/detect.h"
#include "targets/toolchain.h"

namespace mlk::rt {

namespace fs = std::filesystem;

namespace {

// Where the candidates run: host memory, or device memory through the
// driver. upload/download/free are no-ops on the host.
class Device {
 public:
  virtual ~Device() = default;
  virtual std::string describe() const = 0;
  virtual std::string timing() const = 0;
  // Copies of `inputs` and room for `out` where the kernel reads them; the
  // tensors' shapes must outlive the call.
  virtual Status place(const std::vector<HostTensor>& inputs, HostTensor& out, std::vector<mlk_tensor_t>& args,
                       mlk_tensor_t& o) = 0;
  virtual Status call(LoadedArtifact& a, const std::vector<mlk_tensor_t>& args, mlk_tensor_t& o, const DimEnv& dims,
                      const std::string& fn) = 0;
  // The output back into `out` (device: copied; host: already there).
  virtual Status fetch(const mlk_tensor_t& o, HostTensor& out) = 0;
  virtual void release() = 0;
  // Times one call in milliseconds.
  virtual Expected<double> time(LoadedArtifact& a, const std::vector<mlk_tensor_t>& args, mlk_tensor_t& o,
                                const DimEnv& dims, const std::string& fn) = 0;
};

mlk_tensor_t describe_tensor(void* data, const HostTensor& t) {
  return {data, abi_dtype(t.dtype), static_cast<int32_t>(t.shape.size()), t.shape.data(), nullptr};
}

class HostDevice : public Device {
 public:
  std::string describe() const override {
    CpuInfo cpu = detect_cpu();
    std::string f;
    for (const char* want : {"avx2", "avx512f", "avx512_bf16", "amx_tile"})
      if (cpu.has(want)) f += std::string(f.empty() ? "" : " ") + want;
    return "cpu: " + std::to_string(cpu.cores) + " cores (" + f + ")";
  }
  std::string timing() const override { return "steady clock around each call, median"; }
  Status place(const std::vector<HostTensor>& inputs, HostTensor& out, std::vector<mlk_tensor_t>& args,
               mlk_tensor_t& o) override {
    for (const HostTensor& t : inputs) args.push_back(describe_tensor(const_cast<uint8_t*>(t.bytes.data()), t));
    o = describe_tensor(out.bytes.data(), out);
    return Status::Ok();
  }
  Status call(LoadedArtifact& a, const std::vector<mlk_tensor_t>& args, mlk_tensor_t& o, const DimEnv& dims,
              const std::string& fn) override {
    return a.Call(args, o, dims, fn);
  }
  Status fetch(const mlk_tensor_t&, HostTensor&) override { return Status::Ok(); }
  void release() override {}
  Expected<double> time(LoadedArtifact& a, const std::vector<mlk_tensor_t>& args, mlk_tensor_t& o, const DimEnv& dims,
                        const std::string& fn) override {
    const auto t0 = std::chrono::steady_clock::now();
    MLK_RETURN_IF_ERROR(a.Call(args, o, dims, fn));
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
};

class CudaDevice : public Device {
 public:
  CudaDevice(const cuda::Driver* d, int dev, void* ctx, std::string name)
      : d_(d), dev_(dev), ctx_(ctx), name_(std::move(name)) {}
  ~CudaDevice() override {
    release();
    if (start_) d_->event_destroy(start_);
    if (stop_) d_->event_destroy(stop_);
  }
  std::string describe() const override { return name_; }
  std::string timing() const override { return "CUDA events around each launch, median"; }
  Status place(const std::vector<HostTensor>& inputs, HostTensor& out, std::vector<mlk_tensor_t>& args,
               mlk_tensor_t& o) override {
    cuda::ScopedContext scope(ctx_);
    for (size_t i = 0; i <= inputs.size(); ++i) {
      const HostTensor& t = i < inputs.size() ? inputs[i] : out;
      uint64_t p = 0;
      if (int rc = d_->mem_alloc(&p, std::max<size_t>(1, t.bytes.size())); rc != 0)
        return Status::IOError("cuMemAlloc: " + cuda::error_name(rc));
      ptrs_.push_back(p);
      if (i < inputs.size() && !t.bytes.empty())
        if (int rc = d_->memcpy_htod(p, t.bytes.data(), t.bytes.size()); rc != 0)
          return Status::IOError("cuMemcpyHtoD: " + cuda::error_name(rc));
      if (i == inputs.size() && !t.bytes.empty())  // poisoned: an element never written shows
        if (int rc = d_->memset_d8(p, 0xff, t.bytes.size()); rc != 0)
          return Status::IOError("cuMemsetD8: " + cuda::error_name(rc));
      (i < inputs.size() ? args.emplace_back() : o) = describe_tensor(reinterpret_cast<void*>(p), t);
    }
    on_device_.assign(inputs.size() + 1, 1);
    return Status::Ok();
  }
  Status call(LoadedArtifact& a, const std::vector<mlk_tensor_t>& args, mlk_tensor_t& o, const DimEnv& dims,
              const std::string& fn) override {
    cuda::ScopedContext scope(ctx_);
    mlk_cuda_call_t c{dev_, 0, ctx_, nullptr, on_device_.data()};
    MLK_RETURN_IF_ERROR(a.CallCuda(args, o, dims, fn, c));
    if (int rc = d_->ctx_synchronize(); rc != 0) return Status::Internal("the kernel failed on the GPU: " + cuda::error_name(rc));
    return Status::Ok();
  }
  Status fetch(const mlk_tensor_t& o, HostTensor& out) override {
    cuda::ScopedContext scope(ctx_);
    if (out.bytes.empty()) return Status::Ok();
    if (int rc = d_->memcpy_dtoh(out.bytes.data(), reinterpret_cast<uint64_t>(o.data), out.bytes.size()); rc != 0)
      return Status::IOError("cuMemcpyDtoH: " + cuda::error_name(rc));
    return Status::Ok();
  }
  void release() override {
    cuda::ScopedContext scope(ctx_);
    for (uint64_t p : ptrs_) d_->mem_free(p);
    ptrs_.clear();
  }
  Expected<double> time(LoadedArtifact& a, const std::vector<mlk_tensor_t>& args, mlk_tensor_t& o, const DimEnv& dims,
                        const std::string& fn) override {
    cuda::ScopedContext scope(ctx_);
    if (!start_ && (d_->event_create(&start_, 0) != 0 || d_->event_create(&stop_, 0) != 0))
      return Status::Internal("cuEventCreate failed");
    mlk_cuda_call_t c{dev_, 0, ctx_, nullptr, on_device_.data()};
    d_->event_record(start_, nullptr);
    Status st = a.CallCuda(args, o, dims, fn, c);
    d_->event_record(stop_, nullptr);
    float ms = 0;
    if (int rc = d_->event_synchronize(stop_); rc != 0) return Status::Internal("the kernel failed on the GPU: " + cuda::error_name(rc));
    if (!st.ok()) return st;
    if (int rc = d_->event_elapsed_time(&ms, start_, stop_); rc != 0)
      return Status::Internal("cuEventElapsedTime: " + cuda::error_name(rc));
    return static_cast<double>(ms);
  }

 private:
  const cuda::Driver* d_;
  int dev_;
  void* ctx_;
  std::string name_;
  std::vector<uint64_t> ptrs_;
  std::vector<uint8_t> on_device_;
  void *start_ = nullptr, *stop_ = nullptr;
};

// The device the set's profile runs on, or why it cannot run here.
Expected<std::unique_ptr<Device>> open_device(const std::string& profile_name) {
  auto p = find_profile(profile_name);
  if (profile_name == "host") return std::unique_ptr<Device>(new HostDevice());
  if (!p.ok()) return Status::Unsupported("the candidates are for `" + profile_name + "`, which this runner does not know");
  if (!p->is_gpu()) {
    Runnable r = can_run(*p, detect_cpu(), CudaInfo{});
    if (!r.ok) return Status::Unsupported("the candidates are for " + profile_name + ", which this CPU cannot run: " + r.reason);
    return std::unique_ptr<Device>(new HostDevice());
  }
  auto d = cuda::driver();
  if (!d.ok()) return Status::Unsupported("the candidates are for " + profile_name + ": " + d.status().message());
  auto dev = cuda::process_device();
  if (!dev.ok()) return dev.status();
  const CudaInfo info = detect_cuda();
  if (*dev >= static_cast<int>(info.devices.size()))
    return Status::Unsupported("the candidates are for " + profile_name + ", and there is no CUDA device " +
                               std::to_string(*dev) + (info.why_not.empty() ? "" : ": " + info.why_not));
  const mlk::CudaDevice& g = info.devices[*dev];
  if (g.compute_capability < p->compute_capability)
    return Status::Unsupported("the candidates are for " + profile_name + " (compute capability " +
                               std::to_string(p->compute_capability) + "), and cuda:" + std::to_string(*dev) + " (" +
                               g.name + ") has " + std::to_string(g.compute_capability));
  auto ctx = cuda::process_context(*dev);
  if (!ctx.ok()) return ctx.status();
  int version = 0;
  (*d)->driver_get_version(&version);
  std::string name = "cuda:" + std::to_string(*dev) + " " + g.name + " (sm_" + std::to_string(g.compute_capability) +
                     ", " + std::to_string(g.sm_count) + " SMs), driver API " + std::to_string(version);
  return std::unique_ptr<Device>(new CudaDevice(*d, *dev, *ctx, std::move(name)));
}

// Inputs at the timing shape, uniform in [-1, 1) from a fixed seed.
std::vector<HostTensor> draw_inputs(const std::vector<TensorSpec>& specs) {
  std::mt19937_64 rng(0x6d6c6b2d6d656173ULL);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<HostTensor> out;
  for (const TensorSpec& s : specs) {
    HostTensor t(s.dtype, s.shape);
    for (int64_t i = 0, n = t.numel(); i < n; ++i) t.set(i, u(rng));
    out.push_back(std::move(t));
  }
  return out;
}

Expected<std::string> library_digest(const LoadedArtifact& a) {
  nlohmann::json m = parse_json(a.manifest_json());
  try {
    return m.at("files").at(m.at("library").get<std::string>()).get<std::string>();
  } catch (const nlohmann::json::exception&) {
    return Status::Corruption("the manifest does not name its library's sha256");
  }
}

struct Context {
  const CandidateSet& set;
  Device& dev;
  const RunnerOptions& opts;
  const std::vector<HostTensor>& timing_inputs;
  double best_ms = 0;
};

// Loads, checks and times one candidate; every failure is its verdict.
CandidateResult measure_one(Context& cx, const std::string& dir, const Candidate& c) {
  CandidateResult r;
  r.id = c.id;
  r.schedule_hash = c.schedule_hash;
  auto art = LoadedArtifact::Load((fs::path(dir) / c.id).string());
  if (!art.ok()) return r.detail = "cannot load: " + art.status().message(), r;
  auto digest = library_digest(**art);
  if (!digest.ok()) return r.detail = digest.status().message(), r;
  r.library_sha256 = *digest;
  if (*digest != c.library_sha256) return r.detail = "its library is not the one the set lists (sha256 differs)", r;
  const std::string& fn = cx.set.fn;
  for (const CandidateCase& k : cx.set.cases) {
    HostTensor got(k.expected.dtype, k.expected.shape);
    std::vector<mlk_tensor_t> args;
    mlk_tensor_t o{};
    Status st = cx.dev.place(k.inputs, got, args, o);
    if (st.ok()) st = cx.dev.call(**art, args, o, k.dims, fn);
    if (st.ok()) st = cx.dev.fetch(o, got);
    cx.dev.release();
    if (!st.ok()) return r.detail = k.name + ": " + st.message(), r;
    if (cx.opts.fault) cx.opts.fault(c.id, got);
    if (Status cmp = compare(k.expected, got, k.tol); !cmp.ok())
      return r.verdict = "wrong", r.detail = k.name + ": " + cmp.message(), r;
    ErrorStats e = error_stats(k.expected, got);
    r.max_abs_error = std::max(r.max_abs_error, e.max_abs);
    r.max_rel_error = std::max(r.max_rel_error, e.max_rel);
  }
  HostTensor out(cx.set.timing_output.dtype, cx.set.timing_output.shape);
  std::vector<mlk_tensor_t> args;
  mlk_tensor_t o{};
  Status st = cx.dev.place(cx.timing_inputs, out, args, o);
  for (int w = 0; w < cx.set.warmup && st.ok(); ++w) st = cx.dev.call(**art, args, o, cx.set.dims, fn);
  double spent = 0;
  while (st.ok() && static_cast<int>(r.times_ms.size()) < cx.set.max_reps &&
         (static_cast<int>(r.times_ms.size()) < cx.set.min_reps || spent < cx.set.min_time_s * 1000)) {
    auto ms = cx.dev.time(**art, args, o, cx.set.dims, fn);
    if (!ms.ok()) st = ms.status();
    else r.times_ms.push_back(*ms), spent += *ms;
    if (ms.ok() && r.times_ms.size() == 1 && cx.best_ms > 0 && *ms > cx.opts.cutoff_factor * cx.best_ms) break;
  }
  cx.dev.release();
  if (!st.ok()) return r.times_ms.clear(), r.detail = "timing: " + st.message(), r;
  std::vector<double> sorted = r.times_ms;
  std::sort(sorted.begin(), sorted.end());
  r.median_ms = sorted[sorted.size() / 2];
  r.verdict = "ok";
  r.detail = std::to_string(cx.set.cases.size()) + " cases verified, " + std::to_string(r.times_ms.size()) + " timed runs";
  if (cx.best_ms == 0 || r.median_ms < cx.best_ms) cx.best_ms = r.median_ms;
  return r;
}

}  // namespace

Expected<Measurements> run_candidates(const std::string& dir, const RunnerOptions& opts) {
  auto set = read_candidate_set(dir);
  if (!set.ok()) return set.status();
  auto digest = candidate_set_digest(dir);
  if (!digest.ok()) return digest.status();
  for (const std::string& id : opts.only)
    if (std::none_of(set->candidates.begin(), set->candidates.end(), [&](const Candidate& c) { return c.id == id; }))
      return Status::InvalidArgument("no candidate `" + id + "` in " + dir);
  auto dev = open_device(set->profile);
  if (!dev.ok()) return dev.status();
  Measurements m;
  m.set_sha256 = *digest;
  m.fn = set->fn;
  m.profile = set->profile;
  m.dims = set->dims;
  m.device = (*dev)->describe();
  m.runner = "mlk-measure " + mlk_version();
  m.timing = (*dev)->timing() + " of " + std::to_string(set->min_reps) + " to " + std::to_string(set->max_reps) +
             " runs (at least " + std::to_string(set->min_time_s) + " s) after " + std::to_string(set->warmup) +
             " warm-up runs, on inputs drawn uniform in [-1, 1)";
  // The set says its timing shape; it is believed only as far as this
  // machine can hold it (half its memory), checked before anything is drawn.
  double need = 0;
  for (const TensorSpec& s : set->timing_inputs) {
    double n = (dtype_bits(s.dtype) + 7) / 8;
    for (int64_t e : s.shape) n *= static_cast<double>(e);
    need += n;
  }
  const double have = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  if (need > have / 2)
    return Status::InvalidArgument("the set's timing inputs need " + std::to_string(static_cast<int64_t>(need)) +
                                   " bytes, more than half this machine's memory");
  const std::vector<HostTensor> timing = draw_inputs(set->timing_inputs);
  Context cx{*set, **dev, opts, timing};
  for (const Candidate& c : set->candidates) {
    if (!opts.only.empty() && std::find(opts.only.begin(), opts.only.end(), c.id) == opts.only.end()) continue;
    CandidateResult r = measure_one(cx, dir, c);
    if (opts.progress)
      opts.progress("[mlk-measure] " + set->fn + " " + c.id + " " + r.verdict +
                    (r.verdict == "ok" ? " " + std::to_string(r.median_ms) + " ms" : ": " + r.detail));
    m.results.push_back(std::move(r));
  }
  return m;
}

Expected<std::string> measure_program(const std::string& who) {
  std::string program;
  if (const char* e = std::getenv("MLK_MEASURE"); e && *e) {
    program = e;
  } else {
    std::error_code ec;
    auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    auto beside = self.parent_path() / "mlk-measure";
    if (ec || access(beside.c_str(), X_OK) != 0)
      return Status::Unsupported(who + " with mlk-measure, and there is none beside it (" + beside.string() +
                                 "); install the `measure` component there, or set $MLK_MEASURE");
    program = beside.string();
  }
  std::error_code ec;
  if (auto canon = std::filesystem::weakly_canonical(program, ec); !ec) program = canon.string();
  return program;
}

}  // namespace mlk::rt
