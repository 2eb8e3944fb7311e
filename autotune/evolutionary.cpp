// EvolutionarySearch (search_strategy.h): the rules' seeds, Halide's
// autoschedulers, then evolution over the rules' knobs.
#include <algorithm>
#include <set>

#include "autotune/search_strategy.h"
#include "autotune/tuner.h"
#include "base/log.h"

namespace mlk::tune {

EvolutionarySearch::EvolutionarySearch(std::vector<StageInfo> stages, Profile p, uint64_t seed, bool autoschedulers,
                                       CostModel& cost, std::string label)
    : stages_(std::move(stages)), p_(std::move(p)), rng_(seed), space_(knob_space(stages_, p_)),
      autoschedulers_(autoschedulers), cost_(cost), label_(std::move(label)) {
  // The rules' own best guesses (register-tiled GEMM, fused attention, fused
  // vectorised row reductions), so that evolution starts from them; before
  // the autoschedulers, whose compilation alone can take a minute on a large
  // pipeline.
  for (const Knobs& k : seed_knobs(stages_, p_)) group_.push_back({"rule-seed", k, schedule_from_knobs(stages_, k, p_)});
}

std::vector<Candidate> EvolutionarySearch::autoscheduler_candidates() const {
  std::vector<Candidate> autos;
  if (!autoschedulers_ || p_.is_gpu()) return autos;
  int stages = 0;
  for (const StageInfo& st : stages_) stages += st.kind != StageInfo::Kind::kInput;
  for (const std::string& name : autoschedulers_for(false)) {
    AutoschedulerBudget b = autoscheduler_budget(name, stages);
    if (!b.tried_by_tune) {
      log_linef(LogLevel::kNote, "[tune %s] %s", label_.c_str(), b.why_not.c_str());
      continue;
    }
    Schedule s;
    s.autoscheduler = name;
    autos.push_back({name, {}, s});
  }
  return autos;
}

std::vector<Candidate> EvolutionarySearch::next(const SearchHistory& h) {
  if (phase_ == Phase::kSeeds && next_ >= group_.size()) {
    phase_ = Phase::kAutoschedulers;
    group_ = autoscheduler_candidates();
    next_ = 0;
  }
  if (phase_ == Phase::kAutoschedulers && next_ >= group_.size()) phase_ = Phase::kEvolution;
  if (phase_ == Phase::kSeeds || phase_ == Phase::kAutoschedulers)
    return std::vector<Candidate>(group_.begin() + static_cast<std::ptrdiff_t>(next_), group_.end());
  if (phase_ != Phase::kEvolution) return {};
  if (pending_.empty() && !next_batch(h)) {
    if (++stale_ >= 5) phase_ = Phase::kDone;
    return {};
  }
  std::vector<Candidate> picks;
  for (const auto& [origin, k] : pending_) picks.push_back({origin, k, schedule_from_knobs(stages_, k, p_)});
  return picks;
}

void EvolutionarySearch::taken(size_t n, bool any_evaluated) {
  if (phase_ != Phase::kEvolution) {
    next_ += n;
    return;
  }
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(std::min(n, pending_.size())));
  batch_any_ = any_evaluated || batch_any_;
  if (pending_.empty()) {
    stale_ = batch_any_ ? 0 : stale_ + 1;
    if (stale_ >= 5) phase_ = Phase::kDone;
  }
}

// 32 mutations and crossovers of the best four, ranked by the cost model;
// the two best-ranked are exploited and one other explored at random. False
// when the batch holds nothing new.
bool EvolutionarySearch::next_batch(const SearchHistory& h) {
  const Knobs def = default_knobs(stages_, p_);
  std::vector<const Trial*> pool;
  for (const auto& t : h.trials())
    if (t.m.ok() && !t.knobs.empty()) pool.push_back(&t);
  std::sort(pool.begin(), pool.end(), [&](const Trial* a, const Trial* b) { return h.score(*a) < h.score(*b); });
  if (pool.size() > 4) pool.resize(4);
  if (pool.empty()) pool.push_back(nullptr);
  std::vector<std::pair<double, std::pair<std::string, Knobs>>> batch;
  std::set<std::string> batch_seen;
  for (int i = 0; i < 32; ++i) {
    const Trial* pa = pool[rng_() % pool.size()];
    Knobs base = pa ? pa->knobs : def;
    bool cross = pool.size() > 1 && rng_() % 4 == 0;
    Knobs k = cross ? crossover(base, pool[rng_() % pool.size()]->knobs) : mutate(base);
    std::string hash = schedule_from_knobs(stages_, k, p_).hash();
    if (h.seen(hash) || !batch_seen.insert(hash).second) continue;
    batch.push_back({0.0, {cross ? "crossover" : "mutation", k}});
  }
  if (batch.empty()) return false;
  std::vector<Knobs> knobs;
  for (const auto& b : batch) knobs.push_back(b.second.second);
  const std::vector<double> scores = cost_.rank(knobs, h.trials());
  for (size_t i = 0; i < batch.size() && i < scores.size(); ++i) batch[i].first = scores[i];
  std::sort(batch.begin(), batch.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<size_t> pick = {0};
  if (batch.size() > 1) pick.push_back(1);
  if (batch.size() > 2) pick.push_back(2 + rng_() % (batch.size() - 2));
  for (size_t i : pick) pending_.push_back(batch[i].second);
  batch_any_ = false;
  return true;
}

Knobs EvolutionarySearch::mutate(const Knobs& k) {
  Knobs out = k;
  std::vector<std::pair<std::string, std::string>> choices;
  for (const auto& [stage, knobs] : space_)
    for (const auto& [name, values] : knobs)
      if (values.size() > 1) choices.push_back({stage, name});
  if (choices.empty()) return out;
  int n = 1 + static_cast<int>(rng_() % 2);
  for (int i = 0; i < n; ++i) {
    const auto& [stage, name] = choices[rng_() % choices.size()];
    const auto& values = space_.at(stage).at(name);
    out[stage][name] = values[rng_() % values.size()];
  }
  return out;
}

Knobs EvolutionarySearch::crossover(const Knobs& a, const Knobs& b) {
  Knobs out = a;
  for (const auto& [stage, knobs] : b)
    if (rng_() % 2) out[stage] = knobs;
  return out;
}

}  // namespace mlk::tune
