// The learned cost model (see learned_cost_model.h) on XGBoost's C API.
#include "autotune/learned_cost_model.h"

#include <xgboost/c_api.h>

#include <cmath>
#include <string>

#include "autotune/cost_model.h"

namespace mlk::tune {

namespace {

// Boosting rounds and tree depth: small, as the data are (tens of trials).
constexpr int kRounds = 40;

Status xgb(int rc, const char* what) {
  if (rc == 0) return Status::Ok();
  return Status::Internal(std::string("learned cost model: ") + what + ": " + XGBGetLastError());
}

// A dense DMatrix of the rows (owned by the returned handle).
Expected<DMatrixHandle> matrix(const std::vector<std::vector<float>>& x, size_t cols) {
  std::vector<float> flat;
  flat.reserve(x.size() * cols);
  for (const auto& row : x) flat.insert(flat.end(), row.begin(), row.end());
  DMatrixHandle d = nullptr;
  MLK_RETURN_IF_ERROR(xgb(XGDMatrixCreateFromMat(flat.data(), x.size(), cols, NAN, &d), "matrix"));
  return d;
}

}  // namespace

std::vector<float> schedule_features(const std::vector<StageInfo>& stages, const Knobs& k, const Profile& p) {
  std::vector<float> f;
  for (const StageInfo& s : stages) {
    auto it = k.find(s.name);
    KnobValues v(it == k.end() ? nullptr : &it->second, s, p);
    for (const KnobDecl& d : knob_decls())
      if (d.gpu == p.is_gpu() && !d.choices(s.kind).empty()) f.push_back(static_cast<float>(v[d.id]));
  }
  f.push_back(static_cast<float>(std::log1p(predict_ms(stages, k, p))));
  return f;
}

LearnedCostModel::LearnedCostModel(uint64_t seed) : seed_(seed) {}

LearnedCostModel::~LearnedCostModel() {
  if (booster_) XGBoosterFree(static_cast<BoosterHandle>(booster_));
}

Status LearnedCostModel::fit(const std::vector<std::vector<float>>& x, const std::vector<double>& ms) {
  if (x.empty()) return Status::InvalidArgument("learned cost model: no trials to learn from");
  if (x.size() != ms.size())
    return Status::InvalidArgument("learned cost model: " + std::to_string(x.size()) + " rows of features but " +
                                   std::to_string(ms.size()) + " times");
  const size_t cols = x[0].size();
  if (cols == 0) return Status::InvalidArgument("learned cost model: rows without features");
  std::vector<float> labels;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i].size() != cols)
      return Status::InvalidArgument("learned cost model: row " + std::to_string(i) + " has " +
                                     std::to_string(x[i].size()) + " features, row 0 has " + std::to_string(cols));
    if (!std::isfinite(ms[i]) || ms[i] <= 0)
      return Status::InvalidArgument("learned cost model: time " + std::to_string(i) + " is " + std::to_string(ms[i]) +
                                     "; times must be finite and positive");
    labels.push_back(static_cast<float>(std::log(ms[i])));
  }
  auto d = matrix(x, cols);
  if (!d.ok()) return d.status();
  BoosterHandle b = nullptr;
  auto run = [&]() -> Status {
    MLK_RETURN_IF_ERROR(xgb(XGDMatrixSetFloatInfo(*d, "label", labels.data(), labels.size()), "labels"));
    MLK_RETURN_IF_ERROR(xgb(XGBoosterCreate(&*d, 1, &b), "booster"));
    const std::string seed = std::to_string(seed_ % 2147483647);
    for (const auto& [key, value] : {std::pair<const char*, std::string>{"objective", "reg:squarederror"},
                                     {"tree_method", "exact"},
                                     {"max_depth", "4"},
                                     {"eta", "0.3"},
                                     {"min_child_weight", "1"},
                                     {"nthread", "1"},
                                     {"seed", seed},
                                     {"verbosity", "0"}})
      MLK_RETURN_IF_ERROR(xgb(XGBoosterSetParam(b, key, value.c_str()), "parameters"));
    for (int i = 0; i < kRounds; ++i) MLK_RETURN_IF_ERROR(xgb(XGBoosterUpdateOneIter(b, i, *d), "training"));
    return Status::Ok();
  };
  Status st = run();
  XGDMatrixFree(*d);
  if (!st.ok()) {
    if (b) XGBoosterFree(b);
    return st;
  }
  if (booster_) XGBoosterFree(static_cast<BoosterHandle>(booster_));
  booster_ = b;
  columns_ = cols;
  rows_ = x.size();
  return Status::Ok();
}

Expected<std::vector<double>> LearnedCostModel::predict(const std::vector<std::vector<float>>& x) const {
  if (!booster_) return Status::InvalidArgument("learned cost model: not trained yet (fit it first)");
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i].size() != columns_)
      return Status::InvalidArgument("learned cost model: row " + std::to_string(i) + " has " +
                                     std::to_string(x[i].size()) + " features, the model " + std::to_string(columns_));
  if (x.empty()) return std::vector<double>{};
  auto d = matrix(x, columns_);
  if (!d.ok()) return d.status();
  bst_ulong n = 0;
  const float* out = nullptr;
  Status st = xgb(XGBoosterPredict(static_cast<BoosterHandle>(booster_), *d, 0, 0, 0, &n, &out), "prediction");
  std::vector<double> ms;
  if (st.ok())
    for (bst_ulong i = 0; i < n; ++i) ms.push_back(std::exp(static_cast<double>(out[i])));
  XGDMatrixFree(*d);
  if (!st.ok()) return st;
  return ms;
}

}  // namespace mlk::tune
