// Type checker: ast::Program to the typed IR (lang/ir.h), with diagnostics.
//
// Checks names, dtypes and symbolic shapes of every function, proves every
// refinement, exact division and callee precondition from the facts in scope,
// and builds one ir::Function per function whose signature and body are
// well-typed. Errors never cascade: an ill-typed subexpression is an "error
// value" that silently poisons what uses it.
#pragma once

#include "lang/ast.h"
#include "lang/diagnostics.h"
#include "lang/ir.h"

namespace mlk {

ir::Module check_program(const SourceFile& file, const ast::Program& program, DiagnosticSink& sink);

}  // namespace mlk
