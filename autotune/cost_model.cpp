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

int64_t knob(const Knobs& k, const std::string& stage, const char* name, int64_t def) {
  auto s = k.find(stage);
  if (s == k.end()) return def;
  auto it = s->second.find(name);
  return it == s->second.end() ? def : it->second;
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
    if (s.kind == Kind::kOperand && !knob(knobs, s.name, "mat", 0)) continue;  // inline: costed in its matmul
    const double elems = product(s.extents), red = product(s.rextents);
    double eff = 0.1;
    double bytes = elems * 4 * (s.kind == Kind::kOutput ? 2 : 1);
    if (p.is_gpu()) {
      double threads = static_cast<double>(knob(knobs, s.name, "tx", 32) * knob(knobs, s.name, "ty", 8));
      if (s.kind == Kind::kMatmul && knob(knobs, s.name, "smem", 0)) {
        double t = static_cast<double>(knob(knobs, s.name, "tile", 16));
        threads = t * t;
        bytes /= t;  // each staged element is reused by a tile's worth of threads
        eff = std::min(1.0, threads / 256) * 0.6;
      } else {
        eff = std::min(1.0, threads / 256) * 0.3;
      }
    } else if (s.kind == Kind::kMatmul) {
      double acc = static_cast<double>(knob(knobs, s.name, "tn", 2) * knob(knobs, s.name, "tm", 4));
      double regs = p.vector_bits >= 512 ? 32 : 16;
      eff = acc <= regs - 4 ? 0.12 + 0.5 * std::min(1.0, acc / 16) : 0.08;
      if (knob(knobs, s.name, "unroll", 1)) eff *= 1.1;
      if (knob(knobs, s.name, "at_output", 0)) eff *= 1.8;  // accumulators stay in registers
      bytes += elems * red * 4 / std::max(1.0, std::sqrt(acc * lanes));
    } else if (s.kind != Kind::kOutput) {
      eff = 0.15;
      if (knob(knobs, s.name, "fuse", 0)) bytes *= 0.3;  // rows stay in cache
      if (knob(knobs, s.name, "fuse", 0) == 2) bytes *= 0.5;
    } else {
      if (knob(knobs, s.name, "vec", 1) == 2) eff *= 1.05;
    }
    double par = (!p.is_gpu() && s.kind == Kind::kOutput && !knob(knobs, s.name, "par", 1)) ? cores : 1;
    total += par * std::max(elems * red / (peak * eff), bytes / bandwidth);
  }
  return total;
}

}  // namespace mlk::tune
