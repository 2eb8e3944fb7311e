// A cost model learned from measured trials: gradient-boosted regression
// trees (XGBoost, the Debian library) fitted to log(median ms) of the trials
// a search has measured (resumed ones from its tuning log included), used
// by the tuner to rank mutated candidates before any is compiled once
// enough trials are measured (the analytic model of cost_model.h ranks them
// before that). Deterministic: one thread, exact tree method, a fixed seed,
// so the same trials give the same ranking. XGBoost stays in
// learned_cost_model.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "scheduler/rules.h"
#include "targets/profile.h"

namespace mlk::tune {

// A candidate's features: per stage (in table order) the value of every
// knob registered for its kind on the profile (the registry default where
// `k` leaves it out), then log(1 + the analytic prediction in ms). Always
// the same length for the same stage table and profile.
std::vector<float> schedule_features(const std::vector<StageInfo>& stages, const Knobs& k, const Profile& p);

class LearnedCostModel {
 public:
  explicit LearnedCostModel(uint64_t seed = 1);
  ~LearnedCostModel();
  LearnedCostModel(const LearnedCostModel&) = delete;
  LearnedCostModel& operator=(const LearnedCostModel&) = delete;

  // Fits a fresh model to rows `x` (equal lengths, at least one column)
  // with measured times `ms` (finite, > 0), one per row. InvalidArgument
  // naming what is wrong otherwise; Internal with XGBoost's message if it
  // fails. A failed fit leaves the previous model in place.
  Status fit(const std::vector<std::vector<float>>& x, const std::vector<double>& ms);
  // Predicted ms per row; InvalidArgument before a successful fit and for
  // a row of another length than the fit's.
  Expected<std::vector<double>> predict(const std::vector<std::vector<float>>& x) const;
  bool trained() const { return booster_ != nullptr; }
  size_t trained_on() const { return rows_; }

 private:
  uint64_t seed_;
  void* booster_ = nullptr;  // BoosterHandle
  size_t columns_ = 0, rows_ = 0;
};

}  // namespace mlk::tune
