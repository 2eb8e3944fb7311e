#include "autotune/cost_model.h"

#include <algorithm>
#include <cmath>

namespace mlk::tune {

namespace {

double product(const std::vector<int64_t>& v) {
  double p = 1;
  for (int64_t x : v) p *= std::max<int64_t>(1, x);
  return p;
}

// The knob values of stage `s` (the knob registry's defaults where unset).
KnobValues knobs_of(const Knobs& k, const StageInfo& s, const Profile& p) {
  auto it = k.find(s.name);
  return KnobValues(it == k.end() ? nullptr : &it->second, s, p);
}

}  // namespace

double predict_ms(const std::vector<StageInfo>& stages, const Knobs& knobs, const Profile& p) {
  using Kind = StageInfo::Kind;
  const double lanes = vector_lanes(p);
  const double cores = p.is_gpu() ? p.sm_count : std::max(1, p.cores > 0 ? p.cores : 2);
  // Peak multiply-adds per ms, and memory bytes per ms.
  const double peak = p.is_gpu() ? cores * 128 * 2 * 1.5e6 : cores * lanes * 2 * 2 * 2.5e6;
  const double bandwidth = p.is_gpu() ? 2.0e9 : 1.5e7 * cores;
  double total = 0;
  for (const auto& s : stages) {
    if (s.kind == Kind::kInput) continue;
    const KnobValues k = knobs_of(knobs, s, p);
    if (s.kind == Kind::kOperand && !k[Knob::kMat]) continue;  // inline: costed in its matmul
    const double elems = product(s.extents), red = product(s.rextents);
    double eff = 0.1;
    double bytes = elems * 4 * (s.kind == Kind::kOutput ? 2 : 1);
    if (p.is_gpu()) {
      double threads = static_cast<double>(k[Knob::kTx] * k[Knob::kTy]);
      if (s.kind == Kind::kMatmul && k[Knob::kSmem]) {
        double t = static_cast<double>(k[Knob::kTile]);
        threads = t * t;
        bytes /= t;  // each staged element is reused by a tile's worth of threads
        eff = std::min(1.0, threads / 256) * 0.6;
      } else {
        eff = std::min(1.0, threads / 256) * 0.3;
      }
    } else if (s.kind == Kind::kMatmul) {
      double acc = static_cast<double>(k[Knob::kTn] * k[Knob::kTm]);
      double regs = p.vector_bits >= 512 ? 32 : 16;
      eff = acc <= regs - 4 ? 0.12 + 0.5 * std::min(1.0, acc / 16) : 0.08;
      if (k[Knob::kUnroll]) eff *= 1.1;
      if (k[Knob::kAtOutput]) eff *= 1.8;  // accumulators stay in registers
      bytes += elems * red * 4 / std::max(1.0, std::sqrt(acc * lanes));
    } else if (s.kind != Kind::kOutput) {
      eff = 0.15;
      if (k[Knob::kFuse]) bytes *= 0.3;  // rows stay in cache
      if (k[Knob::kFuse] == 2) bytes *= 0.5;
    } else {
      if (k[Knob::kVec] == 2) eff *= 1.05;
    }
    double par = (!p.is_gpu() && s.kind == Kind::kOutput && !k[Knob::kPar]) ? cores : 1;
    total += par * std::max(elems * red / (peak * eff), bytes / bandwidth);
  }
  return total;
}

}  // namespace mlk::tune
