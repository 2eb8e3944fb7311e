// The cache key: a sha256 over everything that determines a compiled artifact
// (docs/cache.md, "The key"). Two machines that compute the same key may use
// each other's artifact, so every input that could change the bytes is here.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace mlk::cache {

struct KeyInputs {
  std::string ir_hash;  // canonical typed IR of entry + callees, already a sha256
  std::string entry;    // entry function name
  std::map<std::string, int64_t> dims;  // concrete dims (or shape bucket bounds)
  std::string profile;                  // target profile id
  std::string capability_fingerprint;
  // Versions of the code generator the producer compiled with (mlk and the
  // Halide + LLVM linked into it). Not the CUDA toolkit: ptxas only assembles
  // the PTX Halide emits, so its version is provenance (manifest.json), not
  // identity, and a consumer without nvcc computes the same key.
  std::string mlk_version, halide_version, llvm_version;
  std::string schedule_space_version;
};

// The canonical serialisation hashed by cache_key(): a version line, then one
// line per field, `NAME=LEN:VALUE`, where LEN is the byte length of VALUE in
// decimal; dims as `dims=COUNT` followed by `dim=LEN:NAME=VALUE` in name order.
// Every value is length-prefixed, so no two different KeyInputs serialise to
// the same text whatever bytes their strings hold. Changing this format
// changes every key: bump the version line when you do.
std::string canonical_key_text(const KeyInputs& in);

// sha256 of canonical_key_text(in), lower-case hex (64 characters). Total and
// deterministic: same inputs, same key, in every process and on every host.
std::string cache_key(const KeyInputs& in);

}  // namespace mlk::cache
