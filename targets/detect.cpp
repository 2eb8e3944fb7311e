#include "targets/detect.h"

#include <cpuid.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "base/sha256.h"

namespace mlk {

bool CpuInfo::has(const std::string& f) const { return std::find(features.begin(), features.end(), f) != features.end(); }

namespace {

uint64_t xgetbv0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

}  // namespace

CpuInfo detect_cpu() {
  CpuInfo info;
  info.cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  unsigned a, b, c, d;
  if (__get_cpuid(0, &a, &b, &c, &d)) {
    char v[13] = {};
    std::memcpy(v, &b, 4);
    std::memcpy(v + 4, &d, 4);
    std::memcpy(v + 8, &c, 4);
    info.vendor = v;
  }
  if (__get_cpuid(0x80000000, &a, &b, &c, &d) && a >= 0x80000004) {
    unsigned brand[12];
    for (unsigned i = 0; i < 3; ++i) __get_cpuid(0x80000002 + i, &brand[4 * i], &brand[4 * i + 1], &brand[4 * i + 2], &brand[4 * i + 3]);
    std::string m(reinterpret_cast<const char*>(brand), sizeof brand);
    m = m.substr(0, m.find('\0'));
    const size_t first = m.find_first_not_of(' '), last = m.find_last_not_of(' ');
    info.brand = first == std::string::npos ? "" : m.substr(first, last - first + 1);
  }
  if (!__get_cpuid(1, &a, &b, &c, &d)) return info;
  const int base_family = static_cast<int>((a >> 8) & 0xF), base_model = static_cast<int>((a >> 4) & 0xF);
  info.family = base_family == 0xF ? base_family + static_cast<int>((a >> 20) & 0xFF) : base_family;
  info.model = base_family == 0x6 || base_family == 0xF ? base_model + (static_cast<int>((a >> 16) & 0xF) << 4) : base_model;
  auto add = [&](bool present, const char* name) {
    if (present) info.features.push_back(name);
  };
  bool osxsave = c & (1u << 27);
  uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  bool os_avx = (xcr0 & 0x6) == 0x6;
  bool os_avx512 = (xcr0 & 0xE6) == 0xE6;
  bool os_amx = (xcr0 & 0x60000) == 0x60000;
  add(c & (1u << 19), "sse41");
  add(os_avx && (c & (1u << 28)), "avx");
  add(os_avx && (c & (1u << 12)), "fma");
  add(os_avx && (c & (1u << 29)), "f16c");
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    add(os_avx && (b & (1u << 5)), "avx2");
    add(os_avx512 && (b & (1u << 16)), "avx512f");
    add(os_avx512 && (b & (1u << 17)), "avx512dq");
    add(os_avx512 && (b & (1u << 28)), "avx512cd");
    add(os_avx512 && (b & (1u << 30)), "avx512bw");
    add(os_avx512 && (b & (1u << 31)), "avx512vl");
    add(os_avx512 && (c & (1u << 11)), "avx512vnni");
    add(os_avx512 && (d & (1u << 23)), "avx512fp16");
    add(os_amx && (d & (1u << 24)), "amx_tile");
    add(os_amx && (d & (1u << 22)), "amx_bf16");
    add(os_amx && (d & (1u << 25)), "amx_int8");
  }
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) add(os_avx512 && (a & (1u << 5)), "avx512bf16");
  return info;
}

std::string cpu_family_key(const CpuInfo& cpu) {
  std::vector<std::string> f = cpu.features;
  std::sort(f.begin(), f.end());
  std::string key = (cpu.vendor.empty() ? "unknown" : cpu.vendor) + " " + std::to_string(cpu.family) + "/" +
                    std::to_string(cpu.model) + ":";
  for (size_t i = 0; i < f.size(); ++i) key += (i ? "," : " ") + f[i];
  return key;
}

CudaInfo detect_cuda() {
  CudaInfo info;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    info.why_not = "no CUDA driver (libcuda.so.1 not found)";
    return info;
  }
  using InitFn = int (*)(unsigned);
  using CountFn = int (*)(int*);
  using GetFn = int (*)(int*, int);
  using AttrFn = int (*)(int*, int, int);
  using NameFn = int (*)(char*, int, int);
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<CountFn>(dlsym(lib, "cuDeviceGetCount"));
  auto get = reinterpret_cast<GetFn>(dlsym(lib, "cuDeviceGet"));
  auto attr = reinterpret_cast<AttrFn>(dlsym(lib, "cuDeviceGetAttribute"));
  auto name = reinterpret_cast<NameFn>(dlsym(lib, "cuDeviceGetName"));
  if (!init || !count || !get || !attr || !name) {
    info.why_not = "the CUDA driver lacks the device API";
    return info;
  }
  info.driver_loaded = true;
  int rc = init(0);
  int n = 0;
  if (rc != 0 || count(&n) != 0 || n == 0) {
    info.why_not = rc != 0 ? "cuInit failed with error " + std::to_string(rc) : "no CUDA device";
    return info;
  }
  for (int i = 0; i < n; ++i) {
    int dev = 0;
    if (get(&dev, i) != 0) continue;
    CudaDevice d;
    int major = 0, minor = 0;
    attr(&major, 75, dev);  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
    attr(&minor, 76, dev);  // ..._MINOR
    attr(&d.sm_count, 16, dev);  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
    d.compute_capability = major * 10 + minor;
    char buf[256] = {0};
    name(buf, sizeof buf - 1, dev);
    d.name = buf;
    info.devices.push_back(d);
  }
  return info;
}

Runnable can_run(const Profile& p, const CpuInfo& cpu, const CudaInfo& cuda) {
  std::string missing;
  for (const auto& f : p.is_gpu() ? p.host_features : p.features)
    if (!cpu.has(f)) missing += (missing.empty() ? "" : ", ") + f;
  if (!missing.empty()) return {false, "CPU lacks " + missing};
  if (!p.is_gpu()) return {true, ""};
  if (cuda.devices.empty()) return {false, cuda.why_not.empty() ? "no CUDA device" : cuda.why_not};
  for (const auto& d : cuda.devices)
    if (d.compute_capability >= p.compute_capability) return {true, "on " + d.name};
  return {false, "no device of compute capability >= " + std::to_string(p.compute_capability / 10) + "." +
                     std::to_string(p.compute_capability % 10)};
}

Profile host_profile() {
  auto base = find_profile("host");
  MLK_CHECK(base.ok(), "the embedded host profile is missing");
  Profile p = *base;
  CpuInfo cpu = detect_cpu();
  p.features = cpu.features;
  p.cores = cpu.cores;
  p.vector_bits = cpu.has("avx512f") ? 512 : cpu.has("avx2") ? 256 : 128;
  // Cache sizes as the C library reads them from cpuid (0 or -1 when it
  // cannot; the embedded profile's values stay then).
  auto kib = [](int name, int fallback) {
    long v = sysconf(name);
    return v > 0 ? static_cast<int>(v / 1024) : fallback;
  };
  p.l1_kib = kib(_SC_LEVEL1_DCACHE_SIZE, p.l1_kib);
  p.l2_kib = kib(_SC_LEVEL2_CACHE_SIZE, p.l2_kib);
  p.l3_kib = kib(_SC_LEVEL3_CACHE_SIZE, p.l3_kib);
  return p;
}

Expected<Profile> resolve_profile(const std::string& name) {
  if (name == "host") return host_profile();
  return find_profile(name);
}

std::string hardware_fingerprint() {
  std::string model = "unknown";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      model = line.substr(line.find(':') + 1);
      model.erase(0, model.find_first_not_of(' '));
      break;
    }
  CpuInfo cpu = detect_cpu();
  std::vector<std::string> features = cpu.features;
  std::sort(features.begin(), features.end());
  std::string flags;
  for (const auto& f : features) flags += (flags.empty() ? "" : ",") + f;
  std::string gpus;
  CudaInfo cuda = detect_cuda();
  for (const auto& d : cuda.devices)
    gpus += (gpus.empty() ? "" : ",") + d.name + " sm_" + std::to_string(d.compute_capability);
  return "cpu=" + model + "; cores=" + std::to_string(cpu.cores) + "; flags=" + flags +
         "; gpu=" + (gpus.empty() ? "none" : gpus);
}

std::string fingerprint_id(const std::string& fingerprint) { return sha256_hex(fingerprint).substr(0, 12); }

int64_t default_worker_memory_limit() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  const int64_t phys = pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : int64_t{24} << 30;
  return std::max<int64_t>(phys / 3, int64_t{2} << 30);
}

}  // namespace mlk
