// What `mlk verify` found: per level, what was checked, the guarantee it
// gives in one sentence, the evidence, a counterexample when it failed, and
// how long it took. The report travels with the artifact (manifest.json and
// the cache entry's metadata, key "verify_report"), where gates read it back
// with cache::parse_verified (cache/entry_meta.h). Halide-free; nlohmann/json stays in report.cpp.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace mlk::verify {

// The levels, cheapest first (the order reports list them).
enum class Level { kTypes, kIdentity, kEnvelope, kMemory, kEquivalence };

const char* level_name(Level l);     // "types", "identity", "envelope", "memory", "equivalence"
const std::vector<Level>& all_levels();
// "types,identity" -> those levels; "all" -> every level; "cheap" -> types
// and identity. Usage error naming the unknown word and the choices.
Expected<std::vector<Level>> parse_levels(const std::string& text);
// "types, identity, envelope, memory, equivalence"
const char* level_list();

struct LevelReport {
  Level level = Level::kTypes;
  bool pass = false;
  // Non-empty: the level could not run on this machine (a CUDA artifact
  // without a GPU), and why. Neither a pass nor a failure: such a level is
  // left out of the stored report and makes `mlk verify` exit 4, not 1.
  std::string not_run;
  std::string checked;         // what was checked, one sentence
  std::string guarantee;       // what a pass guarantees, one sentence (and what it does not)
  std::vector<std::string> evidence;  // lines: hashes, bounds, shapes, directives
  std::string counterexample;  // when !pass: the element, input or shape that shows it
  double seconds = 0;
};

// "pass", "FAIL" or "not run"; what follows it on a level's line ("" for a
// pass, else ": " and the counterexample or why it did not run).
const char* result_word(const LevelReport& l);
std::string result_detail(const LevelReport& l);

struct Report {
  std::string fn, target, dims;  // dims as "M=2,N=3"
  std::vector<LevelReport> levels;
  bool pass() const;             // every level passed (and there is at least one)
  bool failed() const;           // a level that ran did not pass
  // "PASS", "FAIL", or, when nothing failed but a level could not run,
  // "INCOMPLETE (envelope, memory not run here)".
  std::string verdict() const;
  std::string to_json() const;   // one object (see docs/verification.md)
  std::string to_text() const;   // for people: a block per level
};


// The report's object (to_json) placed under "verify_report" in the JSON
// object `json_text` (a manifest or entry metadata); InvalidArgument when
// `json_text` is not a JSON object. Pretty-printed when `indent` >= 0.
// Levels of a report already there that `r` did not run are kept (their
// "passed" and "pass" recomputed): verification can be staged, level by level.
// Only a report of the same fn, target and dims is merged; another is replaced.
// Levels of `r` that could not run here (LevelReport::not_run) are not
// stored: they are neither evidence nor a failure; when none ran, `json_text`
// comes back as it was (never reformatted).
Expected<std::string> attach_report(std::string_view json_text, const Report& r, int indent = -1);

}  // namespace mlk::verify
