#include "runtime/jit.h"

#include "base/files.h"
#include "base/sha256.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>

namespace mlk::rt {

namespace fs = std::filesystem;

struct JitPlugin {
  std::string path;
  std::string file;              // the file the loader opened (dladdr), for its identity
  mutable std::once_flag identity_once;  // jit_plugin_identity, computed once
  mutable std::string identity;
  decltype(&mlk_jit_compile) compile = nullptr;
  decltype(&mlk_jit_build) build = nullptr;
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

// Dims as the plugin's entries take them: parallel arrays of names and
// values (the names point into `dims`, which must outlive them).
struct DimArrays {
  std::vector<const char*> names;
  std::vector<int64_t> values;
  explicit DimArrays(const DimEnv& dims) {
    for (const auto& [k, v] : dims) {
      names.push_back(k.c_str());
      values.push_back(v);
    }
  }
};

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
  p->build = reinterpret_cast<decltype(&mlk_jit_build)>(sym("mlk_jit_build"));
  p->call = reinterpret_cast<decltype(&mlk_jit_call)>(sym("mlk_jit_call"));
  p->release = reinterpret_cast<decltype(&mlk_jit_release)>(sym("mlk_jit_release"));
  p->free_error = reinterpret_cast<decltype(&mlk_jit_free_error)>(sym("mlk_jit_free_error"));
  if (!version) {
    dlclose(h);
    return Status::Unsupported(where + " is not an mlk JIT plugin: it lacks the mlk_jit_* entries of artifact/jit_plugin.h");
  }
  if (int32_t v = version(); v != MLK_JIT_ABI_VERSION) {
    dlclose(h);
    return Status::Unsupported(where + " speaks JIT plugin ABI version " + std::to_string(v) + ", this runtime version " +
                               std::to_string(MLK_JIT_ABI_VERSION) + ": install the plugin built with this runtime");
  }
  Dl_info info{};
  p->file = dladdr(reinterpret_cast<void*>(version), &info) != 0 && info.dli_fname ? info.dli_fname : where;
  if (!p->compile || !p->build || !p->call || !p->release || !p->free_error) {
    dlclose(h);
    return Status::Unsupported(where + " is not an mlk JIT plugin: it lacks the mlk_jit_* entries of artifact/jit_plugin.h");
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
                                                        const std::string& schedule, const DimEnv& dims) {
  const DimArrays d(dims);
  mlk_jit_kernel* handle = nullptr;
  char* error = nullptr;
  int32_t rc = plugin->compile(name.c_str(), text.c_str(), precision.c_str(), fn.c_str(), fn_hash.c_str(),
                               profile.c_str(), schedule.c_str(), d.names.data(), d.values.data(), static_cast<int32_t>(d.names.size()),
                               &handle, &error);
  if (rc != 0 || !handle) return plugin_error(*plugin, rc == 0 ? static_cast<int32_t>(Status::Code::kInternal) : rc, error);
  return std::unique_ptr<JitKernel>(new JitKernel(plugin, handle));
}

namespace {

// The GNU build ID (ELF note NT_GNU_BUILD_ID: a hash the linker computes
// over the linked output) of the loaded object that holds `addr`, in hex;
// "" when it has none.
std::string build_id_of(const void* addr) {
  struct Search {
    uintptr_t addr;
    std::string id;
  } search{reinterpret_cast<uintptr_t>(addr), ""};
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* data) -> int {
        auto* s = static_cast<Search*>(data);
        bool holds = false;
        for (int i = 0; i < info->dlpi_phnum && !holds; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          const uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
          holds = ph.p_type == PT_LOAD && s->addr >= begin && s->addr < begin + ph.p_memsz;
        }
        if (!holds) return 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_NOTE) continue;
          auto* p = reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr);
          const unsigned char* end = p + ph.p_memsz;
          while (p + sizeof(ElfW(Nhdr)) <= end) {
            auto* n = reinterpret_cast<const ElfW(Nhdr)*>(p);
            const unsigned char* name = p + sizeof(ElfW(Nhdr));
            const unsigned char* desc = name + ((n->n_namesz + 3) & ~3u);
            if (desc + n->n_descsz > end) break;
            if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
              static const char* hex = "0123456789abcdef";
              for (uint32_t k = 0; k < n->n_descsz; ++k) {
                s->id += hex[desc[k] >> 4];
                s->id += hex[desc[k] & 15];
              }
              return 1;
            }
            p = desc + ((n->n_descsz + 3) & ~3u);
          }
        }
        return 1;  // the object holding addr, without a build ID
      },
      &search);
  return search.id;
}

}  // namespace

std::string jit_plugin_identity(const JitPlugin* p) {
  std::call_once(p->identity_once, [p] {
    // The linker's build ID where the plugin has one (read from memory),
    // else the sha256 of its file (about 70 MB: a few tenths of a second).
    if (std::string id = build_id_of(reinterpret_cast<const void*>(p->compile)); !id.empty()) {
      p->identity = "abi " + std::to_string(MLK_JIT_ABI_VERSION) + ", build id " + id;
      return;
    }
    auto bytes = read_file(p->file);
    if (bytes.ok()) p->identity = "abi " + std::to_string(MLK_JIT_ABI_VERSION) + ", sha256 " + sha256_hex(*bytes);
  });
  return p->identity;
}

Status build_jit_artifact(const JitPlugin* plugin, const std::string& name, const std::string& text,
                          const std::string& precision, const std::string& fn, const std::string& fn_hash,
                          const std::string& profile, const std::string& schedule, const DimEnv& dims,
                          const std::string& out_dir, bool pack_weights) {
  const DimArrays d(dims);
  char* error = nullptr;
  int32_t rc = plugin->build(name.c_str(), text.c_str(), precision.c_str(), fn.c_str(), fn_hash.c_str(),
                             profile.c_str(), schedule.c_str(), d.names.data(), d.values.data(), static_cast<int32_t>(d.names.size()),
                             out_dir.c_str(), pack_weights ? 1 : 0, &error);
  return rc == 0 ? Status::Ok() : plugin_error(*plugin, rc, error);
}

JitKernel::~JitKernel() { plugin_->release(handle_); }

Status JitKernel::Call(const std::vector<mlk_tensor_t>& args, std::vector<mlk_tensor_t>& outs, const DimEnv& dims) const {
  const DimArrays d(dims);
  char* error = nullptr;
  int32_t rc = plugin_->call(handle_, args.data(), static_cast<int32_t>(args.size()), outs.data(),
                             static_cast<int32_t>(outs.size()), d.names.data(), d.values.data(),
                             static_cast<int32_t>(d.names.size()), &error);
  return rc == 0 ? Status::Ok() : plugin_error(*plugin_, rc, error);
}

}  // namespace mlk::rt
