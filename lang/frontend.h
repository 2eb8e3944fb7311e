// The front end as one pipeline: text -> tokens -> AST -> typed IR.
//
// This is the table of contents of lang/: each stage is one call, and the
// intermediate results can be dumped (`mlk check --emit-tokens / --emit-ir`).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lang/ast.h"
#include "lang/diagnostics.h"
#include "lang/ir.h"
#include "lang/lexer.h"
#include "lang/source.h"
#include "base/status.h"

namespace mlk {

struct FrontendResult {
  std::unique_ptr<SourceFile> file;
  std::vector<Token> tokens;
  ir::Module module;  // only the functions that checked cleanly
  std::vector<Diagnostic> diagnostics;
  bool ok() const { return diagnostics.empty(); }
  // The diagnostics rendered in the fixed format, sorted by position.
  std::string rendered() const;
};

// Runs lex, parse and check on `text`, reported under `name`. With
// `file_imports` false only `std.` modules may be imported (lang/modules.h).
FrontendResult compile_source(std::string name, std::string text, bool file_imports = true);

// The front end after the parser and the imports (lang/modules.h, which
// checks each module with it): records, Dataframes, the checker, recursion.
ir::Module check_resolved(const SourceFile& file, ast::Program& program, DiagnosticSink& sink);

// Reads `path` and compiles it; a file that cannot be read is a Status.
Expected<FrontendResult> compile_file(const std::string& path);

}  // namespace mlk
