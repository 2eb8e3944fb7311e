// `mlk check`: the front end on files, diagnostics to stderr; with --json a
// report of every diagnostic on stdout (docs/cli.md, "mlk check --json").
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/command.h"
#include "lang/frontend.h"
#include "lang/ir_printer.h"

namespace mlk::cli {

namespace {

struct CheckOptions {
  bool emit_ir = false, emit_tokens = false, hash = false, quiet = false, json = false;
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
          "3 on an internal error (a bug in mlk).\n"
          "\n"
          "With --json, stdout is one JSON object: {\"format\": \"mlk-check-1\", \"ok\",\n"
          "\"counts\", \"files\", \"diagnostics\"}, each diagnostic with file, line, column,\n"
          "end_line, end_column (1-based, columns in bytes, the end just past the span),\n"
          "severity, kind and message; the human lines go to stderr (docs/cli.md).\n",
      .flags =
          {
              {.name = "--emit-ir", .help = "print the canonical typed IR of each file", .set = set_bool(o.emit_ir)},
              {.name = "--emit-tokens", .help = "print the token stream (one token per line)",
               .set = set_bool(o.emit_tokens)},
              {.name = "--hash", .help = "print the content hash of every function and of the file",
               .set = set_bool(o.hash)},
              {.name = "--json",
               .help = "print a JSON report of every file and diagnostic on stdout (the other lines go to "
                       "stderr); not with --emit-ir, --emit-tokens or --hash",
               .set = set_bool(o.json)},
              {.name = "-q", .help = "print nothing on success (but the --json report)", .set = set_bool(o.quiet), .aliases = {"--quiet"}},
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

// What --json prints, gathered file by file.
struct CheckReport {
  nlohmann::json files = nlohmann::json::array(), diagnostics = nlohmann::json::array();
  size_t files_with_errors = 0;
};

// One diagnostic as --json prints it: the 1-based line and byte column of
// the span's first byte, and of the position just past its end.
nlohmann::json diagnostic_json(const SourceFile& f, const Diagnostic& d) {
  const LineCol b = f.line_col(d.span.begin), e = f.line_col(d.span.end);
  return {{"file", f.name()}, {"line", b.line}, {"column", b.col}, {"end_line", e.line}, {"end_column", e.col},
          {"severity", "error"}, {"kind", diag_kind_name(d.kind)}, {"message", d.message}};
}

// A file that could not be read: a diagnostic of kind "Unreadable" with no
// position (line, column and their ends are null).
void add_unreadable(CheckReport& rep, const std::string& path, const std::string& message) {
  rep.files.push_back({{"file", path}, {"ok", false}, {"errors", 1}});
  rep.diagnostics.push_back({{"file", path}, {"line", nullptr}, {"column", nullptr}, {"end_line", nullptr},
                             {"end_column", nullptr}, {"severity", "error"}, {"kind", "Unreadable"},
                             {"message", message}});
  ++rep.files_with_errors;
}

// A file with diagnostics: they go to the report sorted by position, as the
// rendered text lists them.
void add_errors(CheckReport& rep, const std::string& path, const FrontendResult& r) {
  std::vector<Diagnostic> sorted = r.diagnostics;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const Diagnostic& a, const Diagnostic& b) { return a.span.begin < b.span.begin; });
  for (const auto& d : sorted) rep.diagnostics.push_back(diagnostic_json(*r.file, d));
  rep.files.push_back({{"file", path}, {"ok", false}, {"errors", sorted.size()}});
  ++rep.files_with_errors;
}

// A well-typed file: its functions and the public ones among them.
void add_ok(CheckReport& rep, const std::string& path, const ir::Module& m) {
  nlohmann::json pub = nlohmann::json::array();
  for (const auto& f : m.functions)
    if (f.is_public) pub.push_back(f.name);
  rep.files.push_back({{"file", path}, {"ok", true}, {"errors", 0}, {"functions", m.functions.size()}, {"public", pub}});
}

// The whole --json document, one line on stdout.
void print_report(const CheckReport& rep) {
  const nlohmann::json j = {{"format", "mlk-check-1"},
                            {"ok", rep.files_with_errors == 0},
                            {"counts",
                             {{"files", rep.files.size()},
                              {"files_with_errors", rep.files_with_errors},
                              {"errors", rep.diagnostics.size()}}},
                            {"files", rep.files},
                            {"diagnostics", rep.diagnostics}};
  std::printf("%s\n", j.dump().c_str());
}

// Checks one file: prints what the options ask for (the ok line and, with
// --json, everything else on stderr) and adds it to `rep`. False when the
// file cannot be read or has errors.
bool check_one(const CheckOptions& o, const std::string& path, CheckReport& rep) {
  auto r = compile_file(path);
  if (!r.ok()) {
    std::fprintf(stderr, "mlk check: %s\n", r.status().message().c_str());
    add_unreadable(rep, path, r.status().message());
    return false;
  }
  if (o.emit_tokens)
    for (const auto& t : r->tokens) {
      LineCol lc = r->file->line_col(t.span.begin);
      std::printf("%u:%u %s %s\n", lc.line, lc.col, tok_name(t.kind), t.text.c_str());
    }
  if (!r->ok()) {
    std::fputs(r->rendered().c_str(), stderr);
    std::fprintf(stderr, "%s: %zu error%s\n", path.c_str(), r->diagnostics.size(),
                 r->diagnostics.size() == 1 ? "" : "s");
    add_errors(rep, path, *r);
    return false;
  }
  r->module = with_precision(r->module, o.precision);
  add_ok(rep, path, r->module);
  if (o.emit_ir) std::fputs(ir::print_module(r->module).c_str(), stdout);
  if (o.hash) {
    for (const auto& f : r->module.functions)
      std::printf("%s %s\n", ir::function_hash(r->module, f).c_str(), f.name.c_str());
    std::printf("%s %s\n", ir::module_hash(r->module).c_str(), path.c_str());
  }
  if (!o.quiet && !o.emit_ir && !o.hash) {
    std::string names;
    for (const auto& f : r->module.functions)
      if (f.is_public) names += (names.empty() ? "" : ", ") + f.name;
    std::fprintf(o.json ? stderr : stdout, "%s: ok, %zu fn%s (public: %s)\n", path.c_str(),
                 r->module.functions.size(), r->module.functions.size() == 1 ? "" : "s",
                 names.empty() ? "none" : names.c_str());
  }
  return true;
}

}  // namespace

CommandSpec check_spec() {
  static CheckOptions scratch;
  return spec(scratch);
}

int run_check(const std::vector<std::string>& args) {
  CheckOptions o;
  if (int bad = parse_or_usage_error(spec(o), args)) return bad;
  if (o.json && (o.emit_ir || o.emit_tokens || o.hash))
    return usage_error("check", "--json cannot be combined with --emit-ir, --emit-tokens or --hash");
  CheckReport rep;
  int status = 0;
  for (const auto& path : o.files)
    if (!check_one(o, path, rep)) status = 1;
  if (o.json) print_report(rep);
  return status;
}

}  // namespace mlk::cli
