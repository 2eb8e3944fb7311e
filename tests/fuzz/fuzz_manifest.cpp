// libFuzzer target: arbitrary bytes through the readers of stored JSON: an
// entry's manifest (cache::manifest_from_json), its producer metadata
// (cache::parse_entry_meta) and an artifact's manifest.json
// (parse_artifact_manifest). They must never throw, crash or hang, whatever
// a store file or a cache server holds; what they accept must serialise back.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cache/entry_meta.h"
#include "cache/manifest.h"
#include "artifact/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto m = mlk::cache::manifest_from_json(text);
  if (m.ok()) {
    // Accepted manifests have an object meta: serialising them is total, and
    // reading the result gives the same manifest.
    auto again = mlk::cache::manifest_from_json(mlk::cache::manifest_to_json(*m));
    if (!again.ok() || again->files != m->files || again->provenance != m->provenance) {
      std::fprintf(stderr, "manifest does not round-trip\n");
      std::abort();
    }
    (void)mlk::cache::validate_manifest(*m);
    (void)mlk::cache::parse_entry_meta(m->meta_json);
  }
  auto meta = mlk::cache::parse_entry_meta(text);
  if (meta.ok() && !mlk::cache::parse_entry_meta(meta->canonical).ok()) {
    std::fprintf(stderr, "entry metadata does not re-read\n");
    std::abort();
  }
  (void)mlk::parse_artifact_manifest(text, "fuzz/manifest.json");
  (void)mlk::cache::canonical_json_object(text);
  return 0;
}
