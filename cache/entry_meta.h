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
#include <set>
#include <vector>

#include "base/status.h"

namespace mlk::cache {

struct EntryMeta {
  std::string fn;            // "" when absent
  std::string program_hash;  // "" when absent
  std::string target;        // "" when absent
  std::map<std::string, int64_t> dims;
  std::optional<double> best_ms, default_ms;
  bool measured = true;      // absent: true (entries of other producers)
  // The levels `mlk verify` passed (its report, key "verify_report");
  // absent: present = false.
  struct Verified {
    bool present = false;
    std::set<std::string> passed;
    std::string str() const;  // "types,identity", "none", or "unverified" when absent
  } verification;
  std::string canonical;     // the whole object, compact JSON (always a valid JSON object)
};

// Total: never throws. An absent field keeps its default (other producers
// write other metadata). Corruption when the text is not a JSON object or a
// known field has the wrong type; the message names the field, e.g.
//   entry metadata: `best_ms` must be a number, got string
Expected<EntryMeta> parse_entry_meta(std::string_view text);

// The verification levels, cheapest first, as `mlk verify` names them
// (verify/report.h): types, identity, envelope, memory, equivalence.
const std::vector<std::string>& verification_levels();

// The levels a gate requires: "envelope", "types,identity", "all" or
// "cheap" (types, identity). Usage error naming the unknown word.
Expected<std::vector<std::string>> parse_required_levels(const std::string& text);

// The "verify_report" of a JSON object (entry metadata or manifest.json),
// read defensively: Corruption naming the field when it has the wrong shape.
Expected<EntryMeta::Verified> parse_verified(std::string_view json_text);

// OK when every level of `required` passed; otherwise InvalidArgument, e.g.
//   `sgemm` is not verified at envelope (its report passes: types,identity)
//   `sgemm` has no verification report (run `mlk verify` first)
Status require_verified(const std::string& what, const EntryMeta::Verified& v, const std::vector<std::string>& required);

}  // namespace mlk::cache
