// An analytic cost model: predicted run time of a rule-based schedule, used
// to rank candidates before measuring them (so that the measuring budget goes
// to promising ones) and, on GPU profiles with no GPU present, as the only
// estimate. It is deliberately simple and is replaced by measurement wherever
// a measurement exists. It reads knobs through the knob registry
// (scheduler/rules_knobs.h): a knob left out takes its registry default.
#pragma once

#include <vector>

#include "scheduler/rules.h"
#include "targets/profile.h"

namespace mlk::tune {

double predict_ms(const std::vector<StageInfo>& stages, const Knobs& knobs, const Profile& p);

}  // namespace mlk::tune
