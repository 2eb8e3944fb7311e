#include "runtime/boundary.h"

#include <algorithm>
#include <cctype>
#include <set>

namespace mlk::rt {

DLDataType to_dl(DType t) {
  switch (t) {
    case DType::F16: return {kDLFloat, 16, 1};
    case DType::BF16: return {kDLBfloat, 16, 1};
    case DType::F32: return {kDLFloat, 32, 1};
    case DType::F64: return {kDLFloat, 64, 1};
    case DType::I8: return {kDLInt, 8, 1};
    case DType::I16: return {kDLInt, 16, 1};
    case DType::I32: return {kDLInt, 32, 1};
    case DType::I64: return {kDLInt, 64, 1};
    case DType::U8: return {kDLUInt, 8, 1};
    case DType::Bool: return {kDLUInt, 8, 1};
  }
  return {kDLOpaqueHandle, 0, 0};
}

std::string dl_dtype_name(DLDataType t) {
  std::string base;
  switch (t.code) {
    case kDLInt: base = "int"; break;
    case kDLUInt: base = "uint"; break;
    case kDLFloat: base = "float"; break;
    case kDLBfloat: base = "bfloat"; break;
    case 6: return t.bits == 8 && t.lanes == 1 ? "bool" : "code 6 bits " + std::to_string(t.bits);
    default: break;
  }
  if (base.empty() || t.lanes != 1)
    return "code " + std::to_string(t.code) + " bits " + std::to_string(t.bits) + " lanes " + std::to_string(t.lanes);
  return base + std::to_string(t.bits);
}

namespace {

std::string list(const int64_t* v, int n) {
  std::string s = "[";
  for (int i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string list(const std::vector<int64_t>& v) { return list(v.data(), static_cast<int>(v.size())); }

std::string device_name(DLDevice d) {
  switch (d.device_type) {
    case kDLCPU: return "cpu";
    case kDLCUDA: return "cuda:" + std::to_string(d.device_id);
    case kDLCUDAHost: return "cuda pinned host memory";
    default: return "device type " + std::to_string(d.device_type);
  }
}

struct Span {
  const uint8_t* begin;
  const uint8_t* end;
};

// Checks one tensor against a declared dtype and rank; `what` names it.
// The device rule (boundary.h); sets *on_device for a tensor used in place on the GPU.
Status check_device(const DLTensor& t, const std::string& what, const Placement& where, bool* on_device) {
  *on_device = false;
  const int type = t.device.device_type;
  if (where.any_device) return Status::Ok();
  if (!where.cuda) {
    if (type == kDLCPU) return Status::Ok();
    if (type == kDLCUDA)
      return Status::InvalidArgument(what + ": on " + device_name(t.device) + ", but the kernel runs on the CPU (" +
                                     (where.profile.empty() ? std::string("a CPU profile") : where.profile) +
                                     "); pass a CPU tensor (x.cpu()) or select a CUDA profile (e.g. cuda_sm90)");
    return Status::InvalidArgument(what + ": on " + device_name(t.device) + "; CPU kernels take CPU tensors");
  }
  if (type == kDLCPU || type == kDLCUDAHost) return Status::Ok();  // copied to the device and back
  if (type == kDLCUDA) {
    if (t.device.device_id != where.device)
      return Status::InvalidArgument(what + ": on " + device_name(t.device) + ", but the kernel (" + where.profile +
                                     ") runs in this process's CUDA context on cuda:" + std::to_string(where.device) +
                                     " (MLK_CUDA_DEVICE chooses it; one context per process)");
    *on_device = true;
    return Status::Ok();
  }
  return Status::InvalidArgument(what + ": on " + device_name(t.device) + "; CUDA kernels take tensors on cuda:" +
                                 std::to_string(where.device) + " or in host memory");
}

Status check_tensor(const DLTensor& t, const std::string& what, DType dtype, size_t rank, void** data,
                    std::vector<int64_t>* shape, Span* span, const Placement& where, bool* on_device) {
  MLK_RETURN_IF_ERROR(check_device(t, what, where, on_device));
  DLDataType want = to_dl(dtype);
  const bool dl_bool = dtype == DType::Bool && t.dtype.code == 6 && t.dtype.bits == 8 && t.dtype.lanes == 1;  // kDLBool (DLPack >= 0.8)
  if (!dl_bool && (t.dtype.code != want.code || t.dtype.bits != want.bits || t.dtype.lanes != want.lanes))
    return Status::InvalidArgument(what + ": dtype " + dl_dtype_name(t.dtype) + " but the signature declares " +
                                   dtype_name(dtype) + " (" + dl_dtype_name(want) + "); mlk never converts dtypes");
  if (t.ndim < 0 || static_cast<size_t>(t.ndim) != rank)
    return Status::InvalidArgument(what + ": rank " + std::to_string(t.ndim) + " but the signature declares rank " +
                                   std::to_string(rank));
  if (t.ndim > 0 && !t.shape) return Status::InvalidArgument(what + ": shape is NULL");
  shape->assign(t.shape, t.shape + t.ndim);
  int64_t numel = 1;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] < 0)
      return Status::InvalidArgument(what + ": axis " + std::to_string(i) + " has negative extent " + std::to_string(t.shape[i]));
    if (t.shape[i] > kMaxExtent)
      return Status::InvalidArgument(what + ": axis " + std::to_string(i) + " extent " + std::to_string(t.shape[i]) +
                                     " exceeds 2147483647 (kernels index in int32)");
    numel *= t.shape[i];
    if (numel > (int64_t{1} << 62) / 8) return Status::InvalidArgument(what + ": " + list(*shape) + " is too large");
  }
  if (t.strides) {
    int64_t expect = 1;
    for (int i = t.ndim - 1; i >= 0; --i) {
      if (t.shape[i] != 1 && t.strides[i] != expect)
        return Status::InvalidArgument(what + ": not contiguous: strides " + list(t.strides, t.ndim) +
                                       " but a row-major " + list(*shape) + " tensor has strides " + [&] {
                                         std::vector<int64_t> rm(t.ndim);
                                         int64_t e = 1;
                                         for (int j = t.ndim - 1; j >= 0; --j) rm[j] = e, e *= t.shape[j];
                                         return list(rm);
                                       }() + " (make it contiguous first)");
      expect *= t.shape[i];
    }
  }
  const size_t esize = static_cast<size_t>(want.bits / 8);
  auto* p = static_cast<uint8_t*>(t.data) + t.byte_offset;
  if (numel > 0 && !t.data) return Status::InvalidArgument(what + ": data is NULL");
  if (numel > 0 && reinterpret_cast<uintptr_t>(p) % esize != 0)
    return Status::InvalidArgument(what + ": data is not aligned to its " + std::to_string(esize) + "-byte elements");
  *data = p;
  *span = {p, p + numel * static_cast<int64_t>(esize)};
  return Status::Ok();
}

// `s` with whitespace kept only where it separates two words, one space:
// "D mod H = 0" and "D  mod H=0" are one text.
std::string normal_text(const std::string& s) {
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::string out;
  bool gap = false;
  for (char c : s) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      gap = true;
      continue;
    }
    if (gap && !out.empty() && word(out.back()) && word(c)) out += ' ';
    out += c;
    gap = false;
  }
  return out;
}

// The handle of `proven` that proved `r` for this call under `env` (rules a,
// b and c of boundary.h's dims rule), or null.
const Proven* proven_for(const Pred& r, const DimEnv& env, const std::vector<Proven>& proven,
                         const std::vector<const DLTensor*>& args, const std::vector<std::vector<int64_t>>& shapes) {
  const std::string text = normal_text(r.str());
  std::set<std::string> vars;
  r.lhs.collect_vars(vars);
  r.rhs.collect_vars(vars);
  for (const Proven& p : proven) {
    if (p.arg >= args.size() || p.arg >= shapes.size() || shapes[p.arg] != p.shape) continue;  // (c)
    const DLDataType d = args[p.arg]->dtype;
    if (d.code != p.dtype.code || d.bits != p.dtype.bits || d.lanes != p.dtype.lanes) continue;
    bool same = std::any_of(p.refinements.begin(), p.refinements.end(),
                            [&](const std::string& t) { return normal_text(t) == text; });  // (a)
    for (const auto& v : vars) {  // (b)
      auto bound = env.find(v), was = p.dims.find(v);
      same = same && bound != env.end() && was != p.dims.end() && bound->second == was->second;
    }
    if (same) return &p;
  }
  return nullptr;
}

}  // namespace

Expected<CheckedCall> check_call(const ir::Function& f, const std::vector<const DLTensor*>& args, const DLTensor* out,
                                 const DimEnv& given, const Placement& where, const std::vector<Proven>& proven) {
  if (out && !f.more_results.empty())
    return Status::InvalidArgument("`" + f.name + "` has " + std::to_string(f.results().size()) +
                                   " results; give one output per result");
  return check_call_all(f, args, out ? std::vector<const DLTensor*>{out} : std::vector<const DLTensor*>{}, given,
                        where, proven);
}

Expected<CheckedCall> check_call_all(const ir::Function& f, const std::vector<const DLTensor*>& args,
                                     const std::vector<const DLTensor*>& outs, const DimEnv& given,
                                     const Placement& where, const std::vector<Proven>& proven) {
  if (args.size() != f.params.size())
    return Status::InvalidArgument("`" + f.name + "` takes " + std::to_string(f.params.size()) + " arguments, got " +
                                   std::to_string(args.size()));
  const std::vector<ir::Result> results = f.results();
  if (!outs.empty() && outs.size() != results.size())
    return Status::InvalidArgument("`" + f.name + "` has " + std::to_string(results.size()) + " results, got " +
                                   std::to_string(outs.size()) + " outputs");
  CheckedCall c;
  std::vector<Span> spans;
  for (size_t i = 0; i < args.size(); ++i) {
    const ir::Param& p = f.params[i];
    std::string what = "argument " + std::to_string(i) + " `" + p.name + "` of `" + f.name + "`";
    if (!args[i]) return Status::InvalidArgument(what + ": NULL tensor");
    void* data = nullptr;
    std::vector<int64_t> shape;
    Span span{};
    bool dev = false;
    MLK_RETURN_IF_ERROR(
        check_tensor(*args[i], what, p.type.dtype, p.type.shape.size(), &data, &shape, &span, where, &dev));
    c.on_device.push_back(dev);
    c.args.push_back(data);
    c.shapes.push_back(std::move(shape));
    spans.push_back(span);
  }
  SkipRefinement skip;
  if (!proven.empty())
    skip = [&](const Pred& r, const DimEnv& env) {
      const Proven* p = proven_for(r, env, proven, args, c.shapes);
      if (!p) return false;
      std::string line = "refinement `" + r.str() + "` of `" + f.params[p->arg].name +
                         "`: proven by its handle (mlk.check), not checked again";
      if (std::find(c.skipped.begin(), c.skipped.end(), line) == c.skipped.end()) c.skipped.push_back(line);
      return true;
    };
  auto dims = bind_dims(f, c.shapes, given, skip);
  if (!dims.ok()) return Status::InvalidArgument("`" + f.name + "`: " + dims.status().message());
  c.dims = *dims;
  for (const ir::Result& r : results) {
    auto shape = concrete_shape(r.type.shape, c.dims);
    if (!shape.ok()) return shape.status();
    c.out_shapes.push_back(*shape);
  }
  c.out_shape = c.out_shapes[0];
  if (outs.empty()) return c;
  std::vector<Span> ospans;
  for (size_t k = 0; k < outs.size(); ++k) {
    std::string what = results.size() == 1 ? "the output of `" + f.name + "`"
                                           : "output " + std::to_string(k) + " of `" + f.name + "`";
    if (!outs[k]) return Status::InvalidArgument(what + " is NULL");
    std::vector<int64_t> oshape;
    Span ospan{};
    void* data = nullptr;
    bool dev = false;
    MLK_RETURN_IF_ERROR(check_tensor(*outs[k], what, results[k].type.dtype, results[k].type.shape.size(), &data,
                                     &oshape, &ospan, where, &dev));
    if (oshape != c.out_shapes[k])
      return Status::InvalidArgument(what + ": shape " + list(oshape) + " but the result is " + list(c.out_shapes[k]));
    auto overlaps = [&](const Span& a) {
      return ospan.begin < ospan.end && a.begin < a.end && ospan.begin < a.end && a.begin < ospan.end;
    };
    for (size_t i = 0; i < spans.size(); ++i)
      if (overlaps(spans[i]))
        return Status::InvalidArgument(what + ": shares memory with argument " + std::to_string(i) + " `" +
                                       f.params[i].name + "`; mlk kernels do not run in place");
    for (size_t j = 0; j < ospans.size(); ++j)
      if (overlaps(ospans[j]))
        return Status::InvalidArgument(what + ": shares memory with output " + std::to_string(j) +
                                       "; each result needs its own");
    ospans.push_back(ospan);
    c.outs.push_back(data);
    c.outs_on_device.push_back(dev);
  }
  c.out = c.outs[0];
  c.out_on_device = c.outs_on_device[0];
  return c;
}

}  // namespace mlk::rt
