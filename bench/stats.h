// Statistics for comparing two sets of timing samples: medians, quantiles,
// the one-sided Mann-Whitney U test and a bootstrap confidence interval of
// the ratio of medians. Pure functions of their inputs (the bootstrap takes an
// explicit seed), no I/O, no Halide; used by the regression gate (gate.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/stats.h"  // median

namespace mlk::bench {

using mlk::median;  // base/stats.h

// The median of each round: `sizes` splits `samples` into consecutive rounds
// (an empty `sizes` is one round). Precondition: the sizes are positive and
// add up to samples.size().
std::vector<double> round_medians(const std::vector<double>& samples, const std::vector<size_t>& sizes);

// The q-quantile (0 <= q <= 1) of `x` by linear interpolation between order
// statistics (numpy's default). Precondition: `x` is not empty.
double quantile(std::vector<double> x, double q);

// One-sided Mann-Whitney U test of "a sample of `slow` tends to be larger
// than a sample of `fast`": the p-value of the observed U under the null
// hypothesis that both come from one distribution. Normal approximation with
// the tie correction and a continuity correction; accurate for counts of
// about 8 or more on each side (the gate always has more). Returns 1 when
// either set is empty or every value is tied.
double mann_whitney_greater_p(const std::vector<double>& slow, const std::vector<double>& fast);

// A percentile bootstrap confidence interval of median(num) / median(den):
// `resamples` times, both sets are resampled with replacement (independently)
// and the ratio of their medians is taken; the interval holds the central
// `confidence` fraction (e.g. 0.99) of those ratios. Deterministic for a given
// `seed`. Preconditions: both sets non-empty, values positive.
struct Interval {
  double low = 0, high = 0;
};
Interval bootstrap_ratio_of_medians(const std::vector<double>& num, const std::vector<double>& den,
                                    double confidence, int resamples, uint64_t seed);

}  // namespace mlk::bench
