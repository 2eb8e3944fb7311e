#include "lang/frontend.h"
#include "base/files.h"


#include "lang/checker.h"
#include "lang/dataframe.h"
#include "lang/parser.h"
#include "lang/modules.h"
#include "lang/records.h"
#include "lang/recursion.h"

namespace mlk {

std::string FrontendResult::rendered() const { return render_all(*file, diagnostics); }

FrontendResult compile_source(std::string name, std::string text, bool file_imports) {
  FrontendResult r;
  r.file = std::make_unique<SourceFile>(std::move(name), std::move(text));
  DiagnosticSink sink;
  r.tokens = lex(*r.file, sink);
  ast::Program program = parse(*r.file, r.tokens, sink);
  resolve_imports(*r.file, program, sink, file_imports);
  r.module = check_resolved(*r.file, program, sink);
  r.diagnostics = sink.diagnostics();
  return r;
}

ir::Module check_resolved(const SourceFile& file, ast::Program& program, DiagnosticSink& sink) {
  auto records = lower_records(file, program, sink);
  auto frames = lower_dataframes(program, sink);
  ir::Module m = check_program(file, program, sink);
  for (auto& f : m.functions) {
    if (auto it = frames.find(f.name); it != frames.end()) f.frames = it->second;
    if (auto it = records.find(f.name); it != records.end()) f.records = it->second;
  }
  reject_recursion(program, m, sink);
  return m;
}

Expected<FrontendResult> compile_file(const std::string& path) {
  auto text = read_file(path);
  if (!text.ok()) return text.status();
  return compile_source(path, std::move(text).value());
}

}  // namespace mlk
