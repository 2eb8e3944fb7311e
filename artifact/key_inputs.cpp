#include "artifact/key_inputs.h"

#include <algorithm>
#include <vector>

#include "lang/ir_printer.h"
#include "scheduler/space_version.h"
#include "targets/toolchain.h"

namespace mlk {

cache::KeyInputs key_inputs(const ir::Module& m, const std::string& fn, const DimEnv& dims, const Profile& p) {
  cache::KeyInputs k;
  k.ir_hash = ir::function_hash(m, *m.find(fn));
  k.entry = fn;
  k.dims = dims;
  k.profile = p.name;
  std::vector<std::string> f = p.is_gpu() ? p.host_features : p.features;
  std::sort(f.begin(), f.end());
  k.capability_fingerprint = p.halide_target;
  for (const auto& x : f) k.capability_fingerprint += "," + x;
  if (p.is_gpu()) k.capability_fingerprint += ",cc" + std::to_string(p.compute_capability);
  k.mlk_version = mlk_version();
  k.halide_version = halide_version();
  k.llvm_version = llvm_version();
  k.schedule_space_version = kScheduleSpaceVersion;
  return k;
}

}  // namespace mlk
