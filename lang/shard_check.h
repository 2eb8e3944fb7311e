// The argument and type rules of `fn g = shard(f, mesh=mesh(x=2), spec=[..],
// out=[..])` (phase-0/transforms.md): the mesh, one layout per parameter and
// one for the result, each sharded dimension proven divisible by its mesh
// axis's size. lang/spmd.h then lowers the checked transform.
#pragma once

#include <vector>

#include "lang/ast.h"
#include "lang/checker_internal.h"
#include "lang/diagnostics.h"
#include "lang/shard_plan.h"

namespace mlk::transform {

struct ShardSpec {
  std::vector<ir::MeshAxis> mesh;
  std::vector<std::vector<int>> in;  // per parameter, per dimension: mesh axis index or -1
  std::vector<int> out;              // per result dimension
};

// Reports every mistake at its argument; false when there was one.
bool check_shard(const ast::Transform& t, const check::Signature& src, ShardSpec& out, DiagnosticSink& sink);

}  // namespace mlk::transform
