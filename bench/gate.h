// The regression gate's decision for one kernel: are the current timing
// samples slower than the baseline's by more than the allowed percentage,
// beyond what noise explains? Pure (seeded) computation over two sample sets;
// `mlk bench` calls it once per kernel, and again on a fresh re-measurement
// of each kernel it suspects, before declaring a regression (docs/ci.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mlk::bench {

struct GateOptions {
  double max_regression_pct = 10;  // allowed slowdown of the median, in percent
  double alpha = 0.01;             // significance level of the Mann-Whitney test
  double confidence = 0.99;        // of the bootstrap interval of the ratio
  int resamples = 2000;            // bootstrap resamples
  uint64_t seed = 1;               // bootstrap seed (the decision is reproducible)
};

struct Comparison {
  double baseline_median_ms = 0, current_median_ms = 0;
  double ratio = 0;              // current median / baseline median (> 1: slower now)
  double ci_low = 0, ci_high = 0;  // bootstrap interval of `ratio`
  double p_slower = 1;           // one-sided Mann-Whitney: current tends to be larger
  double p_faster = 1;           // one-sided Mann-Whitney: current tends to be smaller
  // All three hold: ratio > 1 + pct/100, p_slower < alpha, ci_low > 1 + pct/100.
  bool suspect = false;
  // The mirror image: ratio < 1/(1 + pct/100), p_faster < alpha, ci_high < 1/(1 + pct/100).
  bool faster = false;
};

// Compares `current` with `baseline` (both non-empty, positive milliseconds).
Comparison compare_samples(const std::vector<double>& baseline, const std::vector<double>& current,
                           const GateOptions& opts);

// "+100.3%" / "-4.1%": the change of the median, signed, one decimal.
std::string change_text(double ratio);

}  // namespace mlk::bench
