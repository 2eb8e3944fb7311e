// `mlk check`: the front end on files, diagnostics to stderr.
#include <cstdio>

#include "cli/command.h"
#include "lang/frontend.h"
#include "lang/ir_printer.h"

namespace mlk::cli {

int run_check(const std::vector<std::string>& args) {
  const Command& self = command("check");
  bool emit_ir = false, emit_tokens = false, hash = false, quiet = false;
  std::vector<std::string> files;
  for (const auto& a : args) {
    if (a == "--emit-ir") emit_ir = true;
    else if (a == "--emit-tokens") emit_tokens = true;
    else if (a == "--hash") hash = true;
    else if (a == "-q" || a == "--quiet") quiet = true;
    else if (!a.empty() && a[0] == '-') return usage_error(self, "unknown option `" + a + "`");
    else files.push_back(a);
  }
  if (files.empty()) return usage_error(self, "no input file");
  int status = 0;
  for (const auto& path : files) {
    auto r = compile_file(path);
    if (!r.ok()) {
      std::fprintf(stderr, "mlk check: %s\n", r.status().message().c_str());
      status = 1;
      continue;
    }
    if (emit_tokens)
      for (const auto& t : r->tokens) {
        LineCol lc = r->file->line_col(t.span.begin);
        std::printf("%u:%u %s %s\n", lc.line, lc.col, tok_name(t.kind), t.text.c_str());
      }
    if (!r->ok()) {
      std::fputs(r->rendered().c_str(), stderr);
      std::fprintf(stderr, "%s: %zu error%s\n", path.c_str(), r->diagnostics.size(),
                   r->diagnostics.size() == 1 ? "" : "s");
      status = 1;
      continue;
    }
    if (emit_ir) std::fputs(ir::print_module(r->module).c_str(), stdout);
    if (hash) {
      for (const auto& f : r->module.functions)
        std::printf("%s %s\n", ir::function_hash(r->module, f).c_str(), f.name.c_str());
      std::printf("%s %s\n", ir::module_hash(r->module).c_str(), path.c_str());
    }
    if (!quiet && !emit_ir && !hash) {
      std::string names;
      for (const auto& f : r->module.functions)
        if (f.is_public) names += (names.empty() ? "" : ", ") + f.name;
      std::printf("%s: ok, %zu fn%s (public: %s)\n", path.c_str(), r->module.functions.size(),
                  r->module.functions.size() == 1 ? "" : "s", names.empty() ? "none" : names.c_str());
    }
  }
  return status;
}

}  // namespace mlk::cli
