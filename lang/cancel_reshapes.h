// Cancelling reshape round trips in call-free typed IR.
//
// A block written over rows and used on a batch is a reshape round trip:
// `reshape(gelu(reshape(x, [B * S, F])), [B, S, F])`, a LayerNorm over
// `[B * S, D]` rows of a `[B, S, D]` activation. Each reshape is a view, but
// the lowering indexes a merged axis through a division (scheduler/lower.cpp),
// which hides from Halide which rows a tile reads. This pass moves the outer
// reshape of such a round trip inwards until it meets the inner one, where
// the two cancel:
//
//   reshape(reshape(x, s1), s2)      -> x when x is s2, else reshape(x, s2)
//   reshape(f(a, b, ..), s)          -> f(reshape(a, s), reshape(b, s), ..)
//                                       (f elementwise, including cast/where)
//   reshape(broadcast(y, t, axes), s) -> broadcast(reshape(y, s'), s, axes')
//                                       when every group of axes that the
//                                       reshape merges or splits is wholly
//                                       broadcast or wholly y's
//   reshape(reduce(x, axes), s)      -> reduce(reshape(x, s''), axes'')
//                                       when the reshape regroups only kept
//                                       axes that are adjacent in x
//   reshape(literal or full, s)      -> the literal of shape s
//
// A reshape is moved only where some path below it cancels; a node that
// keeps users of its old shape would then be computed twice, so when the
// result has more computing nodes (anything but params, literals and views)
// than the input, the input is returned unchanged. The values are equal
// element for element: every rule only renames indices.
#pragma once

#include <vector>

#include "lang/ir.h"

namespace mlk {

// `results`: the bodies of one fn's results (one DAG, no kCall nodes).
// Returns them with the round trips cancelled, or `results` itself (the same
// NodeRefs) when there is none or cancelling would duplicate work.
std::vector<ir::NodeRef> cancel_reshapes(const std::vector<ir::NodeRef>& results);

}  // namespace mlk
