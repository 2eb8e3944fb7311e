// Program transformations as definitions: `fn g = grad(f, wrt=[w])`,
// `fn v, g = value_and_grad(f, wrt=[w])`, `fn fb = vmap(f, axes=[0, none])`,
// `fn step = value_and_grad(f, wrt=[w, b])` (one name for several results:
// one fn with several results, sharing the forward and backward stages),
// `fn p = shard(f, mesh=mesh(x=2), spec=[..], out=[..])` (phase-0/transforms.md). Each defines named fns that are ordinary fns for
// calls, check/run/tune/build, the cache and the runtime.
//
// Two stages, run by the checker: declare() derives and checks the new fns'
// signatures from the source's (so that other fns may call them), and
// build() makes their bodies from the source's checked IR (autodiff through
// lang/grad.h, batching through lang/vmap.h, the per-rank kernels and plan of
// a shard through lang/spmd.h), reporting what only the body
// shows (an op that is not differentiable, named with its position).
#pragma once

#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lang/ast.h"
#include "lang/checker_internal.h"
#include "lang/diagnostics.h"
#include "lang/inline.h"
#include "lang/ir.h"
#include "lang/shard_check.h"

namespace mlk::transform {

// One fn a transform defines.
struct Defined {
  std::string name;
  ast::Function stub;  // name, span and visibility, for signatures and messages
  size_t which = 0;    // position among the transform's names
};

// One checked transform.
struct Checked {
  const ast::Transform* t = nullptr;
  bool valid = false;
  std::vector<int> wrt;                         // grad, value_and_grad: parameter indices
  std::vector<std::optional<int64_t>> in_axes;  // vmap
  int64_t out_axis = 0;
  std::string batch;
  ShardSpec shard;                     // shard
  std::vector<check::Signature> sigs;  // one per defined fn
  // grad, value_and_grad, vjp with one name for several results: the one fn
  // returns all of them (sigs[0] has them as its results).
  bool one_fn = false;
};

class Transforms {
 public:
  // Checks every transform of `program` and adds the signatures of the fns
  // they define to `sigs` (invalid ones too, so that calls do not cascade).
  void declare(const ast::Program& program, std::map<std::string, check::Signature>& sigs, DiagnosticSink& sink);
  // Adds the defined fns to `m`, in the order of the transforms; `prov`
  // gives the source spans of the checked nodes.
  void build(const SourceFile& file, ir::Module& m, Provenance& prov, DiagnosticSink& sink) const;

 private:
  std::deque<Defined> defined_;  // stable addresses: signatures point at the stubs
  std::vector<Checked> checked_;
};

}  // namespace mlk::transform
