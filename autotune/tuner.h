// The autotuner: an evolutionary search over the rules' knob space (plus
// Halide's autoschedulers as extra candidates), every candidate verified
// against the reference interpreter and measured in an isolated worker.
// Seeded and replayable; the tuning log is appended after every trial, and a
// run pointed at an existing log resumes where it stopped.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "autotune/measure.h"
#include "lang/bind.h"
#include "lang/ir.h"
#include "scheduler/rules.h"
#include "targets/profile.h"

namespace mlk::tune {

struct TuneOptions {
  int trials = 40;             // measured candidates, at most
  double time_s = 150;         // wall-clock budget for the search
  uint64_t seed = 1;
  double timeout_s = 60;       // per candidate
  bool autoschedulers = true;  // also try Halide's autoschedulers
  std::string log_path;        // JSON lines, appended per trial; resumed from
  bool progress = true;        // progress lines on stderr
  std::function<void(const Schedule&, HostTensor&)> fault;  // test seam, see MeasureSetup
};

struct Trial {
  int index = 0;
  std::string origin;  // "default", "Adams2019", "mutation", "crossover", "resumed"
  Knobs knobs;
  Schedule schedule;
  Measurement m;
  double predicted_ms = 0;
  bool resumed = false;  // taken from the log of an earlier run, not measured now
};

struct TuneResult {
  std::string fn;
  DimEnv dims;
  bool measured = true;      // false: GPU profile without a GPU (cost model + ptxas)
  Schedule best;
  std::string best_origin;
  double best_ms = 0;        // median of the winner (or its estimate when !measured)
  double default_ms = 0;     // the default schedule, the same way
  std::vector<double> best_times_ms;
  int trials = 0;
  std::vector<Trial> log;
  std::string reference;     // what verification compared against
};

Expected<TuneResult> tune_function(const ir::Module& m, const std::string& fn, const Profile& profile,
                                   const DimEnv& dims, const TuneOptions& opts);

}  // namespace mlk::tune
