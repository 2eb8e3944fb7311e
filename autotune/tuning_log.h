// The tuning log (`mlk tune --log FILE`): one JSON line per measured trial,
// after a header that names the tuning problem (fn, IR hash, dims, profile,
// seed, schedule-space version, Halide version), and a line per final-round
// re-measurement. A run given the log of an earlier run of the same problem
// takes its trials instead of measuring them again, and appends its own.
// Also the progress line each trial prints to the log sink.
#pragma once

#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "autotune/tuner.h"
#include "base/status.h"

namespace mlk::tune {

// Final-round re-measurements of an earlier run, by schedule hash.
using FinalTimes = std::map<std::string, std::vector<double>>;

class TuningLog {
 public:
  // Reads `path` (a missing file is an empty log) for the run whose header
  // is `header`, then opens it to append (or starts it with the header).
  // A torn last line (a run killed mid-write) is cut off. Errors:
  // InvalidArgument when the log is of another tuning problem; Corruption
  // naming the line for a damaged one, or for a trial whose knobs `check`
  // refuses (the rules' check_knobs: a stage or knob the tuning problem
  // lacks, a value not among its choices); IOError when it cannot be written.
  using KnobCheck = std::function<Status(const Knobs&)>;
  static Expected<std::unique_ptr<TuningLog>> Open(const std::string& path, const nlohmann::json& header,
                                                   const KnobCheck& check = nullptr);

  // The earlier run's trials, by schedule hash, and its final times.
  const std::map<std::string, Trial>& earlier() const { return earlier_; }
  const FinalTimes& finals() const { return finals_; }

  // Appends a trial, or a final-round re-measurement; flushed at once.
  void Append(const Trial& t);
  void AppendFinal(const std::string& schedule_hash, const std::vector<double>& times_ms);

 private:
  std::ofstream out_;
  std::map<std::string, Trial> earlier_;
  FinalTimes finals_;
};

// A trial as a line of the log.
nlohmann::json trial_json(const Trial& t);

// Where the search stands when a trial is recorded, for its progress line.
struct TrialProgress {
  std::string label;      // "FN PROFILE"
  size_t trials = 0;      // recorded so far, this one included
  int max_trials = 0;     // TuneOptions::trials
  double score_ms = 0;    // this trial's (when ok)
  bool has_best = false;  // a trial passed
  double best_ms = 0;     // the best so far
  double default_ms = 0;  // the naive schedule's (trial 0); 0 none yet
  double eta_s = 0;
};

// "[tune FN PROFILE] trial 3/40 mutation ok 0.123 ms  compile 0.8 s  best
// 0.100 ms (2.000x over naive)  ETA 12s", to the log sink.
void log_trial_progress(const Trial& t, const TrialProgress& p);

}  // namespace mlk::tune
