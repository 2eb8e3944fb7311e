#include "autotune/cost_model_interface.h"

#include "autotune/cost_model.h"
#include "autotune/gpu_cost_model.h"
#include "autotune/tuner.h"
#include "base/log.h"

namespace mlk::tune {

double AnalyticCostModel::predict(const Knobs& k) const { return predict_ms(stages_, k, p_); }

std::vector<double> AnalyticCostModel::rank(const std::vector<Knobs>& batch, const std::deque<Trial>&) {
  std::vector<double> out;
  out.reserve(batch.size());
  for (const Knobs& k : batch) out.push_back(predict(k));
  return out;
}

std::vector<double> LearnedRanking::rank(const std::vector<Knobs>& batch, const std::deque<Trial>& trials) {
  std::vector<double> scores = AnalyticCostModel::rank(batch, trials);
  std::vector<std::vector<float>> x;
  std::vector<double> ms;
  for (const Trial& t : trials)
    if (t.m.ok() && !t.knobs.empty() && t.m.median_ms > 0) {
      x.push_back(schedule_features(stages_, t.knobs, p_));
      ms.push_back(t.m.median_ms);
    }
  if (x.size() < kMinTrials) return scores;
  if (x.size() != learned_.trained_on()) {
    Status st = learned_.fit(x, ms);
    if (!st.ok()) {
      log_linef(LogLevel::kWarning, "[tune %s] %s; ranking with the analytic model", label_.c_str(), st.message().c_str());
      return scores;
    }
    if (progress_ && !said_)
      log_linef(LogLevel::kNote, "[tune %s] ranking candidates with the cost model learned from %zu measured trials",
                label_.c_str(), x.size());
    said_ = true;
  }
  std::vector<std::vector<float>> rows;
  for (const Knobs& k : batch) rows.push_back(schedule_features(stages_, k, p_));
  auto pred = learned_.predict(rows);
  if (!pred.ok()) return scores;
  return *pred;
}

void PtxasCostModel::complete(const Knobs& k, Measurement& m) const {
  if (m.manifest_json.empty() || !m.ok()) return;
  m.median_ms = k.empty() ? 0 : predict_gpu(stages_, k, p_, elem_bytes_, ptxas_kernels(m.manifest_json)).ms;
}

std::unique_ptr<CostModel> make_cost_model(const std::vector<StageInfo>& stages, const Profile& p,
                                           const CostModelOptions& o) {
  if (p.is_gpu()) return std::make_unique<PtxasCostModel>(stages, p, o.elem_bytes);
  return std::make_unique<LearnedRanking>(stages, p, o.seed, o.label, o.progress);
}

}  // namespace mlk::tune
