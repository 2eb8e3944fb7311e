// The CostModel interface (autotune/cost_model_interface.h) over the three
// cost models: the analytic model's predictions, the learned ranking (the
// analytic one until eight measured rule trials, then the XGBoost model fitted
// to them), the ptxas estimate of a built GPU candidate, and the choice by
// profile. Trials are made up here: no candidate is measured.
#include <gtest/gtest.h>

#include <deque>
#include <nlohmann/json.hpp>

#include "autotune/cost_model.h"
#include "autotune/cost_model_interface.h"
#include "autotune/gpu_cost_model.h"
#include "autotune/learned_cost_model.h"
#include "autotune/tuner.h"
#include "scheduler/kernel.h"
#include "tests/test_support.h"

namespace mlk::tune {
namespace {

const DimEnv kDims = {{"M", 96}, {"K", 128}, {"N", 80}};

Profile profile(const std::string& name) {
  auto p = find_profile(name);
  EXPECT_TRUE(p.ok()) << name;
  return p.ok() ? *p : Profile{};
}

std::vector<StageInfo> sgemm_stages(const Profile& p) {
  auto st = stage_infos_for(testing_support::sgemm_module(), "sgemm", kDims, p.halide_target);
  EXPECT_TRUE(st.ok()) << st.status().message();
  return st.ok() ? *st : std::vector<StageInfo>{};
}

// Distinct knob settings: the default with one searched knob changed, in turn.
std::vector<Knobs> variants(const std::vector<StageInfo>& stages, const Profile& p, size_t n) {
  std::vector<Knobs> out;
  const Knobs def = default_knobs(stages, p);
  for (const auto& [stage, knobs] : knob_space(stages, p))
    for (const auto& [name, values] : knobs)
      for (int64_t v : values) {
        Knobs k = def;
        k[stage][name] = v;
        if (out.size() < n && k != def) out.push_back(k);
      }
  return out;
}

// Measured rule trials of `knobs`, the i-th taking 1 + i ms.
std::deque<Trial> measured(const std::vector<Knobs>& knobs) {
  std::deque<Trial> out;
  for (size_t i = 0; i < knobs.size(); ++i) {
    Trial t;
    t.knobs = knobs[i];
    t.m.verdict = Measurement::Verdict::kOk;
    t.m.median_ms = 1.0 + static_cast<double>(i);
    out.push_back(t);
  }
  return out;
}

TEST(CostModelInterface, TheAnalyticModelPredictsAndRanksByPredictMs) {
  const Profile p = profile("cpu_avx2");
  const auto stages = sgemm_stages(p);
  AnalyticCostModel a(stages, p);
  const std::vector<Knobs> batch = variants(stages, p, 4);
  ASSERT_EQ(batch.size(), 4u);
  const std::vector<double> r = a.rank(batch, {});
  ASSERT_EQ(r.size(), batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    EXPECT_EQ(a.predict(batch[i]), predict_ms(stages, batch[i], p));
    EXPECT_EQ(r[i], predict_ms(stages, batch[i], p));
  }
  Measurement m = [] {
    Measurement x;
    x.verdict = Measurement::Verdict::kOk;
    x.median_ms = 3;
    return x;
  }();
  a.complete(batch[0], m);
  EXPECT_EQ(m.median_ms, 3) << "a measurement is left as it is";
}

TEST(CostModelInterface, TheLearnedRankingIsAnalyticUntilEightTrialsThenLearned) {
  const Profile p = profile("cpu_avx2");
  const auto stages = sgemm_stages(p);
  const std::vector<Knobs> all = variants(stages, p, LearnedRanking::kMinTrials + 4);
  ASSERT_EQ(all.size(), LearnedRanking::kMinTrials + 4);
  const std::vector<Knobs> trained(all.begin(), all.begin() + LearnedRanking::kMinTrials);
  const std::vector<Knobs> batch(all.begin() + LearnedRanking::kMinTrials, all.end());
  LearnedRanking l(stages, p, 5, "sgemm cpu_avx2", false);
  AnalyticCostModel a(stages, p);
  std::deque<Trial> few = measured(std::vector<Knobs>(trained.begin(), trained.end() - 1));
  EXPECT_EQ(l.rank(batch, few), a.rank(batch, few)) << "seven measured trials: the analytic ranking";
  EXPECT_EQ(l.predict(batch[0]), a.predict(batch[0]));

  const std::deque<Trial> enough = measured(trained);
  LearnedCostModel direct(5);
  std::vector<std::vector<float>> x, rows;
  std::vector<double> ms;
  for (const Trial& t : enough) x.push_back(schedule_features(stages, t.knobs, p)), ms.push_back(t.m.median_ms);
  ASSERT_TRUE(direct.fit(x, ms).ok());
  for (const Knobs& k : batch) rows.push_back(schedule_features(stages, k, p));
  auto want = direct.predict(rows);
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(l.rank(batch, enough), *want) << "eight: the model learned from them, as fitted alone";
  EXPECT_EQ(l.rank(batch, enough), *want) << "the same trials: the same ranking";
}

TEST(CostModelInterface, ThePtxasModelEstimatesABuiltCandidateFromItsReport) {
  const Profile p = profile("cuda_sm90");
  const auto stages = sgemm_stages(p);
  PtxasCostModel g(stages, p, 4);
  const Knobs k = default_knobs(stages, p);
  nlohmann::json man = {{"ptxas", {{"kernels", {{{"kernel", "k0"}, {"registers", 64}, {"shared_bytes", 8192}}}}}}};
  Measurement built;
  built.verdict = Measurement::Verdict::kOk;
  built.manifest_json = man.dump();
  g.complete(k, built);
  EXPECT_GT(built.median_ms, 0);
  EXPECT_EQ(built.median_ms, predict_gpu(stages, k, p, 4, ptxas_kernels(man.dump())).ms);
  Measurement autoscheduled = built;
  autoscheduled.median_ms = 7;
  g.complete({}, autoscheduled);
  EXPECT_EQ(autoscheduled.median_ms, 0) << "no knobs, no estimate";
  Measurement timed;
  timed.verdict = Measurement::Verdict::kOk;
  timed.median_ms = 0.5;
  g.complete(k, timed);
  EXPECT_EQ(timed.median_ms, 0.5) << "measured on a GPU: left as it is";
  Measurement failed;
  failed.manifest_json = man.dump();
  g.complete(k, failed);
  EXPECT_EQ(failed.median_ms, 0) << "a build that failed is not estimated";
  EXPECT_EQ(g.predict(k), predict_ms(stages, k, p));
}

TEST(CostModelInterface, IsChosenByProfile) {
  const Profile cpu = profile("cpu_avx512"), gpu = profile("cuda_sm90");
  auto c = make_cost_model(sgemm_stages(cpu), cpu, {});
  auto g = make_cost_model(sgemm_stages(gpu), gpu, {});
  EXPECT_NE(dynamic_cast<LearnedRanking*>(c.get()), nullptr);
  EXPECT_NE(dynamic_cast<PtxasCostModel*>(g.get()), nullptr);
}

}  // namespace
}  // namespace mlk::tune
