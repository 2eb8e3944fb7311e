#include "bench/variants.h"

#include <algorithm>
#include <filesystem>
#include <random>

#include "autotune/cached_tune.h"
#include "bench/openblas.h"
#include "cache/entry_meta.h"
#include "lang/precision.h"
#include "cache/key.h"
#include "cache/signatures.h"
#include "cache/store.h"
#include "lang/bind.h"
#include "lang/compare.h"
#include "lang/frontend.h"
#include "lang/ir_printer.h"
#include "runtime/resolve.h"
#include "scheduler/kernel.h"
#include "client/cli_cache.h"
#include "targets/detect.h"
#include "artifact/loaded.h"

namespace mlk::bench {

namespace fs = std::filesystem;

const std::vector<std::string>& all_peer_names() {
  static const std::vector<std::string> names = {"default", "Adams2019", "Li2018", "Mullapudi2016", "openblas"};
  return names;
}

struct PreparedKernel::State {
  std::unique_ptr<FrontendResult> fe;
  const ir::Function* f = nullptr;
  Profile profile;
  // Everything below is made by Prepare and freed by Release.
  std::vector<HostTensor> inputs;
  std::unique_ptr<LoadedArtifact> tuned, baseline;
  std::vector<std::unique_ptr<Kernel>> kernels;
  std::vector<std::unique_ptr<HostTensor>> outputs;  // stable addresses for the closures
  HostTensor* mlk_out = nullptr;
  std::vector<HostTensor> retired;  // the buffers RenewBuffers replaced last

  // A new output buffer for f's result at `env`, kept in `outputs` (its
  // address stays valid until Release).
  HostTensor* new_output(const DimEnv& env) {
    outputs.push_back(std::make_unique<HostTensor>(f->result_type.dtype, *concrete_shape(f->result_type.shape, env)));
    return outputs.back().get();
  }
};

PreparedKernel::~PreparedKernel() = default;

namespace {

// One line of progress, to o.progress when it is set.
void say(const PrepareOptions& o, const std::string& s) {
  if (o.progress) o.progress(s);
}

// Errors of a suite's kernel start with where it is in the suite file.
Status with_where(const KernelSpec& spec, const Status& s) {
  if (spec.where.empty()) return s;
  return Status::InvalidArgument(spec.where + ": " + s.message());
}

HostTensor random_input(const ir::Param& p, const std::vector<int64_t>& shape, std::mt19937_64& rng) {
  HostTensor t(p.type.dtype, shape);
  std::uniform_real_distribution<double> u(-1, 1), pos(0, 1);
  const DType dt = p.type.dtype;
  const bool scalar = shape.empty();
  for (int64_t i = 0; i < t.numel(); ++i) {
    // As `mlk tune` makes them (integers 0 or 1: valid gather indices), except
    // that float scalars (eps, scale) are positive.
    double v = dt == DType::Bool || is_integer(dt) ? static_cast<double>(rng() % 2) : scalar ? pos(rng) : u(rng);
    t.set(i, v);
  }
  return t;
}

}  // namespace

Expected<std::unique_ptr<PreparedKernel>> PreparedKernel::Resolve(const KernelSpec& spec) {
  auto fail = [&](const Status& s) -> Expected<std::unique_ptr<PreparedKernel>> { return with_where(spec, s); };
  std::unique_ptr<PreparedKernel> k(new PreparedKernel());
  k->spec_ = spec;
  k->st_ = std::make_unique<State>();
  State& st = *k->st_;
  auto fe = compile_file(spec.file);
  if (!fe.ok()) return fail(fe.status());
  if (!fe->ok()) return fail(Status::InvalidArgument(spec.file + " has errors:\n" + fe->rendered()));
  st.fe = std::make_unique<FrontendResult>(std::move(fe).value());
  const ir::Module& m = st.fe->module;
  st.f = m.find(spec.fn);
  if (!st.f) return fail(Status::NotFound(spec.file + " has no fn `" + spec.fn + "`"));
  auto profile = resolve_profile(spec.target);
  if (!profile.ok()) return fail(profile.status());
  st.profile = *profile;
  Runnable rn = can_run(st.profile, detect_cpu(), detect_cuda());
  if (!rn.ok) return fail(Status::Unsupported("cannot run " + st.profile.name + " here: " + rn.reason));
  if (st.profile.is_gpu())
    return fail(Status::Unsupported("mlk bench times CPU profiles only; " + st.profile.name + " is a GPU profile"));
  DimEnv dims = spec.dims;
  if (dims.empty()) {
    for (const auto& b : m.tunes)
      if (b.function == spec.fn) {
        dims = b.dims;
        break;
      }
    if (dims.empty())
      return fail(Status::InvalidArgument("`" + spec.fn + "` has no `tune` declaration; give its shape with " +
                                          (spec.where.empty() ? "--dims" : "\"dims\"")));
  }
  for (const auto& [d, v] : dims)
    if (std::find(st.f->dim_vars.begin(), st.f->dim_vars.end(), d) == st.f->dim_vars.end()) {
      std::string vars;
      for (const auto& x : st.f->dim_vars) vars += (vars.empty() ? "" : ", ") + x;
      return fail(Status::InvalidArgument("`" + d + "` is not a dimension of `" + spec.fn + "` (its dimensions: " + vars + ")"));
    }
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& p : st.f->params) {
    auto s = concrete_shape(p.type.shape, dims);
    if (!s.ok()) {
      std::string missing;
      for (const auto& x : st.f->dim_vars)
        if (!dims.count(x)) missing += (missing.empty() ? "" : ", ") + x;
      return fail(Status::InvalidArgument("benchmarking `" + spec.fn + "` needs a value for every dimension; missing: " + missing));
    }
    shapes.push_back(*s);
  }
  auto env = bind_dims(*st.f, shapes, dims);
  if (!env.ok()) return fail(env.status());
  k->env_ = *env;
  k->id_ = spec.fn + " [" + dims_str(k->env_) + "] " + spec.target;
  k->name_ = spec.name.empty() ? k->id_ : spec.name;
  k->ir_hash_ = ir::function_hash(m, *st.f);
  k->cache_key_ = cache::cache_key(tune::key_inputs(m, spec.fn, k->env_, st.profile));
  return k;
}

Status PreparedKernel::Prepare(const PrepareOptions& o) {
  Release();
  State& st = *st_;
  std::mt19937_64 rng(o.seed);
  for (const auto& p : st.f->params) st.inputs.push_back(random_input(p, *concrete_shape(p.type.shape, env_), rng));

  // mlk: the tuned artifact for exactly this fn, shape and profile, else the default schedule.
  mlk_ = Variant{"mlk", "", "", false, nullptr};
  variant_.clear();
  // --cache may name a `mlk serve`: its entries are pulled into the mirror.
  std::unique_ptr<client::CliCache> cc;
  if (!o.store_path.empty() && (!o.default_schedule || !o.baseline_key.empty())) {
    auto c = client::CliCache::Open(o.store_path, o.ns, "mlk bench", /*create_if_missing=*/false, "", o.namespaces);
    if (!c.ok()) return with_where(spec_, c.status());
    cc = std::move(c).value();
  }
  MLK_RETURN_IF_ERROR(PrepareMlk(o, cc.get()));
  if (Status s = mlk_.run(); !s.ok()) return with_where(spec_, s);

  // The baseline's artifact, for an A/B comparison in the same rounds.
  PrepareBaseline(o, cc.get());

  // The peers, each checked against mlk's result before it is timed.
  PreparePeers(o);
  return Status::Ok();
}

namespace {

// An artifact taken by its key (a baseline's, which a report names): with
// o.trusted, only one that a trusted key signed, checked before anything of
// it is loaded; and, signed or not, only an artifact of this fn at this
// shape (its metadata says so), never another kernel a report points at.
Status signed_by_trusted(const PrepareOptions& o, client::CliCache* cc, const std::string& key,
                         const cache::Artifact& hit, const std::string& fn, const DimEnv& env,
                         const std::string& target) {
  if (!o.trusted.empty()) {
    auto st = cache::statement_of_files(key, hit.files, hit.info.manifest.meta_json);
    if (!st.ok()) return st.status();
    cache::SignatureCheck want;  // for the namespace it came from
    if (cc) want.namespaces = cc->signature_namespaces(hit.info);
    MLK_RETURN_IF_ERROR(cache::check_signed("entry " + key.substr(0, 16), *st, hit.info.manifest.meta_json, o.trusted, want));
  }
  auto meta = cache::parse_entry_meta(hit.info.manifest.meta_json);
  if (!meta.ok()) return meta.status();
  if (meta->fn != fn || DimEnv(meta->dims.begin(), meta->dims.end()) != env || (!target.empty() && meta->target != target))
    return Status::InvalidArgument("entry " + key.substr(0, 16) + " is an artifact of `" + meta->fn + "` at " +
                                   dims_str(DimEnv(meta->dims.begin(), meta->dims.end())) + " for " + meta->target +
                                   ", not of `" + fn + "` at " + dims_str(env) + " for " + target);
  return Status::Ok();
}

}  // namespace

Status PreparedKernel::PrepareMlk(const PrepareOptions& o, client::CliCache* cc) {
  State& st = *st_;
  const ir::Module& m = st.fe->module;
  if (!o.artifact_key.empty()) {
    // A baseline's artifact by its key (the A/B re-measurement).
    const std::string& key = o.artifact_key;
    if (cc) cc->pull(key);
    if (!cc || !cc->store())
      return with_where(spec_, Status::NotFound("no artifact cache to take artifact " + key.substr(0, 16) + " from"));
    auto hit = cc->store()->get_entry(o.ns, key);
    if (!hit.ok()) return with_where(spec_, hit.status());
    if (Status s = signed_by_trusted(o, cc, key, *hit, spec_.fn, env_, st.profile.name); !s.ok()) return with_where(spec_, s);
    auto a = LoadedArtifact::LoadFiles(hit->files);
    if (!a.ok()) return with_where(spec_, a.status());
    st.tuned = std::move(a).value();
    variant_ = "tuned";
    mlk_.how = "tuned artifact " + key.substr(0, 16) + " (the baseline's), tuned on " + hit->info.manifest.provenance.host;
  } else if (cc) {
    // The shared resolver (runtime/resolve.h), strict: a benchmark's id is its
    // shape, so only an artifact tuned at exactly this shape is "tuned" here;
    // else the default schedule of the profile.
    auto res = rt::resolve_executable({.lookup = {.cache = cc,
                                                  .ns = o.ns,
                                                  .module = &m,
                                                  .fn = spec_.fn,
                                                  .fhash = ir_hash_,
                                                  .dims = env_,
                                                  .require = rt::Require::kExact,
                                                  .trusted = o.trusted,
                                                  .cpu = detect_cpu()},
                                       .profiles = {st.profile},
                                       .cuda = detect_cuda(),
                                       .jit_fallback = true});
    if (!res.ok()) return with_where(spec_, res.status());
    if (res->tuned) {
      auto a = LoadedArtifact::LoadFiles(res->tuned->entry.files);
      if (!a.ok()) return with_where(spec_, a.status());
      st.tuned = std::move(a).value();
      variant_ = "tuned";
      mlk_.how = "tuned artifact from the cache, key " + res->tuned->key.substr(0, 16) + ", tuned on " +
                 res->tuned->entry.info.manifest.provenance.host;
    }
  }
  if (st.tuned) {
    HostTensor* out = st.mlk_out = st.new_output(env_);
    LoadedArtifact* a = st.tuned.get();
    const ir::Function* fp = st.f;
    const std::vector<HostTensor>* in = &st.inputs;
    const DimEnv* env = &env_;
    mlk_.run = [a, fp, in, env, out]() { return a->RunInto(*fp, *in, *env, *out); };
  } else {
    say(o, "compiling the default schedule (no tuned artifact in the cache)");
    auto kern = Kernel::CompileJit(m, spec_.fn, st.profile, nullptr, env_);
    if (!kern.ok()) return with_where(spec_, kern.status());
    st.kernels.push_back(std::move(kern).value());
    variant_ = "default";
    mlk_.how = "default schedule, Halide JIT (no tuned artifact in the cache for this fn, shape and target)";
    Kernel* kp = st.kernels.back().get();
    HostTensor* out = st.mlk_out = st.new_output(env_);
    const std::vector<HostTensor>* in = &st.inputs;
    const DimEnv* env = &env_;
    mlk_.run = [kp, in, env, out]() { return kp->RunInto(*in, *env, *out); };
  }
  return Status::Ok();
}

void PreparedKernel::PrepareBaseline(const PrepareOptions& o, client::CliCache* cc) {
  State& st = *st_;
  const ir::Module& m = st.fe->module;
  baseline_ = Variant{"baseline", "", "", false, nullptr};
  std::function<std::function<Status()>(HostTensor*)> run_into;  // the baseline's run into an output
  if (!o.baseline_key.empty()) {
    const std::string& key = o.baseline_key;
    if (cc) cc->pull(key);
    if (!cc || !cc->store()) {
      baseline_.error = "no artifact cache to take artifact " + key.substr(0, 16) + " from";
    } else if (auto hit = cc->store()->get_entry(o.ns, key); !hit.ok()) {
      baseline_.error = hit.status().message();
    } else if (Status s = signed_by_trusted(o, cc, key, *hit, spec_.fn, env_, st.profile.name); !s.ok()) {
      baseline_.error = s.message();
    } else if (auto a = LoadedArtifact::LoadFiles(hit->files); !a.ok()) {
      baseline_.error = a.status().message();
    } else {
      st.baseline = std::move(a).value();
      baseline_.how = "tuned artifact " + key.substr(0, 16) + " (the baseline's), tuned on " +
                      hit->info.manifest.provenance.host;
      LoadedArtifact* art = st.baseline.get();
      const ir::Function* fp = st.f;
      const std::vector<HostTensor>* in = &st.inputs;
      const DimEnv* env = &env_;
      run_into = [art, fp, in, env](HostTensor* out) {
        return std::function<Status()>([art, fp, in, env, out]() { return art->RunInto(*fp, *in, *env, *out); });
      };
    }
  } else if (o.baseline_default) {
    say(o, "compiling the default schedule (the baseline's)");
    auto kern = Kernel::CompileJit(m, spec_.fn, st.profile, nullptr, env_);
    if (!kern.ok()) {
      baseline_.error = kern.status().message();
    } else {
      st.kernels.push_back(std::move(kern).value());
      baseline_.how = "the default schedule (the baseline's), Halide JIT";
      Kernel* kp = st.kernels.back().get();
      const std::vector<HostTensor>* in = &st.inputs;
      const DimEnv* env = &env_;
      run_into = [kp, in, env](HostTensor* out) {
        return std::function<Status()>([kp, in, env, out]() { return kp->RunInto(*in, *env, *out); });
      };
    }
  }
  if (!run_into) return;
  // Checked once into an output of its own; then timed into mlk's output,
  // so that the two sides of the A/B read the same input and write the same
  // memory. With outputs of their own, an A/B of one artifact against
  // itself (a streaming kernel of 0.02 ms) was seen to read one side 15-20%
  // slower for a whole process, now and then; the suspect is where each
  // output lies against the input (4 KiB aliasing of loads and stores),
  // which differs between two outputs and not between two runs into one.
  if (Status s = run_into(st.new_output(env_))(); !s.ok()) {
    baseline_.error = "failed: " + s.message();
    return;
  }
  baseline_.run = run_into(st.mlk_out);
}

void PreparedKernel::PreparePeers(const PrepareOptions& o) {
  State& st = *st_;
  const ir::Module& m = st.fe->module;
  const ir::Function& f = *st.f;
  int64_t longest = 1;
  for (const auto& [d, v] : env_) longest = std::max(longest, v);
  const DType judged = judged_dtype(m, f, f.result_type.dtype);
  Tolerance tol = tolerance_for(judged, longest);
  tol.policy_outliers = judged != f.result_type.dtype;
  peers_.clear();
  for (const auto& name : o.peers) {
    Variant v{name, "", "", false, nullptr};
    HostTensor* out = nullptr;
    if (name == "openblas") {
      v.how = openblas_description() + ", cblas_sgemm";
      auto shape = match_matmul(f, env_);
      if (!shape) {
        v.error = "not applicable (only fns that are one F32 matmul of their parameters)";
      } else if (auto fn = openblas_matmul(*shape); !fn.ok()) {
        v.error = fn.status().message();
      } else {
        out = st.new_output(env_);
        const std::vector<HostTensor>* in = &st.inputs;
        v.run = [mm = *fn, in, out]() { return mm(*in, *out); };
      }
    } else if (name == "default" && variant_ == "default") {
      v.how = "the default schedule";
      v.same_as_mlk = true;
      v.error = "same as mlk (no tuned artifact)";
    } else {
      Schedule sched;
      const Schedule* sp = nullptr;
      if (name != "default") {
        sched.autoscheduler = name;
        sp = &sched;
        v.how = "Halide autoscheduler " + name + ", JIT for " + st.profile.name;
      } else {
        v.how = "default schedule, Halide JIT for " + st.profile.name;
      }
      say(o, "compiling " + name);
      auto kern = Kernel::CompileJit(m, spec_.fn, st.profile, sp, env_);
      if (!kern.ok()) {
        v.error = kern.status().message();
      } else {
        st.kernels.push_back(std::move(kern).value());
        Kernel* kp = st.kernels.back().get();
        out = st.new_output(env_);
        const std::vector<HostTensor>* in = &st.inputs;
        const DimEnv* env = &env_;
        v.run = [kp, in, env, out]() { return kp->RunInto(*in, *env, *out); };
      }
    }
    if (v.run) {
      Status s = v.run();
      if (s.ok()) s = compare(*st.mlk_out, *out, tol);
      if (!s.ok()) {
        v.error = (s.code() == Status::Code::kCorruption ? "result disagrees with mlk's: " : "failed: ") + s.message();
        v.run = nullptr;
      }
    }
    if (v.error.size() > 300) v.error = v.error.substr(0, 300) + "...";
    peers_.push_back(std::move(v));
  }
}

void PreparedKernel::RenewBuffers() {
  State& st = *st_;
  std::vector<HostTensor> old;
  // Copy first, swap after: the copies cannot reuse the pages being replaced.
  for (auto& t : st.inputs) {
    HostTensor fresh = t;
    std::swap(t, fresh);
    old.push_back(std::move(fresh));
  }
  for (auto& t : st.outputs) {
    HostTensor fresh = *t;
    std::swap(*t, fresh);
    old.push_back(std::move(fresh));
  }
  st.retired = std::move(old);
}

void PreparedKernel::Release() {
  mlk_.run = nullptr;
  baseline_.run = nullptr;
  for (auto& p : peers_) p.run = nullptr;
  State& st = *st_;
  st.kernels.clear();
  st.tuned.reset();
  st.baseline.reset();
  st.outputs.clear();
  st.inputs.clear();
  st.retired.clear();
  st.mlk_out = nullptr;
}

}  // namespace mlk::bench
