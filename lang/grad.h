// Reverse-mode autodiff on the typed IR: the cotangents of a function's
// parameters given the cotangent of its result, as typed IR built from the
// per-op VJP rules (lang/vjp_rules.h). lang/transforms.h derives the
// signatures of the functions `grad`, `value_and_grad` and `vjp` define and
// reports their errors.
#pragma once

#include <vector>

#include "lang/ir.h"
#include "lang/prover.h"

namespace mlk {

struct GradResult {
  std::vector<ir::NodeRef> cotangents;  // one per `wrt` entry, of its parameter's type
  // When a node on the path from a `wrt` parameter to the result has no
  // derivative: that node, and why (the cotangents are then empty).
  ir::NodeRef not_differentiable;
  std::string why;
};

// `body` is call-free and of a float type; `wrt` are parameter indices of
// float parameters; `facts` the function's refinements. `seed` is the
// cotangent of the result, of its type (a vjp's cotangent parameter); null
// means 1, which is `grad` of a Scalar.
GradResult grad_body(const ir::NodeRef& body, const std::vector<ir::Param>& params, const std::vector<int>& wrt,
                     const Facts& facts, const ir::NodeRef& seed = nullptr);

}  // namespace mlk
