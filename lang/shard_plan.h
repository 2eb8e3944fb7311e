// The SPMD plan of a fn defined by `shard` (phase-0/transforms.md): plain
// data that says how a mesh of ranks computes it. Made by lang/spmd.h, read
// by the per-rank runner (spmd/rank_main.cpp); nothing here runs anything.
//
// Each rank holds the block of every parameter that its mesh coordinates
// select (a dimension sharded over mesh axis k is cut into |k| equal blocks,
// rank coordinate c along k holding block c). Rank r runs the steps in order:
// step i calls its kernel (an ordinary fn of the module, at per-shard shapes)
// on the parameters' blocks followed by the results of steps 0..i-1, then
// applies the step's collectives to the kernel's result. The last step's
// result, after its collectives, is assembled into the global result by
// concatenating along every dimension `result_layout` shards.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mlk::ir {

struct MeshAxis {
  std::string name;
  int64_t size = 1;
};

// A collective over a set of mesh axes (the ranks that differ only in those
// coordinates take part together).
struct Collective {
  enum class Kind { kNone, kAllReduceSum, kAllReduceMax, kAllReduceMin, kAllGather };
  Kind kind = Kind::kNone;
  std::vector<int> axes;  // mesh axis indices
  int64_t dim = -1;       // kAllGather: the dimension the blocks are concatenated along
};

const char* collective_name(Collective::Kind k);  // "all_reduce(sum)", "all_gather", ...

struct ShardStep {
  std::string kernel;             // the fn to call (a fn of the module)
  std::vector<Collective> after;  // applied in order to the kernel's result
  std::string why;     // what the type rules needed it for: "sum over `K`, sharded over `x`"
};

struct ShardPlan {
  std::string fn;  // the fn `shard` defines (its global signature and value)
  std::vector<MeshAxis> mesh;
  // Per parameter, per dimension: the mesh axis it is sharded over, or -1.
  std::vector<std::vector<int>> param_layout;
  // Per result dimension, after the last step: its mesh axis, or -1.
  std::vector<int> result_layout;
  std::vector<ShardStep> steps;
  int64_t ranks() const {
    int64_t n = 1;
    for (const auto& a : mesh) n *= a.size;
    return n;
  }
};

}  // namespace mlk::ir
