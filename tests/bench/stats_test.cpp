// The statistics of the regression gate (bench/stats.h, bench/gate.h) against
// values computed by hand, and the gate's decision on constructed rounds.
#include <gtest/gtest.h>

#include <random>

#include "bench/gate.h"
#include "bench/stats.h"

namespace mlk::bench {
namespace {

std::vector<double> noisy(double center, double spread, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> d(0, spread);  // positive, right-skewed like timings
  std::vector<double> out;
  for (int i = 0; i < n; ++i) out.push_back(center * d(rng));
  return out;
}

TEST(BenchStats, MedianAndQuantile) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(quantile({1, 2, 3, 4, 5}, 0), 1);
  EXPECT_DOUBLE_EQ(quantile({1, 2, 3, 4, 5}, 0.25), 2);
  EXPECT_DOUBLE_EQ(quantile({1, 2, 3, 4}, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(quantile({1, 2, 3, 4, 5}, 1), 5);
}

TEST(BenchStats, MannWhitneyByHand) {
  // U = 25 of 25 pairs; mean 12.5, variance 25 * 11 / 12; z = (25 - 12.5 - 0.5) / sd.
  EXPECT_NEAR(mann_whitney_greater_p({6, 7, 8, 9, 10}, {1, 2, 3, 4, 5}), 0.0060929, 1e-6);
  EXPECT_NEAR(mann_whitney_greater_p({1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}), 0.996691, 1e-5);  // z = -13 / sd
  // All values tied: no evidence either way.
  EXPECT_DOUBLE_EQ(mann_whitney_greater_p({1, 1, 1}, {1, 1, 1}), 1);
  EXPECT_DOUBLE_EQ(mann_whitney_greater_p({}, {1, 2}), 1);
}

TEST(BenchStats, MannWhitneySameDistributionIsNotSignificant) {
  int significant = 0;
  for (uint64_t s = 0; s < 200; ++s)
    if (mann_whitney_greater_p(noisy(1, 0.1, 60, 2 * s), noisy(1, 0.1, 60, 2 * s + 1)) < 0.01) ++significant;
  EXPECT_LE(significant, 8);  // about 1% of 200 expected; the test's level holds
}

TEST(BenchStats, BootstrapIntervalCoversTheRatioAndIsReproducible) {
  auto base = noisy(1.0, 0.05, 200, 1), slow = noisy(2.0, 0.05, 200, 2);
  Interval a = bootstrap_ratio_of_medians(slow, base, 0.99, 2000, 7);
  Interval b = bootstrap_ratio_of_medians(slow, base, 0.99, 2000, 7);
  EXPECT_EQ(a.low, b.low);
  EXPECT_EQ(a.high, b.high);
  EXPECT_LT(a.low, 2.0 * 1.02);
  EXPECT_GT(a.high, 2.0 / 1.02);
  EXPECT_GT(a.low, 1.9);
  EXPECT_LT(a.high, 2.1);
}

TEST(BenchStats, RoundMedians) {
  EXPECT_EQ(round_medians({1, 2, 3, 10, 20, 30, 40}, {3, 4}), (std::vector<double>{2, 25}));
  EXPECT_EQ(round_medians({5, 1, 3}, {}), (std::vector<double>{3}));
}

TEST(BenchGate, HalvedBaselineIsSuspect) {
  auto now = noisy(1.0, 0.05, 10, 3);
  std::vector<double> half;
  for (double t : now) half.push_back(t / 2);
  Comparison c = compare_rounds(half, now, GateOptions{});
  EXPECT_TRUE(c.suspect);
  EXPECT_NEAR(c.ratio, 2, 1e-9);
  EXPECT_GT(c.ci_low, 1.5);
  EXPECT_LT(c.p_slower, 1e-3);
  EXPECT_EQ(c.baseline_rounds, 10);
  EXPECT_EQ(change_text(c.ratio), "+100.0%");
}

TEST(BenchGate, SameDistributionIsNotSuspect) {
  for (uint64_t s = 0; s < 50; ++s) {
    Comparison c = compare_rounds(noisy(1, 0.2, 10, 10 + 2 * s), noisy(1, 0.2, 10, 11 + 2 * s), GateOptions{});
    EXPECT_FALSE(c.suspect) << "seed " << s << ": ratio " << c.ratio;
    EXPECT_FALSE(c.faster);
  }
}

TEST(BenchGate, BimodalKernelIsNotSuspect) {
  // Each round lands on "good" or "bad" memory (x1.55), as SGEMM 128^3 does:
  // two runs of one build differ in how many rounds were unlucky.
  std::mt19937_64 rng(5);
  for (int run = 0; run < 50; ++run) {
    std::vector<double> a, b;
    for (int r = 0; r < 10; ++r) a.push_back(rng() % 3 == 0 ? 1.55 : 1.0), b.push_back(rng() % 3 == 0 ? 1.55 : 1.0);
    EXPECT_FALSE(compare_rounds(a, b, GateOptions{}).suspect) << "run " << run;
  }
}

TEST(BenchGate, SlowerButWithinTheLimitIsNotSuspect) {
  // 5% slower, clearly significant, but the limit is 10%.
  Comparison c = compare_rounds(noisy(1, 0.005, 10, 5), noisy(1.05, 0.005, 10, 6), GateOptions{});
  EXPECT_LT(c.p_slower, 1e-3);
  EXPECT_FALSE(c.suspect);
}

TEST(BenchGate, BeyondTheLimitButTooNoisyIsNotSuspect) {
  // 20% slower in the medians, but the rounds scatter so much that the
  // interval of the ratio reaches below 1.10.
  Comparison c = compare_rounds(noisy(1, 0.4, 10, 7), noisy(1.2, 0.4, 10, 8), GateOptions{});
  EXPECT_FALSE(c.suspect) << c.ratio << " [" << c.ci_low << ", " << c.ci_high << "]";
}

TEST(BenchGate, TooFewRoundsAreNeverSuspect) {
  Comparison c = compare_rounds({1, 1.01, 0.99, 1}, {3, 3.1, 2.9, 3}, GateOptions{});
  EXPECT_GT(c.p_slower, 0.01);
  EXPECT_FALSE(c.suspect);
}

TEST(BenchGate, FasterIsReportedAsFaster) {
  Comparison c = compare_rounds(noisy(1, 0.02, 10, 9), noisy(0.5, 0.02, 10, 10), GateOptions{});
  EXPECT_TRUE(c.faster);
  EXPECT_FALSE(c.suspect);
  EXPECT_NEAR(c.ratio, 0.5, 0.03);
  EXPECT_EQ(change_text(0.5), "-50.0%");
}

}  // namespace
}  // namespace mlk::bench
