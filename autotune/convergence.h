// How a search converged: the best-so-far curve of one job's trials against
// its own search seconds, and when it came within a fraction of its final
// best. `mlk tune` reports both per kernel (docs/tuning.md, "Convergence").
#pragma once

#include <vector>

#include "autotune/tuner.h"

namespace mlk::tune {

// One step of the curve: at `at_s` seconds of the job's search, the best
// median of the trials that passed so far became `best_ms`.
struct CurvePoint {
  double at_s = 0;
  double best_ms = 0;
};

// The steps where the best improved, in trial order (a trial's at_s is when
// it was recorded; resumed trials keep the time of the run that measured
// them). Trials that did not pass are not points. Empty when none passed.
std::vector<CurvePoint> best_so_far(const std::vector<Trial>& log);

// The best at `t` seconds: the last point at or before t; 0 when none.
double best_at(const std::vector<CurvePoint>& curve, double t);

// The first second at which the best was within `fraction` of the curve's
// final best (best <= final x (1 + fraction)); -1 for an empty curve.
double seconds_to_within(const std::vector<CurvePoint>& curve, double fraction);

}  // namespace mlk::tune
