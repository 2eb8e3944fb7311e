// The cost model of CUDA candidates where no GPU can measure them: an
// estimate from what ptxas reports for each kernel (registers, shared memory
// per block, spills), the block shape the knobs choose (threads per block),
// the bytes each stage moves at the fn's dtype, and the tiling (shared-memory
// tiles reuse what a block loads). It tells candidates apart; it does not
// predict absolute times well, and every result it ranks says
// `measured: false`.
//
// Occupancy is the CUDA occupancy calculation: resident blocks per SM are
// limited by threads (max_threads_per_sm), registers (allocated per warp in
// units of 256), shared memory (shared_mem_per_sm) and 32 blocks per SM; the
// grid is quantised into waves over sm_count SMs.
#pragma once

#include <string>
#include <vector>

#include "scheduler/rules.h"
#include "targets/profile.h"

namespace mlk::tune {

// One kernel of ptxas -v's report (artifact/build.cpp, parse_ptxas).
struct PtxasKernel {
  std::string name;
  int registers = 0;
  int shared_bytes = 0;
  int spill_bytes = 0;  // stores + loads
};

// The `ptxas.kernels` array of an artifact's manifest.json (empty when absent).
std::vector<PtxasKernel> ptxas_kernels(const std::string& manifest_json);

// The fraction of an SM's warp slots a kernel of this block shape fills (0..1];
// 0 when one block cannot fit (too many threads, registers or shared bytes).
double occupancy(int threads_per_block, int registers, int shared_bytes, const Profile& p);

struct GpuEstimate {
  double ms = 0;
  double min_occupancy = 1;  // over the stages' kernels
};

// `elem_bytes`: the storage size of the fn's dtype (2 for F16, 4 for F32).
GpuEstimate predict_gpu(const std::vector<StageInfo>& stages, const Knobs& knobs, const Profile& p, int elem_bytes,
                        const std::vector<PtxasKernel>& kernels);

}  // namespace mlk::tune
