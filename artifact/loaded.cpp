#include "artifact/loaded.h"
#include "targets/halide_error.h"
#include "base/files.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/sha256.h"
#include "lang/source.h"
#include "targets/abi.h"
#include "artifact/manifest.h"

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

namespace {

// Writes `bytes` to a new file `path` (O_EXCL, O_NOFOLLOW, 0600).
Status write_private(const std::string& path, const std::string& bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Status::IOError("cannot create " + path + ": " + std::strerror(errno));
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t w = ::write(fd, bytes.data() + off, bytes.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      ::close(fd);
      return Status::IOError("cannot write " + path + ": " + std::strerror(errno));
    }
    off += static_cast<size_t>(w);
  }
  if (::close(fd) != 0) return Status::IOError("cannot write " + path + ": " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace

Expected<std::unique_ptr<LoadedArtifact>> LoadedArtifact::Load(const std::string& dir) {
  // The manifest and the files it lists are read once, into memory; what is
  // hashed and opened is the private copy LoadFiles makes of these bytes, so
  // a later change to `dir` cannot slip other bytes in between.
  auto files = ReadDir(dir);
  if (!files.ok()) return files.status();
  return LoadFiles(*files);
}

Expected<std::map<std::string, std::string>> LoadedArtifact::ReadDir(const std::string& dir) {
  auto text = read_file((fs::path(dir) / "manifest.json").string());
  if (!text.ok()) return text.status();
  auto m = parse_artifact_manifest(*text, dir + "/manifest.json");
  if (!m.ok()) return m.status();
  std::map<std::string, std::string> files = {{"manifest.json", *text}};
  for (const auto& [name, digest] : m->files) {
    auto bytes = read_file((fs::path(dir) / name).string());
    if (!bytes.ok()) return bytes.status();
    if (sha256_hex(*bytes) != digest)
      return Status::Corruption(dir + "/" + name + " does not match the sha256 in its manifest; refusing to load it");
    files[name] = std::move(*bytes);
  }
  return files;
}

Expected<std::unique_ptr<LoadedArtifact>> LoadedArtifact::LoadPrivate(const std::string& dir,
                                                                      const std::map<std::string, std::string>& files) {
  auto text = read_file((fs::path(dir) / "manifest.json").string());
  if (!text.ok()) return text.status();
  auto m = parse_artifact_manifest(*text, "manifest.json");
  if (!m.ok()) return m.status();
  // The copy is hashed: against the manifest, and against the bytes the
  // caller checked (a store's digests, a signature), file by file.
  for (const auto& [name, bytes] : files) {
    auto copy = read_file((fs::path(dir) / name).string());
    if (!copy.ok()) return copy.status();
    if (sha256_hex(*copy) != sha256_hex(bytes))
      return Status::Corruption("the private copy of " + name + " changed after it was written; refusing to load it");
  }
  for (const auto& [name, digest] : m->files) {
    if (!files.count(name)) return Status::Corruption("artifact file " + name + " is listed in its manifest but missing");
    if (sha256_hex(files.at(name)) != digest)
      return Status::Corruption(name + " does not match the sha256 in its manifest; refusing to load it");
  }
  std::unique_ptr<LoadedArtifact> a(new LoadedArtifact());
  a->manifest_ = *text;
  a->unbound_ = m->unbound_dims;
  a->results_ = m->results;
  const std::string tail = "_results";
  const bool results_entry = m->entry_symbol.size() > tail.size() &&
                             m->entry_symbol.compare(m->entry_symbol.size() - tail.size(), tail.size(), tail) == 0;
  if ((a->results_ > 1) != results_entry)
    return Status::Corruption("manifest.json lists " + std::to_string(a->results_) + " results but names the entry " +
                              m->entry_symbol + "; refusing to load it");
  std::string lib = (fs::path(dir) / m->library).string();
  a->handle_ = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!a->handle_) return Status::InvalidArgument("cannot load " + m->library + ": " + dlerror());
  a->entry_ = dlsym(a->handle_, m->entry_symbol.c_str());
  a->last_error_ = reinterpret_cast<const char* (*)()>(dlsym(a->handle_, "mlk_last_error"));
  if (!a->entry_ || !a->last_error_) return Status::Corruption(m->library + " lacks its C ABI entry");
  a->cuda_ = m->profile_kind == "cuda";
  a->profile_ = m->profile_name;
  if (!m->cuda_entry_symbol.empty()) {
    a->cuda_entry_ = dlsym(a->handle_, m->cuda_entry_symbol.c_str());
    if (!a->cuda_entry_) return Status::Corruption(m->library + " lacks its CUDA entry " + m->cuda_entry_symbol);
  }
  if (!m->packed_params.empty()) {
    a->pack_ = dlsym(a->handle_, m->pack_symbol.c_str());
    a->packed_entry_ = dlsym(a->handle_, m->packed_entry_symbol.c_str());
    if (!a->pack_ || !a->packed_entry_)
      return Status::Corruption(m->library + " lacks its packed-weight entries " + m->pack_symbol + " and " +
                                m->packed_entry_symbol);
    a->packed_params_ = m->packed_params;
  }
  return a;
}

Expected<std::unique_ptr<LoadedArtifact>> LoadedArtifact::LoadFiles(const std::map<std::string, std::string>& files) {
  for (const auto& [name, bytes] : files)
    if (name.empty() || name.find('/') != std::string::npos || name.find('\0') != std::string::npos || name == "." ||
        name == "..")
      return Status::Corruption("artifact file name `" + name + "` is not a plain file name");
  std::string tmpl = (fs::temp_directory_path() / "mlk-artifact-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) return Status::IOError("cannot create a directory under " + fs::temp_directory_path().string());
  // mkdtemp makes it 0700: only this user can reach the copy.
  Status st = Status::Ok();
  for (const auto& [name, bytes] : files) {
    st = write_private((fs::path(tmpl) / name).string(), bytes);
    if (!st.ok()) break;
  }
  Expected<std::unique_ptr<LoadedArtifact>> a =
      st.ok() ? LoadPrivate(tmpl, files) : Expected<std::unique_ptr<LoadedArtifact>>(st);
  std::error_code ec;
  fs::remove_all(tmpl, ec);  // a loaded library stays mapped
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
  if (!f.more_results.empty())
    return Status::InvalidArgument("`" + f.name + "` has " + std::to_string(f.results().size()) +
                                   " results; run it with as many outputs");
  std::vector<HostTensor> outs(1);
  outs[0] = std::move(out);
  Status s = RunAllInto(f, inputs, env, outs);
  out = std::move(outs[0]);
  return s;
}

Status LoadedArtifact::RunAllInto(const ir::Function& f, const std::vector<HostTensor>& inputs, const DimEnv& env,
                                  std::vector<HostTensor>& outs) {
  const std::vector<ir::Result> results = f.results();
  if (outs.size() != results.size())
    return Status::InvalidArgument("`" + f.name + "` has " + std::to_string(results.size()) + " results, got " +
                                   std::to_string(outs.size()) + " outputs");
  std::vector<mlk_tensor_t> os;
  for (size_t k = 0; k < results.size(); ++k) {
    auto shape = concrete_shape(results[k].type.shape, env);
    if (!shape.ok()) return shape.status();
    HostTensor& out = outs[k];
    // A default HostTensor reads as an F32 scalar but holds no bytes: allocate.
    if (out.dtype != results[k].type.dtype || out.shape != *shape || out.bytes.empty())
      out = HostTensor(results[k].type.dtype, *shape);
    os.push_back({out.bytes.data(), abi_dtype(out.dtype), static_cast<int32_t>(out.shape.size()), out.shape.data(),
                  nullptr});
  }
  std::vector<mlk_tensor_t> args;
  for (const auto& t : inputs)
    args.push_back({const_cast<uint8_t*>(t.bytes.data()), abi_dtype(t.dtype), static_cast<int32_t>(t.shape.size()),
                    t.shape.data(), nullptr});
  return CallAll(args, os, env, f.name);
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
  std::vector<mlk_tensor_t> outs = {out};
  return CallAll(args, outs, env, fn);
}

Status LoadedArtifact::CallAll(const std::vector<mlk_tensor_t>& args, std::vector<mlk_tensor_t>& outs,
                               const DimEnv& env, const std::string& fn) {
  return CallAll(args.data(), args.size(), outs.data(), outs.size(), env, fn);
}

Status LoadedArtifact::CallAll(const mlk_tensor_t* args, size_t nargs, mlk_tensor_t* outs, size_t nouts,
                               const DimEnv& env, const std::string& fn) {
  if (nouts != results_)
    return Status::InvalidArgument("`" + fn + "`: its artifact has " + std::to_string(results_) + " results, got " +
                                   std::to_string(nouts) + " output tensors");
  auto dimsv = unbound_values(env);
  if (!dimsv.ok()) return dimsv.status();
  const std::vector<int64_t>& dims = *dimsv;
  int rc;
  if (results_ == 1) {
    using Entry = int (*)(const mlk_tensor_t*, int32_t, mlk_tensor_t*, const int64_t*, int32_t);
    rc = reinterpret_cast<Entry>(entry_)(args, static_cast<int32_t>(nargs), outs, dims.data(),
                                         static_cast<int32_t>(dims.size()));
  } else {  // mlk_NAME_results (targets/abi.h)
    using Entry = int (*)(const mlk_tensor_t*, int32_t, mlk_tensor_t*, int32_t, const int64_t*, int32_t);
    rc = reinterpret_cast<Entry>(entry_)(args, static_cast<int32_t>(nargs), outs, static_cast<int32_t>(nouts),
                                         dims.data(), static_cast<int32_t>(dims.size()));
  }
  return status_of(rc, fn);
}

Status LoadedArtifact::status_of(int rc, const std::string& fn) const {
  if (rc == MLK_ERR_CUDA) return Status::Unsupported("`" + fn + "` (CUDA): " + last_error_());
  if (rc == MLK_ERR_CPU) return Status::Unsupported("`" + fn + "`: " + last_error_());
  if (rc != 0) {
    const std::string e = last_error_();
    if (is_requirement_failure(e)) return Status::InvalidArgument("`" + fn + "` failed at run time: " + clean_runtime_error(e));
    return Status::InvalidArgument("`" + fn + "` failed (code " + std::to_string(rc) + "): " + e);
  }
  return Status::Ok();
}

namespace {
using PackEntry = int (*)(int32_t, const mlk_tensor_t*, int32_t, const int64_t*, int32_t, mlk_tensor_t*, int64_t*);
}  // namespace

Expected<std::vector<int64_t>> LoadedArtifact::PackShape(size_t which, const std::vector<mlk_tensor_t>& args,
                                                         const DimEnv& env, const std::string& fn) {
  if (which >= packed_params_.size())
    return Status::InvalidArgument("`" + fn + "` has " + std::to_string(packed_params_.size()) + " packed weights, not " +
                                   std::to_string(which + 1));
  auto dims = unbound_values(env);
  if (!dims.ok()) return dims.status();
  std::vector<int64_t> shape(4);
  int rc = reinterpret_cast<PackEntry>(pack_)(static_cast<int32_t>(which), args.data(), static_cast<int32_t>(args.size()),
                                              dims->data(), static_cast<int32_t>(dims->size()), nullptr, shape.data());
  MLK_RETURN_IF_ERROR(status_of(rc, fn));
  return shape;
}

Status LoadedArtifact::Pack(size_t which, const std::vector<mlk_tensor_t>& args, const DimEnv& env,
                            mlk_tensor_t& packed, const std::string& fn) {
  if (which >= packed_params_.size())
    return Status::InvalidArgument("`" + fn + "` has " + std::to_string(packed_params_.size()) + " packed weights, not " +
                                   std::to_string(which + 1));
  auto dims = unbound_values(env);
  if (!dims.ok()) return dims.status();
  int rc = reinterpret_cast<PackEntry>(pack_)(static_cast<int32_t>(which), args.data(), static_cast<int32_t>(args.size()),
                                              dims->data(), static_cast<int32_t>(dims->size()), &packed, nullptr);
  return status_of(rc, fn);
}

Status LoadedArtifact::CallAllPacked(const mlk_tensor_t* args, size_t nargs, mlk_tensor_t* outs, size_t nouts,
                                     const DimEnv& env, const std::string& fn, const mlk_tensor_t* packed,
                                     size_t npacked) {
  if (!packed_entry_) return Status::InvalidArgument("`" + fn + "`: its artifact reads no packed weights");
  auto dims = unbound_values(env);
  if (!dims.ok()) return dims.status();
  using Entry = int (*)(const mlk_tensor_t*, int32_t, mlk_tensor_t*, int32_t, const int64_t*, int32_t, const mlk_tensor_t*,
                        int32_t);
  int rc = reinterpret_cast<Entry>(packed_entry_)(args, static_cast<int32_t>(nargs), outs, static_cast<int32_t>(nouts),
                                                  dims->data(), static_cast<int32_t>(dims->size()), packed,
                                                  static_cast<int32_t>(npacked));
  return status_of(rc, fn);
}

}  // namespace mlk
