// The typed IR: what the checker produces and every later layer consumes.
//
// A function body is a DAG of immutable Nodes, each with its dtype and its
// symbolic shape. Nodes are built only through ir::make() (and the helpers
// below), which checks the structural invariants; they are never mutated.
// `let` names are gone: a let is simply a Node used more than once. Calls of
// other functions stay as kCall nodes (with the callee's dimension variables
// instantiated); later layers inline them.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lang/dim.h"
#include "lang/dtype.h"
#include "lang/frame.h"
#include "lang/prover.h"
#include "lang/shard_plan.h"

namespace mlk::ir {

// The ops, in the order of their rows in lang/ops.def (the op registry; see
// lang/ops.h for what each one is).
enum class Op {
#define MLK_OP(ID, ...) ID,
#include "lang/ops.def"
#undef MLK_OP
};

const char* op_name(Op op);  // the canonical text name: "add", "reduce_max", ...

struct Type {
  DType dtype = DType::F32;
  Shape shape;
  std::string str() const;  // "Tensor[F32, [B, S, D]]"
  bool operator==(const Type& o) const { return dtype == o.dtype && shape == o.shape; }
};

struct Node;
using NodeRef = std::shared_ptr<const Node>;

// Attributes by op (unused ones stay empty):
//   kParam:        index
//   kLiteral:      literal (value, as canonical text), the node's type gives dtype/shape
//   kSum..kReduceMin, kTranspose, kSoftmax, kGather, kRepeatInterleave, kConcat,
//   kSlice, kIota, kBroadcast: ints (axes / permutation / the one axis)
//   kBroadcast, kReshape: the output shape is the node's shape
//   kRepeatInterleave: dims[0] = repeats;  kSlice: dims = {start, len}
//   kFull:         literal;  kCast: the node's dtype
//   kCall:         callee, dims = the callee's dimension variables, in order
//   kMatmul:       the operands' dtype, or F32 of BF16 or F16 operands: a
//                  widening product (its products and sum in F32, no rounding
//                  to 16 bits), which only passes make (lang/precision.h)
struct Node {
  Op op;
  Type type;
  std::vector<NodeRef> operands;
  std::vector<int64_t> ints;
  std::vector<Dim> dims;
  std::string literal;
  std::string callee;
  int index = 0;
};

// Checked factory: aborts (internal error) on a malformed node, since the
// checker must have rejected every user mistake before building one.
NodeRef make(Node n);

struct Param {
  std::string name;
  Type type;
};

// The most results a fn has (artifacts, the tuner's wire format and the
// runtime's checks rely on it).
constexpr size_t kMaxResults = 64;

// One result of a fn: its type and value.
struct Result {
  Type type;
  NodeRef body;
};

struct Function {
  std::string name;
  bool is_public = false;
  std::vector<std::string> dim_vars;
  std::vector<Param> params;
  std::vector<Pred> refinements;  // all parameters' refinements, in order
  Type result_type;  // the result; of a fn with several, the first
  NodeRef body;      // its value
  // A fn with several results (`-> (T, U, ..)`, or one value_and_grad or vjp
  // fn): the second and later. Shared nodes are shared across results (one
  // DAG), so that lowering computes them once. Layers that handle one result
  // only refuse such a fn by its name (see results()).
  std::vector<Result> more_results;
  // Every result, in order (the first is {result_type, body}).
  std::vector<Result> results() const;
  // Dataframe parameters, each already its column parameters (`df.col`);
  // not part of the IR's text or hash (the kernel sees only the tensors).
  std::vector<Frame> frames;
  // Record parameters (lang/records.h), each already its leaves' parameters;
  // not part of the IR's text or hash either.
  struct RecordParam {
    std::string name;  // the parameter as written ("params")
    std::string type;  // "Params[D, H]"
    int first = 0;     // its leaves: params[first, first + count)
    int count = 0;
    // Each leaf's path below the parameter, in leaf order:
    // "encoder.layer.0.attention.self.query.weight" (an Array's elements
    // by index). A model binds its weights by them (runtime/derived_binding.h).
    std::vector<std::string> paths;
  };
  std::vector<RecordParam> records;
  // Dimension variables no parameter shape binds (must be given explicitly).
  std::vector<std::string> unbound_dims() const;
};

// One tuning-shape bucket: concrete values for every dimension variable.
struct TuneBucket {
  std::string function;
  std::map<std::string, int64_t> dims;
};

struct Module {
  std::vector<Function> functions;  // in source order
  std::vector<TuneBucket> tunes;
  std::vector<ShardPlan> shards;  // one per fn `shard` defines (lang/spmd.h)
  const Function* find(const std::string& name) const;
  const ShardPlan* find_shard(const std::string& name) const;
};

}  // namespace mlk::ir
