// Inlining of fn calls in the typed IR: the body of a function with every
// kCall replaced by the callee's body (its parameters bound to the call's
// operands, its dimension variables to the call's dims). The transforms
// (grad, vmap) work on call-free bodies.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lang/ir.h"
#include "lang/source.h"

namespace mlk {

// Where a node of the checked IR was written; passes that rebuild nodes give
// the new node its original's span, so that a diagnostic about it points at
// the source. Holding the NodeRef keeps its address from being reused.
using Provenance = std::map<ir::NodeRef, Span>;

// `fn`'s body without calls. nullopt with `missing` set to the callee's name
// when a callee (directly or through other calls) is not in `m`.
std::optional<ir::NodeRef> inline_calls(const ir::Module& m, const ir::Function& fn, Provenance& prov,
                                        std::string& missing);

// Every result of `fn` (ir::Function::results) without calls, as one DAG:
// a node the results share stays shared. nullopt as inline_calls.
std::optional<std::vector<ir::NodeRef>> inline_results(const ir::Module& m, const ir::Function& fn,
                                                        Provenance& prov, std::string& missing);

}  // namespace mlk
