// A vjp split in two: a forward that keeps the values its backward reads
// (the residuals), and a backward that reads them instead of recomputing
// the forward. What a training framework runs: the forward once, in the
// forward pass, the backward once, in the backward pass.
//
// Which forward values are kept: every value the backward reads that a
// reduction makes (matmul, sum, mean, reduce_max, reduce_min, softmax).
// Elementwise values, views and broadcasts between them are recomputed from
// those and the parameters inside the backward (fused into its stages),
// which costs less than writing and reading them back: the policy of
// "save the products, recompute the pointwise" that rematerialising
// compilers use.
#pragma once

#include <vector>

#include "lang/ir.h"

namespace mlk {

struct VjpSplit {
  // Forward nodes the backward reads, in forward (topological) order: the
  // forward fn returns them after its result.
  std::vector<ir::NodeRef> residuals;
  // The cotangents rebuilt for the backward fn, whose parameters are the
  // forward's `params` (same indices), then one per residual, then the
  // cotangent of the result.
  std::vector<ir::NodeRef> cotangents;
};

// `body`: the forward, call-free; `cotangents`: grad_body's for a seed that
// is parameter `params` (the index one past the forward's parameters); they
// read `body`'s nodes.
VjpSplit split_vjp(const ir::NodeRef& body, const std::vector<ir::NodeRef>& cotangents, int params);

}  // namespace mlk
