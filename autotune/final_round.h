// The tuner's final round: timings within one search are noisy on a busy
// machine, so the best few candidates (the best three and the default, less
// those more than kFinalRoundSpread behind the best unless the round runs
// here for remote workers' times) are measured again, longer, side by side;
// a second, interleaved round follows for those within 5% of the first
// round's best. The winner and the reported speedup come from this round.
// Re-measurements are appended to the tuning log, and those of an earlier
// run are taken from it instead of measuring again.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <vector>

#include "autotune/measurer.h"
#include "autotune/tuning_log.h"

namespace mlk::tune {

struct FinalRoundRequest {
  const std::deque<Trial>* trials = nullptr;       // the search's, trial 0 the default
  std::function<double(const Trial&)> score;       // the search's ranking, lower first
  const MeasureSetup* setup = nullptr;             // the search's
  double compile_limit_s = 60;
  bool final_round_here = false;                   // TuneOptions::final_round_here
  Measurer* measurer = nullptr;
  const FinalTimes* resumed = nullptr;             // an earlier run's re-measurements; may be null
  TuningLog* log = nullptr;                        // may be null
};

struct FinalRound {
  // The best median of each candidate measured again, and its last times.
  std::map<const Trial*, double> ms;
  std::map<const Trial*, std::vector<double>> times;
  const Trial* winner = nullptr;  // null: nothing measured again
  double winner_ms = 0;
};

// The round; an error when the measurer cannot go on (Measurer's contract).
Expected<FinalRound> final_round(const FinalRoundRequest& r);

}  // namespace mlk::tune
