// Schedules shipped with mlk: what `mlk tune` chose on real machines of the
// CPU families this project runs on, for the examples and MiniLM's step
// fns at common shapes, kept as data (schedule JSON, not binaries) in
// schedules/shipped.json and embedded in the runtime at build time
// (scripts/ship_schedules.py tunes, adds and refreshes entries).
//
// When the cache holds no tuned artifact for a call, the runtime looks here
// before the rules' default: an entry of the same fn (program hash), the
// same precision policy, tuned on a machine of this one's family
// (cpu_family_key: vendor, display family, features) with as many cores,
// at exactly the call's shape, else at the nearest shape (the measure of
// runtime/resolve.h) within kShippedReach of it: further away, the rules'
// default, made for the call's shape, is the better guess. The JIT compiles
// its schedule; `.source` says "shipped".
//
// $MLK_SHIPPED_SCHEDULES: unset or empty, the embedded database; "off",
// none; else the path of a database file to use instead.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "lang/bind.h"
#include "targets/detect.h"

namespace mlk::rt {

// The farthest a shipped schedule's shape may be from the call's: a sum of
// |log2(tuned / requested)| over the dims of 3 (a batch 8x away, or two
// dims 2x and 4x away).
inline constexpr double kShippedReach = 3.0;

struct ShippedEntry {
  std::string fn, fn_hash, precision, program;
  DimEnv dims;
  std::string family_key;  // cpu_family_key of the machine it was tuned on
  int cores = 0;
  std::string schedule;    // the schedule's JSON, as `mlk build --schedule` reads it
  std::string provenance;  // one line: CPU, date, mlk version, the tune's command
  // The rules it was tuned under ("rules-15"; "" when not recorded). Not a
  // condition of the match: a schedule is data that any later build applies
  // or refuses (then the default runs), and the test shipped.verify checks
  // every entry against the build; scripts/ship_schedules.py check lists
  // the entries of older rules, to be tuned again.
  std::string schedule_space;
};

// The entries of a database's text; InvalidArgument naming `where` and the
// entry at fault when it is not one (format "mlk-shipped-schedules-1").
Expected<std::vector<ShippedEntry>> parse_shipped(const std::string& text, const std::string& where);

// The database in use ($MLK_SHIPPED_SCHEDULES, above), parsed once per
// value of the variable (a file: once per content) and shared, not copied,
// by every selection. An unreadable or malformed file is an error that
// names it.
using ShippedDb = std::shared_ptr<const std::vector<ShippedEntry>>;
Expected<ShippedDb> shipped_schedules();

struct ShippedChoice {
  ShippedEntry entry;
  bool exact = false;  // tuned at exactly the requested dims
};

// The entry for fn `fn_hash` under `precision` at `dims` on the machine
// `cpu`, as above; nullopt when none qualifies. Ties of distance go to the
// entry listed first.
std::optional<ShippedChoice> find_shipped(const std::vector<ShippedEntry>& db, const std::string& fn_hash,
                                          const std::string& precision, const DimEnv& dims, const CpuInfo& cpu);

// What the runtime and `mlk run` ask: the entry of shipped_schedules() for
// a call of a fn on the profile named `profile`, on the machine `cpu`; none
// for a profile other than `host` (a named profile is a target the caller
// chose, not this machine's family). Errors are shipped_schedules()'s.
Expected<std::optional<ShippedChoice>> shipped_for(const std::string& profile, const std::string& fn_hash,
                                                   const std::string& precision, const DimEnv& dims,
                                                   const CpuInfo& cpu);

}  // namespace mlk::rt
