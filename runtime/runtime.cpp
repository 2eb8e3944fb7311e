#include "runtime/runtime.h"
#include "base/files.h"

#include <nlohmann/json.hpp>
#include <algorithm>
#include <array>
#include <atomic>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>

#include "cache/entry_meta.h"
#include "cache/key.h"
#include "cache/signatures.h"
#include "base/signing.h"
#include "lang/frontend.h"
#include "lang/ir_printer.h"
#include "base/sha256.h"
#include "runtime/boundary.h"
#include "runtime/jit.h"
#include "client/cli_cache.h"
#include "targets/cuda_driver.h"
#include "targets/detect.h"
#include "artifact/manifest.h"
#include "artifact/loaded.h"
#include "runtime/jit_store.h"
#include "base/json.h"

namespace mlk::rt {

using nlohmann::json;

// The default schedule compiled by the JIT plugin (runtime/jit.h): ahead of
// time into the JIT store (runtime/jit_store.h), `artifact`, else in memory,
// `kernel`, whose Halide JIT pipeline binds its inputs as pipeline state, so
// its calls are serialised. `how` says which, for Selection::reason.
struct Kernel::Jit {
  std::mutex mu;
  std::unique_ptr<JitKernel> kernel;
  std::shared_ptr<LoadedArtifact> artifact;
  std::string how;
  bool shipped = false;  // compiled under the shipped schedule it was given
};

const char* source_name(Selection::Source s) {
  switch (s) {
    case Selection::Source::kExact: return "exact";
    case Selection::Source::kOtherShape: return "other-shape";
    case Selection::Source::kDefaultJit: return "default-jit";
    case Selection::Source::kDirectory: return "directory";
    case Selection::Source::kShipped: return "shipped";
  }
  return "?";
}

namespace {

// The precision policy an artifact was built under: its manifest's
// `precision` (absent: built before policies, f32). `where` names the
// manifest in the Corruption error a bad value gets.
Expected<Precision> built_precision(const json& manifest, const std::string& where) {
  if (!manifest.is_object() || !manifest.contains("precision")) return Precision::kF32;
  const json& p = manifest["precision"];
  auto parsed = parse_precision(p.is_string() ? p.get<std::string>() : p.dump());
  if (!parsed.ok()) return Status::Corruption(where + ": " + parsed.status().message());
  return *parsed;
}

// `file_imports` false for a program text that came out of a store: it was
// written by whoever wrote the entry, so it reads no files of this machine
// (only `std.` modules).
Expected<std::shared_ptr<Program>> compile_program(const std::string& name, const std::string& text,
                                                   Precision precision = Precision::kF32, bool file_imports = true) {
  FrontendResult r = compile_source(name, text, file_imports);
  if (!r.ok()) return Status::InvalidArgument(name + " does not check:\n" + r.rendered());
  auto p = std::make_shared<Program>();
  p->file = name;
  p->text = text;
  p->precision = precision;
  p->module = with_precision(r.module, precision);
  for (const auto& f : p->module.functions) p->fn_hash[f.name] = ir::function_hash(p->module, f);
  return p;
}

// Loads an entry's artifact (LoadedArtifact re-hashes the files against the
// manifest) and checks that it speaks this runtime's C ABI.
Expected<std::shared_ptr<LoadedArtifact>> load_files(const std::map<std::string, std::string>& files) {
  auto a = LoadedArtifact::LoadFiles(files);
  if (!a.ok()) return a.status();
  auto m = parse_artifact_manifest(a.value()->manifest_json(), "manifest.json");  // never throws
  if (!m.ok()) return m.status();
  if (m->abi_version != MLK_ABI_VERSION)
    return Status::Unsupported("the artifact speaks C ABI version " + std::to_string(m->abi_version) +
                               ", this runtime version " + std::to_string(MLK_ABI_VERSION));
  return std::shared_ptr<LoadedArtifact>(std::move(a).value());
}

// What a CUDA kernel does with each kind of tensor, for the selection text.
std::string cuda_copies_text(const LoadedArtifact& a) {
  if (!a.is_cuda()) return "";
  auto dev = cuda::process_device();
  const std::string where = dev.ok() ? "cuda:" + std::to_string(*dev) : "the MLK_CUDA_DEVICE device";
  if (!a.has_cuda_entry())
    return "; CUDA, host tensors only (an older artifact): each call copies the inputs to the device and the result back";
  return "; CUDA: tensors on " + where + " are used in place (no copy); host tensors cost a copy of each input to the "
         "device and of the result back, every call";
}

}  // namespace

Expected<TargetPolicy> TargetPolicy::Parse(const std::string& text) {
  TargetPolicy p;
  std::string list = text, options;
  if (size_t semi = text.find(';'); semi != std::string::npos) {
    list = text.substr(0, semi);
    options = text.substr(semi + 1);
  }
  std::stringstream ss(list.empty() ? "host" : list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto prof = resolve_profile(item);
    if (!prof.ok()) return Status::InvalidArgument("target policy `" + text + "`: " + prof.status().message());
    p.profiles.push_back(item);
  }
  if (p.profiles.empty()) return Status::InvalidArgument("target policy `" + text + "` names no profile");
  // Options, each `require=...` or `precision=...`, separated by `;`.
  size_t start = 0;
  while (!options.empty() && start <= options.size()) {
    size_t end = options.find(';', start);
    std::string opt = options.substr(start, end == std::string::npos ? std::string::npos : end - start);
    start = end == std::string::npos ? options.size() + 1 : end + 1;
    if (opt.rfind("precision=", 0) == 0) {
      auto pr = parse_precision(opt.substr(10));
      if (!pr.ok()) return Status::InvalidArgument("target policy `" + text + "`: " + pr.status().message());
      p.precision = *pr;
      continue;
    }
    if (opt.rfind("require=", 0) != 0)
      return Status::InvalidArgument("target policy `" + text + "`: unknown option `" + opt +
                                     "` (the options are `require=any|tuned|exact|verified:LEVELS|signed:KEYS` "
                                     "and `precision=f32|bf16|f16`)");
    if (opt.rfind("require=verified:", 0) == 0) {  // a tuned artifact whose report passes the levels
      auto lv = cache::parse_required_levels(opt.substr(17));
      if (!lv.ok()) return Status::InvalidArgument("target policy `" + text + "`: " + lv.status().message());
      if (p.require == Require::kAny) p.require = Require::kTuned;
      p.verified = *lv;
      continue;
    }
    if (opt.rfind("require=signed:", 0) == 0) {  // a tuned artifact signed by a trusted key
      auto keys = parse_trusted_keys(opt.substr(15));
      if (!keys.ok()) return Status::InvalidArgument("target policy `" + text + "`: " + keys.status().message());
      if (p.require == Require::kAny) p.require = Require::kTuned;
      p.trusted = *keys;
      continue;
    }
    auto r = parse_require(opt.substr(8));
    if (!r.ok()) return Status::InvalidArgument("target policy `" + text + "`: " + r.status().message());
    if (*r != Require::kAny || (p.verified.empty() && p.trusted.empty())) p.require = *r;
  }
  if (p.trusted.empty()) {  // the machine's default trust list, when the policy names none
    auto keys = default_trusted_signers();
    if (!keys.ok()) return Status::InvalidArgument("target policy `" + text + "`: " + keys.status().message());
    if (!keys->empty()) {
      p.trusted = *keys;
      if (p.require == Require::kAny) p.require = Require::kTuned;
    }
  }
  return p;
}

std::string TargetPolicy::str() const {
  std::string s;
  for (const auto& p : profiles) s += (s.empty() ? "" : ",") + p;
  const bool implied = !verified.empty() || !trusted.empty();  // these imply tuned
  if (require != Require::kAny && !(implied && require == Require::kTuned))
    s += std::string(";require=") + require_name(require);
  if (!verified.empty()) {
    std::string lv;
    for (const auto& l : verified) lv += (lv.empty() ? "" : ",") + l;
    s += ";require=verified:" + lv;
  }
  if (!trusted.empty()) {
    std::string keys;
    for (const auto& k : trusted) keys += (keys.empty() ? "" : ",") + k;
    s += ";require=signed:" + keys;
  }
  if (precision) s += std::string(";precision=") + precision_name(*precision);
  return s;
}

std::string Selection::explain() const {
  std::string s = reason;
  for (const auto& r : rejected) s += "\n  not " + r;
  return s;
}

std::string Selection::explain(const std::vector<std::string>& skipped) const {
  std::string s = explain();
  for (const auto& line : skipped) s += "\n  " + line;
  return s;
}

Expected<DimEnv> dims_of(const ir::Function& f, const std::vector<const DLTensor*>& args, const DimEnv& given) {
  Placement any;
  any.any_device = true;  // the kernel, chosen from these dims, checks the device
  auto c = check_call(f, args, nullptr, given, any);
  if (!c.ok()) return c.status();
  return c->dims;
}

bool Kernel::on_cuda() const { return artifact_ && artifact_->is_cuda(); }

Expected<Placement> Kernel::placement() const {
  Placement p;
  p.profile = sel_.profile;
  if (!on_cuda()) return p;
  auto dev = cuda::process_device();
  if (!dev.ok()) return dev.status();
  p.cuda = true;
  p.device = *dev;
  return p;
}

Expected<std::vector<int64_t>> Kernel::OutputShape(const std::vector<const DLTensor*>& args) const {
  if (!fn_->more_results.empty())
    return Status::InvalidArgument("`" + fn_->name + "` has " + std::to_string(fn_->results().size()) +
                                   " results; ask for the shape of each (OutputShapes)");
  auto where = placement();
  if (!where.ok()) return where.status();
  auto c = check_call(*fn_, args, nullptr, unbound_, *where);
  if (!c.ok()) return c.status();
  return c->out_shape;
}

Expected<std::vector<std::vector<int64_t>>> Kernel::OutputShapes(const std::vector<const DLTensor*>& args) const {
  auto where = placement();
  if (!where.ok()) return where.status();
  auto c = check_call_all(*fn_, args, {}, unbound_, *where);
  if (!c.ok()) return c.status();
  return c->out_shapes;
}

namespace {

// The checked call's arguments and outputs as the C ABI describes them.
struct AbiCall {
  std::vector<mlk_tensor_t> args, outs;
};
AbiCall abi_call(const ir::Function& f, const CheckedCall& c) {
  AbiCall a;
  for (size_t i = 0; i < c.args.size(); ++i)
    a.args.push_back({c.args[i], abi_dtype(f.params[i].type.dtype), static_cast<int32_t>(c.shapes[i].size()),
                      c.shapes[i].data(), nullptr});
  const std::vector<ir::Result> results = f.results();
  for (size_t k = 0; k < c.outs.size(); ++k)
    a.outs.push_back({c.outs[k], abi_dtype(results[k].type.dtype), static_cast<int32_t>(c.out_shapes[k].size()),
                      c.out_shapes[k].data(), nullptr});
  return a;
}

// The C ABI view of packed weights (for mlk_NAME_packed), checked against
// the call: one per packed parameter, each packed from that argument's
// tensor (its data pointer) and holding its shape's bytes.
Expected<std::vector<mlk_tensor_t>> packed_tensors(const PackedWeights& p, const std::vector<int>& params,
                                                   const CheckedCall& c, const std::string& fn) {
  if (p.weights.size() != params.size())
    return Status::InvalidArgument("`" + fn + "` reads " + std::to_string(params.size()) + " packed weights, got " +
                                   std::to_string(p.weights.size()));
  std::vector<mlk_tensor_t> out;
  for (size_t k = 0; k < params.size(); ++k) {
    const PackedWeights::Weight& w = *p.weights[k];
    int64_t n = 1;
    for (int64_t e : w.shape) n *= e;
    if (w.shape.size() != 4 || static_cast<size_t>(n) != w.data.size())
      return Status::InvalidArgument("`" + fn + "`: packed weight " + std::to_string(k) + " holds " +
                                     std::to_string(w.data.size()) + " values for its shape");
    if (w.source != c.args[static_cast<size_t>(params[k])])
      return Status::InvalidArgument("`" + fn + "`: packed weight " + std::to_string(k) + " was packed from another "
                                     "tensor than parameter `" + std::to_string(params[k]) + "` of this call");
    out.push_back({const_cast<uint16_t*>(w.data.data()), abi_dtype(DType::BF16), 4, w.shape.data(), nullptr});
  }
  return out;
}

}  // namespace

Status Kernel::RunAll(const std::vector<const DLTensor*>& args, const std::vector<DLTensor*>& outs,
                      const RunOptions& options) const {
  const size_t count = fn_->results().size();
  if (outs.size() != count)
    return Status::InvalidArgument("`" + fn_->name + "` has " + std::to_string(count) + " results, got " +
                                   std::to_string(outs.size()) + " outputs");
  if (count == 1) return Run(args, outs[0], options);
  auto where = placement();
  if (!where.ok()) return where.status();
  if (where->cuda) return Status::Unsupported("`" + fn_->name + "`: CUDA kernels have one result");
  auto c = check_call_all(*fn_, args, std::vector<const DLTensor*>(outs.begin(), outs.end()), unbound_, *where,
                          options.proven);
  if (!c.ok()) return c.status();
  AbiCall a = abi_call(*fn_, *c);
  if (jit_) {
    std::lock_guard<std::mutex> lock(jit_->mu);
    return jit_->kernel->Call(a.args, a.outs, c->dims);
  }
  if (options.packed) {
    auto pk = packed_tensors(*options.packed, packed_params(), *c, fn_->name);
    if (!pk.ok()) return pk.status();
    return artifact_->CallAllPacked(a.args.data(), a.args.size(), a.outs.data(), a.outs.size(), c->dims, fn_->name,
                                    pk->data(), pk->size());
  }
  return artifact_->CallAll(a.args, a.outs, c->dims, fn_->name);
}

Status Kernel::RunChecked(const CheckedCall& c, void* const* args, size_t n, void* out) const {
  std::array<mlk_tensor_t, kMaxPlannedArgs> fixed;
  std::vector<mlk_tensor_t> more;
  mlk_tensor_t* a = fixed.data();
  if (n > fixed.size()) a = (more.resize(n), more.data());
  for (size_t i = 0; i < n; ++i)
    a[i] = {args[i], abi_dtype(fn_->params[i].type.dtype), static_cast<int32_t>(c.shapes[i].size()),
            c.shapes[i].data(), nullptr};
  mlk_tensor_t o = {out, abi_dtype(fn_->result_type.dtype), static_cast<int32_t>(c.out_shape.size()),
                    c.out_shape.data(), nullptr};
  if (jit_) {
    std::vector<mlk_tensor_t> av(a, a + n), ov{o};
    std::lock_guard<std::mutex> lock(jit_->mu);
    return jit_->kernel->Call(av, ov, c.dims);
  }
  return artifact_->CallAll(a, n, &o, 1, c.dims, fn_->name);
}

Status Kernel::Run(const std::vector<const DLTensor*>& args, DLTensor* out, const RunOptions& options) const {
  if (!out) return Status::InvalidArgument("the output of `" + fn_->name + "` is NULL");
  auto where = placement();
  if (!where.ok()) return where.status();
  auto c = check_call(*fn_, args, out, unbound_, *where, options.proven);
  if (!c.ok()) return c.status();
  AbiCall a = abi_call(*fn_, *c);
  if (jit_) {
    std::lock_guard<std::mutex> lock(jit_->mu);
    return jit_->kernel->Call(a.args, a.outs, c->dims);
  }
  if (!where->cuda && options.packed) {
    auto pk = packed_tensors(*options.packed, packed_params(), *c, fn_->name);
    if (!pk.ok()) return pk.status();
    return artifact_->CallAllPacked(a.args.data(), a.args.size(), a.outs.data(), a.outs.size(), c->dims, fn_->name,
                                    pk->data(), pk->size());
  }
  if (!where->cuda) return artifact_->CallAll(a.args, a.outs, c->dims, fn_->name);
  // CUDA: the driver and the process's context first, so that a machine
  // without them gets a Status, before the artifact is entered.
  auto ctx = cuda::process_context(where->device);
  if (!ctx.ok()) {
    const std::string m = "`" + fn_->name + "` is a CUDA kernel (" + sel_.profile + ") and cannot run here: " +
                          ctx.status().message();
    return ctx.status().code() == Status::Code::kInvalidArgument ? Status::InvalidArgument(m) : Status::Unsupported(m);
  }
  std::vector<uint8_t> on_device(c->on_device.begin(), c->on_device.end());
  on_device.push_back(c->out_on_device ? 1 : 0);
  mlk_cuda_call_t call{where->device, 0, *ctx, options.cuda_stream, on_device.data()};
  return artifact_->CallCuda(a.args, a.outs[0], c->dims, fn_->name, call);
}

size_t PackedWeights::bytes() const {
  size_t n = 0;
  for (const auto& w : weights) n += w->data.size() * sizeof(uint16_t);
  return n;
}

const std::vector<int>& Kernel::packed_params() const {
  static const std::vector<int> kNone;
  return artifact_ && !artifact_->is_cuda() ? artifact_->packed_params() : kNone;
}

Expected<std::vector<std::vector<int64_t>>> Kernel::PackedShapes(const std::vector<const DLTensor*>& args) const {
  const std::vector<int>& params = packed_params();
  if (params.empty()) return Status::InvalidArgument("`" + fn_->name + "`: its kernel reads no packed weights");
  auto where = placement();
  if (!where.ok()) return where.status();
  auto c = check_call(*fn_, args, nullptr, unbound_, *where);
  if (!c.ok()) return c.status();
  AbiCall a = abi_call(*fn_, *c);
  std::vector<std::vector<int64_t>> out;
  for (size_t k = 0; k < params.size(); ++k) {
    auto shape = artifact_->PackShape(k, a.args, c->dims, fn_->name);
    if (!shape.ok()) return shape.status();
    out.push_back(std::move(*shape));
  }
  return out;
}

Expected<std::shared_ptr<const PackedWeights::Weight>> Kernel::PackWeight(size_t which,
                                                                          const std::vector<const DLTensor*>& args) const {
  const std::vector<int>& params = packed_params();
  if (which >= params.size())
    return Status::InvalidArgument("`" + fn_->name + "`: its kernel reads " + std::to_string(params.size()) +
                                   " packed weights, not " + std::to_string(which + 1));
  auto where = placement();
  if (!where.ok()) return where.status();
  auto c = check_call(*fn_, args, nullptr, unbound_, *where);
  if (!c.ok()) return c.status();
  AbiCall a = abi_call(*fn_, *c);
  auto shape = artifact_->PackShape(which, a.args, c->dims, fn_->name);
  if (!shape.ok()) return shape.status();
  auto w = std::make_shared<PackedWeights::Weight>();
  w->shape = std::move(*shape);
  w->source = c->args[static_cast<size_t>(params[which])];
  int64_t n = 1;
  for (int64_t e : w->shape) n *= e;
  w->data.resize(static_cast<size_t>(n));
  mlk_tensor_t t{w->data.data(), abi_dtype(DType::BF16), 4, w->shape.data(), nullptr};
  MLK_RETURN_IF_ERROR(artifact_->Pack(which, a.args, c->dims, t, fn_->name));
  return std::shared_ptr<const PackedWeights::Weight>(std::move(w));
}

Expected<std::shared_ptr<const PackedWeights>> Kernel::PackWeights(const std::vector<const DLTensor*>& args) const {
  auto out = std::make_shared<PackedWeights>();
  const size_t n = packed_params().size();
  if (n == 0) return Status::InvalidArgument("`" + fn_->name + "`: its kernel reads no packed weights");
  for (size_t k = 0; k < n; ++k) {
    auto w = PackWeight(k, args);
    if (!w.ok()) return w.status();
    out->weights.push_back(std::move(*w));
  }
  return std::shared_ptr<const PackedWeights>(std::move(out));
}

Expected<std::unique_ptr<Runtime>> Runtime::Open(Options options) {
  auto c = client::CliCache::Open(options.cache, options.ns, "mlk runtime", /*create_if_missing=*/false, options.token,
                                  options.namespaces, "namespaces");
  if (!c.ok()) return c.status();
  std::unique_ptr<Runtime> rt(new Runtime());
  rt->opts_ = std::move(options);
  rt->cache_ = std::move(c).value();
  return rt;
}

Runtime::~Runtime() = default;

const std::string& Runtime::store_path() const { return cache_->store_path(); }

Expected<std::shared_ptr<const Program>> Runtime::LoadProgram(const std::string& file, Precision precision) {
  auto text = read_file(file);
  if (!text.ok()) return Status::NotFound(text.status().message());
  return LoadSource(file, *text, precision);
}

Expected<std::shared_ptr<const Program>> Runtime::LoadSource(const std::string& file, const std::string& text,
                                                             Precision precision) {
  std::string id = file + "#" + sha256_hex(text) + "#" + precision_name(precision);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = programs_.find(id);
  if (it != programs_.end()) return it->second;
  auto p = compile_program(file, text, precision);
  if (!p.ok()) return p.status();
  programs_[id] = *p;
  return std::shared_ptr<const Program>(*p);
}

Expected<std::shared_ptr<const Kernel>> Runtime::GetKernel(const std::string& program_file, const std::string& fn,
                                                           const TargetPolicy& policy, const DimEnv& dims) {
  auto prog = LoadProgram(program_file, policy.precision.value_or(Precision::kF32));
  if (!prog.ok()) return prog.status();
  return GetKernel(*prog, fn, policy, dims);
}

Expected<std::shared_ptr<const Kernel>> Runtime::GetKernel(const std::shared_ptr<const Program>& program,
                                                           const std::string& fn, const TargetPolicy& policy,
                                                           const DimEnv& dims) {
  std::unique_lock<std::mutex> lock(mu_);
  return Select(program, fn, policy, dims, lock);
}

Expected<std::shared_ptr<const Program>> Runtime::LoadArtifactDir(const std::string& dir) {
  const std::string where = dir + "/manifest.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(where, ec))
    return Status::NotFound(dir + " is not an artifact directory of `mlk build`: it has no manifest.json");
  auto files = LoadedArtifact::ReadDir(dir);
  if (!files.ok()) return files.status();
  const std::string& text = files->at("manifest.json");
  json m = parse_json(text);
  auto str = [&](const json& o, const char* k) {
    return o.is_object() && o.contains(k) && o[k].is_string() ? o[k].get<std::string>() : std::string();
  };
  const std::string fn = str(m, "function"), ir_hash = str(m, "ir_hash");
  const std::string profile = m.is_object() && m.contains("profile") ? str(m["profile"], "name") : "";
  if (fn.empty() || ir_hash.empty() || profile.empty())
    return Status::Corruption(where + ": `function`, `ir_hash` and `profile.name` must be strings");
  auto src = files->find("program.tl");
  if (src == files->end())
    return Status::NotFound(dir + " has no program.tl (built by an older mlk? build it again with `mlk build`)");
  auto precision = built_precision(m, where);
  if (!precision.ok()) return precision.status();
  auto prog = compile_program(dir + "/program.tl", src->second, *precision);
  if (!prog.ok()) return prog.status();
  if ((*prog)->fn_hash[fn] != ir_hash)
    return Status::Corruption(dir + "/program.tl does not hash to the manifest's ir_hash of `" + fn + "`");
  Program::Directory d;
  d.dir = dir;
  d.fn = fn;
  d.profile = profile;
  if (m.contains("dims") && m["dims"].is_object())
    for (const auto& [k, v] : m["dims"].items())
      if (v.is_number_integer()) d.dims[k] = v.get<int64_t>();
  if (m.contains("requires") && m["requires"].is_object() && m["requires"].contains("cpu_features") &&
      m["requires"]["cpu_features"].is_array()) {
    const CpuInfo cpu = detect_cpu();
    std::string missing;
    for (const auto& f : m["requires"]["cpu_features"])
      if (f.is_string() && !cpu.has(f.get<std::string>())) missing += (missing.empty() ? "" : ", ") + f.get<std::string>();
    if (!missing.empty())
      return Status::Unsupported(dir + " was built for " + profile + " and needs CPU features this machine lacks: " + missing);
  }
  auto st = cache::directory_statement(*files);
  if (!st.ok()) return Status::Corruption(dir + ": " + st.status().message());
  d.statement = *st;
  d.files = std::move(*files);
  (*prog)->directory = std::move(d);
  return std::shared_ptr<const Program>(*prog);
}

// The keys `policy` trusts: its own, else the machine's ($MLK_TRUSTED_SIGNERS),
// which a policy made without TargetPolicy::Parse has not read.
static Expected<std::vector<std::string>> trusted_keys(const TargetPolicy& policy) {
  if (!policy.trusted.empty()) return policy.trusted;
  return default_trusted_signers();
}

// OK when the policy admits the directory `d` for a call at `dims`: under a
// trust list (`trusted`: trusted_keys of the policy) a directory signature
// by one of its keys; under require=exact the shape it
// was built for; under require=verified:LEVELS a report passing them that
// one of the trusted keys signed for this directory (a directory has no
// origin, so an unsigned report is its writer's word). Checked over the
// bytes read, before anything of the directory is loaded.
Status Runtime::directory_allowed(const Program::Directory& d, const TargetPolicy& policy,
                                  const std::vector<std::string>& trusted, const DimEnv& dims) {
  const std::string what = "directory " + d.dir;
  const std::string& man = d.files.at("manifest.json");
  auto refused = [&](const std::string& why) {
    return Status::NotFound(why + "; refusing to load it under policy " + policy.str());
  };
  if (!trusted.empty())
    if (Status s = cache::check_signed(what, d.statement, man, trusted, cache::SignatureCheck{.namespaces = {""}}); !s.ok())
      return refused(s.message());
  if (policy.require == Require::kExact && d.dims != dims)
    return refused(what + " was built for " + dims_str(d.dims) + ", not " + dims_str(dims));
  if (policy.verified.empty()) return Status::Ok();
  if (trusted.empty())
    return refused(what + ": its verification report is its writer's word (a directory may hold a cache hit); add "
                          "signed:KEYS (the keys of the verifiers you trust) to accept a report they signed");
  if (Status s = cache::check_report_signed(what, d.statement, man, trusted); !s.ok()) return refused(s.message());
  auto v = cache::parse_verified(man);
  if (!v.ok()) return refused(what + ": " + v.status().message());
  if (Status s = cache::require_verified(what, *v, policy.verified); !s.ok()) return refused(s.message());
  return Status::Ok();
}

Expected<std::shared_ptr<const Kernel>> Runtime::GetKernelByHash(const std::string& program_hash, const std::string& fn,
                                                                 const TargetPolicy& policy, const DimEnv& dims) {
  std::unique_lock<std::mutex> lock(mu_);
  cache::Store* store = cache_->store();
  if (!store) return Status::NotFound("no artifact cache at " + cache_->store_path());
  auto entries = store->list(opts_.ns);
  if (!entries.ok()) return entries.status();
  std::string skipped;
  auto trusted_or = trusted_keys(policy);
  if (!trusted_or.ok()) return trusted_or.status();
  const std::vector<std::string>& trusted = *trusted_or;
  for (const auto& e : *entries) {
    auto meta = cache::parse_entry_meta(e.manifest.meta_json);  // damaged metadata: not a candidate
    if (!meta.ok() || meta->program_hash != program_hash || meta->fn != fn) continue;
    auto art = store->get_entry(opts_.ns, e.key);
    if (!art.ok()) return art.status();
    // Under signed:KEYS (the policy's, else the machine's) an unsigned
    // entry's program is not even compiled: its writer's source is
    // untrusted input to the front end.
    if (std::string why = unsigned_reason(*art, trusted, *cache_); !why.empty()) {
      skipped += "; " + why.substr(0, 500);
      continue;
    }
    auto src = art->files.find("program.tl");
    if (src == art->files.end()) continue;
    auto man = art->files.find("manifest.json");
    auto built = built_precision(man == art->files.end() ? json() : parse_json(man->second),
                                 "entry " + e.key.substr(0, 16) + "'s manifest.json");
    if (!built.ok()) return built.status();
    if (policy.precision && *policy.precision != *built) continue;
    // An entry whose program does not compile here or hashes otherwise is
    // passed over, saying why: its writer's words must not stop the search.
    auto prog = compile_program("program.tl of " + e.key.substr(0, 16), src->second, *built, /*file_imports=*/false);
    if (!prog.ok()) {
      skipped += "; " + prog.status().message().substr(0, 500);
      continue;
    }
    const ir::Function* f = (*prog)->module.find(fn);
    if (!f || ir::function_hash((*prog)->module, *f) != program_hash) {
      skipped += "; entry " + e.key.substr(0, 16) + " says program " + program_hash.substr(0, 16) +
                 " but its program.tl hashes otherwise";
      continue;
    }
    return Select(*prog, fn, policy, dims, lock);
  }
  return Status::NotFound("no entry of fn `" + fn + "` with program hash " + program_hash.substr(0, 16) +
                          " in namespace " + opts_.ns + " of " + cache_->store_path() + skipped);
}

std::string Runtime::kernel_id(const Program& prog, const std::string& fn, const TargetPolicy& policy,
                               const DimEnv& dims, bool pack_weights) {
  auto h = prog.fn_hash.find(fn);
  if (h == prog.fn_hash.end()) return "";
  return h->second + "|" + fn + "|" + policy.str() + "|" + dims_str(dims) +
         (prog.directory ? "|" + prog.directory->dir : "") + (pack_weights ? "|packed" : "");
}

std::vector<Expected<std::shared_ptr<const Kernel>>> Runtime::GetKernels(const std::shared_ptr<const Program>& program,
                                                                         const TargetPolicy& policy,
                                                                         const std::vector<KernelRequest>& wanted) {
  std::vector<std::optional<Expected<std::shared_ptr<const Kernel>>>> got(wanted.size());
  std::vector<size_t> first(wanted.size());  // the request each one repeats (itself if none)
  // Distinct requests not found before: the first of each fn, side by side,
  // then the others in order. The JIT compiles a fn once, at its first
  // request's shape (the seed's tiles depend on it), so the first in step
  // order must make it, as it did when steps were resolved one by one.
  std::vector<size_t> leaders, followers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::map<std::string, size_t> seen;
    std::set<std::string> fns;
    for (size_t i = 0; i < wanted.size(); ++i) {
      const std::string kid = kernel_id(*program, wanted[i].fn, policy, wanted[i].dims, wanted[i].pack_weights);
      auto [at, fresh] = seen.emplace(kid.empty() ? "#" + std::to_string(i) : kid, i);
      first[i] = at->second;
      if (!fresh) continue;
      if (auto it = kernels_.find(kid); !kid.empty() && it != kernels_.end()) got[i] = it->second;
      else (fns.insert(wanted[i].fn).second ? leaders : followers).push_back(i);
    }
  }
  auto resolve = [&](size_t i) {
    try {
      std::unique_lock<std::mutex> lock(mu_);
      got[i] = Select(program, wanted[i].fn, policy, wanted[i].dims, lock, wanted[i].pack_weights);
    } catch (const std::exception& e) {  // a helper thread must not throw: that would end the process
      got[i] = Status::Internal(std::string("resolving `") + wanted[i].fn + "`: " + e.what());
    }
  };
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t m; (m = next++) < leaders.size();) resolve(leaders[m]);
  };
  std::vector<std::thread> helpers;
  if (leaders.size() > 1) {
    const size_t threads = std::min<size_t>({leaders.size(), std::max(1u, std::thread::hardware_concurrency()), 4});
    try {
      for (size_t t = 1; t < threads; ++t) helpers.emplace_back(work);
    } catch (const std::system_error&) {  // no thread to be had: this one does the rest
    }
  }
  work();
  for (std::thread& t : helpers) t.join();
  for (size_t i : followers) resolve(i);
  std::vector<Expected<std::shared_ptr<const Kernel>>> out;
  out.reserve(wanted.size());
  for (size_t i = 0; i < wanted.size(); ++i) out.push_back(*got[first[i]]);
  return out;
}

namespace {

// The selection of a kernel the JIT compiled: under the shipped schedule
// `shipped` (when it was compiled under it), else the default; `how` says
// where the build is kept.
void describe_jit(Selection& sel, const std::string& fn, Precision precision, const TargetPolicy& policy,
                  const DimEnv& dims, const std::optional<ShippedChoice>& shipped, const std::string& how) {
  const std::string untuned = "no tuned artifact of `" + fn + "` for " + policy.str() + " (`mlk tune --fn " + fn +
                              " --target " + sel.profile + precision_flag_text(precision) + " --dims " +
                              dims_str(dims) + "` tunes one); " + how;
  if (!shipped) {
    sel.source = Selection::Source::kDefaultJit;
    sel.reason = sel.profile + ": default schedule (JIT), not tuned: " + untuned;
    return;
  }
  sel.source = Selection::Source::kShipped;
  sel.tuned_dims = dims_str(shipped->entry.dims);
  sel.exact = shipped->exact;
  sel.reason = sel.profile + ": shipped schedule (JIT), " +
               (shipped->exact ? "tuned at exactly " + sel.tuned_dims
                               : "tuned at " + sel.tuned_dims + " (the nearest shipped shape), run at " + dims_str(dims)) +
               ", " + shipped->entry.provenance + "; " + untuned;
}

}  // namespace

Expected<std::shared_ptr<const Kernel>> Runtime::Select(std::shared_ptr<const Program> prog, const std::string& fn,
                                                        const TargetPolicy& policy, const DimEnv& dims,
                                                        std::unique_lock<std::mutex>& lock, bool pack_weights) {
  const ir::Function* f = prog->module.find(fn);
  if (!f) return Status::NotFound(prog->file + " has no fn `" + fn + "`");
  if (!f->is_public) return Status::InvalidArgument("`" + fn + "` is not public; only public fns have artifacts");
  if (policy.precision && *policy.precision != prog->precision)
    return Status::InvalidArgument("`" + fn + "`: the target policy asks for precision " +
                                   precision_name(*policy.precision) + ", but " +
                                   (prog->file.empty() ? std::string("the program") : prog->file) +
                                   " was loaded under " + precision_name(prog->precision) +
                                   " (load it under that policy: mlk.load(..., precision=...))");
  for (const auto& d : f->dim_vars)
    if (!dims.count(d)) return Status::InvalidArgument("kernel `" + fn + "` needs a value for dimension `" + d + "`");
  const std::string& fhash = prog->fn_hash.at(fn);
  const std::string kid = kernel_id(*prog, fn, policy, dims, pack_weights);
  if (auto it = kernels_.find(kid); it != kernels_.end()) return it->second;
  auto k = std::make_shared<Kernel>();
  k->program_ = prog;
  k->fn_ = f;
  for (const auto& d : f->unbound_dims()) k->unbound_[d] = dims.at(d);
  auto done = [&](Selection sel) {
    k->sel_ = std::move(sel);
    kernels_[kid] = k;
    return std::shared_ptr<const Kernel>(k);
  };
  Selection sel;
  // A policy made without Parse (select()'s candidates, the C++ API) has not
  // read the machine's trust list: trusted_keys applies it here.
  auto trusted_or = trusted_keys(policy);
  if (!trusted_or.ok()) return trusted_or.status();
  const std::vector<std::string>& trusted = *trusted_or;
  if (prog->directory) {
    const auto& d = *prog->directory;
    if (d.fn != fn) return Status::NotFound(d.dir + " holds the artifact of `" + d.fn + "`, not of `" + fn + "`");
    // A directory is code like a cache entry (`mlk build -o DIR` may have
    // copied a cache writer's hit): under signed:KEYS it must carry a
    // directory signature by one of KEYS (`mlk build --sign`), checked over
    // the bytes read before anything of it is loaded.
    if (Status s = directory_allowed(d, policy, trusted, dims); !s.ok()) return s;
    if (!d.artifact) {
      auto art = LoadedArtifact::LoadFiles(d.files);
      if (!art.ok()) return art.status();
      d.artifact = std::shared_ptr<LoadedArtifact>(std::move(*art));
    }
    sel.source = Selection::Source::kDirectory;
    sel.profile = d.profile;
    sel.tuned_dims = dims_str(d.dims);
    sel.exact = d.dims == dims;
    sel.reason = d.profile + ": the artifact in " + d.dir + " (built for " + sel.tuned_dims + "), not from the cache" +
                 cuda_copies_text(*d.artifact);
    k->artifact_ = d.artifact;
    return done(std::move(sel));
  }

  // With no JIT fallback under a trust list, as Parse would set it (review 14).
  const Require require = !trusted.empty() && policy.require == Require::kAny ? Require::kTuned : policy.require;
  ResolveRequest rr{.lookup = {.cache = cache_.get(),
                               .ns = opts_.ns,
                               .module = &prog->module,
                               .fn = fn,
                               .fhash = fhash,
                               .dims = dims,
                               .require = require,
                               .verified = policy.verified,
                               .trusted = trusted,
                               .cpu = detect_cpu()},
                    .cuda = detect_cuda(),
                    .jit_fallback = require == Require::kAny};
  for (const auto& name : policy.profiles) {
    auto p = resolve_profile(name);
    if (!p.ok()) return p.status();
    rr.profiles.push_back(*p);
  }
  auto res = resolve_executable(rr);
  if (!res.ok()) return res.status();
  sel.rejected = res->rejected;
  if (res->tuned) {
    const Tuned& found = *res->tuned;
    const std::string& name = res->profile.name;
    auto loaded = LoadTuned(found);
    if (!loaded.ok()) return loaded.status();
    std::shared_ptr<LoadedArtifact> art = *loaded;
    auto meta = cache::parse_entry_meta(found.entry.info.manifest.meta_json);
    if (!meta.ok()) return Status::Corruption("entry " + found.key.substr(0, 16) + ": " + meta.status().message());
    sel.source = found.exact ? Selection::Source::kExact : Selection::Source::kOtherShape;
    sel.profile = name;
    sel.key = found.key;
    sel.exact = found.exact;
    sel.tuned_dims = dims_str(found.tuned_dims);
    sel.reason = name + ": tuned artifact " + found.key.substr(0, 16) + (found.pulled ? " (pulled from the server)" : "") +
                 (found.exact ? ", tuned at exactly " + sel.tuned_dims
                              : ", tuned at " + sel.tuned_dims + " (the nearest tuned shape), run at " + dims_str(dims)) +
                 " on " + found.entry.info.manifest.provenance.host + (!meta->measured ? ", NOT measured (estimated)" : "") +
                 ", verified: " + meta->verification.str() +
                 (found.signer.empty() ? "" : ", signed by key " + found.signer) + cuda_copies_text(*art);
    k->artifact_ = art;
    return done(std::move(sel));
  }
  std::string why;
  for (const auto& r : sel.rejected) why += "\n  " + r;
  if (!res->jit)
    return Status::NotFound("no kernel for `" + fn + "` at " + dims_str(dims) + " under policy " + policy.str() +
                            (res->no_cpu_profile ? " (no CPU profile of it runs here, so no default schedule either)" : "") +
                            ":" + why);
  // No tuned artifact: a schedule shipped for this machine's family, else
  // the default, compiled once per fn, profile and schedule.
  const Profile& jit_profile = res->profile;
  auto shipped = shipped_for(jit_profile.name, fhash, precision_name(prog->precision), dims, rr.lookup.cpu);
  if (!shipped.ok()) return shipped.status();
  auto jit = DefaultJit(*prog, fn, fhash, jit_profile, policy, dims, why, *shipped ? &**shipped : nullptr, lock,
                        pack_weights);
  if (!jit.ok()) return jit.status();
  // A caller of the same kernel that came while this one waited (unlocked)
  // may have made it first: one Kernel per request.
  if (auto it = kernels_.find(kid); it != kernels_.end()) return it->second;
  sel.profile = jit_profile.name;
  describe_jit(sel, fn, prog->precision, policy, dims, (*jit)->shipped ? *shipped : std::nullopt, (*jit)->how);
  if ((*jit)->artifact) k->artifact_ = (*jit)->artifact;
  else k->jit_ = *jit;
  return done(std::move(sel));
}

Expected<std::shared_ptr<LoadedArtifact>> Runtime::LoadTuned(const Tuned& found) {
  if (auto it = artifacts_.find(found.key); it != artifacts_.end()) return it->second;
  auto loaded = load_files(found.entry.files);
  if (!loaded.ok()) return Status(loaded.status().code() == Status::Code::kCorruption
                                      ? Status::Corruption("artifact " + found.key.substr(0, 16) + ": " + loaded.status().message())
                                      : loaded.status());
  std::shared_ptr<LoadedArtifact> art = *loaded;
  artifacts_[found.key] = art;
  return art;
}

Expected<std::shared_ptr<Kernel::Jit>> Runtime::CompileDefault(const JitPlugin& plugin, const Program& prog,
                                                               const std::string& fn, const std::string& fhash,
                                                               const Profile& profile, const DimEnv& dims,
                                                               const std::string& schedule, bool pack_weights) const {
  const std::string precision = precision_name(prog.precision);
  auto jit = std::make_shared<Kernel::Jit>();
  std::string in_memory = "compiled in memory";
  auto dir = jit_store_dir(cache_->store_path());
  const std::string identity = dir ? jit_plugin_identity(&plugin) : "";
  const std::string no_cc = dir ? missing_c_compiler() : "";
  if (dir && (identity.empty() || !no_cc.empty())) {
    in_memory += " (the JIT store " + *dir + " could not keep it: " +
                 (identity.empty() ? "the plugin's file cannot be read, so its kernels have no key" : no_cc) + ")";
  } else if (dir) {
    // The packed form is another build of the same schedule: another key.
    const std::string key = jit_store_key(identity, fn, fhash, precision, profile, dims,
                                          pack_weights ? schedule + "\npacked weights" : schedule);
    auto entry = jit_store_get(*dir, key, [&](const std::string& tmp) {
      return build_jit_artifact(&plugin, prog.file, prog.text, precision, fn, fhash, profile.name, schedule, dims, tmp,
                                pack_weights);
    });
    if (entry.ok()) {
      jit->artifact = entry->artifact;
      jit->how = (entry->built ? "compiled and kept in the JIT store " : "loaded from the JIT store (compiled earlier) ") +
                 entry->dir + (entry->note.empty() ? "" : "; " + entry->note);
      return jit;
    }
    // A schedule refused is refused in memory too: no second compile.
    if (!schedule.empty() && entry.status().code() == Status::Code::kInvalidArgument) return entry.status();
    in_memory += " (the JIT store " + *dir + " could not keep it: " + entry.status().message() + ")";
  } else {
    in_memory += " ($MLK_JIT_STORE=off)";
  }
  auto compiled = JitKernel::Compile(&plugin, prog.file, prog.text, precision, fn, fhash, profile.name, schedule, dims);
  if (!compiled.ok()) return compiled.status();
  jit->kernel = std::move(*compiled);
  jit->how = in_memory;
  return jit;
}

Expected<std::shared_ptr<Kernel::Jit>> Runtime::DefaultJit(const Program& prog, const std::string& fn,
                                                           const std::string& fhash, const Profile& profile,
                                                           const TargetPolicy& policy, const DimEnv& dims,
                                                           const std::string& why, const ShippedChoice* shipped,
                                                           std::unique_lock<std::mutex>& lock, bool pack_weights) {
  const std::string schedule = shipped ? shipped->entry.schedule : "";
  const std::string jid = fhash + "|" + fn + "|" + profile.name + (shipped ? "|" + sha256_hex(schedule) : "") +
                          (pack_weights ? "|packed" : "");
  if (auto it = jits_.find(jid); it != jits_.end()) {
    const auto ready = it->second;  // another caller's compile: wait for it unlocked
    lock.unlock();
    Expected<std::shared_ptr<Kernel::Jit>> got = ready.get();
    lock.lock();
    return got;
  }
  auto plugin = load_jit_plugin();
  if (!plugin.ok())
    return Status(plugin.status().code() == Status::Code::kNotFound
                      ? Status::NotFound("no tuned artifact of `" + fn + "` at " + dims_str(dims) + " under policy " +
                                         policy.str() + " (`mlk tune --fn " + fn + " --target " + profile.name +
                                         precision_flag_text(prog.precision) + " --dims " + dims_str(dims) +
                                         "` tunes one), and no default schedule either: " +
                                         plugin.status().message() + why)
                      : plugin.status());
  std::promise<Expected<std::shared_ptr<Kernel::Jit>>> done;
  jits_.emplace(jid, done.get_future().share());
  lock.unlock();
  // Whatever happens, the entry gets a value (waiters are woken) and a
  // failure is forgotten: no exception leaves a promise unkept.
  auto result = [&]() -> Expected<std::shared_ptr<Kernel::Jit>> {
    try {
      if (schedule.empty()) return CompileDefault(**plugin, prog, fn, fhash, profile, dims, "", pack_weights);
      auto given = CompileDefault(**plugin, prog, fn, fhash, profile, dims, schedule, pack_weights);
      if (given.ok()) {
        (*given)->shipped = true;
        return given;
      }
      if (given.status().code() != Status::Code::kInvalidArgument) return given;
      // A shipped schedule this build refuses (one the refresh script would
      // drop): the default, saying why.
      auto fallback = CompileDefault(**plugin, prog, fn, fhash, profile, dims, "", pack_weights);
      if (fallback.ok())
        (*fallback)->how += "; the shipped schedule tuned at " + dims_str(shipped->entry.dims) +
                            " was refused: " + given.status().message().substr(0, 300);
      return fallback;
    } catch (const std::exception& e) {
      return Status::Internal("compiling the default schedule of `" + fn + "`: " + e.what());
    }
  }();
  lock.lock();
  if (!result.ok()) jits_.erase(jid);
  done.set_value(result);
  return result;
}

}  // namespace mlk::rt
