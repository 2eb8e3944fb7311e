#include "runtime/jit.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

namespace mlk::rt {

namespace fs = std::filesystem;

struct JitPlugin {
  std::string path;
  decltype(&mlk_jit_compile) compile = nullptr;
  decltype(&mlk_jit_call) call = nullptr;
  decltype(&mlk_jit_release) release = nullptr;
  decltype(&mlk_jit_free_error) free_error = nullptr;
};

namespace {

constexpr const char* kPluginName = "libmlk_jit.so";

// The directory of the module (shared object or executable) that holds this
// code; "" when the dynamic loader cannot say.
std::string own_directory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&own_directory), &info) == 0 || !info.dli_fname) return "";
  fs::path file = info.dli_fname;
  // For the main executable glibc reports argv[0], which may be relative (to
  // a working directory since left): then the executable itself.
  if (!file.is_absolute()) {
    std::error_code ec;
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (ec) return "";
    file = exe;
  }
  return file.parent_path().string();
}

// The Status of a code the plugin returned (a Status::Code value).
Status status_of(int32_t code, std::string message) {
  switch (static_cast<Status::Code>(code)) {
    case Status::Code::kInvalidArgument: return Status::InvalidArgument(std::move(message));
    case Status::Code::kUsage: return Status::Usage(std::move(message));
    case Status::Code::kNotFound: return Status::NotFound(std::move(message));
    case Status::Code::kCorruption: return Status::Corruption(std::move(message));
    case Status::Code::kIOError: return Status::IOError(std::move(message));
    case Status::Code::kUnsupported: return Status::Unsupported(std::move(message));
    default: return Status::Internal(std::move(message));
  }
}

Status plugin_error(const JitPlugin& p, int32_t code, char* error) {
  std::string message = error ? error : "the JIT plugin failed and said nothing";
  if (error) p.free_error(error);
  return status_of(code, std::move(message));
}

// Opens one candidate; the reason it failed otherwise.
Expected<std::unique_ptr<JitPlugin>> open_plugin(const std::string& where) {
  dlerror();
  void* h = dlopen(where.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* why = dlerror();
    const std::string e = why ? why : "cannot be loaded";
    return Status::NotFound(e.rfind(where, 0) == 0 ? e : where + ": " + e);  // dlerror() names the file itself
  }
  auto p = std::make_unique<JitPlugin>();
  p->path = where;
  auto sym = [&](const char* name) { return dlsym(h, name); };
  auto version = reinterpret_cast<decltype(&mlk_jit_abi_version)>(sym("mlk_jit_abi_version"));
  p->compile = reinterpret_cast<decltype(&mlk_jit_compile)>(sym("mlk_jit_compile"));
  p->call = reinterpret_cast<decltype(&mlk_jit_call)>(sym("mlk_jit_call"));
  p->release = reinterpret_cast<decltype(&mlk_jit_release)>(sym("mlk_jit_release"));
  p->free_error = reinterpret_cast<decltype(&mlk_jit_free_error)>(sym("mlk_jit_free_error"));
  if (!version || !p->compile || !p->call || !p->release || !p->free_error) {
    dlclose(h);
    return Status::Unsupported(where + " is not an mlk JIT plugin: it lacks the mlk_jit_* entries of artifact/jit_plugin.h");
  }
  if (int32_t v = version(); v != MLK_JIT_ABI_VERSION) {
    dlclose(h);
    return Status::Unsupported(where + " speaks JIT plugin ABI version " + std::to_string(v) + ", this runtime version " +
                               std::to_string(MLK_JIT_ABI_VERSION) + ": install the plugin built with this runtime");
  }
  return p;  // never closed: kernels and Halide's JIT code live in it
}

}  // namespace

Expected<const JitPlugin*> load_jit_plugin() {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<JitPlugin>> loaded;  // by $MLK_JIT_PLUGIN ("" = the search)
  const char* env = std::getenv("MLK_JIT_PLUGIN");
  const std::string given = env ? env : "";
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = loaded.find(given); it != loaded.end()) return it->second.get();
  std::vector<std::string> candidates;
  if (!given.empty()) {
    candidates.push_back(given);
  } else {
    if (std::string dir = own_directory(); !dir.empty()) candidates.push_back((fs::path(dir) / kPluginName).string());
    candidates.push_back(kPluginName);
  }
  std::string tried;
  for (const auto& c : candidates) {
    auto p = open_plugin(c);
    if (p.ok()) return (loaded[given] = std::move(p).value()).get();
    if (p.status().code() == Status::Code::kUnsupported) return p.status();
    tried += "\n  " + p.status().message();
  }
  return Status::NotFound(
      "the JIT plugin " + std::string(kPluginName) +
      ", which compiles the default schedule (it links Halide; the runtime does not), could not be loaded:" + tried +
      "\n  install it next to libmlk_runtime.so or the Python module (`cmake --build build --target mlk_jit` builds it), "
      "or set $MLK_JIT_PLUGIN to its path; without it only tuned artifacts run");
}

Expected<std::unique_ptr<JitKernel>> JitKernel::Compile(const JitPlugin* plugin, const std::string& name,
                                                        const std::string& text, const std::string& precision,
                                                        const std::string& fn,
                                                        const std::string& fn_hash, const std::string& profile,
                                                        const DimEnv& dims) {
  std::vector<const char*> names;
  std::vector<int64_t> values;
  for (const auto& [k, v] : dims) {
    names.push_back(k.c_str());
    values.push_back(v);
  }
  mlk_jit_kernel* handle = nullptr;
  char* error = nullptr;
  int32_t rc = plugin->compile(name.c_str(), text.c_str(), precision.c_str(), fn.c_str(), fn_hash.c_str(),
                               profile.c_str(), names.data(), values.data(), static_cast<int32_t>(names.size()),
                               &handle, &error);
  if (rc != 0 || !handle) return plugin_error(*plugin, rc == 0 ? static_cast<int32_t>(Status::Code::kInternal) : rc, error);
  return std::unique_ptr<JitKernel>(new JitKernel(plugin, handle));
}

JitKernel::~JitKernel() { plugin_->release(handle_); }

Status JitKernel::Call(const std::vector<mlk_tensor_t>& args, std::vector<mlk_tensor_t>& outs, const DimEnv& dims) const {
  std::vector<const char*> names;
  std::vector<int64_t> values;
  for (const auto& [k, v] : dims) {
    names.push_back(k.c_str());
    values.push_back(v);
  }
  char* error = nullptr;
  int32_t rc = plugin_->call(handle_, args.data(), static_cast<int32_t>(args.size()), outs.data(),
                             static_cast<int32_t>(outs.size()), names.data(), values.data(),
                             static_cast<int32_t>(names.size()), &error);
  return rc == 0 ? Status::Ok() : plugin_error(*plugin_, rc, error);
}

}  // namespace mlk::rt
