#include "targets/loaded_artifact.h"
#include "base/files.h"

#include <dlfcn.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "base/sha256.h"
#include "lang/source.h"
#include "targets/abi.h"
#include "targets/artifact_manifest.h"

namespace mlk {

namespace fs = std::filesystem;

int32_t abi_dtype(DType t) {
  switch (t) {
    case DType::F16: return MLK_F16;
    case DType::BF16: return MLK_BF16;
    case DType::F32: return MLK_F32;
    case DType::F64: return MLK_F64;
    case DType::I8: return MLK_I8;
    case DType::I16: return MLK_I16;
    case DType::I32: return MLK_I32;
    case DType::I64: return MLK_I64;
    case DType::U8: return MLK_U8;
    case DType::Bool: return MLK_BOOL;
  }
  return -1;
}

LoadedArtifact::~LoadedArtifact() {
  if (handle_) dlclose(handle_);
}

Expected<std::unique_ptr<LoadedArtifact>> LoadedArtifact::Load(const std::string& dir) {
  auto text = read_file((fs::path(dir) / "manifest.json").string());
  if (!text.ok()) return text.status();
  auto m = parse_artifact_manifest(*text, dir + "/manifest.json");
  if (!m.ok()) return m.status();
  for (const auto& [name, digest] : m->files) {
    auto bytes = read_file((fs::path(dir) / name).string());
    if (!bytes.ok()) return bytes.status();
    if (sha256_hex(*bytes) != digest)
      return Status::Corruption(dir + "/" + name + " does not match the sha256 in its manifest; refusing to load it");
  }
  std::unique_ptr<LoadedArtifact> a(new LoadedArtifact());
  a->manifest_ = *text;
  a->unbound_ = m->unbound_dims;
  std::string lib = (fs::path(dir) / m->library).string();
  a->handle_ = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!a->handle_) return Status::InvalidArgument(std::string("cannot load ") + lib + ": " + dlerror());
  a->entry_ = dlsym(a->handle_, m->entry_symbol.c_str());
  a->last_error_ = reinterpret_cast<const char* (*)()>(dlsym(a->handle_, "mlk_last_error"));
  if (!a->entry_ || !a->last_error_) return Status::Corruption(lib + " lacks its C ABI entry");
  a->cuda_ = m->profile_kind == "cuda";
  a->profile_ = m->profile_name;
  if (!m->cuda_entry_symbol.empty()) {
    a->cuda_entry_ = dlsym(a->handle_, m->cuda_entry_symbol.c_str());
    if (!a->cuda_entry_) return Status::Corruption(lib + " lacks its CUDA entry " + m->cuda_entry_symbol);
  }
  return a;
}

Expected<std::unique_ptr<LoadedArtifact>> LoadedArtifact::LoadFiles(const std::map<std::string, std::string>& files) {
  std::string tmpl = (fs::temp_directory_path() / "mlk-artifact-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) return Status::IOError("cannot create a directory under " + fs::temp_directory_path().string());
  Status st = Status::Ok();
  for (const auto& [name, bytes] : files) {
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
      st = Status::Corruption("artifact file name `" + name + "` is not a plain file name");
      break;
    }
    std::ofstream out(fs::path(tmpl) / name, std::ios::binary);
    out << bytes;
    if (!out) {
      st = Status::IOError("cannot write " + (fs::path(tmpl) / name).string());
      break;
    }
  }
  Expected<std::unique_ptr<LoadedArtifact>> a = st.ok() ? Load(tmpl) : Expected<std::unique_ptr<LoadedArtifact>>(st);
  std::error_code ec;
  fs::remove_all(tmpl, ec);
  return a;
}

Expected<HostTensor> LoadedArtifact::Run(const ir::Function& f, const std::vector<HostTensor>& inputs,
                                         const DimEnv& env) {
  HostTensor out;
  MLK_RETURN_IF_ERROR(RunInto(f, inputs, env, out));
  return out;
}

Status LoadedArtifact::RunInto(const ir::Function& f, const std::vector<HostTensor>& inputs, const DimEnv& env,
                               HostTensor& out) {
  auto shape = concrete_shape(f.result_type.shape, env);
  if (!shape.ok()) return shape.status();
  // A default HostTensor reads as an F32 scalar but holds no bytes: allocate.
  if (out.dtype != f.result_type.dtype || out.shape != *shape || out.bytes.empty())
    out = HostTensor(f.result_type.dtype, *shape);
  std::vector<mlk_tensor_t> args;
  for (const auto& t : inputs)
    args.push_back({const_cast<uint8_t*>(t.bytes.data()), abi_dtype(t.dtype), static_cast<int32_t>(t.shape.size()),
                    t.shape.data(), nullptr});
  mlk_tensor_t o{out.bytes.data(), abi_dtype(out.dtype), static_cast<int32_t>(out.shape.size()), out.shape.data(),
                 nullptr};
  return Call(args, o, env, f.name);
}

Expected<std::vector<int64_t>> LoadedArtifact::unbound_values(const DimEnv& env) const {
  std::vector<int64_t> dims;
  for (const auto& d : unbound_) {
    auto it = env.find(d);
    if (it == env.end()) return Status::InvalidArgument("dimension `" + d + "` has no value");
    dims.push_back(it->second);
  }
  return dims;
}

Status LoadedArtifact::CallCuda(const std::vector<mlk_tensor_t>& args, mlk_tensor_t& out, const DimEnv& env,
                                const std::string& fn, const mlk_cuda_call_t& call) {
  if (!cuda_entry_)
    return Status::Unsupported("`" + fn + "`: this CUDA artifact has no device-memory entry (built by an older mlk); "
                               "rebuild it, or pass host tensors");
  auto dims = unbound_values(env);
  if (!dims.ok()) return dims.status();
  using Entry = int (*)(const mlk_tensor_t*, int32_t, mlk_tensor_t*, const int64_t*, int32_t, const mlk_cuda_call_t*);
  int rc = reinterpret_cast<Entry>(cuda_entry_)(args.data(), static_cast<int32_t>(args.size()), &out, dims->data(),
                                                static_cast<int32_t>(dims->size()), &call);
  if (rc == MLK_ERR_CUDA) return Status::Unsupported("`" + fn + "` (CUDA): " + last_error_());
  if (rc != 0) return Status::InvalidArgument("`" + fn + "` failed (code " + std::to_string(rc) + "): " + last_error_());
  return Status::Ok();
}

Status LoadedArtifact::Call(const std::vector<mlk_tensor_t>& args, mlk_tensor_t& out, const DimEnv& env,
                            const std::string& fn) {
  auto dimsv = unbound_values(env);
  if (!dimsv.ok()) return dimsv.status();
  const std::vector<int64_t>& dims = *dimsv;
  using Entry = int (*)(const mlk_tensor_t*, int32_t, mlk_tensor_t*, const int64_t*, int32_t);
  int rc = reinterpret_cast<Entry>(entry_)(args.data(), static_cast<int32_t>(args.size()), &out, dims.data(),
                                           static_cast<int32_t>(dims.size()));
  if (rc == MLK_ERR_CUDA) return Status::Unsupported("`" + fn + "` (CUDA): " + last_error_());
  if (rc != 0) return Status::InvalidArgument("`" + fn + "` failed (code " + std::to_string(rc) + "): " + last_error_());
  return Status::Ok();
}

}  // namespace mlk
