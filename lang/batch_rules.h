// The batching rule of each op (the BATCH column of lang/ops.def), for vmap
// (lang/vmap.h): the node `n` rebuilt on operands of which at least one
// carries a leading batch axis of extent `b`; the result carries it too, at
// axis 0. Calls are inlined before.
#pragma once

#include <vector>

#include "lang/ir.h"

namespace mlk::vm {

struct BVal {
  ir::NodeRef node;
  bool batched = false;  // axis 0 of node is the batch axis
};

using BatchRule = ir::NodeRef (*)(const ir::NodeRef& n, const std::vector<BVal>& ops, const Dim& b);

BatchRule batch_rule(ir::Op op);

// `v` with the batch axis: itself when batched, else broadcast along a new
// leading axis of extent `b`.
ir::NodeRef lifted(const BVal& v, const Dim& b);

}  // namespace mlk::vm
