// Parser: tokens to ast::Program, with error recovery.
//
// A syntax error is reported once and the parser skips to the next `let` of the
// same function, or to the next top-level `fn`/`public`/`tune`, so one file can
// yield several errors without cascades. A function with a syntax error keeps
// its signature (when that parsed) and has had_syntax_error set; the checker
// then checks only its signature.
#pragma once

#include "lang/ast.h"
#include "lang/diagnostics.h"
#include "lang/lexer.h"

namespace mlk {

ast::Program parse(const SourceFile& file, const std::vector<Token>& tokens, DiagnosticSink& sink);

}  // namespace mlk
