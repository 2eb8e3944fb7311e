// `mlk check`: the front end on files, diagnostics to stderr.
#include <cstdio>

#include "cli/args.h"
#include "cli/command.h"
#include "lang/frontend.h"
#include "lang/ir_printer.h"

namespace mlk::cli {

namespace {

struct CheckOptions {
  bool emit_ir = false, emit_tokens = false, hash = false, quiet = false;
  Precision precision = Precision::kF32;  // --precision: the IR --emit-ir and --hash show
  std::vector<std::string> files;
};

CommandSpec spec(CheckOptions& o) {
  return {
      .name = "check",
      .summary = "type-check .tl programs and print diagnostics",
      .positionals = "FILE.tl...",
      .description =
          "Parses and type-checks .tl programs: dtypes, symbolic shapes and refinements.\n"
          "Exit status 0 when every file is well-typed, 1 when any has errors (printed as\n"
          "FILE:LINE:COL: error: MESSAGE with the source line and a caret), 2 on bad usage,\n"
          "3 on an internal error (a bug in mlk).\n",
      .flags =
          {
              {.name = "--emit-ir", .help = "print the canonical typed IR of each file", .set = set_bool(o.emit_ir)},
              {.name = "--emit-tokens", .help = "print the token stream (one token per line)",
               .set = set_bool(o.emit_tokens)},
              {.name = "--hash", .help = "print the content hash of every function and of the file",
               .set = set_bool(o.hash)},
              {.name = "-q", .help = "print nothing on success", .set = set_bool(o.quiet), .aliases = {"--quiet"}},
              precision_flag(o.precision),
          },
      .positional =
          [&o](const std::string& file) {
            o.files.push_back(file);
            return Status::Ok();
          },
      .no_positional = "no input file",
  };
}

}  // namespace

CommandSpec check_spec() {
  static CheckOptions scratch;
  return spec(scratch);
}

int run_check(const std::vector<std::string>& args) {
  CheckOptions o;
  if (int bad = parse_or_usage_error(spec(o), args)) return bad;
  const bool emit_ir = o.emit_ir, emit_tokens = o.emit_tokens, hash = o.hash, quiet = o.quiet;
  const std::vector<std::string>& files = o.files;
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
    r->module = with_precision(r->module, o.precision);
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
