// What mlk.testing (python/mlk/testing.py), the migration tooling, needs from
// the runtime: the tolerance envelope of a fn's result at a shape, from the
// numerics policy's table (docs/numerics.md, section 5: lang/compare.h), and
// the concrete parameter shapes at a shape, to generate inputs.
//
// Contract: both read the typed IR only; nothing is compiled or run.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "lang/bind.h"
#include "lang/dtype.h"
#include "lang/ir.h"

namespace mlk::rt {

struct Envelope {
  DType dtype = DType::F32;
  int64_t reduction_length = 1;  // K: the longest reduction (1: elementwise)
  bool through_erf = false;      // the result depends on `erf`
  double rtol = 0, atol = 0;     // |got - want| <= atol + rtol * |want|
};

// tolerance_for(dtype, k), widened to kF64ErfAtol for F64 through erf.
Envelope envelope_for(DType dtype, int64_t reduction_length, bool through_erf);

// The envelope of the result of `f` (of module `m`) at `dims` (every
// dimension variable of `f`): K is the longest reduction of `f` and of every
// fn it calls (the reduced extent of a `sum` or `mean`, `matmul`'s inner
// extent, a `softmax` axis; `reduce_max` and `reduce_min` are exact).
// InvalidArgument when a dimension is missing.
Expected<Envelope> envelope_of(const ir::Module& m, const ir::Function& f, const DimEnv& dims);

// The shape of every parameter of `f` at `dims`, checked as a call would be
// (every dimension variable given, the refinements hold); errors name the
// dimension or refinement.
Expected<std::vector<std::vector<int64_t>>> param_shapes(const ir::Function& f, const DimEnv& dims);

}  // namespace mlk::rt
