// What this machine can run: CPU features through cpuid, CUDA devices
// through the driver API loaded at run time (dlopen of libcuda.so.1; mlk has
// no link-time dependency on the driver).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "targets/profile.h"

namespace mlk {

struct CpuInfo {
  std::vector<std::string> features;  // cpuid names as in profiles: "avx2", "avx512f", ...
  int cores = 0;
  std::string vendor;  // cpuid leaf 0: "GenuineIntel", "AuthenticAMD"; "" when unknown
  int family = 0;      // cpuid leaf 1's display family: 6 (Intel), 25 (Zen 3, Zen 4), 26 (Zen 5)
  int model = 0;       // and display model: 143 (Sapphire Rapids), 17 (Zen 4 EPYC), ...
  std::string brand;   // the brand string, "AMD EPYC 9R14 96-Core Processor"
  bool has(const std::string& f) const;
};

// What a schedule tuned on one machine needs of another to be shipped to it
// (runtime/shipped.h): the vendor, the display family and model and the
// features, in one line, "AuthenticAMD 25/17: avx,avx2,...". Features sorted.
std::string cpu_family_key(const CpuInfo& cpu);

struct CudaDevice {
  std::string name;
  int compute_capability = 0;  // major * 10 + minor
  int sm_count = 0;
};

struct CudaInfo {
  bool driver_loaded = false;
  std::string why_not;  // when no driver or no device
  std::vector<CudaDevice> devices;
};

CpuInfo detect_cpu();
CudaInfo detect_cuda();

// Whether `p` can run here, and if not, why ("missing avx512f, avx512bw").
struct Runnable {
  bool ok = false;
  std::string reason;
};
Runnable can_run(const Profile& p, const CpuInfo& cpu, const CudaInfo& cuda);

// The `host` profile made concrete: the detected features, vector width and
// cores of this machine.
Profile host_profile();
// `name`, with `host` resolved by host_profile().
Expected<Profile> resolve_profile(const std::string& name);

// The machine's hardware fingerprint, what measurement workers register
// with: "cpu=MODEL; cores=N; flags=F,..; gpu=NAME sm_CC,.. | none".
std::string hardware_fingerprint();
// A short name for a fingerprint in progress lines: its sha256's first 12 digits.
std::string fingerprint_id(const std::string& fingerprint);

// A third of this machine's physical memory, at least 2 GiB: what a
// measurement worker's child may map (RLIMIT_AS) unless told otherwise (two
// workers and the tuner then fit).
int64_t default_worker_memory_limit();

}  // namespace mlk
