// The blocks of a sharded tensor (lang/shard_plan.h): the block a rank holds
// along one dimension, and a tensor reassembled from its blocks. Plain
// row-major host tensors; no MPI here (spmd/mesh.h moves the blocks).
#pragma once

#include <cstdint>
#include <vector>

#include "lang/shard_plan.h"
#include "lang/tensor.h"

namespace mlk::spmd {

// Block `index` of `parts` equal blocks of `t` along `dim` (the caller has
// checked that `parts` divides the extent).
HostTensor block_of(const HostTensor& t, int64_t dim, int64_t parts, int64_t index);

// The blocks, in order, concatenated along `dim` (inverse of block_of).
HostTensor concat_blocks(const std::vector<HostTensor>& blocks, int64_t dim);

// The mesh coordinates of `rank` (row-major: the last axis varies fastest).
std::vector<int64_t> mesh_coords(const std::vector<ir::MeshAxis>& mesh, int64_t rank);

// The block of the global tensor `t` that the rank at `coords` holds under
// `layout` (per dimension: a mesh axis or -1).
HostTensor local_block(const HostTensor& t, const std::vector<int>& layout, const std::vector<ir::MeshAxis>& mesh,
                       const std::vector<int64_t>& coords);

}  // namespace mlk::spmd
