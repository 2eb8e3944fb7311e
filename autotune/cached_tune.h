// Tuning through the artifact cache: compute the key, return a hit at once,
// otherwise tune, build the winner and store artifact, schedule, tuning log
// and timings under the key. What `mlk tune` runs per (function, shape).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "autotune/tuner.h"
#include "cache/key.h"
#include "cache/store.h"
#include "artifact/key_inputs.h"

namespace mlk::tune {

// Everything that determines an artifact: artifact/key_inputs.h (Halide-free,
// shared with the runtime); named here too for the tuner's callers.
using mlk::key_inputs;

struct Outcome {
  std::string key;
  bool cached = false;        // found in the store, not tuned now
  std::string summary_line;   // for people
  std::string json;           // the summary object of `mlk tune --json`
  std::string schedule_json;  // the winner's schedule (Schedule::to_json), cached or tuned now
  std::string origin;         // a cache hit's provenance.origin (cache/manifest.h): who stored it
};

// One (fn, shape, profile) to tune through the cache.
struct TuneRequest {
  const ir::Module* module = nullptr;  // not null
  std::string fn;
  std::string source;  // the .tl file, stored with the artifact (program.tl)
  Profile profile;
  DimEnv dims;
  TuneOptions opts;
  cache::Store* store = nullptr;  // may be null (no cache): then the artifact goes only to `out_dir`
  std::string ns = cache::kDefaultNamespace;
  std::string out_dir;   // may be empty (no copy outside the cache)
  std::string work_dir;  // the tuner's scratch directory (tuning logs, the winner's build)
  // Called with the tuned winner's files and metadata (the summary object)
  // just before they are stored and copied to `out_dir`; it may add to both
  // (`mlk tune` attaches its `mlk verify` report). An error stores nothing
  // and is returned. Not called on a cache hit.
  std::function<Status(std::map<std::string, std::string>& files, std::string& meta_json)> before_store = {};
};

// Lookup, else tune_function (with the log at tuning_log_path), then store.
Expected<Outcome> tune_cached(const TuneRequest& r);

// The parts of tune_cached, for callers that tune several requests at once
// (autotune/program_tune.h). The request's cache key.
std::string tuning_key(const TuneRequest& r);
// opts.log_path, else <work_dir>/<key>.tuning.jsonl: a rerun resumes it.
std::string tuning_log_path(const TuneRequest& r);
// The stored entry of the request's key as an Outcome (cached = true; its
// files copied to out_dir), or none. No store: none.
Expected<std::optional<Outcome>> lookup_tuned(const TuneRequest& r);
// Builds `result`'s winner as `mlk build` would, checks the stored artifact
// through its C ABI against the verification cases, calls before_store, and
// stores it under the key with its schedule, log and timings.
Expected<Outcome> store_tuned(const TuneRequest& r, const TuneResult& result);

}  // namespace mlk::tune
