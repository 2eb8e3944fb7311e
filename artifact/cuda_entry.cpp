#include "artifact/cuda_entry.h"

namespace mlk {

std::string cuda_wrapper_support() {
  return R"C(#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

/* CUDA: the process's one context (targets/cuda_driver.h), the caller's stream. */
typedef int (*mlkabi_acquire_t)(void*, void**, bool);
typedef int (*mlkabi_release_t)(void*);
typedef int (*mlkabi_stream_t)(void*, void*, void**);
extern mlkabi_acquire_t halide_set_cuda_acquire_context(mlkabi_acquire_t);
extern mlkabi_release_t halide_set_cuda_release_context(mlkabi_release_t);
extern mlkabi_stream_t halide_set_cuda_get_stream(mlkabi_stream_t);
extern int halide_cuda_wrap_device_ptr(void* user_context, struct halide_buffer_t* buf, uint64_t device_ptr);
extern int halide_cuda_detach_device_ptr(void* user_context, struct halide_buffer_t* buf);

static void* mlkabi_libcuda;
static pthread_once_t mlkabi_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t mlkabi_mu = PTHREAD_MUTEX_INITIALIZER;
static void* mlkabi_primary[1024];          /* retained primary contexts, by device */
static __thread void* mlkabi_ctx;            /* this call's context (NULL outside a call) */
static __thread void* mlkabi_stream;         /* this call's stream */

static int mlkabi_acquire(void* user_context, void** ctx, bool create) {
  (void)user_context; (void)create;
  *ctx = mlkabi_ctx;
  return mlkabi_ctx ? 0 : -1;
}
static int mlkabi_release(void* user_context) { (void)user_context; return 0; }
static int mlkabi_get_stream(void* user_context, void* ctx, void** stream) {
  (void)user_context; (void)ctx;
  *stream = mlkabi_stream;
  return 0;
}
static void mlkabi_cuda_init(void) {
  mlkabi_libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!mlkabi_libcuda) mlkabi_libcuda = dlopen("libcuda.so", RTLD_NOW | RTLD_GLOBAL);
  halide_set_cuda_acquire_context(mlkabi_acquire);
  halide_set_cuda_release_context(mlkabi_release);
  halide_set_cuda_get_stream(mlkabi_get_stream);
  halide_reuse_device_allocations(NULL, true);
}
/* Halide's CUDA runtime finds the driver's entry points here (its own looks
 * for libcuda.so, which driver-only machines lack). */
void* halide_cuda_get_symbol(void* user_context, const char* name) {
  (void)user_context;
  pthread_once(&mlkabi_once, mlkabi_cuda_init);
  return mlkabi_libcuda ? dlsym(mlkabi_libcuda, name) : NULL;
}
static int mlkabi_primary_context(int device, void** ctx) {
  typedef int (*init_t)(unsigned);
  typedef int (*get_t)(int*, int);
  typedef int (*retain_t)(void**, int);
  init_t init = (init_t)dlsym(mlkabi_libcuda, "cuInit");
  get_t get = (get_t)dlsym(mlkabi_libcuda, "cuDeviceGet");
  retain_t retain = (retain_t)dlsym(mlkabi_libcuda, "cuDevicePrimaryCtxRetain");
  int rc = 0, dev = 0;
  if (device < 0 || device >= 1024) {
    snprintf(mlkabi_err, sizeof mlkabi_err, "CUDA device %d is out of range", device);
    return MLK_ERR_CUDA;
  }
  pthread_mutex_lock(&mlkabi_mu);
  if (!mlkabi_primary[device]) {
    if (!init || !get || !retain) rc = -1;
    else if ((rc = init(0)) == 0 && (rc = get(&dev, device)) == 0) rc = retain(&mlkabi_primary[device], dev);
  }
  *ctx = mlkabi_primary[device];
  pthread_mutex_unlock(&mlkabi_mu);
  if (rc != 0 || !*ctx) {
    snprintf(mlkabi_err, sizeof mlkabi_err, "the primary CUDA context of cuda:%d cannot be had (CUDA error %d)", device, rc);
    return MLK_ERR_CUDA;
  }
  return MLK_OK;
}
static int mlkabi_cuda_begin(const mlk_cuda_call_t* call) {
  void* ctx = call ? call->context : NULL;
  int device = call ? call->device_id : 0;
  pthread_once(&mlkabi_once, mlkabi_cuda_init);
  if (!mlkabi_libcuda) {
    snprintf(mlkabi_err, sizeof mlkabi_err,
             "the CUDA driver (libcuda.so.1) cannot be loaded: this CUDA artifact needs an NVIDIA driver");
    return MLK_ERR_CUDA;
  }
  if (!call) {
    const char* e = getenv("MLK_CUDA_DEVICE");
    device = e && *e ? atoi(e) : 0;
  }
  if (!ctx) {
    int rc = mlkabi_primary_context(device, &ctx);
    if (rc) return rc;
  }
  mlkabi_ctx = ctx;
  mlkabi_stream = call ? call->stream : NULL;
  return MLK_OK;
}
static void mlkabi_cuda_end(void) { mlkabi_ctx = NULL; mlkabi_stream = NULL; }

)C";
}

std::string cuda_wrapper_before(size_t n) {
  const std::string N = std::to_string(n);
  return "  /* CUDA: this call's context and stream; device tensors wrapped, never copied. */\n"
         "  if ((rc = mlkabi_cuda_begin(call))) return rc;\n"
         "  int on_dev[" + std::to_string(n + 1) + "];\n"
         "  for (int i = 0; i <= " + N + "; ++i) on_dev[i] = call && call->on_device && call->on_device[i];\n"
         "  for (int i = 0; i <= " + N + "; ++i) {\n"
         "    if (!on_dev[i]) continue;\n"
         "    b[i].host = NULL;\n"
         "    b[i].flags = i < " + N + " ? 2 : 0; /* halide_buffer_flag_device_dirty: the data is on the device */\n"
         "    if ((rc = halide_cuda_wrap_device_ptr(NULL, &b[i], (uint64_t)(uintptr_t)(i < " + N +
         " ? args[i].data : out->data)))) {\n"
         "      for (int j = 0; j < i; ++j) if (on_dev[j]) halide_cuda_detach_device_ptr(NULL, &b[j]);\n"
         "      snprintf(mlkabi_err, sizeof mlkabi_err, \"cannot wrap tensor %d as a CUDA device buffer (Halide error %d)\", i, rc);\n"
         "      mlkabi_cuda_end();\n"
         "      return rc;\n"
         "    }\n"
         "  }\n";
}

std::string cuda_wrapper_after(size_t n) {
  const std::string N = std::to_string(n);
  return "  /* Host tensors: the result copied back, their device copies freed once the\n"
         "     stream is done with them. Device tensors: detached, left to their owner. */\n"
         "  int copies = 0;\n"
         "  for (int i = 0; i <= " + N + "; ++i) copies |= !on_dev[i] && b[i].device != 0;\n"
         "  if (rc == 0 && !on_dev[" + N + "]) rc = halide_copy_to_host(NULL, &b[" + N + "]);\n"
         "  for (int i = 0; copies && i <= " + N + "; ++i)\n"
         "    if (b[i].device) { halide_device_sync(NULL, &b[i]); break; }\n"
         "  for (int i = 0; i <= " + N + "; ++i) {\n"
         "    if (on_dev[i]) halide_cuda_detach_device_ptr(NULL, &b[i]);\n"
         "    else halide_device_free(NULL, &b[i]);\n"
         "  }\n"
         "  mlkabi_cuda_end();\n";
}

}  // namespace mlk
