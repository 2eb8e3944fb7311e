#include "runtime/runtime.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "autotune/cached_tune.h"
#include "cache/key.h"
#include "lang/frontend.h"
#include "lang/ir_printer.h"
#include "lang/sha256.h"
#include "runtime/boundary.h"
#include "service/cli_cache.h"
#include "targets/detect.h"
#include "targets/loaded_artifact.h"

namespace mlk::rt {

using nlohmann::json;

namespace {

std::string dims_str(const DimEnv& d) {
  std::string s;
  for (const auto& [k, v] : d) s += (s.empty() ? "" : ",") + k + "=" + std::to_string(v);
  return s;
}

Expected<std::shared_ptr<const Program>> compile_program(const std::string& name, const std::string& text) {
  FrontendResult r = compile_source(name, text);
  if (!r.ok()) return Status::InvalidArgument(name + " does not check:\n" + r.rendered());
  auto p = std::make_shared<Program>();
  p->file = name;
  p->module = std::move(r.module);
  return std::shared_ptr<const Program>(std::move(p));
}

// Loads an entry's artifact (LoadedArtifact re-hashes the files against the
// manifest) and checks that it speaks this runtime's C ABI.
Expected<std::shared_ptr<LoadedArtifact>> load_files(const std::map<std::string, std::string>& files) {
  auto a = LoadedArtifact::LoadFiles(files);
  if (!a.ok()) return a.status();
  json m = json::parse(a.value()->manifest_json(), nullptr, false);
  if (m.is_discarded() || m.value("abi_version", 0) != MLK_ABI_VERSION)
    return Status::Unsupported("the artifact speaks C ABI version " + (m.is_discarded() ? std::string("?") : m["abi_version"].dump()) +
                               ", this runtime version " + std::to_string(MLK_ABI_VERSION));
  return std::shared_ptr<LoadedArtifact>(std::move(a).value());
}

}  // namespace

Expected<TargetPolicy> TargetPolicy::Parse(const std::string& text) {
  TargetPolicy p;
  std::stringstream ss(text.empty() ? "host" : text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto prof = resolve_profile(item);
    if (!prof.ok()) return Status::InvalidArgument("target policy `" + text + "`: " + prof.status().message());
    p.profiles.push_back(item);
  }
  if (p.profiles.empty()) return Status::InvalidArgument("target policy `" + text + "` names no profile");
  return p;
}

std::string TargetPolicy::str() const {
  std::string s;
  for (const auto& p : profiles) s += (s.empty() ? "" : ",") + p;
  return s;
}

std::string Selection::explain() const {
  std::string s = reason;
  for (const auto& r : rejected) s += "\n  not " + r;
  return s;
}

Expected<DimEnv> dims_of(const ir::Function& f, const std::vector<const DLTensor*>& args, const DimEnv& given) {
  auto c = check_call(f, args, nullptr, given);
  if (!c.ok()) return c.status();
  return c->dims;
}

Expected<std::vector<int64_t>> Kernel::OutputShape(const std::vector<const DLTensor*>& args) const {
  auto c = check_call(*fn_, args, nullptr, unbound_);
  if (!c.ok()) return c.status();
  return c->out_shape;
}

Status Kernel::Run(const std::vector<const DLTensor*>& args, DLTensor* out) const {
  if (!out) return Status::InvalidArgument("the output of `" + fn_->name + "` is NULL");
  auto c = check_call(*fn_, args, out, unbound_);
  if (!c.ok()) return c.status();
  std::vector<mlk_tensor_t> a;
  for (size_t i = 0; i < args.size(); ++i)
    a.push_back({c->args[i], abi_dtype(fn_->params[i].type.dtype), static_cast<int32_t>(c->shapes[i].size()),
                 c->shapes[i].data(), nullptr});
  mlk_tensor_t o{c->out, abi_dtype(fn_->result_type.dtype), static_cast<int32_t>(c->out_shape.size()),
                 c->out_shape.data(), nullptr};
  return artifact_->Call(a, o, c->dims, fn_->name);
}

Expected<std::unique_ptr<Runtime>> Runtime::Open(Options options) {
  auto c = service::CliCache::Open(options.cache, options.ns, "mlk runtime", /*create_if_missing=*/false, options.token);
  if (!c.ok()) return c.status();
  std::unique_ptr<Runtime> rt(new Runtime());
  rt->opts_ = std::move(options);
  rt->cache_ = std::move(c).value();
  return rt;
}

Runtime::~Runtime() = default;

const std::string& Runtime::store_path() const { return cache_->store_path(); }

Expected<std::shared_ptr<const Program>> Runtime::LoadProgram(const std::string& file) {
  auto text = read_file(file);
  if (!text.ok()) return Status::NotFound(text.status().message());
  std::string id = file + "#" + sha256_hex(*text);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = programs_.find(id);
  if (it != programs_.end()) return it->second;
  auto p = compile_program(file, *text);
  if (!p.ok()) return p.status();
  programs_[id] = *p;
  return *p;
}

Expected<std::shared_ptr<const Kernel>> Runtime::GetKernel(const std::string& program_file, const std::string& fn,
                                                           const TargetPolicy& policy, const DimEnv& dims) {
  auto prog = LoadProgram(program_file);
  if (!prog.ok()) return prog.status();
  std::lock_guard<std::mutex> lock(mu_);
  return Select(*prog, fn, policy, dims);
}

Expected<std::shared_ptr<const Kernel>> Runtime::GetKernelByHash(const std::string& program_hash, const std::string& fn,
                                                                 const TargetPolicy& policy, const DimEnv& dims) {
  std::lock_guard<std::mutex> lock(mu_);
  cache::Store* store = cache_->store();
  if (!store) return Status::NotFound("no artifact cache at " + cache_->store_path());
  auto entries = store->list(opts_.ns);
  if (!entries.ok()) return entries.status();
  for (const auto& e : *entries) {
    json meta = json::parse(e.manifest.meta_json, nullptr, false);
    if (meta.is_discarded() || meta.value("program_hash", "") != program_hash || meta.value("fn", "") != fn) continue;
    auto art = store->get_entry(opts_.ns, e.key);
    if (!art.ok()) return art.status();
    auto src = art->files.find("program.tl");
    if (src == art->files.end()) continue;
    auto prog = compile_program("program.tl of " + e.key.substr(0, 16), src->second);
    if (!prog.ok()) return prog.status();
    const ir::Function* f = (*prog)->module.find(fn);
    if (!f || ir::function_hash((*prog)->module, *f) != program_hash)
      return Status::Corruption("entry " + e.key.substr(0, 16) + " says program " + program_hash.substr(0, 16) +
                                " but its program.tl hashes otherwise");
    return Select(*prog, fn, policy, dims);
  }
  return Status::NotFound("no entry of fn `" + fn + "` with program hash " + program_hash.substr(0, 16) +
                          " in namespace " + opts_.ns + " of " + cache_->store_path());
}

// Caller holds mu_.
Expected<std::shared_ptr<const Kernel>> Runtime::Select(std::shared_ptr<const Program> prog, const std::string& fn,
                                                        const TargetPolicy& policy, const DimEnv& dims) {
  const ir::Function* f = prog->module.find(fn);
  if (!f) return Status::NotFound(prog->file + " has no fn `" + fn + "`");
  if (!f->is_public) return Status::InvalidArgument("`" + fn + "` is not public; only public fns have artifacts");
  for (const auto& d : f->dim_vars)
    if (!dims.count(d)) return Status::InvalidArgument("kernel `" + fn + "` needs a value for dimension `" + d + "`");
  const std::string fhash = ir::function_hash(prog->module, *f);
  const std::string kid = fhash + "|" + fn + "|" + policy.str() + "|" + dims_str(dims);
  if (auto it = kernels_.find(kid); it != kernels_.end()) return it->second;

  Selection sel;
  const CpuInfo cpu = detect_cpu();
  const CudaInfo cuda = detect_cuda();
  cache::Store* store = cache_->store();
  for (const auto& name : policy.profiles) {
    auto p = resolve_profile(name);
    if (!p.ok()) return p.status();
    Runnable rn = can_run(*p, cpu, cuda);
    if (!rn.ok) {
      sel.rejected.push_back(name + ": cannot run here: " + rn.reason);
      continue;
    }
    std::string key = cache::cache_key(tune::key_inputs(prog->module, fn, dims, *p));
    bool pulled = cache_->pull(key);
    store = cache_->store();
    if (!store) {
      sel.rejected.push_back(name + ": no artifact cache at " + cache_->store_path());
      continue;
    }
    auto hit = store->get_entry(opts_.ns, key);
    std::string tuned_dims = dims_str(dims);
    bool exact = hit.ok();
    if (!hit.ok() && hit.status().code() != Status::Code::kNotFound) return hit.status();
    if (!hit.ok()) {
      // Any artifact of this fn and profile: correct at every valid shape.
      auto entries = store->list(opts_.ns);
      if (!entries.ok()) return entries.status();
      for (const auto& e : *entries) {
        json meta = json::parse(e.manifest.meta_json, nullptr, false);
        if (meta.is_discarded() || meta.value("program_hash", "") != fhash || meta.value("fn", "") != fn ||
            meta.value("target", "") != p->name)
          continue;
        hit = store->get_entry(opts_.ns, e.key);
        if (!hit.ok()) return hit.status();
        key = e.key;
        DimEnv td;
        if (meta.contains("dims") && meta["dims"].is_object())
          for (const auto& [k, v] : meta["dims"].items())
            if (v.is_number_integer()) td[k] = v.get<int64_t>();
        tuned_dims = dims_str(td);
        break;
      }
    }
    if (!hit.ok()) {
      sel.rejected.push_back(name + ": no artifact of `" + fn + "` in namespace " + opts_.ns + " of " +
                             cache_->store_path() + " (run `mlk tune` for " + name + ")");
      continue;
    }
    std::shared_ptr<LoadedArtifact> art;
    if (auto it = artifacts_.find(key); it != artifacts_.end()) {
      art = it->second;
    } else {
      auto loaded = load_files(hit->files);
      if (!loaded.ok()) return Status(loaded.status().code() == Status::Code::kCorruption
                                          ? Status::Corruption("artifact " + key.substr(0, 16) + ": " + loaded.status().message())
                                          : loaded.status());
      art = *loaded;
      artifacts_[key] = art;
    }
    json meta = json::parse(hit->info.manifest.meta_json, nullptr, false);
    sel.profile = name;
    sel.key = key;
    sel.exact = exact;
    sel.tuned_dims = tuned_dims;
    sel.reason = name + ": artifact " + key.substr(0, 16) + (pulled ? " (pulled from the server)" : "") +
                 (exact ? ", tuned at exactly " + tuned_dims : ", tuned at " + tuned_dims + ", run at " + dims_str(dims)) +
                 " on " + hit->info.manifest.provenance.host +
                 (meta.is_object() && !meta.value("measured", true) ? ", NOT measured (estimated)" : "");
    auto k = std::make_shared<Kernel>();
    k->program_ = prog;
    k->fn_ = f;
    k->artifact_ = art;
    for (const auto& d : f->unbound_dims()) k->unbound_[d] = dims.at(d);
    k->sel_ = std::move(sel);
    kernels_[kid] = k;
    return std::shared_ptr<const Kernel>(k);
  }
  std::string why;
  for (const auto& r : sel.rejected) why += "\n  " + r;
  return Status::NotFound("no kernel for `" + fn + "` at " + dims_str(dims) + " under policy " + policy.str() + ":" + why);
}

}  // namespace mlk::rt
