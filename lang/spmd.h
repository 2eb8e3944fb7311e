// SPMD lowering of `shard` (phase-0/transforms.md, section 4): a checked
// fn's call-free body typed at per-shard shapes, cut into per-rank kernels
// (ordinary fns) at the collectives its sharding rules require, and the plan
// that runs them (lang/shard_plan.h).
//
// Each value carries a layout: per dimension, the mesh axis it is cut over
// (a block of |axis| equal shards) or none; a value varies across exactly the
// axes its layout names. The rules (one per op, in spmd_rules.cpp) keep the
// layout through elementwise ops, broadcasts, transposes and matmuls on free
// dimensions, and need a collective where a reduction, a contraction or a
// softmax runs along a sharded dimension.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lang/diagnostics.h"
#include "lang/ir.h"
#include "lang/prover.h"
#include "lang/shard_check.h"

namespace mlk {

struct SpmdError {
  DiagKind kind = DiagKind::ShardMismatch;
  ir::NodeRef at;  // the op (null: the transform itself)
  std::string message;
};

struct SpmdResult {
  ir::ShardPlan plan;
  std::vector<ir::Function> kernels;  // the plan's steps' fns, in order
  std::optional<SpmdError> error;
};

// `f` has a call-free body; `name` is the fn `shard` defines (its kernels are
// `name__step0`, `name__step1`, ...), `is_public` their visibility.
SpmdResult spmd_lower(const ir::Function& f, const transform::ShardSpec& spec, const std::string& name,
                      bool is_public);

}  // namespace mlk
