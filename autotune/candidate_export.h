// Tuning with the measurements taken elsewhere (docs/tuning.md, "Measuring
// elsewhere"): the search's best candidates exported as a candidate set
// (artifact/candidate_set.h) for `mlk-measure` on the machine with the
// device, and its measurements imported back as the search's trials.
#pragma once

#include <string>

#include "autotune/cached_tune.h"
#include "artifact/candidate_set.h"
#include "autotune/tuner.h"

namespace mlk::tune {

// The search's `count` best distinct candidates by its own ranking (measured
// medians where it measured, else the cost model's estimates), the default
// schedule always among them, each built into DIR/cNN as `mlk build` would,
// with the verification cases and the timing shape: DIR/candidates.json.
// `dir` must be empty or absent. Returns a line for people.
Expected<std::string> export_candidates(const TuneRequest& r, const TuneResult& result, const std::string& dir,
                                        int count);

// A set of one candidate, `schedule` built for `p`, with the setup's cases,
// shape and timing limits, written to `dir`: what a job of `mlk tune
// --workers` carries for a worker that only runs artifacts (GPU profiles).
// `source` is the program's path, recorded in the manifest.
Status export_one(const MeasureSetup& setup, const Profile& p, const std::string& source, const Schedule& schedule,
                  const std::string& dir);

// A runner's result as the tuner's Measurement.
Measurement measurement_of(const CandidateResult& r);

// The TuneResult that `mlk-measure`'s measurements in `file` (of the
// candidate set in `set_dir`) make: the candidates as trials with the
// measured times and verdicts, the fastest that passed every case as the
// winner, measured: true and the device in measured_on (store_tuned then
// stores the winner built here only if its library is the one measured).
// InvalidArgument when the set or the file is of another problem, or the
// file measured another set; NotFound when no candidate passed.
Expected<TuneResult> import_measurements(const TuneRequest& r, const std::string& file, const std::string& set_dir);

}  // namespace mlk::tune
