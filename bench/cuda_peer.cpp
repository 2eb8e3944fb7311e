// mlk-cuda-peer: the GPU peers of scripts/device_check.sh, with nothing
// linked: the CUDA driver (libcuda.so.1) and cuBLAS (libcublas.so.13/.12)
// are dlopen()ed, so the binary built here runs on any machine and says
// plainly what is missing there.
//
//   mlk-cuda-peer bandwidth [MIB]      device-to-device copy of MIB MiB
//                                      (default 1024), timed with CUDA events:
//                                      HBM bandwidth = 2 * bytes / time
//   mlk-cuda-peer gemm M K N f32|f16   cuBLAS SGEMM, or GemmEx with F16
//                                      inputs and F32 accumulation
//
// Prints one JSON object on stdout; exit 0 when it ran, 2 when the driver,
// a device or cuBLAS is missing (the JSON says which), 1 on a bad argument.
// The best of 20 timed runs after 3 warm-ups is reported.
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Cuda {
  int (*init)(unsigned);
  int (*device_get)(int*, int);
  int (*primary_ctx_retain)(void**, int);
  int (*ctx_set_current)(void*);
  int (*mem_alloc)(uint64_t*, size_t);
  int (*mem_free)(uint64_t);
  int (*memset_d8)(uint64_t, unsigned char, size_t);
  int (*memcpy_dtod)(uint64_t, uint64_t, size_t);
  int (*memcpy_htod)(uint64_t, const void*, size_t);
  int (*event_create)(void**, unsigned);
  int (*event_record)(void*, void*);
  int (*event_synchronize)(void*);
  int (*event_elapsed_time)(float*, void*, void*);
  int (*device_get_name)(char*, int, int);
};

// IEEE half bits of v (|v| < 1, round to nearest): the F16 peer's operands.
uint16_t half_bits(float v) {
  uint32_t f;
  std::memcpy(&f, &v, 4);
  const uint16_t sign = static_cast<uint16_t>((f >> 16) & 0x8000);
  const float a = v < 0 ? -v : v;
  if (a < 6.1035156e-05f) return sign;  // to zero below the smallest normal
  int e = 0;
  const float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  uint32_t mant = static_cast<uint32_t>(std::lround((m * 2 - 1) * 1024));
  int exp = e - 1 + 15;
  if (mant == 1024) mant = 0, ++exp;
  return static_cast<uint16_t>(sign | (exp << 10) | mant);
}

int missing(const std::string& what, const std::string& why) {
  std::printf("{\"ran\": false, \"missing\": \"%s\", \"why\": \"%s\"}\n", what.c_str(), why.c_str());
  return 2;
}

template <typename F>
bool sym(void* lib, const char* name, F* f) {
  *f = reinterpret_cast<F>(dlsym(lib, name));
  return *f != nullptr;
}

// The driver, device 0 and its primary context (current on this thread); the device name in `name`.
const char* open_cuda(Cuda* c, std::string* name) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!lib) return "libcuda.so.1 not found (no NVIDIA driver)";
  if (!sym(lib, "cuInit", &c->init) || !sym(lib, "cuDeviceGet", &c->device_get) ||
      !sym(lib, "cuDevicePrimaryCtxRetain", &c->primary_ctx_retain) || !sym(lib, "cuCtxSetCurrent", &c->ctx_set_current) ||
      !sym(lib, "cuMemAlloc_v2", &c->mem_alloc) || !sym(lib, "cuMemFree_v2", &c->mem_free) ||
      !sym(lib, "cuMemsetD8_v2", &c->memset_d8) || !sym(lib, "cuMemcpyDtoD_v2", &c->memcpy_dtod) ||
      !sym(lib, "cuMemcpyHtoD_v2", &c->memcpy_htod) ||
      !sym(lib, "cuEventCreate", &c->event_create) || !sym(lib, "cuEventRecord", &c->event_record) ||
      !sym(lib, "cuEventSynchronize", &c->event_synchronize) ||
      !(sym(lib, "cuEventElapsedTime_v2", &c->event_elapsed_time) ||  // CUDA 13's name
        sym(lib, "cuEventElapsedTime", &c->event_elapsed_time)) ||
      !sym(lib, "cuDeviceGetName", &c->device_get_name))
    return "the CUDA driver lacks an entry point";
  int dev = 0;
  void* ctx = nullptr;
  if (c->init(0) != 0 || c->device_get(&dev, 0) != 0) return "cuInit or cuDeviceGet failed (no CUDA device)";
  if (c->primary_ctx_retain(&ctx, dev) != 0 || c->ctx_set_current(ctx) != 0) return "no primary context";
  char buf[256] = {0};
  c->device_get_name(buf, sizeof buf - 1, dev);
  *name = buf;
  return nullptr;
}

// Best of 20 timed runs of `f` (after 3 warm-ups), in ms.
template <typename F>
double best_ms(const Cuda& c, F&& f) {
  void *a = nullptr, *b = nullptr;
  c.event_create(&a, 0);
  c.event_create(&b, 0);
  for (int i = 0; i < 3; ++i) f();
  double best = 1e30;
  for (int i = 0; i < 20; ++i) {
    c.event_record(a, nullptr);
    f();
    c.event_record(b, nullptr);
    c.event_synchronize(b);
    float ms = 0;
    c.event_elapsed_time(&ms, a, b);
    best = std::min(best, static_cast<double>(ms));
  }
  return best;
}

int bandwidth(const Cuda& c, const std::string& dev, size_t mib) {
  const size_t bytes = mib << 20;
  uint64_t src = 0, dst = 0;
  if (c.mem_alloc(&src, bytes) != 0 || c.mem_alloc(&dst, bytes) != 0) return missing("memory", "cuMemAlloc failed");
  c.memset_d8(src, 1, bytes);
  double ms = best_ms(c, [&] { c.memcpy_dtod(dst, src, bytes); });
  std::printf("{\"ran\": true, \"probe\": \"bandwidth\", \"device\": \"%s\", \"bytes\": %zu, \"best_ms\": %.4f, "
              "\"gb_per_s\": %.1f}\n", dev.c_str(), bytes, ms, 2.0 * bytes / (ms * 1e6));
  c.mem_free(src);
  c.mem_free(dst);
  return 0;
}

int gemm(const Cuda& c, const std::string& dev, int m, int k, int n, bool f16) {
  void* lib = nullptr;
  for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"})
    if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
  if (!lib) return missing("cublas", "libcublas.so.13/.12 not found on this machine");
  using Create = int (*)(void**);
  using Sgemm = int (*)(void*, int, int, int, int, int, const float*, const void*, int, const void*, int, const float*,
                        void*, int);
  using GemmEx = int (*)(void*, int, int, int, int, int, const void*, const void*, int, int, const void*, int, int,
                         const void*, void*, int, int, int, int);
  Create create;
  Sgemm sgemm;
  GemmEx gemm_ex;
  if (!sym(lib, "cublasCreate_v2", &create) || !sym(lib, "cublasSgemm_v2", &sgemm) || !sym(lib, "cublasGemmEx", &gemm_ex))
    return missing("cublas", "libcublas lacks cublasCreate_v2, cublasSgemm_v2 or cublasGemmEx");
  void* h = nullptr;
  if (create(&h) != 0) return missing("cublas", "cublasCreate failed");
  const size_t es = f16 ? 2 : 4;
  uint64_t a = 0, b = 0, d = 0;
  if (c.mem_alloc(&a, es * m * k) || c.mem_alloc(&b, es * k * n) || c.mem_alloc(&d, 4 * size_t(m) * n))
    return missing("memory", "cuMemAlloc failed");
  // Random operands, uniform in [-1, 1): zeros run faster than real data.
  auto fill = [&](uint64_t dst, size_t count) {
    std::vector<uint16_t> h16(f16 ? count : 0);
    std::vector<float> h32(f16 ? 0 : count);
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (size_t i = 0; i < count; ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      const float v = static_cast<float>(x >> 40) / static_cast<float>(1 << 23) - 1.0f;
      if (f16) h16[i] = half_bits(v); else h32[i] = v;
    }
    return c.memcpy_htod(dst, f16 ? static_cast<const void*>(h16.data()) : h32.data(), es * count);
  };
  if (fill(a, size_t(m) * k) != 0 || fill(b, size_t(k) * n) != 0) return missing("memory", "cuMemcpyHtoD failed");
  const float one = 1, zero = 0;
  // Row-major C = A B is column-major C^T = B^T A^T: swap the operands.
  auto run = [&] {
    if (f16)  // CUDA_R_16F = 2, CUDA_R_32F = 0, CUBLAS_COMPUTE_32F = 68, CUBLAS_GEMM_DEFAULT = -1
      gemm_ex(h, 0, 0, n, m, k, &one, reinterpret_cast<void*>(b), 2, n, reinterpret_cast<void*>(a), 2, k, &zero,
              reinterpret_cast<void*>(d), 0, n, 68, -1);
    else
      sgemm(h, 0, 0, n, m, k, &one, reinterpret_cast<void*>(b), n, reinterpret_cast<void*>(a), k, &zero,
            reinterpret_cast<void*>(d), n);
  };
  double ms = best_ms(c, run);
  std::printf("{\"ran\": true, \"peer\": \"cublas\", \"dtype\": \"%s\", \"device\": \"%s\", \"M\": %d, \"K\": %d, "
              "\"N\": %d, \"best_ms\": %.4f, \"tflops\": %.2f}\n", f16 ? "f16" : "f32", dev.c_str(), m, k, n, ms,
              2.0 * m * k * n / (ms * 1e9));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "";
  if (what != "bandwidth" && !(what == "gemm" && argc == 6)) {
    std::fprintf(stderr, "usage: mlk-cuda-peer bandwidth [MIB] | gemm M K N f32|f16\n");
    return 1;
  }
  Cuda c{};
  std::string dev;
  if (const char* why = open_cuda(&c, &dev)) return missing("cuda", why);
  if (what == "bandwidth") return bandwidth(c, dev, argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 1024);
  const std::string dt = argv[5];
  if (dt != "f32" && dt != "f16") {
    std::fprintf(stderr, "mlk-cuda-peer gemm: dtype `%s` is not f32 or f16\n", dt.c_str());
    return 1;
  }
  return gemm(c, dev, std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]), dt == "f16");
}
