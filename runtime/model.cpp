#include "runtime/model.h"

#include <algorithm>
#include <filesystem>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>

#include "base/files.h"
#include "interop/safetensors.h"
#include "lang/tensor.h"
#include "runtime/derived_binding.h"
#include "runtime/boundary.h"

namespace mlk::rt {

// A tensor the model holds for its whole life: a weight (in place in the
// mapped file, or copied when unaligned) or a constant.
struct Model::Held {
  DLTensor dl{};
  std::vector<int64_t> shape;
  std::vector<uint8_t> owned;  // a constant's or a copied weight's bytes; empty for a weight in place
};

// One run of a step's fn: per parameter, a value name or a held tensor.
struct Model::StepInstance {
  size_t step = 0;
  int instance = 0;
  const ir::Function* fn = nullptr;
  std::vector<std::string> value;  // "" where `held` is set
  std::vector<const Held*> held;
};

struct Model::Weights {
  std::string path;
  safetensors::File file;
};

// Memory of one call: intermediate results (a buffer is reused once its
// value is dead) or a left-out input's zeros.
struct Buffer {
  std::vector<uint8_t> bytes;
};

// One value of a call in a buffer: its own shape and record, so that a
// reused buffer never changes what an earlier step was given.
struct View {
  std::vector<int64_t> shape;
  DLTensor dl{};
};

class Model::Call {
 public:
  struct Step {
    const StepInstance* at = nullptr;
    std::shared_ptr<const Kernel> kernel;
    std::vector<const DLTensor*> args;
    DLTensor* out = nullptr;  // null for the last, which writes the caller's output
    RunOptions run;  // what handles proved of its arguments (run.proven)
    std::vector<std::string> skipped;  // the refinements they spared (CheckedCall::skipped)
  };
  std::vector<Step> steps;
  std::vector<int64_t> out_shape;
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::vector<std::unique_ptr<View>> views;
};

namespace {

// How messages name parameter `index` of `f`: "parameter `wq`", or for a
// leaf of a record parameter "field `p.attention.self.query.weight`".
std::string param_label(const ir::Function& f, size_t index) {
  for (const auto& r : f.records)
    if (static_cast<int>(index) >= r.first && static_cast<int>(index) < r.first + r.count &&
        index - r.first < r.paths.size())
      return "field `" + r.name + "." + r.paths[index - r.first] + "`";
  return "parameter `" + f.params[index].name + "`";
}

DLTensor dl_tensor(void* data, DType dtype, std::vector<int64_t>& shape) {
  DLTensor t{};
  t.data = data;
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<int32_t>(shape.size());
  t.dtype = to_dl(dtype);
  t.shape = shape.empty() ? nullptr : shape.data();
  return t;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

std::optional<DType> mlk_dtype(safetensors::DType t) {
  std::string name(safetensors::dtype_name(t));
  if (name == "BOOL") return DType::Bool;
  return parse_dtype(name);
}

// `s` with `prefix` before its message, same code.
Status prefixed(const Status& s, const std::string& prefix) {
  const std::string m = prefix + s.message();
  switch (s.code()) {
    case Status::Code::kOk: return s;
    case Status::Code::kInvalidArgument: return Status::InvalidArgument(m);
    case Status::Code::kUsage: return Status::Usage(m);
    case Status::Code::kNotFound: return Status::NotFound(m);
    case Status::Code::kCorruption: return Status::Corruption(m);
    case Status::Code::kIOError: return Status::IOError(m);
    case Status::Code::kUnsupported: return Status::Unsupported(m);
    case Status::Code::kInternal: return Status::Internal(m);
  }
  return Status::Internal(m);
}

bool is_dim_var(const ir::Function& f, const std::string& s) {
  return std::find(f.dim_vars.begin(), f.dim_vars.end(), s) != f.dim_vars.end();
}

// Dims bound so far for one instance, and where each was bound.
struct DimState {
  DimEnv env;
  std::map<std::string, std::string> origin;
};

// Why `shape` does not fit parameter type `want` under `st` (which it
// extends on success); "" when it fits.
std::string fit(const ir::Function& f, const Shape& want, const std::vector<int64_t>& shape, const std::string& key,
                DimState& st) {
  if (shape.size() != want.size())
    return "its rank is " + std::to_string(shape.size()) + ", the parameter's " + std::to_string(want.size());
  for (size_t ax = 0; ax < want.size(); ++ax) {
    const int64_t got = shape[ax];
    const std::string a = "axis " + std::to_string(ax) + " is " + std::to_string(got);
    if (got < 1 || got > kMaxExtent) return a + ", but extents must be in [1, 2147483647]";
    const std::string v = want[ax].str();
    if (!is_dim_var(f, v)) continue;
    auto it = st.env.find(v);
    if (it == st.env.end()) {
      st.env[v] = got;
      st.origin[v] = "`" + key + "` axis " + std::to_string(ax);
    } else if (it->second != got) {
      return a + ", but " + v + " = " + std::to_string(it->second) + ", bound by " + st.origin[v];
    }
  }
  for (size_t ax = 0; ax < want.size(); ++ax) {  // compound extents (`D / H`) whose dims are all bound
    std::set<std::string> vars;
    want[ax].collect_vars(vars);
    bool all = true;
    for (const auto& v : vars) all = all && st.env.count(v);
    if (!all || is_dim_var(f, want[ax].str())) continue;
    auto v = want[ax].eval(st.env);
    if (!v || *v != shape[ax])
      return "axis " + std::to_string(ax) + " is " + std::to_string(shape[ax]) + ", but " + want[ax].str() + " = " +
             (v ? std::to_string(*v) : "(not a whole number)") + " here";
  }
  return "";
}

// The refinements of `f` over dims that are all bound.
Status check_refinements(const ir::Function& f, const DimState& st, const std::string& at) {
  for (const Pred& r : f.refinements) {
    std::set<std::string> vars;
    r.lhs.collect_vars(vars);
    r.rhs.collect_vars(vars);
    bool all = true;
    for (const auto& v : vars) all = all && st.env.count(v);
    if (!all) continue;
    auto holds = r.eval(st.env);
    if (holds && *holds) continue;
    std::string vals;
    for (const auto& v : vars) vals += (vals.empty() ? "" : ", ") + v + " = " + std::to_string(st.env.at(v)) +
                                       " (bound by " + st.origin.at(v) + ")";
    return Status::InvalidArgument(at + ": the refinement `" + r.str() + "` of `" + f.name + "` does not hold: " + vals);
  }
  return Status::Ok();
}

}  // namespace

Model::~Model() = default;

const ir::Function& Model::result_fn() const { return *program_->module.find(binding_.steps.back().fn); }

size_t Model::mapped_bytes() const {
  size_t n = 0;
  for (const auto& t : weights_->file.tensors()) n += t.nbytes;
  return n;
}

const std::vector<int64_t>& Model::OutputShape(const Call& call) { return call.out_shape; }

Expected<std::shared_ptr<const Model>> Model::Load(std::shared_ptr<Runtime> runtime, const Files& files,
                                                   const TargetPolicy& policy) {
  std::shared_ptr<Model> m(new Model());
  const char* pack = std::getenv("MLK_PACK_WEIGHTS");
  m->pack_weights_ = !(pack && std::string(pack) == "off");
  m->rt_ = std::move(runtime);
  m->policy_ = policy;
  auto prog = m->rt_->LoadProgram(files.program, policy.precision.value_or(Precision::kF32));
  if (!prog.ok()) return prog.status();
  m->program_ = *prog;
  std::string binding_path = files.binding;
  if (binding_path.empty()) {
    binding_path = files.program;
    if (binding_path.size() > 3 && binding_path.compare(binding_path.size() - 3, 3, ".tl") == 0)
      binding_path.resize(binding_path.size() - 3);
    binding_path += ".binding.json";
    std::error_code ec;
    if (!files.entry.empty() || !files.rename.empty() || !std::filesystem::exists(binding_path, ec)) {
      auto b = derive_binding(m->program_->module, files.program, files.entry, files.rename);
      if (!b.ok()) return b.status();
      m->binding_ = std::move(*b);
      MLK_RETURN_IF_ERROR(m->BindWeights(files.weights));
      return std::shared_ptr<const Model>(std::move(m));
    }
  }
  auto text = read_file(binding_path);
  if (!text.ok()) return Status::NotFound("the binding of " + files.program + ": " + text.status().message());
  auto b = parse_binding(binding_path, *text, m->program_->module);
  if (!b.ok()) return b.status();
  m->binding_ = std::move(*b);
  MLK_RETURN_IF_ERROR(m->BindWeights(files.weights));
  return std::shared_ptr<const Model>(std::move(m));
}

// Binds every step instance's weights and constants, checking each weight
// against its parameter, then checks that every tensor of the file is used.
Status Model::BindWeights(const std::string& weights_path) {
  auto file = safetensors::File::Open(weights_path);
  if (!file.ok()) return file.status();
  weights_ = std::make_unique<Weights>(Weights{weights_path, std::move(*file)});
  std::map<std::string, const Held*> by_key;
  std::map<std::string, std::string> bound_at;  // key -> who binds it first
  for (size_t si = 0; si < binding_.steps.size(); ++si) {
    const BindingStep& step = binding_.steps[si];
    const ir::Function* f = program_->module.find(step.fn);
    for (int i = 0; i < step.repeat; ++i) {
      StepInstance in{si, i, f, std::vector<std::string>(f->params.size()),
                      std::vector<const Held*>(f->params.size(), nullptr)};
      const std::string at = step.where(si) + (step.repeat > 1 ? ", instance " + std::to_string(i) + " of " +
                                                                     std::to_string(step.repeat)
                                                               : std::string());
      DimState st;
      st.env = step.dims;
      for (const auto& [d, v] : step.dims) st.origin[d] = "the step's \"dims\" in " + binding_.file;
      for (size_t p = 0; p < f->params.size(); ++p) {
        const ir::Param& par = f->params[p];
        // "parameter `wq` of `layer` (step 1, instance 3 of 6)", or for a
        // record's leaf "field `p.attention.self.query.weight` of `layer` (step 4)".
        const std::string bound = param_label(*f, p) + " of `" + f->name + "` (step " + std::to_string(si) +
                                  (step.repeat > 1 ? ", instance " + std::to_string(i) + " of " + std::to_string(step.repeat)
                                                   : std::string()) + ")";
        if (auto a = step.args.find(par.name); a != step.args.end()) {
          in.value[p] = a->second;
          continue;
        }
        if (auto c = step.constants.find(par.name); c != step.constants.end()) {
          HostTensor t(par.type.dtype, {});
          t.set(0, c->second);
          auto h = std::make_unique<Held>();
          h->owned = std::move(t.bytes);
          h->dl = dl_tensor(h->owned.data(), par.type.dtype, h->shape);
          in.held[p] = h.get();
          held_.push_back(std::move(h));
          continue;
        }
        const std::string& written = step.weights.at(par.name);
        const std::string key = binding_.derived ? written : weight_key(written, i);  // a derived key has no {i}
        const std::string of = "`" + key + "` of " + weights_path;
        const safetensors::TensorView* tv = weights_->file.find(key);
        if (!tv) return Status::InvalidArgument(weights_path + " has no tensor `" + key + "`, which " + binding_.file +
                                                " binds to " + bound);
        auto dt = mlk_dtype(tv->dtype);
        if (!dt)
          return Status::InvalidArgument("tensor " + of + " has dtype " + std::string(safetensors::dtype_name(tv->dtype)) +
                                         ", which no mlk dtype holds; " + bound + " is " + par.type.str());
        if (*dt != par.type.dtype)
          return Status::InvalidArgument("tensor " + of + " is " + dtype_name(*dt) + ", but " + bound + " is " +
                                         par.type.str() + "; mlk never converts dtypes");
        DimState before = st;
        std::string why = fit(*f, par.type.shape, tv->shape, key, st);
        if (!why.empty()) {
          std::vector<int64_t> rev(tv->shape.rbegin(), tv->shape.rend());
          if (rev.size() == 2 && rev != tv->shape && fit(*f, par.type.shape, rev, key, before).empty())
            why += " (the tensor looks transposed: " + shape_str(rev) + " would fit; the program takes the weight "
                   "as stored, e.g. nn.Linear's [out, in])";
          return Status::InvalidArgument("tensor " + of + " has shape " + shape_str(tv->shape) + ", but " + bound +
                                         " is " + par.type.str() + ": " + why);
        }
        if (!bound_at.count(key)) bound_at[key] = bound;
        auto found = by_key.find(key);
        if (found == by_key.end()) {
          auto h = std::make_unique<Held>();
          h->shape = tv->shape;
          void* data = const_cast<uint8_t*>(tv->data);
          if (!tv->aligned) {  // copied once, so that typed access is aligned
            h->owned.assign(tv->data, tv->data + tv->nbytes);
            data = h->owned.data();
            copied_bytes_ += tv->nbytes;
          }
          h->dl = dl_tensor(data, *dt, h->shape);
          found = by_key.emplace(key, h.get()).first;
          held_.push_back(std::move(h));
        }
        in.held[p] = found->second;
      }
      MLK_RETURN_IF_ERROR(check_refinements(*f, st, "the weights of " + at));
      instances_.push_back(std::move(in));
    }
  }
  std::set<std::string> unused(binding_.unused.begin(), binding_.unused.end());
  for (const auto& k : unused) {
    if (!weights_->file.find(k))
      return Status::InvalidArgument(binding_.derived ? weights_path + " has no tensor `" + k + "`, a field of the records of " +
                                                            binding_.file + " (one no step reads)"
                                                      : binding_.file + " lists `" + k + "` as \"unused\", but " + weights_path +
                                     " has no such tensor");
    if (bound_at.count(k))
      return Status::InvalidArgument(binding_.file + " lists `" + k + "` as \"unused\", but it is bound to " +
                                     bound_at[k]);
  }
  for (const auto& t : weights_->file.tensors())
    if (!bound_at.count(t.name) && !unused.count(t.name))
      return Status::InvalidArgument(
          "tensor `" + t.name + "` of " + weights_path + " is bound by no step of " + binding_.file +
          (binding_.derived ? "; give the record a field at that path (a record may describe the whole checkpoint), "
                              "or map a field to it with a rename"
                            : "; bind it to a parameter, or list it under \"unused\""));
  return Status::Ok();
}

Expected<std::shared_ptr<Model::Call>> Model::Prepare(const std::vector<const DLTensor*>& inputs,
                                                      const std::vector<Proven>& proven) const {
  const auto& ins = binding_.inputs;
  if (inputs.size() != ins.size()) {
    std::string names;
    for (const auto& in : ins) names += (names.empty() ? "" : ", ") + in.name;
    return Status::InvalidArgument("the model takes " + std::to_string(ins.size()) + " inputs (" + names + "), got " +
                                   std::to_string(inputs.size()));
  }
  auto call = std::make_shared<Call>();
  std::map<std::string, const DLTensor*> values;
  std::map<std::string, Buffer*> owned;  // values held in this call's buffers
  for (size_t i = 0; i < ins.size(); ++i) {
    if (inputs[i]) {
      values[ins[i].name] = inputs[i];
      continue;
    }
    if (ins[i].zeros_like.empty()) return Status::InvalidArgument("input `" + ins[i].name + "` of the model is required");
    const DLTensor* like = values.at(ins[i].zeros_like);
    auto buf = std::make_unique<Buffer>();
    auto view = std::make_unique<View>();
    int64_t n = 1;
    for (int a = 0; a < like->ndim; ++a) {
      if (!like->shape || like->shape[a] < 0)
        return Status::InvalidArgument("input `" + ins[i].zeros_like + "` has no shape or a negative extent");
      view->shape.push_back(like->shape[a]);
      n *= like->shape[a];
    }
    buf->bytes.assign(static_cast<size_t>(n) * ((like->dtype.bits * like->dtype.lanes + 7) / 8), 0);
    view->dl = *like;
    view->dl.data = buf->bytes.empty() ? nullptr : buf->bytes.data();
    view->dl.shape = view->shape.empty() ? nullptr : view->shape.data();
    view->dl.strides = nullptr;
    view->dl.byte_offset = 0;
    values[ins[i].name] = &view->dl;
    call->buffers.push_back(std::move(buf));
    call->views.push_back(std::move(view));
  }
  std::vector<Buffer*> free_buffers;
  // Every step checked first, then their kernels found together
  // (Runtime::GetKernels), so that a first call compiles its distinct fns
  // side by side; the first step in order that fails is the error.
  std::vector<Runtime::KernelRequest> wanted;
  std::vector<std::string> ats;
  Status unchecked;
  for (size_t k = 0; k < instances_.size(); ++k) {
    const StepInstance& in = instances_[k];
    const BindingStep& step = binding_.steps[in.step];
    const std::string at = step.where(in.step) +
                           (step.repeat > 1 ? ", instance " + std::to_string(in.instance) : std::string()) + ": ";
    Call::Step cs;
    cs.at = &in;
    for (size_t p = 0; p < in.fn->params.size(); ++p) cs.args.push_back(in.held[p] ? &in.held[p]->dl : values.at(in.value[p]));
    for (const Proven& q : proven)  // a handle's input, wherever this step takes it
      for (size_t p = 0; p < cs.args.size(); ++p)
        if (q.arg < inputs.size() && inputs[q.arg] && cs.args[p] == inputs[q.arg]) {
          cs.run.proven.push_back(q);
          cs.run.proven.back().arg = p;
        }
    auto checked = check_call(*in.fn, cs.args, nullptr, step.dims, {}, cs.run.proven);
    if (!checked.ok()) {
      unchecked = prefixed(checked.status(), at);
      break;
    }
    cs.skipped = checked->skipped;
    wanted.push_back({in.fn->name, checked->dims, pack_weights_});
    ats.push_back(at);
    if (k + 1 == instances_.size()) {
      call->out_shape = checked->out_shape;
    } else {
      const DType dt = in.fn->result_type.dtype;
      int64_t n = 1;
      for (int64_t e : checked->out_shape) n *= e;
      const size_t bytes = static_cast<size_t>(n) * static_cast<size_t>(dtype_bits(dt) / 8);
      Buffer* buf = nullptr;
      for (auto it = free_buffers.begin(); it != free_buffers.end(); ++it)
        if ((*it)->bytes.size() == bytes) {
          buf = *it;
          free_buffers.erase(it);
          break;
        }
      if (!buf) {
        call->buffers.push_back(std::make_unique<Buffer>());
        buf = call->buffers.back().get();
        buf->bytes.resize(bytes);
      }
      auto view = std::make_unique<View>();
      view->shape = checked->out_shape;
      view->dl = dl_tensor(buf->bytes.empty() ? nullptr : buf->bytes.data(), dt, view->shape);
      // The value this step overwrites is dead once the step has run: its buffer is free for later steps.
      if (auto prev = owned.find(step.out); prev != owned.end()) free_buffers.push_back(prev->second);
      owned[step.out] = buf;
      values[step.out] = &view->dl;
      cs.out = &view->dl;
      call->views.push_back(std::move(view));
    }
    call->steps.push_back(std::move(cs));
  }
  auto kernels = rt_->GetKernels(program_, policy_, wanted);
  for (size_t k = 0; k < kernels.size(); ++k) {
    if (!kernels[k].ok()) return prefixed(kernels[k].status(), ats[k]);
    Call::Step& cs = call->steps[k];
    cs.kernel = *kernels[k];
    const std::vector<int>& params = cs.kernel->packed_params();
    bool held = pack_weights_ && !params.empty();
    for (int p : params) held = held && static_cast<size_t>(p) < cs.at->held.size() && cs.at->held[p];
    if (!held) continue;
    // Packing is an optimisation: where it fails, the kernel packs within each call.
    if (auto packed = PackedFor(*cs.at, cs.kernel, cs.args); packed.ok()) cs.run.packed = *packed;
  }
  if (!unchecked.ok()) return unchecked;
  return call;
}

Expected<const PackedWeights*> Model::PackedFor(const StepInstance& in, const std::shared_ptr<const Kernel>& kernel,
                                                const std::vector<const DLTensor*>& args) const {
  const auto key = std::make_pair(&in, kernel.get());
  {
    std::lock_guard<std::mutex> lock(packed_mu_);
    if (auto it = packed_.find(key); it != packed_.end()) return it->second.weights.get();
  }
  auto shapes = kernel->PackedShapes(args);
  if (!shapes.ok()) return shapes.status();
  const std::vector<int>& params = kernel->packed_params();
  auto set = std::make_shared<PackedWeights>();
  for (size_t k = 0; k < params.size(); ++k) {
    const WeightKey wkey{&in, params[k], (*shapes)[k]};
    std::shared_ptr<const PackedWeights::Weight> w;
    {
      std::lock_guard<std::mutex> lock(packed_mu_);
      if (auto it = weights_packed_.find(wkey); it != weights_packed_.end()) w = it->second;
    }
    if (!w) {
      auto made = kernel->PackWeight(k, args);
      if (!made.ok()) return made.status();
      std::lock_guard<std::mutex> lock(packed_mu_);
      w = weights_packed_.emplace(wkey, *made).first->second;
    }
    set->weights.push_back(std::move(w));
  }
  std::lock_guard<std::mutex> lock(packed_mu_);
  return packed_.emplace(key, Packed{kernel, std::move(set)}).first->second.weights.get();
}

size_t Model::packed_bytes() const {
  std::lock_guard<std::mutex> lock(packed_mu_);
  size_t n = 0;
  for (const auto& [key, w] : weights_packed_) n += w->data.size() * sizeof(uint16_t);
  return n;
}

Status Model::Run(Call& call, DLTensor* out) const {
  if (!out) return Status::InvalidArgument("the output of the model is NULL");
  for (auto& s : call.steps) {
    Status st = s.kernel->Run(s.args, s.out ? s.out : out, s.run);
    if (!st.ok()) {
      const BindingStep& step = binding_.steps[s.at->step];
      return prefixed(st, step.where(s.at->step) +
                              (step.repeat > 1 ? ", instance " + std::to_string(s.at->instance) : std::string()) + ": ");
    }
  }
  return Status::Ok();
}

std::vector<std::string> Model::Selections(const Call& call) {
  std::vector<std::string> out;
  const StepInstance* last = nullptr;
  for (const auto& s : call.steps) {
    if (last && last->step == s.at->step) continue;
    out.push_back("`" + s.at->fn->name + "`: " + s.kernel->selection().reason);
    for (const auto& line : s.skipped) out.push_back("  " + line);
    last = s.at;
  }
  return out;
}

}  // namespace mlk::rt
