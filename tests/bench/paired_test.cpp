// The A/B verdict (bench/paired.h): the t distribution against tabled values,
// and the paired comparison on constructed rounds where the machine's load
// varies from round to round as on a shared CI runner.
#include <gtest/gtest.h>

#include <random>

#include "bench/gate.h"
#include "bench/paired.h"

namespace mlk::bench {
namespace {

TEST(BenchPaired, StudentTAgainstTables) {
  EXPECT_NEAR(student_t_quantile(0.995, 9), 3.249836, 1e-5);
  EXPECT_NEAR(student_t_quantile(0.975, 4), 2.776445, 1e-5);
  EXPECT_NEAR(student_t_quantile(0.95, 30), 1.697261, 1e-5);
  EXPECT_NEAR(student_t_quantile(0.975, 1), 12.7062, 1e-3);
  EXPECT_NEAR(student_t_quantile(0.975, 2), 4.302653, 1e-5);
  EXPECT_NEAR(student_t_cdf(2.015048, 5), 0.95, 1e-6);
  EXPECT_NEAR(student_t_cdf(-2.015048, 5), 0.05, 1e-6);
  EXPECT_DOUBLE_EQ(student_t_cdf(0, 7), 0.5);
  EXPECT_NEAR(student_t_quantile(0.005, 9), -3.249836, 1e-5);
}

// Rounds of one kernel on a machine whose load changes every round (a factor
// between 1 and `load` common to both sides of the round), each side with its
// own small noise; the current side `slowdown` times slower.
struct Rounds {
  std::vector<double> base, cur;
};
Rounds loaded_rounds(double slowdown, double load, double noise, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> l(1, load);
  std::lognormal_distribution<double> e(0, noise);
  Rounds r;
  for (int i = 0; i < n; ++i) {
    double f = l(rng);
    r.base.push_back(0.1 * f * e(rng));
    r.cur.push_back(0.1 * slowdown * f * e(rng));
  }
  return r;
}

TEST(BenchPaired, ByHand) {
  // log-ratios log 2, log 2, log 2: no spread, ratio 2 exactly.
  Comparison c = compare_paired({1, 2, 3}, {2, 4, 6}, GateOptions{});
  EXPECT_DOUBLE_EQ(c.ratio, 2);
  EXPECT_DOUBLE_EQ(c.ci_low, 2);
  EXPECT_TRUE(c.suspect);
  EXPECT_FALSE(c.faster);
  // log-ratios 0, log 2, 0, log 2: mean log 2 / 2, sd log 2 / sqrt(3), se sd / 2;
  // the 99% interval is exp(mean -+ t(0.995, 3) se), t = 5.840909.
  c = compare_paired({1, 1, 1, 1}, {1, 2, 1, 2}, GateOptions{});
  const double m = std::log(2) / 2, se = std::log(2) / std::sqrt(3) / 2;
  EXPECT_NEAR(c.ratio, std::sqrt(2), 1e-12);
  EXPECT_NEAR(c.ci_low, std::exp(m - 5.840909 * se), 1e-5);
  EXPECT_NEAR(c.ci_high, std::exp(m + 5.840909 * se), 1e-5);
  EXPECT_FALSE(c.suspect);  // the interval reaches below 1.1
  // Two rounds: no spread can be estimated, nothing is suspect.
  EXPECT_FALSE(compare_paired({1, 1}, {3, 3}, GateOptions{}).suspect);
}

TEST(BenchPaired, LoadThatHitsBothSidesIsNotARegression) {
  int paired = 0, unpaired = 0;
  for (uint64_t s = 0; s < 200; ++s) {
    Rounds r = loaded_rounds(1.0, 3.0, 0.05, 10, s);
    paired += compare_paired(r.base, r.cur, GateOptions{}).suspect;
    // The same current rounds against rounds recorded on a quiet machine.
    Rounds quiet = loaded_rounds(1.0, 1.0, 0.05, 10, 1000 + s);
    unpaired += compare_rounds(quiet.base, r.cur, GateOptions{}).suspect;
  }
  EXPECT_EQ(paired, 0);
  EXPECT_GT(unpaired, 100);  // the weaker mode cannot tell the load from a slower kernel
}

TEST(BenchPaired, ARealSlowdownIsCaughtUnderLoad) {
  for (uint64_t s = 0; s < 200; ++s) {
    Rounds r = loaded_rounds(1.5, 3.0, 0.05, 10, s);
    Comparison c = compare_paired(r.base, r.cur, GateOptions{});
    EXPECT_TRUE(c.suspect) << "seed " << s << ": ratio " << c.ratio << " [" << c.ci_low << ", " << c.ci_high << "]";
    EXPECT_GT(c.ci_high, 1.5);
    EXPECT_LT(c.ci_low, 1.5);
  }
}

TEST(BenchPaired, FasterIsTheMirrorImage) {
  Rounds r = loaded_rounds(1 / 1.5, 3.0, 0.05, 10, 3);
  Comparison c = compare_paired(r.base, r.cur, GateOptions{});
  EXPECT_TRUE(c.faster);
  EXPECT_FALSE(c.suspect);
  EXPECT_LT(c.p_faster, 0.01);
}

}  // namespace
}  // namespace mlk::bench
