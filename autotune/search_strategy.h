// The SearchStrategy interface: which candidates the tuner tries, in which
// order. The tuner's loop (tuner.cpp) evaluates them (measures, verifies,
// logs, resumes from a log); the strategy proposes them.
//
// The contract: next() returns the candidates to evaluate next, in order,
// those of the current group that the loop has not taken yet first; the loop
// evaluates a prefix of them (as many as its budget and measurer allow) and
// reports how many with taken(), before it calls next() again. An empty
// next() with done() false means "nothing this time, ask again" (a batch that
// held nothing new). A strategy may skip what the history has seen, but need
// not: the loop evaluates a schedule once, and counts a seen one as taken.
// The loop calls next() only with budget left, so a strategy's random draws
// depend on the candidates' outcomes, never on the clock.
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "autotune/cost_model_interface.h"
#include "scheduler/rules.h"
#include "targets/profile.h"

namespace mlk::tune {

struct Trial;

struct Candidate {
  std::string origin;  // "naive", "rule-seed", "Adams2019", "mutation", "crossover", ...
  Knobs knobs;         // empty for an autoscheduler's
  Schedule sched;
};

// What a strategy may read of the search so far (the loop's).
class SearchHistory {
 public:
  virtual const std::deque<Trial>& trials() const = 0;
  virtual bool seen(const std::string& schedule_hash) const = 0;
  // What ranks trials, lower first: the measured time, or an estimate where
  // nothing is measured.
  virtual double score(const Trial& t) const = 0;

 protected:
  ~SearchHistory() = default;
};

class SearchStrategy {
 public:
  virtual ~SearchStrategy() = default;
  virtual std::vector<Candidate> next(const SearchHistory& h) = 0;
  // `n` candidates of the last next() were taken (evaluated, or skipped as
  // seen); `any_evaluated`: at least one of them was evaluated.
  virtual void taken(size_t n, bool any_evaluated) = 0;
  virtual bool done() const = 0;
};

// The tuner's search: the rules' seeds (seed_knobs), then Halide's
// autoschedulers (with `autoschedulers`, on CPU profiles: each one whose
// autoscheduler_budget lets `mlk tune` try it, the others named once in a
// note prefixed by `label`), then evolution over the rules' knobs: batches of 32 mutations and
// crossovers of the best four rule trials (the default knobs while none
// passed), less those seen, ranked by `cost`; the two best-ranked are
// proposed and one other at random. Done after 5 batches in a row evaluated
// nothing new. Deterministic for a seed and the trials' outcomes.
class EvolutionarySearch : public SearchStrategy {
 public:
  EvolutionarySearch(std::vector<StageInfo> stages, Profile p, uint64_t seed, bool autoschedulers, CostModel& cost,
                     std::string label);
  std::vector<Candidate> next(const SearchHistory& h) override;
  void taken(size_t n, bool any_evaluated) override;
  bool done() const override { return phase_ == Phase::kDone; }

 private:
  enum class Phase { kSeeds, kAutoschedulers, kEvolution, kDone };
  std::vector<Candidate> autoscheduler_candidates() const;
  bool next_batch(const SearchHistory& h);
  Knobs mutate(const Knobs& k);
  Knobs crossover(const Knobs& a, const Knobs& b);

  std::vector<StageInfo> stages_;
  Profile p_;
  std::mt19937_64 rng_;
  KnobSpace space_;
  bool autoschedulers_;
  CostModel& cost_;
  std::string label_;
  Phase phase_ = Phase::kSeeds;
  std::vector<Candidate> group_;  // the seeds, or the autoschedulers
  size_t next_ = 0;               // the next of group_
  std::deque<std::pair<std::string, Knobs>> pending_;  // the current batch's picks not yet taken
  int stale_ = 0;  // batches in a row that evaluated nothing new
  bool batch_any_ = false;
};

// Proposes a fixed list of candidates, in order (a tuning log's trials, a
// test's), then is done.
class ReplayStrategy : public SearchStrategy {
 public:
  explicit ReplayStrategy(std::vector<Candidate> candidates) : candidates_(std::move(candidates)) {}
  std::vector<Candidate> next(const SearchHistory& h) override;
  void taken(size_t n, bool any_evaluated) override;
  bool done() const override { return next_ >= candidates_.size(); }

 private:
  std::vector<Candidate> candidates_;
  size_t next_ = 0;
};

// The candidates of `trials` in trial order (TuneResult::log, a log's), for
// a ReplayStrategy.
std::vector<Candidate> replay_candidates(const std::vector<Trial>& trials);

}  // namespace mlk::tune
