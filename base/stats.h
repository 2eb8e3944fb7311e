// The one median of mlk: of timing samples (the tuner, `mlk run --repeat`,
// `mlk bench` and its gate).
#pragma once

#include <vector>

namespace mlk {

// The median of `x` (the mean of the two middle values for an even count).
// `x` must not be empty (an internal check).
double median(std::vector<double> x);

}  // namespace mlk
