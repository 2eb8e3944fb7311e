// The regression gate's decision for one kernel: is it slower now than in
// the baseline by more than the allowed percentage, beyond what noise
// explains? Pure (seeded) computation; `mlk bench` calls it once per kernel,
// and again on a fresh re-measurement of each kernel it suspects, before
// declaring a regression (docs/ci.md).
//
// The unit of evidence is the measurement *round*, not the single sample:
// each round runs the kernel on freshly allocated buffers, and how a kernel's
// data lands in physical memory can change its speed by tens of percent
// (measured: SGEMM 128^3 took 0.013 or 0.020 ms depending on the round), a
// difference that samples within one round never show. Samples within a
// round are summarised by their median; the rounds are what is compared.
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
  double baseline_median_ms = 0, current_median_ms = 0;  // medians of the round medians
  double ratio = 0;                // current / baseline (> 1: slower now)
  double ci_low = 0, ci_high = 0;  // bootstrap interval of `ratio`, rounds resampled
  double p_slower = 1;             // one-sided Mann-Whitney on round medians: current larger
  double p_faster = 1;             // the same, current smaller
  int baseline_rounds = 0, current_rounds = 0;
  // All three hold: ratio > 1 + pct/100, p_slower < alpha, ci_low > 1 + pct/100.
  bool suspect = false;
  // The mirror image: ratio < 1/(1 + pct/100), p_faster < alpha, ci_high < 1/(1 + pct/100).
  bool faster = false;
};

// Compares round medians (both non-empty, positive milliseconds; see
// stats.h round_medians()). With 4 rounds or fewer on each side the
// Mann-Whitney test cannot reach p < 0.01, so nothing is ever suspect:
// `mlk bench` uses 10 rounds unless told otherwise.
Comparison compare_rounds(const std::vector<double>& baseline_rounds, const std::vector<double>& current_rounds,
                          const GateOptions& opts);

// "+100.3%" / "-4.1%": the change of the median, signed, one decimal.
std::string change_text(double ratio);

}  // namespace mlk::bench
