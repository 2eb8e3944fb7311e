// The manifest.json of an artifact directory (as artifact/build.cpp writes
// it), read defensively: artifacts come from a store, a cache server or a
// directory on disk and may be damaged. Halide-free; nlohmann/json stays in
// artifact_manifest.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace mlk {

// What loading and calling an artifact needs from its manifest.
struct ArtifactManifest {
  std::map<std::string, std::string> files;  // plain file name -> sha256 hex
  std::string library;                       // a plain file name listed in `files`
  std::string entry_symbol;
  int64_t abi_version = 0;
  std::vector<std::string> unbound_dims;     // signature.unbound_dims (absent: none)
  size_t results = 1;                        // the length of signature.results (absent: 1)
  std::string profile_kind;                  // profile.kind: "cpu", "cuda" ("" when absent)
  std::string profile_name;                  // profile.name ("" when absent)
  std::string cuda_entry_symbol;             // cuda.entry_symbol: the device-memory entry ("" when absent)
  // packed_weights (docs/artifacts.md, "Packed weights"; absent: none): the
  // parameter index of each weight the kernel reads packed, in pack order,
  // and the entries that pack one and run on them.
  std::vector<int> packed_params;
  std::string pack_symbol, packed_entry_symbol;
};

// Total: never throws. Corruption, starting with `where` (e.g.
// "/tmp/a/manifest.json"), when the text is not an mlk-artifact-1 manifest or
// a field is missing or has the wrong type; the message names the field.
Expected<ArtifactManifest> parse_artifact_manifest(std::string_view text, const std::string& where);

}  // namespace mlk
