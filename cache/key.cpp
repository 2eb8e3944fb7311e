#include "cache/key.h"

#include "base/sha256.h"

namespace mlk::cache {

namespace {

void field(std::string& out, const char* name, const std::string& value) {
  out += name;
  out += '=';
  out += std::to_string(value.size());
  out += ':';
  out += value;
  out += '\n';
}

}  // namespace

std::string canonical_key_text(const KeyInputs& in) {
  std::string out = "mlk-cache-key/2\n";
  field(out, "ir_hash", in.ir_hash);
  field(out, "entry", in.entry);
  out += "dims=" + std::to_string(in.dims.size()) + "\n";
  for (const auto& [name, value] : in.dims) {  // std::map: sorted by name
    out += "dim=" + std::to_string(name.size()) + ":" + name + "=" + std::to_string(value) + "\n";
  }
  field(out, "profile", in.profile);
  field(out, "capability_fingerprint", in.capability_fingerprint);
  field(out, "mlk_version", in.mlk_version);
  field(out, "halide_version", in.halide_version);
  field(out, "llvm_version", in.llvm_version);
  field(out, "schedule_space_version", in.schedule_space_version);
  return out;
}

std::string cache_key(const KeyInputs& in) { return sha256_hex(canonical_key_text(in)); }

}  // namespace mlk::cache
