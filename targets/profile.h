// Target capability profiles: machines described as data.
//
// Each profile is one JSON file in targets/profiles/, embedded into the
// binary at build time. A CPU profile names its Halide target, ISA features,
// vector width, cores and cache sizes; a CUDA profile its compute capability,
// SM count, shared memory, registers, thread and warp limits.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace mlk {

struct Profile {
  std::string name;
  std::string kind;  // "cpu" or "cuda"
  std::string description;
  std::string halide_target;           // Halide target string ("host": detect)
  std::vector<std::string> features;   // required CPU features (cpuid names) or "cuda"
  int vector_bits = 0;                 // cpu
  int cores = 0;                       // cpu; 0 = all of the machine's
  int l1_kib = 0, l2_kib = 0, l3_kib = 0;
  int compute_capability = 0;          // cuda, e.g. 90
  std::string ptx_arch;                // cuda, e.g. "sm_90"
  std::vector<std::string> host_features;  // cuda: CPU features its host code needs
  int sm_count = 0, shared_mem_per_block = 0, shared_mem_per_sm = 0, registers_per_sm = 0;
  int max_threads_per_block = 0, warp_size = 0;
  std::string json;                    // the profile file as embedded

  bool is_gpu() const { return kind == "cuda"; }
};

// All embedded profiles, sorted by name.
const std::vector<Profile>& all_profiles();
// The profile called `name`; NotFound lists the known names.
Expected<Profile> find_profile(const std::string& name);
// Parses one profile file's text (for tests and for --profile-file).
Expected<Profile> parse_profile(const std::string& json_text, const std::string& where);

}  // namespace mlk
