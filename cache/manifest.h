// What an entry of the artifact store says about its artifact: the files it
// consists of (name -> blob digest and size), producer-defined metadata, and
// provenance. Plain data with a canonical JSON form; nlohmann/json stays in
// manifest.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "base/status.h"

namespace mlk::cache {

struct BlobRef {
  std::string digest;  // sha256 of the bytes, 64 lower-case hex characters
  int64_t size = 0;    // length of the bytes
  bool operator==(const BlobRef&) const = default;
};

// Who made an artifact, where, when, with what.
struct Provenance {
  std::string producer;  // e.g. "mlk autotune", "mlk compile"
  std::string host;      // filled with gethostname() by the store when empty
  int64_t time = 0;      // unix seconds; filled with the current time when 0
  std::map<std::string, std::string> toolchain;  // e.g. {"mlk": "0.1.0", "halide": "21.0.0", "llvm": "20.1"}
  bool measured = false;  // true: timings were measured on hardware; false: estimated (cost model)
  // Where this copy came from, set by whoever stored it, never taken from a
  // writer: kOriginLocal for what a tune on this machine stored, a server's
  // URL for a pulled copy, "import:FILE" for an imported one; "" (unknown)
  // for what a server received and for entries stored before origins were
  // recorded. Signing tools sign only kOriginLocal entries, or what a
  // trusted key already signed (docs/signing.md). Not covered by signatures.
  std::string origin = {};
  bool operator==(const Provenance&) const = default;
};

// Provenance::origin of an entry a tune on this machine stored.
inline constexpr const char* kOriginLocal = "local";

struct Manifest {
  std::map<std::string, BlobRef> files;  // file name -> blob (e.g. "kernel.so", "schedule.json")
  std::string meta_json = "{}";          // a JSON object defined by the producer (signature, schedule, report)
  Provenance provenance;
};

// Canonical compact JSON: {"files":{NAME:{"digest":D,"size":N}},"meta":{...},
// "provenance":{...}} with object keys sorted. Total; meta_json must already be
// a valid JSON object (canonical_json_object() makes it so).
std::string manifest_to_json(const Manifest& m);

// Parses manifest_to_json()'s output. InvalidArgument names what is wrong.
// `max_values` > 0 bounds the values the text may hold (base/json.h), for a
// manifest from outside: more is InvalidArgument.
Expected<Manifest> manifest_from_json(std::string_view text, int64_t max_values = 0);

// `text` parsed and re-serialised canonically (sorted keys, compact); the empty
// string is "{}". InvalidArgument when it is not a JSON object.
Expected<std::string> canonical_json_object(std::string_view text);

// Checks a manifest before it is stored: file names non-empty printable text
// (no leading '/', no "." or ".." path parts), digests 64 lower-case hex,
// sizes >= 0, meta_json a JSON object.
Status validate_manifest(const Manifest& m);

bool is_sha256_hex(std::string_view s);

}  // namespace mlk::cache
