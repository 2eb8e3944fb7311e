// The VJP rule of each op (the VJP column of lang/ops.def): given a node `y`
// of a float dtype and `g`, the cotangent of `y` (a value of y's type), the
// cotangent contributed to each operand of `y`, as typed IR. Used by
// reverse-mode autodiff (lang/grad.h), which calls a rule only for a node
// that depends on a `wrt` parameter; calls are inlined before.
#pragma once

#include <string>
#include <vector>

#include "lang/ir.h"
#include "lang/prover.h"

namespace mlk::ad {

struct Vjp {
  // One entry per operand of `y`; null where the operand gets no cotangent
  // (Bool conditions, integer indices, constants).
  std::vector<ir::NodeRef> cts;
  // Non-empty when `y` has no derivative here; says why (the message's tail).
  std::string not_differentiable;
};

// `facts` are the refinements of the function being differentiated (a rule
// may need to decide whether an extent is 0, e.g. the padding of `slice`).
using VjpRule = Vjp (*)(const ir::NodeRef& y, const ir::NodeRef& g, const Facts& facts);

VjpRule vjp_rule(ir::Op op);

}  // namespace mlk::ad
