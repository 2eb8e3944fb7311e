#include "autotune/gpu_cost_model.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include "base/json.h"

namespace mlk::tune {

namespace {

using Kind = StageInfo::Kind;

double product(const std::vector<int64_t>& v) {
  double p = 1;
  for (int64_t x : v) p *= std::max<int64_t>(1, x);
  return p;
}

// The kernel that computes stage `s`: Halide names kernels after the Func
// ("kernel_<stage>_s0_..."); the heaviest kernel when no name matches.
PtxasKernel kernel_of(const StageInfo& s, const std::vector<PtxasKernel>& kernels) {
  PtxasKernel worst;
  for (const auto& k : kernels) {
    if (k.name.find(s.name + "_s") != std::string::npos) return k;
    if (k.registers > worst.registers) worst = k;
  }
  return worst;
}

// Multiply-adds per ms on the CUDA cores (Halide 21 emits no tensor-core
// code) and DRAM bytes per ms, by compute capability.
double peak_macs_per_ms(const Profile& p) { return p.sm_count * 128.0 * 1.7e6; }
double dram_bytes_per_ms(const Profile& p) { return p.compute_capability >= 90 ? 3.35e9 : 1.9e9; }

}  // namespace

std::vector<PtxasKernel> ptxas_kernels(const std::string& manifest_json) {
  std::vector<PtxasKernel> out;
  auto m = parse_json(manifest_json);
  if (!m.is_object() || !m.contains("ptxas") || !m["ptxas"].is_object() || !m["ptxas"].contains("kernels")) return out;
  for (const auto& k : m["ptxas"]["kernels"]) {
    if (!k.is_object()) continue;
    PtxasKernel p;
    p.name = k.value("kernel", "");
    p.registers = k.value("registers", 0);
    p.shared_bytes = k.value("shared_bytes", 0);
    p.spill_bytes = k.value("spill_stores", 0) + k.value("spill_loads", 0);
    out.push_back(p);
  }
  return out;
}

double occupancy(int threads_per_block, int registers, int shared_bytes, const Profile& p) {
  const int warp = p.warp_size > 0 ? p.warp_size : 32;
  const int max_threads_sm = 2048;  // sm_80 and sm_90
  const int max_warps_sm = max_threads_sm / warp;
  if (threads_per_block <= 0 || threads_per_block > std::max(1, p.max_threads_per_block)) return 0;
  const int warps = (threads_per_block + warp - 1) / warp;
  int blocks = std::min(32, max_warps_sm / warps);
  if (registers > 0) {
    const int per_warp = ((registers * warp + 255) / 256) * 256;  // allocation unit: 256 registers
    blocks = std::min(blocks, p.registers_per_sm / (per_warp * warps));
  }
  if (shared_bytes > 0) {
    if (shared_bytes > p.shared_mem_per_block) return 0;
    blocks = std::min(blocks, p.shared_mem_per_sm / shared_bytes);
  }
  return std::max(0, blocks) * warps / static_cast<double>(max_warps_sm);
}

GpuEstimate predict_gpu(const std::vector<StageInfo>& stages, const Knobs& knobs, const Profile& p, int elem_bytes,
                        const std::vector<PtxasKernel>& kernels) {
  GpuEstimate e;
  const double macs_ms = peak_macs_per_ms(p), bytes_ms = dram_bytes_per_ms(p);
  for (const auto& s : stages) {
    if (s.kind == Kind::kInput || s.kind == Kind::kOperand) continue;
    auto it = knobs.find(s.name);
    const KnobValues k(it == knobs.end() ? nullptr : &it->second, s, p);
    const double elems = product(s.extents), red = product(s.rextents);
    const bool tiled = s.kind == Kind::kMatmul && k[Knob::kSmem];
    const double t = static_cast<double>(k[Knob::kTile]);
    const int threads = tiled ? static_cast<int>(t * t) : static_cast<int>(k[Knob::kTx] * k[Knob::kTy]);
    const PtxasKernel kern = kernel_of(s, kernels);
    double occ = occupancy(threads, kern.registers, kern.shared_bytes, p);
    if (occ <= 0) occ = 1.0 / 64;  // does not fit: ptxas or the launch fails; rank it last but finite
    e.min_occupancy = std::min(e.min_occupancy, occ);
    // Wave quantisation: the last wave of blocks leaves SMs idle.
    const double blocks = std::max(1.0, std::ceil(elems / std::max(1, threads)));
    const double per_wave = std::max(1.0, occ * 2048 / std::max(1, threads)) * p.sm_count;
    const double util = blocks / (std::ceil(blocks / per_wave) * per_wave);
    // Latency hiding grows with occupancy up to about half the warp slots.
    const double hide = std::min(1.0, occ / 0.5);
    // Bytes from DRAM: each element read once and written once; a matmul
    // reads its operands once per output tile (shared-memory tiles of t, or
    // L1 reuse across a block of tx x ty without them).
    double bytes = elems * elem_bytes * (s.kind == Kind::kOutput ? 2 : 1);
    double compute_eff = 0.35;
    if (s.kind == Kind::kMatmul) {
      // Without shared memory, L1 keeps about a quarter of a block's square of loads.
      const double reuse = tiled ? t : std::sqrt(static_cast<double>(threads)) / 4;
      bytes += 2 * elems * red * elem_bytes / std::max(1.0, reuse);
      compute_eff = tiled ? 0.6 : 0.25;
    } else if (red > 1) {
      bytes += elems * red * elem_bytes;  // a row reduction reads its rows
    }
    double ms = std::max(elems * red / (macs_ms * compute_eff * hide * util), bytes / (bytes_ms * std::min(1.0, occ / 0.25)));
    if (kern.spill_bytes > 0) ms *= 1 + kern.spill_bytes / 256.0;  // local-memory traffic per thread
    e.ms += ms + 0.004;  // a launch
  }
  return e;
}

}  // namespace mlk::tune
