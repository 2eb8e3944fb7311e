// The SearchStrategy interface (autotune/search_strategy.h), with a fake
// search history and a fake cost model: the evolutionary search proposes the
// rules' seeds, then the autoschedulers, then batches ranked by its cost
// model, skips what the history has seen, stops after five batches that
// evaluated nothing, and proposes the same candidates for the same seed and
// outcomes; a replay proposes its list in order.
#include <gtest/gtest.h>

#include <deque>
#include <set>

#include "autotune/search_strategy.h"
#include "autotune/tuner.h"
#include "scheduler/kernel.h"
#include "tests/test_support.h"

namespace mlk::tune {
namespace {

// Trials as the loop would record them; the score is the median time.
class FakeHistory : public SearchHistory {
 public:
  const std::deque<Trial>& trials() const override { return trials_; }
  bool seen(const std::string& hash) const override { return all_seen || seen_.count(hash) > 0; }
  double score(const Trial& t) const override { return t.m.median_ms; }

  // Records every candidate as measured, each slower than the last.
  void record(const std::vector<Candidate>& cs) {
    for (const Candidate& c : cs) {
      Trial t;
      t.index = static_cast<int>(trials_.size());
      t.origin = c.origin;
      t.knobs = c.knobs;
      t.schedule = c.sched;
      t.m.verdict = Measurement::Verdict::kOk;
      t.m.median_ms = 1.0 + static_cast<double>(trials_.size());
      seen_.insert(c.sched.hash());
      trials_.push_back(t);
    }
  }
  bool all_seen = false;

 private:
  std::deque<Trial> trials_;
  std::set<std::string> seen_;
};

// Scores a batch by position: reversed, so the last candidate ranks first.
class FakeCost : public CostModel {
 public:
  double predict(const Knobs&) const override { return 1; }
  std::vector<double> rank(const std::vector<Knobs>& batch, const std::deque<Trial>&) override {
    ++calls;
    last = batch;
    std::vector<double> s;
    for (size_t i = 0; i < batch.size(); ++i) s.push_back(static_cast<double>(batch.size() - i));
    return s;
  }
  int calls = 0;
  std::vector<Knobs> last;
};

struct Problem {
  Profile p;
  std::vector<StageInfo> stages;
};

Problem sgemm_setup() {
  auto p = find_profile("cpu_avx2");
  EXPECT_TRUE(p.ok());
  auto st = stage_infos_for(testing_support::sgemm_module(), "sgemm", {{"M", 96}, {"K", 128}, {"N", 80}},
                            p.ok() ? p->halide_target : "host");
  EXPECT_TRUE(st.ok()) << st.status().message();
  return {p.ok() ? *p : Profile{}, st.ok() ? *st : std::vector<StageInfo>{}};
}

// Takes whole groups until `n` evolution candidates were proposed; their hashes.
std::vector<std::string> evolve(uint64_t seed, size_t n) {
  const Problem s = sgemm_setup();
  FakeCost cost;
  FakeHistory h;
  EvolutionarySearch e(s.stages, s.p, seed, false, cost, "sgemm cpu_avx2");
  std::vector<std::string> out;
  while (out.size() < n && !e.done()) {
    std::vector<Candidate> g = e.next(h);
    for (const Candidate& c : g)
      if (c.origin == "mutation" || c.origin == "crossover") out.push_back(c.sched.hash());
    if (g.empty()) continue;
    h.record(g);
    e.taken(g.size(), true);
  }
  return out;
}

TEST(EvolutionarySearch, ProposesTheSeedsThenTheAutoschedulersThenRankedBatches) {
  const Problem s = sgemm_setup();
  FakeCost cost;
  FakeHistory h;
  EvolutionarySearch e(s.stages, s.p, 1, true, cost, "sgemm cpu_avx2");
  const std::vector<Knobs> seeds = seed_knobs(s.stages, s.p);
  std::vector<Candidate> g = e.next(h);
  ASSERT_EQ(g.size(), seeds.size());
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_EQ(g[i].origin, "rule-seed");
    EXPECT_EQ(g[i].knobs, seeds[i]);
    EXPECT_EQ(g[i].sched, schedule_from_knobs(s.stages, seeds[i], s.p));
  }
  // A prefix taken: the rest comes again first.
  if (g.size() > 1) {
    e.taken(1, true);
    EXPECT_EQ(e.next(h).size(), g.size() - 1);
    e.taken(g.size() - 1, true);
  } else {
    e.taken(g.size(), true);
  }
  h.record(g);
  g = e.next(h);
  ASSERT_FALSE(g.empty());
  if (g[0].knobs.empty()) {  // the autoschedulers this pipeline gets
    for (const Candidate& c : g) {
      EXPECT_EQ(c.origin, c.sched.autoscheduler);
      EXPECT_TRUE(c.knobs.empty());
    }
    EXPECT_EQ(cost.calls, 0) << "nothing ranked before evolution";
    h.record(g);
    e.taken(g.size(), true);
    g = e.next(h);
  }
  ASSERT_FALSE(g.empty());
  EXPECT_LE(g.size(), 3u) << "two exploited, one explored";
  EXPECT_EQ(cost.calls, 1);
  EXPECT_EQ(g[0].knobs, cost.last.back()) << "the cost model's best-ranked first";
  for (const Candidate& c : g) {
    EXPECT_TRUE(c.origin == "mutation" || c.origin == "crossover") << c.origin;
    EXPECT_FALSE(h.seen(c.sched.hash())) << "nothing the history has seen";
  }
}

TEST(EvolutionarySearch, TheSameSeedAndOutcomesGiveTheSameCandidates) {
  const std::vector<std::string> a = evolve(7, 12), b = evolve(7, 12);
  ASSERT_EQ(a.size(), 12u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, evolve(8, 12)) << "another seed, another search";
}

TEST(EvolutionarySearch, IsDoneAfterFiveBatchesThatHeldNothingNew) {
  const Problem s = sgemm_setup();
  FakeCost cost;
  FakeHistory h;
  EvolutionarySearch e(s.stages, s.p, 1, false, cost, "sgemm cpu_avx2");
  std::vector<Candidate> seeds = e.next(h);
  e.taken(seeds.size(), true);
  h.all_seen = true;
  int empty = 0;
  while (!e.done() && empty < 100) {
    EXPECT_TRUE(e.next(h).empty());
    ++empty;
  }
  EXPECT_TRUE(e.done());
  EXPECT_EQ(empty, 5);
  EXPECT_EQ(cost.calls, 0) << "an empty batch is not ranked";
}

TEST(EvolutionarySearch, IsDoneAfterFiveBatchesThatEvaluatedNothing) {
  const Problem s = sgemm_setup();
  FakeCost cost;
  FakeHistory h;
  EvolutionarySearch e(s.stages, s.p, 1, false, cost, "sgemm cpu_avx2");
  int groups = 0;
  for (; !e.done() && groups < 100; ++groups) {
    std::vector<Candidate> g = e.next(h);
    if (!g.empty()) e.taken(g.size(), false);  // every one skipped by the loop
  }
  EXPECT_TRUE(e.done());
  EXPECT_LE(groups, 1 + 5) << "the seeds, then five batches";
}

TEST(ReplayStrategy, ProposesItsCandidatesInOrderThenIsDone) {
  const Problem s = sgemm_setup();
  std::vector<Trial> log(3);
  const Knobs def = default_knobs(s.stages, s.p);
  for (int i = 0; i < 3; ++i) {
    log[i].origin = "o" + std::to_string(i);
    log[i].knobs = def;
    log[i].schedule.autoscheduler = "A" + std::to_string(i);
  }
  ReplayStrategy r(replay_candidates(log));
  FakeHistory h;
  std::vector<Candidate> g = r.next(h);
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[1].origin, "o1");
  EXPECT_EQ(g[2].sched.autoscheduler, "A2");
  r.taken(2, true);
  EXPECT_FALSE(r.done());
  g = r.next(h);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].origin, "o2");
  r.taken(1, true);
  EXPECT_TRUE(r.done());
  EXPECT_TRUE(r.next(h).empty());
}

}  // namespace
}  // namespace mlk::tune
