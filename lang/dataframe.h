// Dataframe parameters to tensor parameters: the front-end step between the
// parser and the checker (lang/frontend.cpp).
//
// A parameter `df: Dataframe[N, Schema{a: I32 where a >= 1, e:
// FixedSizeList[F16, D], m: Nullable[F32]}]` becomes one tensor parameter per
// non-nullable column, in order, named `df_a` (Tensor[I32, [N]]) and `df_e`
// (Tensor[F16, [N, D]]) (ir::column_param_name); a nullable column has no
// tensor (its values are checked by the reader and not passed on). In the
// body, `to_tensor(df.a)` becomes the name `df_a`, which the checker then
// resolves like any parameter, so everything after the front end sees only
// tensors; writing `df_a` itself is an error (FrameUse). The
// columns, their types and value rules are returned as ir::Frame per fn, for
// the readers of tables (interop/arrow_schema.h).
//
// Errors (unknown columns, column types the reader cannot read, rules a
// column cannot carry, `to_tensor` of a nullable column, a Dataframe used as
// a value) are diagnostics; a fn with one is then treated like a fn with a
// syntax error (the checker checks its signature only, so nothing cascades),
// and a Dataframe parameter with an error in its type is dropped.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "lang/ast.h"
#include "lang/diagnostics.h"
#include "lang/frame.h"

namespace mlk {

// Rewrites `program` in place (the parameters of the fns with Dataframe
// parameters, and `to_tensor(..)` and `a.b` in every body). The result maps each
// such fn's name to its frames, in parameter order.
std::map<std::string, std::vector<ir::Frame>> lower_dataframes(ast::Program& program, DiagnosticSink& sink);

}  // namespace mlk
