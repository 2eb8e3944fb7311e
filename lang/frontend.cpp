#include "lang/frontend.h"
#include "base/files.h"


#include "lang/checker.h"
#include "lang/dataframe.h"
#include "lang/parser.h"
#include "lang/recursion.h"

namespace mlk {

std::string FrontendResult::rendered() const { return render_all(*file, diagnostics); }

FrontendResult compile_source(std::string name, std::string text) {
  FrontendResult r;
  r.file = std::make_unique<SourceFile>(std::move(name), std::move(text));
  DiagnosticSink sink;
  r.tokens = lex(*r.file, sink);
  ast::Program program = parse(*r.file, r.tokens, sink);
  auto frames = lower_dataframes(program, sink);
  r.module = check_program(*r.file, program, sink);
  for (auto& f : r.module.functions)
    if (auto it = frames.find(f.name); it != frames.end()) f.frames = it->second;
  reject_recursion(program, r.module, sink);
  r.diagnostics = sink.diagnostics();
  return r;
}

Expected<FrontendResult> compile_file(const std::string& path) {
  auto text = read_file(path);
  if (!text.ok()) return text.status();
  return compile_source(path, std::move(text).value());
}

}  // namespace mlk
