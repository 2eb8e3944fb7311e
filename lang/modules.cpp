// Imports (lang/modules.h).
#include "lang/modules.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "base/files.h"
#include "lang/frontend.h"
#include "lang/lexer.h"
#include "lang/parser.h"

namespace mlk {
namespace {

std::string q(const std::string& s) { return "`" + s + "`"; }

constexpr size_t kMaxDepth = 16;
constexpr uintmax_t kMaxModuleBytes = uintmax_t{16} << 20;
constexpr size_t kMaxImports = 256;  // module imports in one front-end run, nested ones included

// One front-end run's imports: the chain being resolved (for cycles) and
// what each module (with its dtype) compiled to, so a module imported twice
// is checked once.
struct Context {
  std::vector<std::string> chain;  // module keys (absolute paths, std names), the importing file first
  std::vector<std::string> names;  // the same as written
  std::map<std::string, std::string> checked;  // key -> "" or its first diagnostic
  size_t imports = 0;
  bool file_imports = true;  // false: `std.` modules only (resolve_imports)
};

// A module's tokens, with every F32 made `dtype` when one is given.
std::vector<Token> tokens_of(const SourceFile& f, const std::string& dtype, DiagnosticSink& sink) {
  std::vector<Token> toks = lex(f, sink);
  if (!dtype.empty())
    for (Token& t : toks)
      if (t.kind == Tok::kDType && t.text == "F32") t.text = dtype;
  return toks;
}

void resolve(const SourceFile& file, ast::Program& program, DiagnosticSink& sink, Context& ctx);

// --- renaming and re-positioning what a module brings in ---

class Merge {
 public:
  Merge(std::string alias, Span at, const ast::Program& m) : prefix_(alias + "."), at_(at) {
    for (const auto& f : m.functions) fns_.insert(f.name);
    for (const auto& t : m.transforms)
      for (const auto& [n, s] : t.names) fns_.insert(n);
    for (const auto& r : m.records) records_.insert(r.name);
  }

  void into(ast::Program& m, ast::Program& out) {
    for (auto& r : m.records) {
      r.name = prefix_ + r.name;
      r.span = r.name_span = at_;
      for (auto& d : r.dims) d.second = at_;
      for (auto& f : r.fields) {
        f.name_span = at_;
        type(f.type);
      }
      out.records.push_back(std::move(r));
    }
    for (auto& f : m.functions) {
      f.name = prefix_ + f.name;
      f.is_public = false;
      f.span = f.name_span = at_;
      for (auto& d : f.dims) d.second = at_;
      for (auto& p : f.params) {
        p.name_span = at_;
        type(p.type);
      }
      type(f.result);
      for (auto& t : f.more_results) type(t);
      for (auto& l : f.lets) {
        l.name_span = at_;
        if (l.ascription) type(*l.ascription);
        if (l.value) expr(*l.value);
      }
      if (f.body) expr(*f.body);
      out.functions.push_back(std::move(f));
    }
    for (auto& t : m.transforms) {
      t.is_public = false;
      t.span = t.kind_span = t.source_span = at_;
      for (auto& [n, s] : t.names) {
        n = prefix_ + n;
        s = at_;
      }
      if (fns_.count(t.source)) t.source = prefix_ + t.source;
      for (auto& s : t.keyword_spans) s = at_;
      for (auto& v : t.values) expr(*v);
      out.transforms.push_back(std::move(t));
    }
  }

 private:
  void dim(ast::DimExpr& d) {
    d.span = at_;
    if (d.lhs) dim(*d.lhs);
    if (d.rhs) dim(*d.rhs);
  }
  void type(ast::Type& t) {
    t.span = t.dtype_span = t.record_span = at_;
    for (auto& d : t.shape) dim(*d);
    for (auto& p : t.preds) {
      p.span = at_;
      dim(*p.lhs);
      dim(*p.rhs);
    }
    if (!t.record.empty() && records_.count(t.record)) t.record = prefix_ + t.record;
    for (auto& a : t.record_args) dim(*a);
    if (t.element) type(*t.element);
    if (t.frame) {
      dim(*t.frame->rows);
      for (auto& c : t.frame->columns) {
        c.span = c.name_span = c.dtype_span = at_;
        if (c.list_size) dim(*c.list_size);
        if (c.categories) dim(*c.categories);
        for (auto& r : c.rules) r.span = r.subject_span = r.bound_span = at_;
      }
    }
  }
  void expr(ast::Expr& e) {
    e.span = e.callee_span = at_;
    if (e.kind == ast::Expr::Kind::kCall && fns_.count(e.name)) e.name = prefix_ + e.name;
    if (e.kind == ast::Expr::Kind::kCall && e.name == "fold" && e.args.size() >= 3 &&
        e.args[2]->kind == ast::Expr::Kind::kName && fns_.count(e.args[2]->name))
      e.args[2]->name = prefix_ + e.args[2]->name;  // `fold(xs, h, step)` names a fn
    for (auto& s : e.arg_keyword_spans) s = at_;
    for (auto& s : e.dim_arg_spans) s = at_;
    for (auto& [n, d] : e.dim_args) dim(*d);
    for (auto& a : e.args) expr(*a);
  }

  std::string prefix_;
  Span at_;
  std::set<std::string> fns_, records_;
};

// --- one import ---

struct Loaded {
  std::string key;   // what identifies the module: "std.nn" or its absolute path
  std::string name;  // how it is reported
  std::string text;
};

std::optional<Loaded> load(const SourceFile& file, const ast::Import& im, DiagnosticSink& sink, const Context& ctx) {
  if (im.is_path && !ctx.file_imports) {
    sink.error(DiagKind::Import, im.span,
               "cannot import file " + q(im.module) + " here: only the standard library's `std.` modules are read "
               "(a program compiled for someone else, such as a measurement worker's job, reads no files)");
    return std::nullopt;
  }
  if (!im.is_path) {
    const char* text = std_module_text(im.module);
    if (text == nullptr) {
      std::string known;
      for (const auto& n : std_module_names()) known += (known.empty() ? "" : ", ") + n;
      sink.error(DiagKind::Import, im.span,
                 "no module " + q(im.module) +
                     (im.module.rfind("std.", 0) == 0 ? "" : "; a module is `std.NAME` or a file, `import \"path.tl\" as NAME`") +
                     " (the standard library: " + known + ")");
      return std::nullopt;
    }
    return Loaded{im.module, im.module, text};
  }
  namespace fs = std::filesystem;
  fs::path p(im.module);
  if (p.is_relative()) p = fs::path(file.name()).parent_path() / p;
  std::error_code ec;
  fs::path abs = fs::weakly_canonical(p, ec);
  if (ec) abs = p;
  // A module is a regular file of bounded size: never a device, a FIFO or a directory.
  auto st = fs::status(abs, ec);
  if (!ec && fs::exists(st) && !fs::is_regular_file(st)) {
    sink.error(DiagKind::Import, im.span, "cannot read module " + q(im.module) + ": not a regular file");
    return std::nullopt;
  }
  if (!ec && fs::exists(st) && fs::file_size(abs, ec) > kMaxModuleBytes) {
    sink.error(DiagKind::Import, im.span,
               "module " + q(im.module) + " is larger than " + std::to_string(kMaxModuleBytes >> 20) + " MiB");
    return std::nullopt;
  }
  auto text = read_file(abs.string());
  if (!text.ok()) {
    sink.error(DiagKind::Import, im.span, "cannot read module " + q(im.module) + ": " + text.status().message());
    return std::nullopt;
  }
  return Loaded{abs.string(), im.module, std::move(text).value()};
}

// Compiles a module on its own; "" when it checks, else its first
// diagnostic, rendered with its position in the module.
std::string check_module(const Loaded& m, const std::string& dtype, Context& ctx) {
  SourceFile f(m.key, m.text);
  DiagnosticSink sink;
  std::vector<Token> toks = tokens_of(f, dtype, sink);
  ast::Program p = parse(f, toks, sink);
  resolve(f, p, sink, ctx);
  check_resolved(f, p, sink);
  if (sink.diagnostics().empty()) return "";
  std::vector<Diagnostic> ds = sink.diagnostics();
  std::sort(ds.begin(), ds.end(), [](const Diagnostic& a, const Diagnostic& b) { return a.span.begin < b.span.begin; });
  LineCol lc = f.line_col(ds.front().span.begin);
  std::string more = ds.size() > 1 ? " (and " + std::to_string(ds.size() - 1) + " more)" : "";
  return m.name + ":" + std::to_string(lc.line) + ":" + std::to_string(lc.col) + ": " + ds.front().message + more;
}

bool uses(const ast::Expr& e, const std::set<std::string>& aliases) {
  if (e.kind == ast::Expr::Kind::kCall || e.kind == ast::Expr::Kind::kName)
    if (size_t dot = e.name.find('.'); dot != std::string::npos && aliases.count(e.name.substr(0, dot))) return true;
  for (const auto& a : e.args)
    if (uses(*a, aliases)) return true;
  return false;
}

bool uses(const ast::Type& t, const std::set<std::string>& aliases) {
  if (size_t dot = t.record.find('.'); dot != std::string::npos && aliases.count(t.record.substr(0, dot))) return true;
  return t.element && uses(*t.element, aliases);
}

// Marks the fns and transforms that use a failed import (see resolve).
void quiet_uses(ast::Program& program, const std::set<std::string>& aliases) {
  for (auto& f : program.functions) {
    bool use = f.body && uses(*f.body, aliases);
    for (const auto& l : f.lets) use = use || (l.value && uses(*l.value, aliases));
    for (const auto& p : f.params) use = use || uses(p.type, aliases);
    if (!use) continue;
    f.had_syntax_error = true;  // the checker checks its signature only
    f.lets.clear();
    f.body.reset();
    f.params.erase(std::remove_if(f.params.begin(), f.params.end(), [&](const ast::Param& p) { return uses(p.type, aliases); }),
                   f.params.end());
  }
  for (auto& t : program.transforms)
    if (size_t dot = t.source.find('.'); dot != std::string::npos && aliases.count(t.source.substr(0, dot)))
      t.had_error = true;
}

void resolve(const SourceFile& file, ast::Program& program, DiagnosticSink& sink, Context& ctx) {
  std::set<std::string> aliases, failed;
  std::vector<ast::Import> imports = std::move(program.imports);
  program.imports.clear();
  for (const ast::Import& im : imports) {
    if (!aliases.insert(im.alias).second) {
      sink.error(DiagKind::Import, im.span, "a module is already imported as " + q(im.alias) + "; import this one `as` another name");
      continue;
    }
    if (++ctx.imports > kMaxImports) {
      sink.error(DiagKind::Import, im.span,
                 "more than " + std::to_string(kMaxImports) + " imports in all, nested ones included; import fewer modules");
      break;
    }
    std::optional<Loaded> m = load(file, im, sink, ctx);
    if (!m) {
      failed.insert(im.alias);
      continue;
    }
    if (std::count(ctx.chain.begin(), ctx.chain.end(), m->key)) {
      std::string path;
      size_t from = std::find(ctx.chain.begin(), ctx.chain.end(), m->key) - ctx.chain.begin();
      for (size_t i = from; i < ctx.names.size(); ++i) path += ctx.names[i] + " -> ";
      sink.error(DiagKind::Import, im.span, "module " + q(im.module) + " imports itself (" + path + im.module + ")");
      failed.insert(im.alias);
      continue;
    }
    if (ctx.chain.size() >= kMaxDepth) {
      sink.error(DiagKind::Import, im.span, "imports nest more than " + std::to_string(kMaxDepth) + " deep here");
      failed.insert(im.alias);
      continue;
    }
    const std::string key = m->key + "[" + im.dtype + "]";
    ctx.chain.push_back(m->key);
    ctx.names.push_back(im.module);
    if (!ctx.checked.count(key)) ctx.checked[key] = check_module(*m, im.dtype, ctx);
    if (!ctx.checked[key].empty()) {
      sink.error(DiagKind::Import, im.span, "module " + q(im.module) + " does not check: " + ctx.checked[key]);
      failed.insert(im.alias);
      ctx.chain.pop_back();
      ctx.names.pop_back();
      continue;
    }
    // Clean: parse it again (the check above consumed its syntax tree) and
    // merge. Its imports resolve again here, deeper than when it was checked
    // perhaps: an error now (depth, count) is this import's too.
    SourceFile f(m->key, m->text);
    DiagnosticSink again;
    std::vector<Token> toks = tokens_of(f, im.dtype, again);
    ast::Program mp = parse(f, toks, again);
    resolve(f, mp, again, ctx);
    ctx.chain.pop_back();
    ctx.names.pop_back();
    if (!again.diagnostics().empty()) {
      LineCol lc = f.line_col(again.diagnostics().front().span.begin);
      sink.error(DiagKind::Import, im.span,
                 "module " + q(im.module) + " does not import here: " + m->name + ":" + std::to_string(lc.line) + ":" +
                     std::to_string(lc.col) + ": " + again.diagnostics().front().message);
      failed.insert(im.alias);
      continue;
    }
    Merge(im.alias, im.span, mp).into(mp, program);
  }
  // What uses a module that failed is not checked further (its signature
  // is), so its calls do not cascade into "unknown function" errors.
  if (!failed.empty()) quiet_uses(program, failed);
}

}  // namespace

void resolve_imports(const SourceFile& file, ast::Program& program, DiagnosticSink& sink, bool file_imports) {
  Context ctx;
  ctx.file_imports = file_imports;
  std::error_code ec;
  std::filesystem::path self = std::filesystem::weakly_canonical(file.name(), ec);
  ctx.chain.push_back(ec ? file.name() : self.string());
  ctx.names.push_back(std::filesystem::path(file.name()).filename().string());
  resolve(file, program, sink, ctx);
}

}  // namespace mlk
