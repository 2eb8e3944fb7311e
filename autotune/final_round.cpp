#include "autotune/final_round.h"

#include <algorithm>
#include <string>

#include "base/stats.h"

namespace mlk::tune {

namespace {

// The candidates of the first round: the best three and the default, less
// those drift could not make the winner (each costs a compile: 10-15 s for a
// MiniLM layer); the default, if far behind, keeps its search time for the
// report. Not when the search times came from remote workers
// (final_round_here): then a worker's report must not decide which
// candidates this machine measures.
std::vector<const Trial*> contenders(const FinalRoundRequest& r) {
  std::vector<const Trial*> top;
  for (const auto& t : *r.trials)
    if (t.m.ok()) top.push_back(&t);
  std::sort(top.begin(), top.end(), [&](const Trial* a, const Trial* b) { return r.score(*a) < r.score(*b); });
  if (top.size() > 3) top.resize(3);
  const Trial* def = r.trials->empty() || !r.trials->front().m.ok() ? nullptr : &r.trials->front();
  if (def && std::find(top.begin(), top.end(), def) == top.end()) top.push_back(def);
  if (!top.empty() && !r.final_round_here) {
    const double lead = r.score(*top.front());
    std::erase_if(top, [&](const Trial* t) { return r.score(*t) > lead * kFinalRoundSpread; });
  }
  return top;
}

}  // namespace

Expected<FinalRound> final_round(const FinalRoundRequest& r) {
  FinalRound out;
  std::vector<const Trial*> top = contenders(r);
  if (top.empty() || (top.size() < 2 && !r.final_round_here)) return out;
  MeasureSetup longer = *r.setup;
  longer.min_time_s = 1.0;
  longer.min_reps = 10;
  longer.max_reps = 500;
  longer.cutoff_ms = 0;
  longer.compile_timeout_s = r.compile_limit_s;
  // Two rounds, interleaved, so drift hits all alike; the second only for
  // the candidates within kCloseCall of the first round's best (a lead
  // larger than that is not drift), so a clear winner costs one compile.
  constexpr double kCloseCall = 1.05;
  for (int round = 0; round < 2; ++round) {
    if (round == 1) {
      double lead = 0;
      for (const auto& [t, ms] : out.ms) lead = lead == 0 ? ms : std::min(lead, ms);
      std::vector<const Trial*> close;
      for (const Trial* t : top)
        if (out.ms.count(t) && out.ms[t] <= lead * kCloseCall) close.push_back(t);
      if (close.size() < 2) break;
      top = close;
    }
    for (const Trial* t : top) {
      std::string h = t->schedule.hash() + "#" + std::to_string(round);
      Measurement m;
      auto it = r.resumed ? r.resumed->find(h) : FinalTimes::const_iterator{};
      if (r.resumed && it != r.resumed->end()) {
        m.verdict = Measurement::Verdict::kOk;
        m.times_ms = it->second;
      } else {
        // A candidate far slower than the others (often the default of a
        // large pipeline, a second a run) needs few runs to be placed:
        // about kFinalRoundRunS of runs, at least 3.
        MeasureSetup setup = longer;
        if (t->m.median_ms > 0)
          setup.min_reps = static_cast<int>(std::clamp(kFinalRoundRunS * 1e3 / t->m.median_ms, 3.0, 10.0));
        auto measured = r.measurer->measure(setup, t->schedule);
        if (!measured.ok()) return measured.status();
        m = std::move(*measured);
        if (r.log && m.ok()) r.log->AppendFinal(h, m.times_ms);
      }
      if (!m.ok() || m.times_ms.empty()) continue;
      const double med = median(m.times_ms);
      auto& best = out.ms[t];
      best = best == 0 ? med : std::min(best, med);
      out.times[t] = m.times_ms;
    }
  }
  for (const auto& [t, ms] : out.ms)
    if (!out.winner || ms < out.winner_ms) {
      out.winner = t;
      out.winner_ms = ms;
    }
  return out;
}

}  // namespace mlk::tune
