// How much memory running a fn at a shape takes, estimated before anything is
// allocated, so that a shape too large for this machine is refused with a
// message (exit 1) rather than ending in std::bad_alloc or the OOM killer.
// Halide-free.
#pragma once

#include <cstdint>
#include <string>

#include "lang/bind.h"
#include "lang/ir.h"
#include "base/status.h"

namespace mlk {

// Physical memory of this machine in bytes (sysconf), 0 when unknown.
int64_t physical_memory_bytes();

// "12.0 TiB", "512 MiB", "100 bytes": powers of 1024.
std::string human_memory(double bytes);

// Bytes of one set of f's parameters and of one result at `dims`. A dimension
// without a value (or an extent below 0) counts as 0; a total that does not fit
// in 64 bits is reported through `overflow` (and the sums then saturate).
struct TensorBytes {
  int64_t inputs = 0;  // all parameters together
  int64_t result = 0;
  bool overflow = false;
};
TensorBytes tensor_bytes(const ir::Function& f, const DimEnv& dims);

// The input sets the autotuner keeps at `dims` besides the verification set:
// as many as fit in ~256 MiB, 1 to 3 (autotune/tuner.cpp, prepare_measurement).
int tuner_timing_sets(int64_t input_bytes);

// What a run needs: `input_sets` copies of the parameters and `results`
// results. InvalidArgument when that exceeds `available` bytes (default:
// physical_memory_bytes(); 0 means unknown and passes), naming `label` (e.g.
// "--dims M=1000000,K=1000000,N=1000000"), the estimate and the memory:
//   LABEL needs about 10.9 TiB for the inputs and outputs (...); this machine
//   has 23.4 GiB of memory; choose smaller dimensions
Status check_memory_budget(const ir::Function& f, const DimEnv& dims, int input_sets, int results,
                           const std::string& label, int64_t available = -1);

// The autotuner's budget: tuner_timing_sets() + 1 verification set of inputs,
// and 2 results (the reference and a candidate's output).
Status check_tuning_memory(const ir::Function& f, const DimEnv& dims, const std::string& label,
                           int64_t available = -1);

// "M=1000000,K=1000000": dims as --dims takes them (sorted by name).
std::string dims_label(const DimEnv& dims);

}  // namespace mlk
