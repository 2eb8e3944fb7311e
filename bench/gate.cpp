#include "bench/gate.h"

#include <cstdio>

#include "bench/stats.h"
#include "lang/status.h"

namespace mlk::bench {

Comparison compare_samples(const std::vector<double>& baseline, const std::vector<double>& current,
                           const GateOptions& opts) {
  MLK_CHECK(!baseline.empty() && !current.empty(), "comparison of empty sample sets");
  Comparison c;
  c.baseline_median_ms = median(baseline);
  c.current_median_ms = median(current);
  c.ratio = c.current_median_ms / c.baseline_median_ms;
  Interval ci = bootstrap_ratio_of_medians(current, baseline, opts.confidence, opts.resamples, opts.seed);
  c.ci_low = ci.low;
  c.ci_high = ci.high;
  c.p_slower = mann_whitney_greater_p(current, baseline);
  c.p_faster = mann_whitney_greater_p(baseline, current);
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
