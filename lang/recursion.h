// Rejects recursion: a .tl fn may not call itself, directly or through other
// fns (every call is inlined when lowering, so the call graph must be acyclic).
#pragma once

#include "lang/ast.h"
#include "lang/diagnostics.h"
#include "lang/ir.h"

namespace mlk {

// Reports each cycle once, at the first fn of the cycle in source order, and
// removes the fns on cycles from `module`.
void reject_recursion(const ast::Program& program, ir::Module& module, DiagnosticSink& sink);

}  // namespace mlk
