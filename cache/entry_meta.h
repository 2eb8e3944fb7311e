// The producer metadata of a cache entry (Manifest::meta_json) as `mlk tune`
// writes it, read defensively: it comes from a store file or a cache server
// and may be damaged or written by something else. Halide-free; nlohmann/json
// stays in entry_meta.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace mlk::cache {

struct EntryMeta {
  std::string fn;            // "" when absent
  std::string program_hash;  // "" when absent
  std::string target;        // "" when absent
  std::map<std::string, int64_t> dims;
  std::optional<double> best_ms, default_ms;
  bool measured = true;      // absent: true (entries of other producers)
  std::string canonical;     // the whole object, compact JSON (always a valid JSON object)
};

// Total: never throws. An absent field keeps its default (other producers
// write other metadata). Corruption when the text is not a JSON object or a
// known field has the wrong type; the message names the field, e.g.
//   entry metadata: `best_ms` must be a number, got string
Expected<EntryMeta> parse_entry_meta(std::string_view text);

}  // namespace mlk::cache
