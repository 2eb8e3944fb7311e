#include "autotune/convergence.h"

namespace mlk::tune {

std::vector<CurvePoint> best_so_far(const std::vector<Trial>& log) {
  std::vector<CurvePoint> out;
  for (const Trial& t : log) {
    if (!t.m.ok() || t.m.median_ms <= 0) continue;
    if (out.empty() || t.m.median_ms < out.back().best_ms)
      out.push_back({out.empty() || t.at_s > out.back().at_s ? t.at_s : out.back().at_s, t.m.median_ms});
  }
  return out;
}

double best_at(const std::vector<CurvePoint>& curve, double t) {
  double best = 0;
  for (const CurvePoint& p : curve)
    if (p.at_s <= t) best = p.best_ms;
  return best;
}

double seconds_to_within(const std::vector<CurvePoint>& curve, double fraction) {
  if (curve.empty()) return -1;
  const double limit = curve.back().best_ms * (1 + fraction);
  for (const CurvePoint& p : curve)
    if (p.best_ms <= limit) return p.at_s;
  return curve.back().at_s;
}

}  // namespace mlk::tune
