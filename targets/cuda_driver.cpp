#include "targets/cuda_driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <mutex>

namespace mlk::cuda {

namespace {

struct Loaded {
  Driver d;
  std::string error;  // empty: loaded
};

template <typename F>
bool bind(void* lib, const char* name, F* f) {
  *f = reinterpret_cast<F>(dlsym(lib, name));
  return *f != nullptr;
}

Loaded load() {
  Loaded l;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  const char* err = lib ? nullptr : dlerror();
  const std::string why = err ? err : "not found";  // about libcuda.so.1, the name drivers install
  if (!lib) lib = dlopen("libcuda.so", RTLD_NOW | RTLD_GLOBAL);
  if (!lib) {
    l.error = std::string("the CUDA driver (libcuda.so.1) cannot be loaded: ") + why +
              "; CUDA kernels need an NVIDIA driver on this machine";
    return l;
  }
  Driver& d = l.d;
  bool ok = bind(lib, "cuInit", &d.init) && bind(lib, "cuDeviceGet", &d.device_get) &&
            bind(lib, "cuDeviceGetCount", &d.device_get_count) &&
            bind(lib, "cuDeviceGetAttribute", &d.device_get_attribute) &&
            bind(lib, "cuDevicePrimaryCtxRetain", &d.primary_ctx_retain) &&
            bind(lib, "cuCtxPushCurrent_v2", &d.ctx_push) && bind(lib, "cuCtxPopCurrent_v2", &d.ctx_pop) &&
            bind(lib, "cuCtxSynchronize", &d.ctx_synchronize) && bind(lib, "cuMemAlloc_v2", &d.mem_alloc) &&
            bind(lib, "cuMemFree_v2", &d.mem_free) && bind(lib, "cuMemcpyHtoD_v2", &d.memcpy_htod) &&
            bind(lib, "cuMemcpyDtoH_v2", &d.memcpy_dtoh) && bind(lib, "cuMemsetD8_v2", &d.memset_d8) &&
            bind(lib, "cuEventCreate", &d.event_create) && bind(lib, "cuEventRecord", &d.event_record) &&
            bind(lib, "cuEventSynchronize", &d.event_synchronize) &&
            (bind(lib, "cuEventElapsedTime_v2", &d.event_elapsed_time) ||  // CUDA 13's name
             bind(lib, "cuEventElapsedTime", &d.event_elapsed_time)) &&
            bind(lib, "cuDriverGetVersion", &d.driver_get_version) &&
            bind(lib, "cuEventDestroy_v2", &d.event_destroy) &&
            bind(lib, "cuStreamSynchronize", &d.stream_synchronize) &&
            bind(lib, "cuGetErrorName", &d.get_error_name);
  if (!ok) {
    l.error = "the CUDA driver lacks an entry point mlk needs (is it older than CUDA 11?)";
    return l;
  }
  if (int rc = d.init(0); rc != 0) l.error = "cuInit failed: " + error_name(rc);
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

Expected<const Driver*> driver() {
  const Loaded& l = loaded();
  if (!l.error.empty()) return Status::Unsupported(l.error);
  return &l.d;
}

std::string error_name(int rc) {
  const char* name = nullptr;
  const Loaded& l = loaded();
  if (l.d.get_error_name) l.d.get_error_name(rc, &name);
  return std::string(name ? name : "CUDA error") + " (" + std::to_string(rc) + ")";
}

Expected<int> process_device() {
  static const std::string env = [] {
    const char* e = std::getenv("MLK_CUDA_DEVICE");
    return std::string(e ? e : "");
  }();
  if (env.empty()) return 0;
  char* end = nullptr;
  long v = std::strtol(env.c_str(), &end, 10);
  if (*end != '\0' || v < 0 || v > 1023)
    return Status::InvalidArgument("MLK_CUDA_DEVICE=`" + env + "` is not a device number (0, 1, ...)");
  return static_cast<int>(v);
}

Expected<void*> process_context(int device) {
  auto d = driver();
  if (!d.ok()) return d.status();
  static std::mutex mu;
  static std::map<int, void*> contexts;  // retained once, never released: the process's contexts
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = contexts.find(device); it != contexts.end()) return it->second;
  int n = 0;
  if (int rc = (*d)->device_get_count(&n); rc != 0) return Status::Unsupported("cuDeviceGetCount: " + error_name(rc));
  if (device >= n)
    return Status::InvalidArgument("CUDA device " + std::to_string(device) + " does not exist (this machine has " +
                                   std::to_string(n) + "; MLK_CUDA_DEVICE chooses)");
  int dev = 0;
  if (int rc = (*d)->device_get(&dev, device); rc != 0) return Status::Unsupported("cuDeviceGet: " + error_name(rc));
  void* ctx = nullptr;
  if (int rc = (*d)->primary_ctx_retain(&ctx, dev); rc != 0)
    return Status::Unsupported("the primary context of cuda:" + std::to_string(device) + ": " + error_name(rc));
  contexts[device] = ctx;
  return ctx;
}

ScopedContext::ScopedContext(void* ctx) {
  auto d = driver();
  ok_ = d.ok() && ctx && (*d)->ctx_push(ctx) == 0;
}

ScopedContext::~ScopedContext() {
  if (!ok_) return;
  void* old = nullptr;
  (*driver())->ctx_pop(&old);
}

}  // namespace mlk::cuda
