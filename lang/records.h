// Records and Arrays to tensor parameters: the front-end step after the
// parser and before the Dataframes (lang/frontend.cpp).
//
//   record Linear [I, O] { w: Tensor[F32, [O, I]], b: Tensor[F32, [O]] }
//   record Mlp [D, F, L] { layers: Array[Linear[D, D], L], out: Linear[D, F] }
//   fn f[B, D](p: Mlp[D, 10, 2], x: Tensor[F32, [B, D]]) -> .. = .. p.layers[1].w ..
//
// A parameter of a record (or `Array[T, N]`) type becomes one tensor
// parameter per leaf, depth first in declaration order, named by its path
// with `_` for `.` (field_param_name: `p_layers_1_w`), its type the
// field's with the record's dimensions replaced by the arguments written at
// the use (`Mlp[D, 10, 2]`: I := D, O := D, ..). An Array's length must be a
// constant there. So everything after the front end (the checker, lowering,
// the cache key, the runtime) sees only tensors, as with Dataframes.
//
// In bodies:
// - `p.layers[1].w` (a path to a leaf) becomes the leaf's parameter name;
// - a path to a record or an Array passed to a user fn (or to a fn a
//   transform defined) is expanded into its leaves, in order: positionally,
//   or as keywords `k=p.out` -> `k_w=p_out_w, k_b=p_out_b`; a record argument
//   at a record parameter of another record type is an error naming both;
// - `fold(xs, init, g)` over an Array `xs` of N elements is
//   `g(.. g(g(init, xs[0]), xs[1]) .., xs[N-1])` (carry first, as
//   functools.reduce and jax.lax.scan), unrolled here; further arguments
//   are passed to every call after the element (`fold(xs, h, g, mask)`:
//   `g(h, xs[0], mask)`), and dimension arguments too (`fold[H=12](..)`:
//   `g[H=12](..)`);
// - a record anywhere else is an error (RecordUse).
// In transforms of a fn with record parameters, a `wrt` entry naming a
// record (or a path into one) stands for its float leaves, and a per-parameter
// list (`vmap`'s `axes`, `shard`'s `spec`) gives each leaf its record's entry.
//
// Errors are diagnostics; a fn with one is then treated like a fn with a
// syntax error (its signature without the bad parameter is still checked).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "lang/ast.h"
#include "lang/ir.h"
#include "lang/diagnostics.h"
#include "lang/source.h"

namespace mlk {

// The parameter name of the leaf at `path` ("p.layers.1.w" -> "p_layers_1_w").
std::string field_param_name(const std::string& path);

// Rewrites `program` in place (see above). The result maps each fn with
// record parameters (and each fn a transform of one defines) to them, for
// the runtime's callers that pass records whole (python/mlk/records.py).
std::map<std::string, std::vector<ir::Function::RecordParam>> lower_records(const SourceFile& file, ast::Program& program,
                                                                            DiagnosticSink& sink);

}  // namespace mlk
