// Records and Arrays to tensor parameters (lang/records.h).
#include "lang/records.h"

#include <algorithm>
#include <map>
#include <set>

#include "lang/ast_clone.h"

namespace mlk {
namespace {

std::string q(const std::string& s) { return "`" + s + "`"; }

// Bounds, so that a hostile program cannot make the front end build an
// unbounded number of parameters or calls.
constexpr long long kMaxArray = 1024;   // elements of one Array
constexpr size_t kMaxLeaves = 4096;     // tensor parameters one parameter becomes
constexpr int kMaxNesting = 32;         // records inside records
constexpr int kMaxDimNodes = 256;       // nodes of one dimension argument after substitution
constexpr size_t kMaxExpanded = 1 << 18;  // leaves, expanded arguments and fold calls in one program
constexpr int kMaxTreeHeight = 1000;    // the parser's bound on an expression's height (lang/parser.cpp)

int nodes(const ast::DimExpr& d) { return 1 + (d.lhs ? nodes(*d.lhs) : 0) + (d.rhs ? nodes(*d.rhs) : 0); }

bool is_float_dtype(const std::string& d) { return d == "F16" || d == "BF16" || d == "F32" || d == "F64"; }

using Subst = std::map<std::string, const ast::DimExpr*>;
using ast::clone;

// The value of a dimension expression with no names, or nullopt.
std::optional<long long> constant(const ast::DimExpr& d) {
  using K = ast::DimExpr::Kind;
  if (d.kind == K::kInt) return d.value;
  if (d.kind == K::kName) return std::nullopt;
  auto a = constant(*d.lhs), b = constant(*d.rhs);
  if (!a || !b || *a > kMaxArray || *b > kMaxArray || *a < -kMaxArray || *b < -kMaxArray) return std::nullopt;
  switch (d.kind) {
    case K::kAdd: return *a + *b;
    case K::kSub: return *a - *b;
    case K::kMul: return *a * *b;
    case K::kDiv: return *b != 0 && *a % *b == 0 ? std::optional<long long>(*a / *b) : std::nullopt;
    default: return std::nullopt;
  }
}

// A record-typed value after expansion: a leaf (a tensor parameter), or a
// record / Array whose children are named ("w", "0", ..) in order.
struct Node {
  std::string name;    // its field name or index ("w", "0"); the parameter's name at the root
  std::string type;    // "Linear[D, 4]", "Array[..]"; empty for a leaf
  std::string record;  // the record's name ("Array" for an Array); empty for a leaf
  std::string dtype;   // a leaf's dtype
  std::string param;   // a leaf's parameter name
  const ast::Record* decl = nullptr;
  std::vector<Node> children;  // (a vector of an incomplete type: C++17)
  bool leaf() const { return record.empty(); }
  void leaves(std::vector<const Node*>& out) const {
    if (leaf()) out.push_back(this);
    for (const auto& c : children) c.leaves(out);
  }
};

std::string dim_text(const ast::DimExpr& d) {
  using K = ast::DimExpr::Kind;
  if (d.kind == K::kInt) return std::to_string(d.value);
  if (d.kind == K::kName) return d.name;
  const char* op = d.kind == K::kAdd ? " + " : d.kind == K::kSub ? " - " : d.kind == K::kMul ? " * " : " / ";
  return "(" + dim_text(*d.lhs) + op + dim_text(*d.rhs) + ")";
}

class Lowering {
 public:
  Lowering(const SourceFile& file, ast::Program& p, DiagnosticSink& sink) : file_(file), p_(p), sink_(sink) {}

  std::map<std::string, std::vector<ir::Function::RecordParam>> run() {
    declare_records();
    for (ast::Function& f : p_.functions) {
      expand_params(f);
      record_params_[f.name] = fn_records_;
    }
    // A transform's fns take its source's parameters (first, in order), so
    // its records; twice, for a transform of a transform written after it.
    for (int pass = 0; pass < 2; ++pass)
      for (const ast::Transform& t : p_.transforms)
        if (auto it = record_params_.find(t.source); it != record_params_.end())
          for (const auto& [n, s] : t.names) {
            record_params_[n] = it->second;
            written_[n] = written_[t.source];
            scopes_[n] = scopes_[t.source];
            if (out_.count(t.source)) out_[n] = out_[t.source];
          }
    for (ast::Function& f : p_.functions) rewrite_body(f);
    for (ast::Transform& t : p_.transforms) rewrite_transform(t);
    return std::move(out_);
  }

 private:
  struct Scope {  // the record parameters of one fn, by name
    std::map<std::string, Node> params;
    std::map<std::string, std::string> leaves;  // their leaves' parameter names -> paths ("p_w" -> "p.w")
  };

  void error(DiagKind k, Span s, const std::string& m) {
    sink_.error(k, s, m);
    failed_ = true;
  }
  std::string at(Span s) const {
    LineCol lc = file_.line_col(s.begin);
    return std::to_string(lc.line) + ":" + std::to_string(lc.col);
  }

  // --- declarations ---

  void declare_records() {
    static const std::set<std::string> reserved = {"Array", "Dataframe", "Schema", "Nullable", "FixedSizeList"};
    for (const ast::Record& r : p_.records) {
      failed_ = false;
      if (reserved.count(r.name)) {
        error(DiagKind::Duplicate, r.name_span, q(r.name) + " is a built-in type name; name the record otherwise");
        continue;
      }
      if (auto it = records_.find(r.name); it != records_.end()) {
        error(DiagKind::Duplicate, r.name_span, "record " + q(r.name) + " is already declared at " + at(it->second->name_span));
        continue;
      }
      std::set<std::string> seen;
      for (const auto& [d, s] : r.dims)
        if (!seen.insert(d).second) error(DiagKind::Duplicate, s, "dimension " + q(d) + " of record " + q(r.name) + " is declared twice");
      seen.clear();
      for (const ast::Field& f : r.fields)
        if (!seen.insert(f.name).second)
          error(DiagKind::Duplicate, f.name_span, "field " + q(f.name) + " of record " + q(r.name) + " is declared twice");
      if (r.fields.empty()) error(DiagKind::RecordDecl, r.name_span, "record " + q(r.name) + " has no fields");
      records_[r.name] = &r;
      if (failed_) bad_.insert(r.name);
    }
    // Each declaration on its own, its dims standing for themselves: unknown
    // records and dimensions and wrong arities are reported once, here; a
    // cycle (and an Array length) only where a parameter expands the record.
    for (const ast::Record& r : p_.records) {
      auto it = records_.find(r.name);
      if (it == records_.end() || it->second != &r || bad_.count(r.name)) continue;
      failed_ = false;
      std::vector<std::string> stack{r.name};
      for (const ast::Field& f : r.fields) {
        Node n;
        size_t leaves = 0;
        std::vector<ast::Param> sink;
        expand(f.type, r.name + "." + f.name, Subst{}, &r, stack, n, sink, leaves, /*check_only=*/true);
      }
      if (failed_) bad_.insert(r.name);
    }
  }

  // Expands `t` at `path` into `node` and (unless check_only) parameters.
  // `in`: the record whose field this is (its dims are the only names a
  // field's type may use), or nullptr at a fn's parameter.
  bool expand(const ast::Type& t, const std::string& path, const Subst& s, const ast::Record* in,
              std::vector<std::string>& stack, Node& node, std::vector<ast::Param>& out, size_t& leaves,
              bool check_only) {
    if (t.record.empty()) {  // a Tensor or Scalar
      if (in && check_only) {  // at use, the record's names are replaced by the arguments
        for (const auto& d : t.shape)
          if (!names_declared(*d, *in)) return false;
        for (const auto& p : t.preds)
          if (!names_declared(*p.lhs, *in) || !names_declared(*p.rhs, *in)) return false;
      }
      node.dtype = t.dtype;
      node.param = field_param_name(path);
      if (!check_only) {
        leaf_path_[node.param] = path;
        if (!spend(1, t.span)) return false;
        if (++leaves > kMaxLeaves) {
          error(DiagKind::RecordDecl, t.span,
                "this parameter becomes more than " + std::to_string(kMaxLeaves) + " tensors; split it");
          return false;
        }
        ast::Param p;
        p.name = node.param;
        p.type.span = t.span;
        p.type.dtype_span = t.dtype_span;
        p.type.dtype = t.dtype;
        for (const auto& d : t.shape) p.type.shape.push_back(clone(*d, s));
        for (const auto& pr : t.preds) {
          ast::Pred c;
          c.op = pr.op;
          c.span = pr.span;
          c.lhs = clone(*pr.lhs, s);
          c.rhs = clone(*pr.rhs, s);
          p.type.preds.push_back(std::move(c));
        }
        out.push_back(std::move(p));
      }
      return true;
    }
    if (stack.size() > static_cast<size_t>(kMaxNesting)) {
      error(DiagKind::RecordDecl, t.record_span, "records nest more than " + std::to_string(kMaxNesting) + " deep here");
      return false;
    }
    for (const auto& a : t.record_args)
      if (in && check_only && !names_declared(*a, *in)) return false;
    std::vector<std::unique_ptr<ast::DimExpr>> args;
    for (const auto& a : t.record_args) {
      args.push_back(clone(*a, s));  // bounded: each argument was checked at the level above
      if (nodes(*args.back()) > kMaxDimNodes) {
        error(DiagKind::RecordDecl, t.record_span,
              "a dimension argument of " + q(t.record) + " grows past " + std::to_string(kMaxDimNodes) +
                  " terms through the records that pass it on; simplify it");
        return false;
      }
    }
    std::string argtext;
    for (const auto& a : args) argtext += (argtext.empty() ? "" : ", ") + dim_text(*a);
    node.record = t.record;
    if (t.record == "Array") {
      node.type = "Array[" + (t.element->record.empty() ? std::string("Tensor") : t.element->record) + ", " + argtext + "]";
      long long n = 1;
      if (!check_only) {
        auto c = constant(*args[0]);
        if (!c || *c < 1 || *c > kMaxArray) {
          error(DiagKind::RecordDecl, args[0]->span,  // where the length was written: at the use
                "the length of an Array is a constant from 1 to " + std::to_string(kMaxArray) + " where it is used; here it is `" +
                    argtext + "`");
          return false;
        }
        n = *c;
      }
      for (long long i = 0; i < n; ++i) {
        node.children.emplace_back();
        node.children.back().name = std::to_string(i);
        if (!expand(*t.element, path + "." + std::to_string(i), s, in, stack, node.children.back(), out, leaves,
                    check_only))
          return false;
      }
      return true;
    }
    auto it = records_.find(t.record);
    if (it == records_.end()) {
      std::string known;
      for (const auto& [n, r] : records_) known += (known.empty() ? "" : ", ") + n;
      error(DiagKind::UnknownRecord, t.record_span,
            "unknown type " + q(t.record) + "; a type is `Tensor[..]`, `Scalar[..]`, `Array[..]`, `Dataframe[..]` or a record" +
                (known.empty() ? std::string(" (none is declared)") : " (declared: " + known + ")"));
      return false;
    }
    const ast::Record& r = *it->second;
    node.decl = &r;
    node.type = t.record + (args.empty() ? "" : "[" + argtext + "]");
    if (bad_.count(r.name)) {  // already reported at its declaration
      failed_ = true;
      return false;
    }
    if (args.size() != r.dims.size()) {
      error(DiagKind::RecordDecl, t.span,
            "record " + q(r.name) + " takes " + std::to_string(r.dims.size()) + " dimension" + (r.dims.size() == 1 ? "" : "s") +
                ", found " + std::to_string(args.size()) + " (declared at " + at(r.name_span) + ")");
      return false;
    }
    if (std::count(stack.begin(), stack.end(), r.name)) {
      error(DiagKind::RecordDecl, t.record_span, "record " + q(r.name) + " contains itself (through " + stack.back() + ")");
      return false;
    }
    if (check_only && in) return true;  // the record is checked at its own declaration
    Subst inner;
    for (size_t i = 0; i < args.size(); ++i) inner[r.dims[i].first] = args[i].get();
    stack.push_back(r.name);
    bool ok = true;
    for (const ast::Field& f : r.fields) {
      node.children.emplace_back();
      node.children.back().name = f.name;
      ok = ok && expand(f.type, path + "." + f.name, inner, &r, stack, node.children.back(), out, leaves, check_only);
    }
    stack.pop_back();
    return ok;
  }

  // Counts `n` against the program's budget of expanded tensors and calls.
  bool spend(size_t n, Span s) {
    if ((expanded_ += n) <= kMaxExpanded) return true;
    if (!over_budget_)
      error(DiagKind::RecordDecl, s,
            "records expand to more than " + std::to_string(kMaxExpanded) +
                " parameters, arguments and fold calls in this program; split it");
    over_budget_ = failed_ = true;
    return false;
  }

  bool names_declared(const ast::DimExpr& d, const ast::Record& r) {
    if (d.kind == ast::DimExpr::Kind::kName) {
      for (const auto& [n, s] : r.dims)
        if (n == d.name) return true;
      error(DiagKind::UnknownDim, d.span,
            "unknown dimension " + q(d.name) + "; declare it in the record's dimension list `record " + r.name + " [..]`");
      return false;
    }
    return (!d.lhs || names_declared(*d.lhs, r)) && (!d.rhs || names_declared(*d.rhs, r));
  }

  void expand_params(ast::Function& f) {
    fn_records_.clear();
    scope_ = Scope{};
    failed_ = false;
    std::vector<ast::Param> params;
    std::vector<std::string>& written = written_[f.name];
    for (ast::Param& p : f.params) {
      written.push_back(p.name);
      if (p.type.record.empty()) {
        fn_records_.push_back("");
        params.push_back(std::move(p));
        continue;
      }
      Node n;
      std::vector<ast::Param> leaves;
      std::vector<std::string> stack;
      size_t count = 0;
      fn_records_.push_back(p.type.record == "Array" ? "Array" : p.type.record);
      if (!expand(p.type, p.name, Subst{}, nullptr, stack, n, leaves, count, false)) continue;
      ir::Function::RecordParam rp{p.name, n.type, static_cast<int>(params.size()), static_cast<int>(leaves.size())};
      for (auto& l : leaves) {
        l.name_span = p.name_span;
        scope_.leaves[l.name] = leaf_path_[l.name];
        rp.paths.push_back(leaf_path_[l.name].substr(p.name.size() + 1));
        params.push_back(std::move(l));
      }
      scope_.params[p.name] = std::move(n);
      out_[f.name].push_back(rp);
    }
    f.params = std::move(params);
    if (failed_) {
      // The signature without the bad parameter is still checked; the body
      // is not, so nothing that used the parameter cascades.
      f.had_syntax_error = true;
      f.lets.clear();
      f.body.reset();
      out_.erase(f.name);
    }
    scopes_[f.name] = std::move(scope_);
  }

  // --- bodies ---

  // The node a name or path denotes in the current scope; nullptr when its
  // root is no record parameter; `bad` after an error.
  const Node* resolve(const ast::Expr& e, bool& bad) {
    bad = false;
    const std::string& n = e.name;
    size_t dot = n.find('.');
    auto it = scope_.params.find(n.substr(0, dot));
    if (it == scope_.params.end()) return nullptr;
    const Node* cur = &it->second;
    std::string walked = it->first;
    while (dot != std::string::npos) {
      size_t next = n.find('.', dot + 1);
      std::string part = n.substr(dot + 1, next == std::string::npos ? std::string::npos : next - dot - 1);
      const Node* found = nullptr;
      for (const auto& c : cur->children)
        if (c.name == part) found = &c;
      if (found == nullptr) {
        bad = true;
        if (cur->leaf())
          error(DiagKind::UnknownField, e.span, q(walked) + " is a tensor; it has no field " + q(part));
        else if (cur->record == "Array")
          error(DiagKind::UnknownField, e.span,
                q(walked) + " is an " + cur->type + "; index it with an integer from 0 to " +
                    std::to_string(cur->children.size() - 1) + ", not " + q(part));
        else {
          std::string names;
          for (const auto& c : cur->children) names += (names.empty() ? "" : ", ") + c.name;
          error(DiagKind::UnknownField, e.span,
                "record " + q(cur->record) + " has no field " + q(part) + " (its fields: " + names + "; declared at " +
                    at(cur->decl->name_span) + ")");
        }
        return nullptr;
      }
      cur = found;
      walked += "." + part;
      dot = next;
    }
    return cur;
  }

  bool user_fn(const std::string& n) const { return record_params_.count(n) > 0; }

  void use_error(const ast::Expr& e, const Node& n) {
    error(DiagKind::RecordUse, e.span,
          q(e.name) + " is a " + n.type + ", not a value; take a field (`" + e.name + "." + n.children.front().name +
              "`), or pass it whole to a fn");
  }

  // Whether `fn` is a fn of the program as written (not one a transform defines).
  bool written_by_hand(const std::string& fn) const {
    return std::any_of(p_.functions.begin(), p_.functions.end(), [&](const ast::Function& f) { return f.name == fn; });
  }

  // The leaves of written parameter i (1 for a tensor; 0 for a record whose
  // declaration had an error).
  size_t leaves_of(const std::vector<std::string>& names, const std::vector<std::string>& kinds, size_t i) {
    if (kinds[i].empty()) return 1;
    auto it = scope_.params.find(names[i]);
    if (it == scope_.params.end()) return 0;
    std::vector<const Node*> leaves;
    it->second.leaves(leaves);
    return leaves.size();
  }
  size_t leaf_count(const std::vector<std::string>& names, const std::vector<std::string>& kinds) {
    size_t n = 0;
    for (size_t i = 0; i < names.size(); ++i) n += leaves_of(names, kinds, i);
    return n;
  }

  // "`shard` needs `spec=[..]` with one entry per parameter of `f` as
  // written (2: `params`, a Params[D, H] of 4 leaves; `batch`), a record's
  // entry applying to each of its leaves, or one per leaf (5); found 3".
  std::string written_count(const ast::Transform& t, const std::vector<std::string>& names,
                            const std::vector<std::string>& kinds, size_t found) {
    std::string list;
    for (size_t i = 0; i < names.size(); ++i) {
      list += (i ? "; " : "") + q(names[i]);
      auto it = scope_.params.find(names[i]);
      if (kinds[i].empty() || it == scope_.params.end()) continue;
      const size_t n = leaves_of(names, kinds, i);
      list += ", a " + it->second.type + " of " + std::to_string(n) + (n == 1 ? " leaf" : " leaves");
    }
    const std::string kw = t.kind == "vmap" ? "axes" : "spec";
    return q(t.kind) + " needs `" + kw + "=[..]` with one entry per parameter of " + q(t.source) + " as written (" +
           std::to_string(names.size()) + ": " + list + "), a record's entry applying to each of its leaves, or one "
           "per leaf (" + std::to_string(leaf_count(names, kinds)) + "); found " + std::to_string(found);
  }

  ast::ExprPtr leaf_name(const Node& leaf, Span s) {
    auto e = std::make_unique<ast::Expr>();
    e->kind = ast::Expr::Kind::kName;
    e->name = leaf.param;
    e->span = s;
    return e;
  }

  // After an error in a path: the name of its root, so no later pass
  // reports the path again (the fn is then checked by its signature only).
  static void drop_path(ast::Expr& e) { e.name = e.name.substr(0, e.name.find('.')); }

  void expr(ast::ExprPtr& e) {
    if (e->kind == ast::Expr::Kind::kName && scope_.leaves.count(e->name) && !scope_.params.count(e->name)) {
      error(DiagKind::RecordUse, e->span,
            q(e->name) + " is the parameter the field " + q(scope_.leaves.at(e->name)) + " became; write " +
                q(scope_.leaves.at(e->name)));
      return;
    }
    if (e->kind == ast::Expr::Kind::kName) {
      bool bad = false;
      const Node* n = resolve(*e, bad);
      if (n && n->leaf()) e->name = n->param;
      else if (n) use_error(*e, *n);
      if (bad || (n && !n->leaf())) drop_path(*e);
      return;
    }
    if (e->kind == ast::Expr::Kind::kCall && e->name == "fold" && !user_fn("fold")) return fold(e);
    if (e->kind == ast::Expr::Kind::kCall && user_fn(e->name)) return call(*e);
    for (auto& a : e->args) expr(a);
  }

  // A call of a user fn: record arguments become their leaves.
  void call(ast::Expr& e) {
    const std::vector<std::string>& want = record_params_.at(e.name);
    std::vector<ast::ExprPtr> args;
    std::vector<std::string> kws;
    std::vector<Span> kw_spans;
    size_t position = 0;
    for (size_t i = 0; i < e.args.size(); ++i) {
      ast::ExprPtr& a = e.args[i];
      const bool positional = e.arg_keywords[i].empty();
      std::string expect = positional && position < want.size() ? want[position] : "";
      bool known = positional;  // a positional argument, or a keyword naming a written parameter
      if (!positional)
        if (auto w = written_.find(e.name); w != written_.end())
          for (size_t j = 0; j < w->second.size() && j < want.size(); ++j)
            if (w->second[j] == e.arg_keywords[i]) {
              expect = want[j];
              known = true;
            }
      if (positional) ++position;
      const std::string which = positional ? std::to_string(position) : q(e.arg_keywords[i]);
      bool bad = false;
      const Node* n = a->kind == ast::Expr::Kind::kName ? resolve(*a, bad) : nullptr;
      if (bad) {
        drop_path(*a);
        args.push_back(std::move(a));
        kws.push_back(e.arg_keywords[i]);
        kw_spans.push_back(e.arg_keyword_spans[i]);
        continue;
      }
      if (n == nullptr || n->leaf()) {
        if (known && !expect.empty())
          error(DiagKind::BadArguments, a->span,
                "argument " + which + " of " + q(e.name) + " is a record " + q(expect) +
                    "; pass a value of that record (a parameter, or a path into one)");
        expr(a);
        args.push_back(std::move(a));
        kws.push_back(e.arg_keywords[i]);
        kw_spans.push_back(e.arg_keyword_spans[i]);
        continue;
      }
      if (!known || expect != n->record) {
        error(DiagKind::BadArguments, a->span,
              known ? "argument " + which + " of " + q(e.name) + " is " +
                          (expect.empty() ? std::string("a tensor") : "a record " + q(expect)) + ", found " + q(a->name) +
                          ", a " + n->type
                    : q(e.name) + " has no parameter " + which + " (found " + q(a->name) + ", a " + n->type + ")");
        continue;
      }
      std::vector<const Node*> leaves;
      n->leaves(leaves);
      if (!spend(leaves.size(), a->span)) return;
      for (const Node* l : leaves) {
        args.push_back(leaf_name(*l, a->span));
        // `k=p.out` -> `k_w=p_out_w`: the callee's leaf is named by its path under `k`.
        kws.push_back(positional ? "" : e.arg_keywords[i] + l->param.substr(field_param_name(a->name).size()));
        kw_spans.push_back(e.arg_keyword_spans[i]);
      }
    }
    e.args = std::move(args);
    e.arg_keywords = std::move(kws);
    e.arg_keyword_spans = std::move(kw_spans);
  }

  // fold[dims](xs, init, g, extra..) -> g[dims](.. g[dims](init, xs[0], extra..) .., xs[N-1], extra..).
  void fold(ast::ExprPtr& e) {
    const char* form =
        "`fold` takes an Array, the initial value, a fn and the fn's other arguments: `fold(xs, init, g, a..)`, "
        "calling `g(carry, xs[i], a..)`";
    bool positional = e->args.size() >= 3 && e->args[2]->kind == ast::Expr::Kind::kName;
    for (const auto& k : e->arg_keywords) positional = positional && k.empty();
    if (!positional) {
      error(DiagKind::BadArguments, e->span, form);
      return;
    }
    bool bad = false;
    const Node* xs = e->args[0]->kind == ast::Expr::Kind::kName ? resolve(*e->args[0], bad) : nullptr;
    if (bad) return drop_path(*e->args[0]);
    if (xs == nullptr || xs->record != "Array") {
      error(DiagKind::BadArguments, e->args[0]->span,
            std::string("the first argument of `fold` is an Array (a parameter or field of type `Array[..]`); ") + form);
      return;
    }
    const std::string g = e->args[2]->name;
    if (!user_fn(g)) {
      error(DiagKind::BadArguments, e->args[2]->span, "`fold` calls a fn of this program; " + q(g) + " is none");
      return;
    }
    if (e->args[1]->depth + static_cast<int>(xs->children.size()) > kMaxTreeHeight) {
      error(DiagKind::BadArguments, e->span,
            "`fold` over " + std::to_string(xs->children.size()) + " elements nests its calls deeper than " +
                std::to_string(kMaxTreeHeight) + " here; fold fewer elements, or fold inside a fn");
      return;
    }
    const size_t extras = e->args.size() - 3;
    if (!spend(xs->children.size() * (1 + extras), e->span)) return;
    ast::ExprPtr acc = std::move(e->args[1]);
    const std::string base = e->args[0]->name;
    for (size_t i = 0; i < xs->children.size(); ++i) {
      auto c = std::make_unique<ast::Expr>();
      c->kind = ast::Expr::Kind::kCall;
      c->name = g;
      c->span = e->span;
      c->callee_span = e->args[2]->span;
      c->depth = acc->depth + 1;
      for (const auto& [n, d] : e->dim_args) c->dim_args.emplace_back(n, ast::clone(*d));
      c->dim_arg_spans = e->dim_arg_spans;
      auto arg = [&](ast::ExprPtr a, Span s) {
        c->depth = std::max(c->depth, a->depth + 1);
        c->args.push_back(std::move(a));
        c->arg_keywords.emplace_back();
        c->arg_keyword_spans.push_back(s);
      };
      arg(std::move(acc), e->span);
      auto x = std::make_unique<ast::Expr>();
      x->kind = ast::Expr::Kind::kName;
      x->name = base + "." + xs->children[i].name;
      x->span = e->args[0]->span;
      arg(std::move(x), e->args[0]->span);
      for (size_t k = 3; k < e->args.size(); ++k) arg(ast::clone(*e->args[k]), e->args[k]->span);
      acc = std::move(c);
    }
    expr(acc);  // once, from the outermost call in
    e = std::move(acc);
  }

  void rewrite_body(ast::Function& f) {
    scope_ = std::move(scopes_[f.name]);
    failed_ = false;
    for (auto& l : f.lets) {
      if (l.value) expr(l.value);
      if (scope_.params.count(l.name))
        error(DiagKind::Duplicate, l.name_span, q(l.name) + " is already a record parameter of this fn");
    }
    if (f.body) expr(f.body);
    if (failed_) {  // reported; the checker checks the signature only, and no later pass reads the body
      f.had_syntax_error = true;
      f.lets.clear();
      f.body.reset();
    }
    scopes_[f.name] = std::move(scope_);
  }

  // --- transforms ---

  void rewrite_transform(ast::Transform& t) {
    auto sc = scopes_.find(t.source);
    if (sc == scopes_.end() || sc->second.params.empty()) return;
    scope_ = sc->second;
    const std::vector<std::string>& kinds = record_params_.at(t.source);
    const std::vector<std::string>& names = written_.at(t.source);
    if (names.size() != kinds.size()) return;  // the source is defined twice (the checker says so)
    // grad and value_and_grad without `wrt` differentiate the first
    // parameter as written (lang/transforms.cpp): a record's float leaves.
    // Only for a record (a tensor is the first parameter as it is, and
    // lang/transforms.cpp names it when it is not float); not for a record
    // whose declaration failed (reported already).
    if ((t.kind == "grad" || t.kind == "value_and_grad") && !names.empty() && !kinds.front().empty() &&
        scope_.params.count(names.front()) &&
        std::find(t.keywords.begin(), t.keywords.end(), "wrt") == t.keywords.end()) {
      auto list = std::make_unique<ast::Expr>(), first = std::make_unique<ast::Expr>();
      first->kind = ast::Expr::Kind::kName, first->name = names.front(), first->span = t.source_span;
      list->kind = ast::Expr::Kind::kList, list->span = t.source_span, list->depth = 2;
      list->args.push_back(std::move(first));
      t.keywords.push_back("wrt"), t.keyword_spans.push_back(t.source_span), t.values.push_back(std::move(list));
    }
    for (size_t k = 0; k < t.keywords.size(); ++k) {
      ast::Expr& v = *t.values[k];
      if (v.kind != ast::Expr::Kind::kList) continue;
      std::vector<ast::ExprPtr> out;
      if (t.keywords[k] == "wrt") {  // a record: its float leaves
        for (auto& a : v.args) {
          bool bad = false;
          const Node* n = a->kind == ast::Expr::Kind::kName ? resolve(*a, bad) : nullptr;
          if (bad) {
            t.had_error = true;  // reported; the transform's fns are invalid, nothing cascades
            continue;
          }
          if (n == nullptr) {
            out.push_back(std::move(a));
            continue;
          }
          std::vector<const Node*> leaves;
          n->leaves(leaves);
          size_t before = out.size();
          for (const Node* l : leaves)
            if (n->leaf() || is_float_dtype(l->dtype)) out.push_back(leaf_name(*l, a->span));
          if (out.size() == before) {
            error(DiagKind::GradWrt, a->span, q(a->name) + ", a " + n->type + ", has no float field to differentiate");
            t.had_error = true;
          }
        }
      } else if (t.keywords[k] == "axes" || t.keywords[k] == "spec") {
        // One entry per parameter as written: a record's for each of its leaves.
        // Or one per leaf, as the fn's parameters are after this pass.
        // A source a transform defines (a vjp's, with its cotangent and
        // residuals) has parameters beyond those written: the transform's
        // own check counts them.
        if (v.args.size() != kinds.size()) {
          if (v.args.size() == leaf_count(names, kinds) || !written_by_hand(t.source)) continue;
          error(DiagKind::TransformDecl, v.span, written_count(t, names, kinds, v.args.size()));
          t.had_error = true;
          return;
        }
        for (size_t i = 0; i < kinds.size(); ++i) {
          if (kinds[i].empty()) {
            out.push_back(std::move(v.args[i]));
            continue;
          }
          auto it = scope_.params.find(names[i]);
          if (it == scope_.params.end()) return;  // the parameter had an error
          std::vector<const Node*> leaves;
          it->second.leaves(leaves);
          for (size_t j = 0; j < leaves.size(); ++j) out.push_back(ast::clone(*v.args[i]));
        }
      } else {
        continue;
      }
      v.args = std::move(out);
    }
  }

  const SourceFile& file_;
  ast::Program& p_;
  DiagnosticSink& sink_;
  bool failed_ = false;
  size_t expanded_ = 0;
  bool over_budget_ = false;
  std::map<std::string, const ast::Record*> records_;
  std::set<std::string> bad_;  // records whose declaration had an error
  // Per fn (and fn a transform defines): for each parameter as written, its
  // record's name ("Array" for an Array), or "" for a tensor.
  std::map<std::string, std::vector<std::string>> record_params_;
  std::vector<std::string> fn_records_;
  std::map<std::string, std::vector<std::string>> written_;  // per fn: its parameters' names as written
  std::map<std::string, Scope> scopes_;
  Scope scope_;
  std::map<std::string, std::vector<ir::Function::RecordParam>> out_;
  std::map<std::string, std::string> leaf_path_;  // a leaf's parameter name -> its path, as expanded
};

}  // namespace

std::string field_param_name(const std::string& path) {
  std::string s = path;
  std::replace(s.begin(), s.end(), '.', '_');
  return s;
}

std::map<std::string, std::vector<ir::Function::RecordParam>> lower_records(const SourceFile& file, ast::Program& program,
                                                                            DiagnosticSink& sink) {
  return Lowering(file, program, sink).run();
}

}  // namespace mlk
