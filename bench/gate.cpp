#include "bench/gate.h"

#include <cstdio>

#include "bench/stats.h"
#include "base/status.h"

namespace mlk::bench {

Comparison compare_rounds(const std::vector<double>& baseline_rounds, const std::vector<double>& current_rounds,
                          const GateOptions& opts) {
  MLK_CHECK(!baseline_rounds.empty() && !current_rounds.empty(), "comparison of empty sets of rounds");
  Comparison c;
  c.baseline_rounds = static_cast<int>(baseline_rounds.size());
  c.current_rounds = static_cast<int>(current_rounds.size());
  c.baseline_median_ms = median(baseline_rounds);
  c.current_median_ms = median(current_rounds);
  c.ratio = c.current_median_ms / c.baseline_median_ms;
  Interval ci = bootstrap_ratio_of_medians(current_rounds, baseline_rounds, opts.confidence, opts.resamples, opts.seed);
  c.ci_low = ci.low;
  c.ci_high = ci.high;
  c.p_slower = mann_whitney_greater_p(current_rounds, baseline_rounds);
  c.p_faster = mann_whitney_greater_p(baseline_rounds, current_rounds);
  const double limit = 1 + opts.max_regression_pct / 100;
  c.suspect = c.ratio > limit && c.p_slower < opts.alpha && c.ci_low > limit;
  c.faster = c.ratio < 1 / limit && c.p_faster < opts.alpha && c.ci_high < 1 / limit;
  return c;
}

std::string change_text(double ratio) {
  char b[32];
  std::snprintf(b, sizeof b, "%+.1f%%", (ratio - 1) * 100);
  return b;
}

}  // namespace mlk::bench
