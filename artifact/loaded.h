// A built artifact loaded into this process with dlopen and called through
// its C ABI (mlk_abi.h). Used by `mlk run` for tuned artifacts from the cache
// and by tests; the full runtime (runtime/) builds on the same entry.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "lang/bind.h"
#include "lang/ir.h"
#include "base/status.h"
#include "lang/tensor.h"
#include "targets/abi.h"

namespace mlk {

// The C ABI dtype code (mlk_dtype_t) of a dtype.
int32_t abi_dtype(DType t);

class LoadedArtifact {
 public:
  ~LoadedArtifact();
  // `dir` holds the artifact's files (manifest.json and the library). The
  // manifest and the files it lists are read into memory once and loaded
  // with LoadFiles: `dir` is never opened by path after it was hashed.
  static Expected<std::unique_ptr<LoadedArtifact>> Load(const std::string& dir);
  // What Load reads: manifest.json and the files it lists (name -> bytes),
  // each checked against the manifest's sha256 (Corruption when not).
  static Expected<std::map<std::string, std::string>> ReadDir(const std::string& dir);
  // The same from an artifact's files in memory (a cache entry, checked by
  // the caller): written to a private temporary directory (0700, files
  // 0600, created exclusively), the copy re-hashed against these bytes and
  // the manifest, the copy loaded, and the directory removed. So the bytes
  // hashed are the bytes opened. Files whose names are not plain file names
  // are refused.
  static Expected<std::unique_ptr<LoadedArtifact>> LoadFiles(const std::map<std::string, std::string>& files);

  // Runs `f` (whose signature must match the manifest's) on `inputs`; the
  // dims of `env` give the values of the unbound dimensions.
  Expected<HostTensor> Run(const ir::Function& f, const std::vector<HostTensor>& inputs, const DimEnv& env);
  // The same into `out` (reallocated only when its dtype or shape differs).
  Status RunInto(const ir::Function& f, const std::vector<HostTensor>& inputs, const DimEnv& env, HostTensor& out);
  // Every result of a fn with several (or one), into `outs` (one per
  // result, each reallocated only when its dtype or shape differs).
  Status RunAllInto(const ir::Function& f, const std::vector<HostTensor>& inputs, const DimEnv& env,
                    std::vector<HostTensor>& outs);

  // The C ABI entry on tensors the caller has checked and described (shape
  // arrays live until the call returns); `env` supplies the unbound dims.
  // Thread-safe: the entry is reentrant. `fn` names the fn in messages.
  Status Call(const std::vector<mlk_tensor_t>& args, mlk_tensor_t& out, const DimEnv& env, const std::string& fn);
  // The same with one output tensor per result (`outs` as many as the
  // manifest's "results"; the caller has checked them).
  Status CallAll(const std::vector<mlk_tensor_t>& args, std::vector<mlk_tensor_t>& outs, const DimEnv& env,
                 const std::string& fn);
  // The same on arrays (allocates nothing when the fn has no unbound dims).
  Status CallAll(const mlk_tensor_t* args, size_t nargs, mlk_tensor_t* outs, size_t nouts, const DimEnv& env,
                 const std::string& fn);

  // CUDA artifacts (profile kind "cuda"): whether it is one, and the entry
  // that takes device memory (mlk_NAME_cuda, targets/abi.h; absent from CUDA
  // artifacts built before it existed). `call.on_device` has args.size() + 1
  // flags. The caller has checked that the tensors' device is call.device_id.
  bool is_cuda() const { return cuda_; }
  bool has_cuda_entry() const { return cuda_entry_ != nullptr; }
  const std::string& profile_name() const { return profile_; }
  Status CallCuda(const std::vector<mlk_tensor_t>& args, mlk_tensor_t& out, const DimEnv& env, const std::string& fn,
                  const mlk_cuda_call_t& call);

  const std::string& manifest_json() const { return manifest_; }

  // Packed weights (the manifest's packed_weights; docs/artifacts.md): the
  // parameter index of each weight its products read packed, in pack order
  // (empty for most artifacts). PackShape gives pack `which`'s [t, k2, c, 2]
  // (BF16, dense) for a call on `args`; Pack fills `packed` (that shape)
  // from the weight among `args`; CallAllPacked runs as CallAll on packed
  // weights made so, one per packed_params(), instead of packing per call.
  const std::vector<int>& packed_params() const { return packed_params_; }
  Expected<std::vector<int64_t>> PackShape(size_t which, const std::vector<mlk_tensor_t>& args, const DimEnv& env,
                                           const std::string& fn);
  Status Pack(size_t which, const std::vector<mlk_tensor_t>& args, const DimEnv& env, mlk_tensor_t& packed,
              const std::string& fn);
  Status CallAllPacked(const mlk_tensor_t* args, size_t nargs, mlk_tensor_t* outs, size_t nouts, const DimEnv& env,
                       const std::string& fn, const mlk_tensor_t* packed, size_t npacked);

 private:
  static Expected<std::unique_ptr<LoadedArtifact>> LoadPrivate(const std::string& dir,
                                                               const std::map<std::string, std::string>& files);
  Expected<std::vector<int64_t>> unbound_values(const DimEnv& env) const;
  Status status_of(int rc, const std::string& fn) const;  // an entry's return code
  std::vector<int> packed_params_;
  void* pack_ = nullptr;           // mlk_NAME_pack
  void* packed_entry_ = nullptr;   // mlk_NAME_packed
  bool cuda_ = false;
  void* cuda_entry_ = nullptr;
  std::string profile_;
  LoadedArtifact() = default;
  void* handle_ = nullptr;
  void* entry_ = nullptr;
  const char* (*last_error_)() = nullptr;
  std::string manifest_;
  std::vector<std::string> unbound_;
  size_t results_ = 1;  // the manifest's "results" (one when it lists none)
};

}  // namespace mlk
