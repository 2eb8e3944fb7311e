// The runtime's JIT fallback: the default schedule of a fn compiled by the
// JIT plugin (libmlk_jit.so, artifact/jit_plugin.h), which is loaded with
// dlopen the first time a kernel needs it. The runtime itself links no
// compiler; a deployment without the plugin runs tuned artifacts only.
//
// Where the plugin is looked for, in order:
//   1. $MLK_JIT_PLUGIN, when set and not empty: that file and nothing else;
//   2. libmlk_jit.so in the directory of the module that holds the runtime
//      (libmlk_runtime.so, the Python module, or an executable);
//   3. libmlk_jit.so by the dynamic loader's own search (a plugin already
//      loaded, LD_LIBRARY_PATH, the caller's run path).
// A plugin, once loaded, stays loaded for the life of the process.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "lang/bind.h"
#include "artifact/jit_plugin.h"

namespace mlk::rt {

struct JitPlugin;

// The plugin, loaded now or before. NotFound, naming every place tried and
// why it failed and how to install the plugin, when none loads; Unsupported
// when the plugin found speaks another plugin ABI. Thread-safe.
Expected<const JitPlugin*> load_jit_plugin();

// What identifies the plugin's code for the JIT store (runtime/jit_store.h):
// its ABI version and the linker's build ID of the loaded plugin (else the
// sha256 of its file), found once per process. A plugin rebuilt gets another
// identity, so its store entries are not reused.
// "" when the file cannot be read (then the store is not used).
std::string jit_plugin_identity(const JitPlugin* plugin);

// fn `fn` compiled as JitKernel::Compile compiles it, but ahead of time, into
// the artifact directory `out_dir` (which exists and is empty): the plugin's
// mlk_jit_build; `pack_weights`: its products read weights packed (a
// model's kernels). IOError when no C compiler links it.
Status build_jit_artifact(const JitPlugin* plugin, const std::string& name, const std::string& text,
                          const std::string& precision, const std::string& fn, const std::string& fn_hash,
                          const std::string& profile, const std::string& schedule, const DimEnv& dims,
                          const std::string& out_dir, bool pack_weights = false);

// One fn compiled by the plugin.
class JitKernel {
 public:
  // Compiles fn `fn`, whose program hash is `fn_hash`, of the program `text`
  // (named `name` in messages) under the precision policy `precision`
  // ("f32", "bf16", "f16") for the CPU profile named `profile` ("host", or
  // one of `mlk targets` that runs here), extents estimated from `dims`,
  // under `schedule` (a schedule's JSON; "": the profile's default). A
  // schedule Halide refuses is InvalidArgument.
  static Expected<std::unique_ptr<JitKernel>> Compile(const JitPlugin* plugin, const std::string& name,
                                                      const std::string& text, const std::string& precision,
                                                      const std::string& fn,
                                                      const std::string& fn_hash, const std::string& profile,
                                                      const std::string& schedule, const DimEnv& dims);
  ~JitKernel();
  JitKernel(const JitKernel&) = delete;
  JitKernel& operator=(const JitKernel&) = delete;

  // On arguments the caller has checked; `dims` gives every dimension
  // variable. Not thread-safe: callers serialise calls of one kernel.
  // `outs`: one per result of the fn.
  Status Call(const std::vector<mlk_tensor_t>& args, std::vector<mlk_tensor_t>& outs, const DimEnv& dims) const;

 private:
  JitKernel(const JitPlugin* plugin, mlk_jit_kernel* handle) : plugin_(plugin), handle_(handle) {}
  const JitPlugin* plugin_;
  mlk_jit_kernel* handle_;
};

}  // namespace mlk::rt
