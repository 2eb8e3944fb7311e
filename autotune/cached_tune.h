// Tuning through the artifact cache: compute the key, return a hit at once,
// otherwise tune, build the winner and store artifact, schedule, tuning log
// and timings under the key. What `mlk tune` runs per (function, shape).
#pragma once

#include <string>

#include "autotune/tuner.h"
#include "cache/key.h"
#include "cache/store.h"
#include "targets/key_inputs.h"

namespace mlk::tune {

// Everything that determines an artifact: targets/key_inputs.h (Halide-free,
// shared with the runtime); named here too for the tuner's callers.
using mlk::key_inputs;

struct Outcome {
  std::string key;
  bool cached = false;        // found in the store, not tuned now
  std::string summary_line;   // for people
  std::string json;           // the summary object of `mlk tune --json`
  std::string schedule_json;  // the winner's schedule (Schedule::to_json), cached or tuned now
};

// `store` may be null (no cache): then the artifact goes only to `out_dir`.
// `out_dir` may be empty (no copy outside the cache).
Expected<Outcome> tune_cached(const ir::Module& m, const std::string& fn, const std::string& source,
                              const Profile& p, const DimEnv& dims, TuneOptions opts, cache::Store* store,
                              const std::string& ns, const std::string& out_dir, const std::string& work_dir);

}  // namespace mlk::tune
