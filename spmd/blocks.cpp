// Blocks of sharded tensors (spmd/blocks.h).
#include "spmd/blocks.h"

#include <cstring>

#include "base/status.h"

namespace mlk::spmd {
namespace {

// Elements before `dim` (outer), the extent, and bytes of one step along it.
struct Split {
  int64_t outer = 1, extent = 1, inner_bytes = 1;
};

Split split(const std::vector<int64_t>& shape, int64_t dim, size_t elem) {
  Split s;
  for (int64_t d = 0; d < dim; ++d) s.outer *= shape[d];
  s.extent = shape[dim];
  s.inner_bytes = static_cast<int64_t>(elem);
  for (size_t d = dim + 1; d < shape.size(); ++d) s.inner_bytes *= shape[d];
  return s;
}

}  // namespace

HostTensor block_of(const HostTensor& t, int64_t dim, int64_t parts, int64_t index) {
  MLK_CHECK(dim >= 0 && dim < static_cast<int64_t>(t.shape.size()) && parts >= 1 && t.shape[dim] % parts == 0,
            "block_of: the extent is not a multiple of the parts");
  std::vector<int64_t> shape = t.shape;
  shape[dim] /= parts;
  HostTensor out(t.dtype, shape);
  Split in = split(t.shape, dim, t.elem_size());
  int64_t len = shape[dim] * in.inner_bytes;
  for (int64_t o = 0; o < in.outer; ++o)
    std::memcpy(out.bytes.data() + o * len, t.bytes.data() + o * in.extent * in.inner_bytes + index * len, len);
  return out;
}

HostTensor concat_blocks(const std::vector<HostTensor>& blocks, int64_t dim) {
  MLK_CHECK(!blocks.empty(), "concat_blocks: no blocks");
  std::vector<int64_t> shape = blocks[0].shape;
  shape[dim] *= static_cast<int64_t>(blocks.size());
  HostTensor out(blocks[0].dtype, shape);
  Split b = split(blocks[0].shape, dim, blocks[0].elem_size());
  int64_t len = b.extent * b.inner_bytes;
  for (size_t i = 0; i < blocks.size(); ++i) {
    MLK_CHECK(blocks[i].shape == blocks[0].shape, "concat_blocks: blocks of different shapes");
    for (int64_t o = 0; o < b.outer; ++o)
      std::memcpy(out.bytes.data() + (o * blocks.size() + i) * len, blocks[i].bytes.data() + o * len, len);
  }
  return out;
}

std::vector<int64_t> mesh_coords(const std::vector<ir::MeshAxis>& mesh, int64_t rank) {
  std::vector<int64_t> c(mesh.size());
  for (size_t k = mesh.size(); k-- > 0;) {
    c[k] = rank % mesh[k].size;
    rank /= mesh[k].size;
  }
  return c;
}

HostTensor local_block(const HostTensor& t, const std::vector<int>& layout, const std::vector<ir::MeshAxis>& mesh,
                       const std::vector<int64_t>& coords) {
  HostTensor out = t;
  for (size_t d = 0; d < layout.size(); ++d)
    if (layout[d] >= 0) out = block_of(out, static_cast<int64_t>(d), mesh[layout[d]].size, coords[layout[d]]);
  return out;
}

}  // namespace mlk::spmd
