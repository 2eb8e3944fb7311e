#include "bench/paired.h"

#include <cmath>

#include "base/stats.h"
#include "base/status.h"

namespace mlk::bench {

namespace {

double t_pdf(double x, int df) {
  const double n = df;
  const double c = std::lgamma((n + 1) / 2) - std::lgamma(n / 2) - 0.5 * std::log(n * M_PI);
  return std::exp(c - (n + 1) / 2 * std::log1p(x * x / n));
}

}  // namespace

// Closed forms for df 1 and 2; otherwise Simpson's rule over [0, |t|] in
// steps no wider than 0.01 (the density is smooth and bounded), |t| capped at
// 200, beyond which the tail is below 1e-7 for df >= 3.
double student_t_cdf(double t, int df) {
  MLK_CHECK(df >= 1, "t distribution needs df >= 1");
  if (df == 1) return 0.5 + std::atan(t) / M_PI;
  if (df == 2) return 0.5 + t / (2 * std::sqrt(2 + t * t));
  const double a = std::min(std::fabs(t), 200.0);
  int steps = static_cast<int>(std::ceil(a / 0.01));
  if (steps % 2) ++steps;
  double area = 0;
  if (steps > 0) {
    const double h = a / steps;
    double sum = t_pdf(0, df) + t_pdf(a, df);
    for (int i = 1; i < steps; ++i) sum += (i % 2 ? 4 : 2) * t_pdf(i * h, df);
    area = std::min(sum * h / 3, 0.5);
  }
  return t >= 0 ? 0.5 + area : 0.5 - area;
}

double student_t_quantile(double p, int df) {
  MLK_CHECK(p > 0 && p < 1, "t quantile outside (0, 1)");
  if (p < 0.5) return -student_t_quantile(1 - p, df);
  double lo = 0, hi = 1;
  while (student_t_cdf(hi, df) < p && hi < 1e4) hi *= 2;
  for (int i = 0; i < 60; ++i) {
    const double mid = (lo + hi) / 2;
    (student_t_cdf(mid, df) < p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

namespace {

// The verdict from one log-ratio per round.
Comparison compare_log_ratios(const std::vector<double>& d, double baseline_median, double current_median,
                              const GateOptions& opts) {
  Comparison c;
  const size_t n = d.size();
  c.baseline_rounds = c.current_rounds = static_cast<int>(n);
  c.baseline_median_ms = baseline_median;
  c.current_median_ms = current_median;
  double mean = 0;
  for (double x : d) mean += x / n;
  c.ratio = std::exp(mean);
  c.ci_low = c.ci_high = c.ratio;
  if (n < 3) return c;
  double ss = 0;
  for (double x : d) ss += (x - mean) * (x - mean);
  const int df = static_cast<int>(n) - 1;
  const double se = std::sqrt(ss / df / n);
  const double q = student_t_quantile(1 - (1 - opts.confidence) / 2, df);
  c.ci_low = std::exp(mean - q * se);
  c.ci_high = std::exp(mean + q * se);
  // se == 0 (every round the same ratio): the evidence is as strong as it gets.
  const double t = se > 0 ? mean / se : (mean > 0 ? 1e9 : mean < 0 ? -1e9 : 0);
  c.p_slower = 1 - student_t_cdf(t, df);
  c.p_faster = student_t_cdf(t, df);
  const double limit = 1 + opts.max_regression_pct / 100;
  c.suspect = c.ratio > limit && c.ci_low > limit && c.p_slower < opts.alpha;
  c.faster = c.ratio < 1 / limit && c.ci_high < 1 / limit && c.p_faster < opts.alpha;
  return c;
}

}  // namespace

Comparison compare_paired(const std::vector<double>& baseline_rounds, const std::vector<double>& current_rounds,
                          const GateOptions& opts) {
  MLK_CHECK(!baseline_rounds.empty() && baseline_rounds.size() == current_rounds.size(),
            "paired comparison of unequal or empty sets of rounds");
  std::vector<double> d;
  for (size_t i = 0; i < baseline_rounds.size(); ++i) {
    MLK_CHECK(baseline_rounds[i] > 0 && current_rounds[i] > 0, "paired comparison of non-positive times");
    d.push_back(std::log(current_rounds[i] / baseline_rounds[i]));
  }
  return compare_log_ratios(d, median(baseline_rounds), median(current_rounds), opts);
}

Comparison compare_paired_samples(const std::vector<double>& baseline_samples, const std::vector<size_t>& baseline_sizes,
                                  const std::vector<double>& current_samples, const std::vector<size_t>& current_sizes,
                                  const GateOptions& opts) {
  MLK_CHECK(!baseline_sizes.empty() && baseline_sizes == current_sizes &&
                baseline_samples.size() == current_samples.size(),
            "paired comparison of unequal or empty rounds");
  std::vector<double> d, bm, cm;
  size_t at = 0;
  for (size_t n : baseline_sizes) {
    MLK_CHECK(n > 0, "an empty round");
    double b = baseline_samples[at], c = current_samples[at];
    for (size_t k = at; k < at + n; ++k) {
      b = std::min(b, baseline_samples[k]);
      c = std::min(c, current_samples[k]);
    }
    MLK_CHECK(b > 0 && c > 0, "paired comparison of non-positive times");
    d.push_back(std::log(c / b));
    bm.push_back(b);
    cm.push_back(c);
    at += n;
  }
  return compare_log_ratios(d, median(bm), median(cm), opts);
}

}  // namespace mlk::bench
