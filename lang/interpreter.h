// The reference interpreter: evaluates a checked function on concrete host
// tensors, the oracle that the Halide lowering and the autotuner are checked
// against. The numerics policy it implements is docs/numerics.md.
//
// Every node is computed in double precision (integers and Bool exactly, in
// int64) and its result is rounded once to the node's dtype with round_to():
// F16/BF16/F32 round to nearest even per op, integers wrap (two's complement),
// Bool is 0/1. Reductions accumulate in double (floats) or wrap (integers).
// The interpreter is deliberately simple and single-threaded; it is meant for
// the small and medium shapes of tests and verification, not for speed.
#pragma once

#include <string>
#include <vector>

#include "lang/bind.h"
#include "lang/ir.h"
#include "base/status.h"
#include "lang/tensor.h"

namespace mlk {

// Evaluates the (public or private) function `fn` of the checked module `m`
// on `inputs`, one per parameter in order. Each input's dtype must equal its
// parameter's ("`w` must be F32, got F16"); ranks, extents and refinements
// are checked by bind_dims(), which also takes `given` (values for dimension
// variables that no input binds, as with --dims).
//
// Errors (all InvalidArgument unless noted): a function not in `m`
// (NotFound), bad inputs or dimensions, a refinement that does not hold, a
// gather index out of range ("gather index 7 at idx[1, 2] is outside
// [0, 5)"), an iota extent whose indices the dtype cannot hold, any value
// with an extent outside [1, 2^31-1] or more than 2^31 elements (checked
// before allocating). Precondition: `m` came out of the checker (every
// function in it checked cleanly); a malformed module is an internal error.
Expected<HostTensor> interpret(const ir::Module& m, const std::string& fn, const std::vector<HostTensor>& inputs,
                               const DimEnv& given);

// The same for a fn with several results (or one): the value of each.
Expected<std::vector<HostTensor>> interpret_all(const ir::Module& m, const std::string& fn,
                                                const std::vector<HostTensor>& inputs, const DimEnv& given);

// The most elements any single value may have in the interpreter (2^31).
constexpr int64_t kMaxInterpreterElements = int64_t{1} << 31;

}  // namespace mlk
