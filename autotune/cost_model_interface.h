// The CostModel interface: what the search asks of a cost model, over the
// three models of autotune/ (the analytic one, cost_model.h; the one learned
// from measured trials, learned_cost_model.h; the GPU one from ptxas's
// report, gpu_cost_model.h), and the choice of one by profile.
//
// The contract: predict() is a rule candidate's time (ms) from its knobs
// alone, what a trial records as predicted_ms; rank() scores a batch of rule
// candidates (lower first) given every trial so far, and may learn from
// those trials (so it is not const); complete() fills in the time of a
// candidate that was built but not run (Measurement::manifest_json set, see
// BuildOnlyMeasurer) and leaves any other measurement as it is. All are
// deterministic: the same trials and candidates give the same numbers.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "autotune/learned_cost_model.h"
#include "autotune/measure.h"
#include "scheduler/rules.h"
#include "targets/profile.h"

namespace mlk::tune {

struct Trial;

class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual double predict(const Knobs& k) const = 0;
  virtual std::vector<double> rank(const std::vector<Knobs>& batch, const std::deque<Trial>& trials) = 0;
  virtual void complete(const Knobs& k, Measurement& m) const {}
};

// predict_ms (cost_model.h) for predictions and ranks.
class AnalyticCostModel : public CostModel {
 public:
  AnalyticCostModel(std::vector<StageInfo> stages, Profile p) : stages_(std::move(stages)), p_(std::move(p)) {}
  double predict(const Knobs& k) const override;
  std::vector<double> rank(const std::vector<Knobs>& batch, const std::deque<Trial>& trials) override;

 protected:
  std::vector<StageInfo> stages_;
  Profile p_;
};

// The analytic model's predictions; ranks by a LearnedCostModel fitted to the
// measured rule trials (ok, median_ms > 0) once there are kMinTrials of them
// (refitted whenever their number changed), by the analytic model before
// that or when fitting or predicting fails (a warning names why). `label`
// ("FN PROFILE") prefixes its log lines; `progress`: say once when the
// learned model starts ranking.
class LearnedRanking : public AnalyticCostModel {
 public:
  static constexpr size_t kMinTrials = 8;
  LearnedRanking(std::vector<StageInfo> stages, Profile p, uint64_t seed, std::string label, bool progress)
      : AnalyticCostModel(std::move(stages), std::move(p)), learned_(seed), label_(std::move(label)),
        progress_(progress) {}
  std::vector<double> rank(const std::vector<Knobs>& batch, const std::deque<Trial>& trials) override;

 private:
  LearnedCostModel learned_;
  std::string label_;
  bool progress_, said_ = false;
};

// The analytic model's predictions and ranks; complete() estimates a built
// candidate with predict_gpu from its manifest's ptxas report (0 for a
// candidate without knobs). `elem_bytes`: the fn's result dtype's size.
class PtxasCostModel : public AnalyticCostModel {
 public:
  PtxasCostModel(std::vector<StageInfo> stages, Profile p, int elem_bytes)
      : AnalyticCostModel(std::move(stages), std::move(p)), elem_bytes_(elem_bytes) {}
  void complete(const Knobs& k, Measurement& m) const override;

 private:
  int elem_bytes_;
};

struct CostModelOptions {
  uint64_t seed = 1;      // the learned model's
  int elem_bytes = 4;     // the fn's result dtype's size (GPU estimates)
  std::string label;      // "FN PROFILE", for log lines
  bool progress = true;
};

// GPU profiles: PtxasCostModel (no measured times to learn from, and a
// build's ptxas report where nothing runs). CPU profiles: LearnedRanking.
std::unique_ptr<CostModel> make_cost_model(const std::vector<StageInfo>& stages, const Profile& p,
                                           const CostModelOptions& o);

}  // namespace mlk::tune
