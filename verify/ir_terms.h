// Internal to verify/: the typed IR of a fn evaluated symbolically at a
// concrete shape, with the semantics of scheduler/algorithm_terms.h (reals,
// bit-vectors, uninterpreted exp/log/sqrt/tanh/pow; erf as the documented
// polynomial the lowering uses, docs/numerics.md). The meaning of each op is
// taken from the op's definition (lang/ops.h, phase-0/builtins.md), not from
// the lowering, so that the two can be compared.
#pragma once

#include "scheduler/algorithm_terms.h"

namespace mlk::verify {

// One term per element of the result, row-major; the result is given in its
// storage representation (Bool as an 8-bit 0/1) as the Halide output is.
// Unsupported names an op that is not modelled (gather: its indices are data).
Expected<sym::EvaluatedAlgorithm> evaluate_ir(const ir::Module& m, const std::string& fn, const DimEnv& dims);

}  // namespace mlk::verify
