// The learned cost model (autotune/learned_cost_model.h): it learns a ranking
// from measured times, the same data and seed give the same predictions,
// features follow the knob registry, and bad input is refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "autotune/learned_cost_model.h"
#include "tests/scheduler/stage_tables.h"

namespace mlk::tune {
namespace {

using testing_support::profile;
using testing_support::stage;
using Kind = StageInfo::Kind;

// A synthetic cost with an interaction and a threshold: what trees learn.
double cost(const std::vector<float>& x) { return 1 + 3 * x[0] + x[1] * x[1] + (x[2] > 0.5 ? 4 * x[0] : 0); }

std::vector<std::vector<float>> rows(int n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<std::vector<float>> x(n);
  for (auto& r : x) r = {u(rng), u(rng), u(rng), u(rng)};
  return x;
}

// Spearman's rank correlation of two equally long series.
double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  auto ranks = [](const std::vector<double>& v) {
    std::vector<size_t> idx(v.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::sort(idx.begin(), idx.end(), [&](size_t i, size_t j) { return v[i] < v[j]; });
    std::vector<double> r(v.size());
    for (size_t k = 0; k < idx.size(); ++k) r[idx[k]] = static_cast<double>(k);
    return r;
  };
  auto ra = ranks(a), rb = ranks(b);
  double d2 = 0, n = static_cast<double>(a.size());
  for (size_t i = 0; i < a.size(); ++i) d2 += (ra[i] - rb[i]) * (ra[i] - rb[i]);
  return 1 - 6 * d2 / (n * (n * n - 1));
}

TEST(LearnedCostModel, RanksUnseenCandidatesLikeTheirTimes) {
  std::mt19937 rng(3);
  auto train = rows(60, rng), test = rows(40, rng);
  std::vector<double> ms, truth;
  for (const auto& r : train) ms.push_back(cost(r));
  for (const auto& r : test) truth.push_back(cost(r));
  LearnedCostModel m(7);
  ASSERT_TRUE(m.fit(train, ms).ok());
  EXPECT_EQ(m.trained_on(), 60u);
  auto pred = m.predict(test);
  ASSERT_TRUE(pred.ok()) << pred.status().message();
  EXPECT_GT(spearman(*pred, truth), 0.8);
  // The candidate it ranks first is among the truly best quarter.
  size_t first = std::min_element(pred->begin(), pred->end()) - pred->begin();
  std::vector<double> sorted = truth;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_LE(truth[first], sorted[sorted.size() / 4]);
}

TEST(LearnedCostModel, TheSameTrialsAndSeedGiveTheSameRanking) {
  std::mt19937 rng(5);
  auto train = rows(30, rng), test = rows(20, rng);
  std::vector<double> ms;
  for (const auto& r : train) ms.push_back(cost(r));
  LearnedCostModel a(11), b(11);
  ASSERT_TRUE(a.fit(train, ms).ok());
  ASSERT_TRUE(b.fit(train, ms).ok());
  EXPECT_EQ(*a.predict(test), *b.predict(test));
  ASSERT_TRUE(a.fit(train, ms).ok());  // refitting is deterministic too
  EXPECT_EQ(*a.predict(test), *b.predict(test));
}

TEST(LearnedCostModel, BadInputIsRefusedByName) {
  LearnedCostModel m;
  EXPECT_EQ(m.predict({{1, 2}}).status().message(), "learned cost model: not trained yet (fit it first)");
  EXPECT_EQ(m.fit({}, {}).message(), "learned cost model: no trials to learn from");
  EXPECT_EQ(m.fit({{1, 2}}, {1, 2}).message(), "learned cost model: 1 rows of features but 2 times");
  EXPECT_EQ(m.fit({{1, 2}, {3}}, {1, 2}).message(), "learned cost model: row 1 has 1 features, row 0 has 2");
  EXPECT_EQ(m.fit({{1, 2}, {3, 4}}, {1, NAN}).message(),
            "learned cost model: time 1 is nan; times must be finite and positive");
  EXPECT_EQ(m.fit({{1, 2}, {3, 4}}, {1, 0}).message(),
            "learned cost model: time 1 is 0.000000; times must be finite and positive");
  EXPECT_FALSE(m.trained());
  ASSERT_TRUE(m.fit({{1, 2}, {3, 4}}, {1, 2}).ok());
  EXPECT_EQ(m.predict({{1, 2, 3}}).status().message(), "learned cost model: row 0 has 3 features, the model 2");
  // A failed fit keeps the model it had.
  EXPECT_FALSE(m.fit({{1}}, {-1}).ok());
  EXPECT_TRUE(m.predict({{1, 2}}).ok());
}

TEST(LearnedCostModel, FeaturesAreTheKnobsOfEveryStageInRegistryOrder) {
  StageInfo mm = stage("matmul0", Kind::kMatmul, {256, 256}, {256});
  mm.operands = {"load_a", "load_b"};
  std::vector<StageInfo> t = {stage("load_a", Kind::kInput, {256, 256}), stage("load_b", Kind::kInput, {256, 256}), mm,
                              stage("output", Kind::kOutput, {256, 256})};
  const Profile p = profile("cpu_avx512");
  auto unset = schedule_features(t, {}, p);
  auto set = schedule_features(t, {{"matmul0", {{"tm", 12}}}}, p);
  ASSERT_EQ(unset.size(), set.size());
  // tn, tm, ... of the matmul, then vec, par, fuse_outer of the output, then the analytic prediction.
  EXPECT_EQ(unset[1], 4.0f);  // tm's registry default
  EXPECT_EQ(set[1], 12.0f);
  EXPECT_NE(unset.back(), 0.0f);
}

}  // namespace
}  // namespace mlk::tune
