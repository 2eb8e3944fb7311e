// Internal to scheduler/: what the compile driver (scheduler/compile.h) hands
// Kernel for the JIT. Includes Halide.h (through lower.h); only scheduler/
// includes it.
#pragma once

#include "scheduler/lower.h"

namespace mlk {

struct JitPipeline {
  // The lowered algorithm: its ImageParams and dimension Params are how a run
  // binds inputs and extents.
  lower::Pipeline lowered;
  Halide::Pipeline pipeline;  // scheduled and JIT-compiled for `target`
  Halide::Target target;
  Schedule schedule;          // as applied (never with packed weights: compile_jit)
};

}  // namespace mlk
