#include "bench/stats.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "base/status.h"

namespace mlk::bench {

std::vector<double> round_medians(const std::vector<double>& samples, const std::vector<size_t>& sizes) {
  if (sizes.empty()) return {median(samples)};
  std::vector<double> out;
  size_t at = 0;
  for (size_t n : sizes) {
    MLK_CHECK(n > 0 && at + n <= samples.size(), "round sizes do not fit the samples");
    out.push_back(median(std::vector<double>(samples.begin() + static_cast<std::ptrdiff_t>(at),
                                             samples.begin() + static_cast<std::ptrdiff_t>(at + n))));
    at += n;
  }
  MLK_CHECK(at == samples.size(), "round sizes do not add up to the samples");
  return out;
}

double quantile(std::vector<double> x, double q) {
  MLK_CHECK(!x.empty(), "quantile of no values");
  MLK_CHECK(q >= 0 && q <= 1, "quantile outside [0, 1]");
  std::sort(x.begin(), x.end());
  double pos = q * static_cast<double>(x.size() - 1);
  size_t i = static_cast<size_t>(std::floor(pos));
  if (i + 1 >= x.size()) return x.back();
  double frac = pos - static_cast<double>(i);
  return x[i] + frac * (x[i + 1] - x[i]);
}

double mann_whitney_greater_p(const std::vector<double>& slow, const std::vector<double>& fast) {
  const double n1 = static_cast<double>(slow.size()), n2 = static_cast<double>(fast.size());
  if (slow.empty() || fast.empty()) return 1;
  // Average ranks over the pooled values; ties share their mean rank.
  std::vector<std::pair<double, int>> all;  // value, 1 for `slow`
  for (double v : slow) all.push_back({v, 1});
  for (double v : fast) all.push_back({v, 0});
  std::sort(all.begin(), all.end());
  const double n = n1 + n2;
  double rank_sum_slow = 0, tie_term = 0;
  for (size_t i = 0; i < all.size();) {
    size_t j = i;
    while (j < all.size() && all[j].first == all[i].first) ++j;
    double t = static_cast<double>(j - i);
    double mean_rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2;
    for (size_t k = i; k < j; ++k)
      if (all[k].second) rank_sum_slow += mean_rank;
    tie_term += t * t * t - t;
    i = j;
  }
  double u = rank_sum_slow - n1 * (n1 + 1) / 2;
  double var = n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1)));
  if (var <= 0) return 1;
  double z = (u - n1 * n2 / 2 - 0.5) / std::sqrt(var);
  return 0.5 * std::erfc(z / std::sqrt(2.0));
}

Interval bootstrap_ratio_of_medians(const std::vector<double>& num, const std::vector<double>& den,
                                    double confidence, int resamples, uint64_t seed) {
  MLK_CHECK(!num.empty() && !den.empty(), "bootstrap of an empty sample");
  MLK_CHECK(resamples > 0 && confidence > 0 && confidence < 1, "bootstrap parameters");
  std::mt19937_64 rng(seed);
  std::vector<double> ratios, a(num.size()), b(den.size());
  ratios.reserve(static_cast<size_t>(resamples));
  std::uniform_int_distribution<size_t> pick_a(0, num.size() - 1), pick_b(0, den.size() - 1);
  for (int r = 0; r < resamples; ++r) {
    for (auto& v : a) v = num[pick_a(rng)];
    for (auto& v : b) v = den[pick_b(rng)];
    ratios.push_back(median(a) / median(b));
  }
  double tail = (1 - confidence) / 2;
  return {quantile(ratios, tail), quantile(ratios, 1 - tail)};
}

}  // namespace mlk::bench
