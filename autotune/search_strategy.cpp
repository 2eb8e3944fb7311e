#include "autotune/search_strategy.h"

#include <algorithm>

#include "autotune/tuner.h"

namespace mlk::tune {

std::vector<Candidate> ReplayStrategy::next(const SearchHistory&) {
  return std::vector<Candidate>(candidates_.begin() + static_cast<std::ptrdiff_t>(std::min(next_, candidates_.size())),
                                candidates_.end());
}

void ReplayStrategy::taken(size_t n, bool) { next_ = std::min(candidates_.size(), next_ + n); }

std::vector<Candidate> replay_candidates(const std::vector<Trial>& trials) {
  std::vector<Candidate> out;
  for (const Trial& t : trials) out.push_back({t.origin, t.knobs, t.schedule});
  return out;
}

}  // namespace mlk::tune
