#include "lang/checker.h"

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <set>

#include "lang/checker_internal.h"
#include "lang/ir_verify.h"
#include "lang/transforms.h"

namespace mlk {
namespace check {

namespace {

std::string q(const std::string& s) { return "`" + s + "`"; }

ir::Op binary_op(const std::string& s) {
  static const std::map<std::string, ir::Op> m = {
      {"+", ir::Op::kAdd}, {"-", ir::Op::kSub}, {"*", ir::Op::kMul}, {"/", ir::Op::kDiv},
      {"==", ir::Op::kEq}, {"!=", ir::Op::kNe}, {"<", ir::Op::kLt},  {"<=", ir::Op::kLe},
      {">", ir::Op::kGt},  {">=", ir::Op::kGe}, {"&&", ir::Op::kAnd}, {"||", ir::Op::kOr}};
  return m.at(s);
}

std::string describe(const Val& v) { return v.name.empty() ? "" : " (" + q(v.name) + ")"; }

}  // namespace

std::optional<Dim> resolve_dim(const ast::DimExpr& d, const std::vector<std::string>& dims, const Facts& facts,
                               bool prove, DiagnosticSink& sink) {
  using K = ast::DimExpr::Kind;
  switch (d.kind) {
    case K::kInt: return Dim::constant(d.value);
    case K::kName:
      for (const auto& n : dims)
        if (n == d.name) return Dim::var(n);
      sink.error(DiagKind::UnknownDim, d.span,
                 "unknown dimension " + q(d.name) + "; declare it in the function's dimension list `[..]`");
      return std::nullopt;
    default: break;
  }
  auto a = resolve_dim(*d.lhs, dims, facts, prove, sink);
  auto b = resolve_dim(*d.rhs, dims, facts, prove, sink);
  if (!a || !b) return std::nullopt;
  Dim r;
  switch (d.kind) {
    case K::kAdd: r = *a + *b; break;
    case K::kSub: r = *a - *b; break;
    case K::kMul: r = *a * *b; break;
    case K::kDiv:
      if (*b == Dim()) {
        sink.error(DiagKind::DimOverflow, d.span, "dimension division by zero");
        return std::nullopt;
      }
      if (prove) {
        Pred p{Pred::Op::kModZero, *a, *b};
        if (!facts.prove(p)) {
          sink.error(DiagKind::Unproven, d.span,
                     q(Dim::exact_div(*a, *b).str()) + " needs " + q(p.str()) +
                         ", which is not known here; add [" + p.str() + "] to a parameter's type");
          return std::nullopt;
        }
      }
      r = Dim::exact_div(*a, *b);
      break;
    default: break;
  }
  if (r.overflowed()) {
    sink.error(DiagKind::DimOverflow, d.span, "dimension arithmetic overflows 64 bits");
    return std::nullopt;
  }
  return r;
}

FnChecker::FnChecker(const SourceFile& file, DiagnosticSink& sink, const std::map<std::string, Signature>& sigs,
                     const Signature& self)
    : file_(file), sink_(sink), sigs_(sigs), self_(self) {
  for (const Pred& p : self.refinements) facts_.add(p);
}

std::vector<ir::NodeRef> FnChecker::check_body() {
  const ast::Function& f = *self_.ast;
  size_t errors_before = sink_.count();
  for (size_t i = 0; i < self_.params.size(); ++i) {
    const ir::Param& p = self_.params[i];
    ir::Node n;
    n.op = ir::Op::kParam;
    n.type = p.type;
    n.index = static_cast<int>(i);
    Val v;
    v.node = ir::make(std::move(n));
    v.name = p.name;
    locals_[p.name] = v;
    for (size_t ax = 0; ax < p.type.shape.size(); ++ax) {
      std::set<std::string> vars;
      p.type.shape[ax].collect_vars(vars);
      for (const auto& var : vars)
        if (!bindings_.count(var))
          bindings_[var] = {var + " bound by " + q(p.name) + ".shape[" + std::to_string(ax) + "]"};
    }
  }
  for (const ast::Let& l : f.lets) {
    bool dup = locals_.count(l.name) > 0;
    for (const auto& d : self_.dims) dup = dup || d == l.name;
    if (dup) error(DiagKind::Duplicate, l.name_span, q(l.name) + " is already defined in " + q(f.name));
    Val v = l.value ? expr(*l.value) : Val::Error(l.name_span);
    if (!v.error && l.ascription) {
      auto declared = std::optional<ir::Type>();
      size_t before = sink_.count();
      ir::Type t{*parse_dtype(l.ascription->dtype), {}};
      for (const auto& d : l.ascription->shape) {
        auto dim = resolve_dim(*d, self_.dims, facts_, true, sink_);
        if (dim && prove_or_report({Pred::Op::kGe, *dim, Dim::constant(1)}, d->span, "dimension " + q(dim->str()), ""))
          t.shape.push_back(*dim);
      }
      // Refinements of an ascription are claims: proven from the facts in
      // scope, or refused (a let adds no facts of its own).
      for (const auto& p : l.ascription->preds) {
        auto a = resolve_dim(*p.lhs, self_.dims, facts_, true, sink_);
        auto b = resolve_dim(*p.rhs, self_.dims, facts_, true, sink_);
        if (a && b)
          prove_or_report({static_cast<Pred::Op>(p.op), *a, *b}, p.span, "`let " + l.name + " : " + t.str() + "`", "");
      }
      if (sink_.count() == before) {
        Val c = coerce(v, t);
        if (c.error) {
          v = c;
        } else if (!same_type(c.type(), t)) {
          error(DiagKind::ReturnType, l.value->span,
                "`let " + l.name + "` is declared " + t.str() + " but its value is " + c.type().str() +
                    where_bound(c.type().shape));
          v = Val::Error(l.value->span);
        } else {
          v = c;
        }
      } else {
        v = Val::Error(l.value->span);
      }
    } else if (!v.error && !require_typed(v, "`let " + l.name + "`")) {
      v = Val::Error(v.span);
    }
    if (!dup) {
      v.name = l.name;
      locals_[l.name] = v;
    }
  }
  if (!f.body) return {};
  // A fn with several results ends in a tuple of as many values, each
  // checked against its declared type.
  std::vector<ir::Type> want = {self_.result};
  want.insert(want.end(), self_.more_results.begin(), self_.more_results.end());
  std::vector<const ast::Expr*> tail = {f.body.get()};
  if (want.size() > 1 || f.body->kind == ast::Expr::Kind::kTuple) {
    if (f.body->kind != ast::Expr::Kind::kTuple || f.body->args.size() != want.size()) {
      size_t got = f.body->kind == ast::Expr::Kind::kTuple ? f.body->args.size() : 1;
      error(DiagKind::ReturnType, f.body->span,
            q(f.name) + " returns " + std::to_string(want.size()) + (want.size() == 1 ? " result" : " results") +
                " but its body ends in " + std::to_string(got) + (got == 1 ? " value" : " values") +
                (want.size() > 1 ? "; end it in a tuple `(" + std::string(want.size() == 2 ? "a, b" : "a, b, ..") + ")`"
                                 : "; declare the results as `-> (T, U, ..)`"));
      return {};
    }
    tail.clear();
    for (const auto& a : f.body->args) tail.push_back(a.get());
  }
  std::vector<ir::NodeRef> out;
  for (size_t i = 0; i < want.size(); ++i) {
    Val body = expr(*tail[i]);
    if (body.error) return {};
    body = coerce(body, want[i]);
    if (body.error) return {};
    if (!same_type(body.type(), want[i])) {
      std::string which = want.size() == 1 ? "" : " as its result " + std::to_string(i + 1);
      error(DiagKind::ReturnType, tail[i]->span,
            q(f.name) + " returns " + want[i].str() + which + " but its body is " + body.type().str() +
                where_bound(body.type().shape));
      return {};
    }
    out.push_back(body.node);
  }
  if (sink_.count() != errors_before) return {};
  return out;
}

Val FnChecker::expr(const ast::Expr& e) {
  Val v = expr_at(e);
  if (provenance && v.node && !v.error && !v.lit && e.kind != ast::Expr::Kind::kName) provenance->emplace(v.node, e.span);
  return v;
}

Val FnChecker::expr_at(const ast::Expr& e) {
  using K = ast::Expr::Kind;
  switch (e.kind) {
    case K::kInt:
    case K::kFloat: {
      Val v;
      v.lit = true;
      v.span = e.span;
      v.lit_text = e.text;
      v.lit_integral = e.kind == K::kInt;
      errno = 0;
      v.lit_value = std::strtod(e.text.c_str(), nullptr);
      if (errno == ERANGE && std::abs(v.lit_value) > 1) {
        error(DiagKind::LiteralRange, e.span, "literal " + q(e.text) + " is out of range of every dtype");
        return Val::Error(e.span);
      }
      return v;
    }
    case K::kBool: {
      Val v;
      v.lit = v.lit_bool = true;
      v.lit_value = e.bool_value ? 1 : 0;
      v.lit_text = e.bool_value ? "true" : "false";
      v.span = e.span;
      return v;
    }
    case K::kName: return name_ref(e);
    case K::kDType:
      error(DiagKind::BadArguments, e.span,
            "dtype " + q(e.name) + " is not a value; dtypes are arguments of `cast`, `iota` and `full` only");
      return Val::Error(e.span);
    case K::kList:
      error(DiagKind::BadArguments, e.span, "a list is not a value; lists are arguments of builtins only");
      return Val::Error(e.span);
    case K::kTuple:
      error(DiagKind::BadArguments, e.span,
            "a tuple `(a, b, ..)` is not a value; it is only the whole result of a fn with several results");
      return Val::Error(e.span);
    case K::kUnary: return unary(e);
    case K::kBinary: return binary(e);
    case K::kCall: {
      auto it = sigs_.find(e.name);
      if (it != sigs_.end()) return call_fn(e, it->second);
      if (!is_builtin(e.name)) {
        error(DiagKind::UnknownFunction, e.callee_span, "unknown function " + q(e.name));
        for (const auto& a : e.args) expr(*a);  // still report errors inside the arguments
        return Val::Error(e.span);
      }
      if (!e.dim_args.empty()) {
        error(DiagKind::BadArguments, e.dim_arg_spans[0],
              "explicit dimensions are for calls of fns; builtin " + q(e.name) + " takes none");
        return Val::Error(e.span);
      }
      return builtin(e);
    }
  }
  return Val::Error(e.span);
}

Val FnChecker::name_ref(const ast::Expr& e) {
  auto it = locals_.find(e.name);
  if (it != locals_.end()) {
    Val v = it->second;
    v.span = e.span;
    return v;
  }
  for (const auto& d : self_.dims)
    if (d == e.name) {
      error(DiagKind::UnknownName, e.span,
            q(e.name) + " is a dimension, not a value; write it inside a shape or as a builtin's dimension argument");
      return Val::Error(e.span);
    }
  error(DiagKind::UnknownName, e.span, "unknown name " + q(e.name));
  return Val::Error(e.span);
}

Val FnChecker::unary(const ast::Expr& e) {
  Val a = expr(*e.args[0]);
  if (a.error) return Val::Error(e.span);
  if (a.lit) {
    if (e.name == "-" && !a.lit_bool) {
      a.lit_value = -a.lit_value;
      a.lit_text = a.lit_text[0] == '-' ? a.lit_text.substr(1) : "-" + a.lit_text;
    } else if (e.name == "!" && a.lit_bool) {
      a.lit_value = 1 - a.lit_value;
      a.lit_text = a.lit_value ? "true" : "false";
    } else {
      error(DiagKind::BadOperandDType, e.span, "unary " + q(e.name) + " does not apply to literal " + q(a.lit_text));
      return Val::Error(e.span);
    }
    a.span = e.span;
    return a;
  }
  DType t = a.type().dtype;
  bool ok = e.name == "-" ? is_signed(t) : t == DType::Bool;
  if (!ok) {
    error(DiagKind::BadOperandDType, e.span,
          "unary " + q(e.name) + (e.name == "-" ? " needs a signed or floating-point dtype" : " needs Bool") +
              ", found " + dtype_name(t) + describe(a));
    return Val::Error(e.span);
  }
  ir::Node n;
  n.op = e.name == "-" ? ir::Op::kNeg : ir::Op::kNot;
  n.type = a.type();
  n.operands = {a.node};
  Val r;
  r.node = ir::make(std::move(n));
  r.span = e.span;
  return r;
}

Val FnChecker::binary(const ast::Expr& e) {
  Val a = expr(*e.args[0]);
  Val b = expr(*e.args[1]);
  if (a.error || b.error) return Val::Error(e.span);
  ir::Op op = binary_op(e.name);
  bool logic = op == ir::Op::kAnd || op == ir::Op::kOr;
  bool cmp = op >= ir::Op::kEq && op <= ir::Op::kGe;
  if (a.lit && b.lit) {
    error(DiagKind::LiteralRange, e.span,
          "both operands of " + q(e.name) + " are literals, so the result has no dtype or shape; "
          "give one of them a type with `full(DTYPE, [DIMS], VALUE)`");
    return Val::Error(e.span);
  }
  if (a.lit) a = coerce(a, b.type());
  if (b.lit) b = coerce(b, a.type());
  if (a.error || b.error) return Val::Error(e.span);
  const ir::Type& ta = a.type();
  const ir::Type& tb = b.type();
  if (ta.dtype != tb.dtype) {
    error(DiagKind::DTypeMismatch, e.span,
          q(e.name) + " needs identical dtypes, found " + ta.str() + describe(a) + " and " + tb.str() + describe(b) +
              "; convert one with `cast`");
    return Val::Error(e.span);
  }
  if ((ta.shape.empty()) != (tb.shape.empty())) {
    const Val& s = ta.shape.empty() ? a : b;
    const Val& t = ta.shape.empty() ? b : a;
    error(DiagKind::ImplicitBroadcast, e.span,
          q(e.name) + " does not broadcast the scalar" + (s.name.empty() ? std::string() : " " + q(s.name)) + " (" +
              s.type().str() + ") to " + t.type().str() + describe(t) + "; write `broadcast(" +
              (s.name.empty() ? "..." : s.name) + ", " + shape_str(t.type().shape) + ")`");
    return Val::Error(e.span);
  }
  if (!same_shape(ta.shape, tb.shape)) {
    std::vector<Dim> all = ta.shape;
    all.insert(all.end(), tb.shape.begin(), tb.shape.end());
    error(DiagKind::ShapeMismatch, e.span,
          q(e.name) + " needs identical shapes, found " + ta.str() + describe(a) + " and " + tb.str() + describe(b) +
              where_bound(all) + broadcast_hint(ta.shape.size() < tb.shape.size() ? a : b,
                                                ta.shape.size() < tb.shape.size() ? b : a));
    return Val::Error(e.span);
  }
  DType t = ta.dtype;
  if (logic && t != DType::Bool) {
    error(DiagKind::BadOperandDType, e.span, q(e.name) + " needs Bool operands, found " + dtype_name(t));
    return Val::Error(e.span);
  }
  if (!logic && !cmp && t == DType::Bool) {
    error(DiagKind::BadOperandDType, e.span, q(e.name) + " is not defined on Bool; use `&&`, `||` or `where`");
    return Val::Error(e.span);
  }
  if (cmp && t == DType::Bool && op != ir::Op::kEq && op != ir::Op::kNe) {
    error(DiagKind::BadOperandDType, e.span, q(e.name) + " does not order Bool values; use `==` or `!=`");
    return Val::Error(e.span);
  }
  ir::Node n;
  n.op = op;
  n.type = {cmp ? DType::Bool : t, ta.shape};
  n.operands = {a.node, b.node};
  Val r;
  r.node = ir::make(std::move(n));
  r.span = e.span;
  return r;
}

Val FnChecker::coerce(const Val& v, const ir::Type& t) {
  if (v.error || !v.lit) return v;
  bool fits = v.lit_bool ? t.dtype == DType::Bool : literal_fits(t.dtype, v.lit_value, v.lit_integral);
  if (!v.lit_bool && v.lit_integral && t.dtype == DType::I64) {
    int64_t x;
    const std::string& s = v.lit_text;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
    fits = ec == std::errc() && p == s.data() + s.size();
  }
  if (!fits) {
    std::string why = v.lit_bool ? " is Bool, but the other operand is " + std::string(dtype_name(t.dtype))
                      : t.dtype == DType::Bool ? " is a number, but the other operand is Bool"
                      : is_integer(t.dtype) && !v.lit_integral ? " is not an integer, but the dtype is " + std::string(dtype_name(t.dtype))
                                              : " does not fit in " + std::string(dtype_name(t.dtype));
    error(DiagKind::LiteralRange, v.span, "literal " + q(v.lit_text) + why);
    return Val::Error(v.span);
  }
  ir::Node n;
  n.op = ir::Op::kLiteral;
  n.type = t;
  n.literal = v.lit_text;
  Val r;
  r.node = ir::make(std::move(n));
  r.span = v.span;
  return r;
}

bool FnChecker::require_typed(const Val& v, const std::string& what) {
  if (v.error) return false;
  if (!v.lit) return true;
  error(DiagKind::LiteralRange, v.span,
        "literal " + q(v.lit_text) + " has no dtype or shape as " + what +
            "; give it one with `full(DTYPE, [DIMS], VALUE)`");
  return false;
}

bool FnChecker::prove_or_report(const Pred& p, Span s, const std::string& what, const std::string& subject) {
  if (facts_.prove(p)) return true;
  std::vector<Dim> dims = {p.lhs, p.rhs};
  std::string where = subject.empty() ? param_mentioning(p.lhs) : subject;
  error(DiagKind::Unproven, s,
        what + " needs " + q(p.str()) + ", which the facts in scope do not prove; add [" + p.str() + "] to " +
            (where.empty() ? std::string("a parameter's type") : "the type of " + q(where)) + where_bound(dims));
  return false;
}

// "; to repeat `b` along the other axes, write `broadcast(b, [B, D],
// axes=[1])`" when `small`'s shape is `big`'s with axes left out (trailing
// axes matched first, as numpy aligns them); "" otherwise.
std::string FnChecker::broadcast_hint(const Val& small, const Val& big) const {
  const Shape& s = small.type().shape;
  const Shape& b = big.type().shape;
  if (s.empty() || s.size() >= b.size()) return "";
  auto same = [&](const Dim& x, const Dim& y) { return same_shape(Shape{x}, Shape{y}); };
  std::vector<int64_t> axes;
  bool trailing = true;
  for (size_t i = 0; i < s.size(); ++i) trailing = trailing && same(s[i], b[b.size() - s.size() + i]);
  if (trailing)
    for (size_t i = 0; i < s.size(); ++i) axes.push_back(static_cast<int64_t>(b.size() - s.size() + i));
  else
    for (size_t i = 0, j = 0; i < s.size(); ++i, ++j) {  // leftmost placement, in order
      while (j < b.size() && !same(s[i], b[j])) ++j;
      if (j == b.size()) return "";
      axes.push_back(static_cast<int64_t>(j));
    }
  std::string list;
  for (int64_t ax : axes) list += (list.empty() ? "" : ", ") + std::to_string(ax);
  const std::string name = small.name.empty() ? "..." : small.name;
  return "; to repeat " + (small.name.empty() ? std::string("it") : q(small.name)) +
         " along the other axes, write `broadcast(" + name + ", " + shape_str(b) + ", axes=[" + list + "])`";
}

bool FnChecker::same_shape(const Shape& a, const Shape& b) const {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!facts_.prove({Pred::Op::kEq, a[i], b[i]})) return false;
  return true;
}

bool FnChecker::same_type(const ir::Type& a, const ir::Type& b) const {
  return a.dtype == b.dtype && same_shape(a.shape, b.shape);
}

std::string FnChecker::where_bound(const std::vector<Dim>& dims) const {
  std::set<std::string> vars;
  for (const Dim& d : dims) d.collect_vars(vars);
  std::string out;
  for (const auto& v : vars) {
    auto it = bindings_.find(v);
    if (it == bindings_.end()) continue;
    out += (out.empty() ? " (" : "; ") + it->second.text;
  }
  return out.empty() ? out : out + ")";
}

std::string FnChecker::param_mentioning(const Dim& d) const {
  std::set<std::string> want;
  d.collect_vars(want);
  for (const auto& p : self_.params)
    for (const Dim& x : p.type.shape) {
      std::set<std::string> have;
      x.collect_vars(have);
      for (const auto& v : have)
        if (want.count(v)) return p.name;
    }
  return "";
}

std::optional<Dim> FnChecker::dim_of_ast(const ast::DimExpr& d) {
  return resolve_dim(d, self_.dims, facts_, true, sink_);
}

std::optional<Dim> FnChecker::dim_of(const ast::Expr& e) {
  using K = ast::Expr::Kind;
  switch (e.kind) {
    case K::kInt: {
      int64_t v;
      auto [p, ec] = std::from_chars(e.text.data(), e.text.data() + e.text.size(), v);
      if (ec != std::errc() || p != e.text.data() + e.text.size() || v > 2147483647) {
        error(DiagKind::LiteralRange, e.span, "dimension " + q(e.text) + " is out of range; dimensions are at most 2147483647");
        return std::nullopt;
      }
      return Dim::constant(v);
    }
    case K::kName:
      for (const auto& d : self_.dims)
        if (d == e.name) return Dim::var(d);
      error(DiagKind::UnknownDim, e.span,
            locals_.count(e.name) ? q(e.name) + " is a value, but a dimension is expected here"
                                  : "unknown dimension " + q(e.name) + "; declare it in the function's dimension list `[..]`");
      return std::nullopt;
    case K::kBinary: {
      if (e.name != "+" && e.name != "-" && e.name != "*" && e.name != "/") break;
      auto a = dim_of(*e.args[0]);
      auto b = dim_of(*e.args[1]);
      if (!a || !b) return std::nullopt;
      Dim r;
      if (e.name == "+") r = *a + *b;
      if (e.name == "-") r = *a - *b;
      if (e.name == "*") r = *a * *b;
      if (e.name == "/") {
        if (*b == Dim()) {
          error(DiagKind::DimOverflow, e.span, "dimension division by zero");
          return std::nullopt;
        }
        Pred p{Pred::Op::kModZero, *a, *b};
        if (!prove_or_report(p, e.span, q(Dim::exact_div(*a, *b).str()), "")) return std::nullopt;
        r = Dim::exact_div(*a, *b);
      }
      if (r.overflowed()) {
        error(DiagKind::DimOverflow, e.span, "dimension arithmetic overflows 64 bits");
        return std::nullopt;
      }
      return r;
    }
    default: break;
  }
  error(DiagKind::BadArguments, e.span, "expected a dimension (an integer, a dimension name, or `+ - * /` of them)");
  return std::nullopt;
}

std::optional<int64_t> FnChecker::int_of(const ast::Expr& e, const char* what) {
  const ast::Expr* x = &e;
  bool neg = false;
  if (x->kind == ast::Expr::Kind::kUnary && x->name == "-") {
    neg = true;
    x = x->args[0].get();
  }
  int64_t v;
  if (x->kind == ast::Expr::Kind::kInt) {
    auto [p, ec] = std::from_chars(x->text.data(), x->text.data() + x->text.size(), v);
    if (ec == std::errc() && p == x->text.data() + x->text.size() && v < (1 << 30)) return neg ? -v : v;
  }
  error(DiagKind::BadArguments, e.span, std::string("expected ") + what + " (an integer literal)");
  return std::nullopt;
}

Val FnChecker::call_fn(const ast::Expr& e, const Signature& callee) {
  std::vector<Val> args;
  bool bad = false;
  for (const auto& a : e.args) {
    args.push_back(expr(*a));
    bad = bad || args.back().error;
  }
  if (!callee.valid) return Val::Error(e.span);
  if (callee.split_part) {
    error(DiagKind::BadArguments, e.callee_span,
          q(callee.ast->name) + " is a part of a `vjp_split` (the values it passes between its forward and "
                                 "backward are known once the source is checked); it is not called from .tl");
    return Val::Error(e.span);
  }
  if (!callee.more_results.empty()) {
    error(DiagKind::BadArguments, e.callee_span,
          q(callee.ast->name) + " has " + std::to_string(1 + callee.more_results.size()) +
              " results, and a fn with several results cannot be called from .tl yet; call it from the runtime, "
              "or call the fns it is made of");
    return Val::Error(e.span);
  }
  auto slot = match_args(e, callee);
  if (!slot || bad) return Val::Error(e.span);
  std::map<std::string, Dim> m;
  if (!unify_dims(e, callee, args, *slot, m)) return Val::Error(e.span);
  return call_node(e, callee, args, *slot, m);
}

// Matches arguments to parameters: positional first, then by keyword.
std::optional<std::vector<int>> FnChecker::match_args(const ast::Expr& e, const Signature& callee) {
  const std::string fname = q(callee.ast->name);
  std::vector<int> slot(callee.params.size(), -1);
  for (size_t i = 0; i < e.args.size(); ++i) {
    size_t target = i;
    if (!e.arg_keywords[i].empty()) {
      target = callee.params.size();
      for (size_t j = 0; j < callee.params.size(); ++j)
        if (callee.params[j].name == e.arg_keywords[i]) target = j;
      if (target == callee.params.size()) {
        error(DiagKind::BadArguments, e.arg_keyword_spans[i], fname + " has no parameter " + q(e.arg_keywords[i]));
        return std::nullopt;
      }
    }
    if (target >= callee.params.size()) {
      error(DiagKind::BadArguments, e.args[i]->span,
            fname + " takes " + std::to_string(callee.params.size()) + (callee.params.size() == 1 ? " argument" : " arguments") + ", found " +
                std::to_string(e.args.size()));
      return std::nullopt;
    }
    if (slot[target] != -1) {
      error(DiagKind::BadArguments, e.args[i]->span, "parameter " + q(callee.params[target].name) + " of " + fname + " is given twice");
      return std::nullopt;
    }
    slot[target] = static_cast<int>(i);
  }
  for (size_t j = 0; j < slot.size(); ++j)
    if (slot[j] == -1) {
      error(DiagKind::BadArguments, e.span, "missing argument " + q(callee.params[j].name) + " of " + fname);
      return std::nullopt;
    }
  return slot;
}

// Unify: explicit dims first, then bare-variable extents, then solve the rest.
bool FnChecker::unify_dims(const ast::Expr& e, const Signature& callee, const std::vector<Val>& args,
                           const std::vector<int>& slot, std::map<std::string, Dim>& m) {
  const std::string fname = q(callee.ast->name);
  for (size_t i = 0; i < e.dim_args.size(); ++i) {
    const auto& [name, d] = e.dim_args[i];
    bool known = false;
    for (const auto& v : callee.dims) known = known || v == name;
    if (!known) {
      error(DiagKind::UnknownDim, e.dim_arg_spans[i], fname + " has no dimension " + q(name));
      return false;
    }
    if (m.count(name)) {
      error(DiagKind::BadArguments, e.dim_arg_spans[i], "dimension " + q(name) + " of " + fname + " is given twice");
      return false;
    }
    auto v = dim_of_ast(*d);
    if (!v) return false;
    if (!prove_or_report({Pred::Op::kGe, *v, Dim::constant(1)}, d->span, "dimension " + q(name), "")) return false;
    m[name] = *v;
  }
  for (size_t j = 0; j < callee.params.size(); ++j) {
    const Val& a = args[slot[j]];
    if (a.lit) continue;
    const ir::Type& pt = callee.params[j].type;
    if (a.type().dtype != pt.dtype || a.rank() != static_cast<int>(pt.shape.size())) {
      error(a.type().dtype != pt.dtype ? DiagKind::DTypeMismatch : DiagKind::ShapeMismatch, a.span,
            "argument " + q(callee.params[j].name) + " of " + fname + " must be " + pt.str() + ", found " +
                a.type().str());
      return false;
    }
    for (size_t ax = 0; ax < pt.shape.size(); ++ax) {
      const auto& ts = pt.shape[ax].terms();
      if (ts.size() == 1 && ts[0].coef == 1 && ts[0].atoms.size() == 1 && !ts[0].atoms[0].quot &&
          !m.count(ts[0].atoms[0].key))
        m[ts[0].atoms[0].key] = a.type().shape[ax];
    }
  }
  if (!solve_linear_dims(callee, args, slot, m)) return false;
  for (const auto& v : callee.dims)
    if (!m.count(v)) {
      error(DiagKind::CannotInfer, e.callee_span,
            "cannot infer dimension " + q(v) + " of " + fname + " from the arguments; give it explicitly: `" +
                callee.ast->name + "[" + v + "=...](...)`");
      return false;
    }
  return true;
}

// Solves the remaining linear patterns `c*V + rest = actual` for one unknown V.
bool FnChecker::solve_linear_dims(const Signature& callee, const std::vector<Val>& args, const std::vector<int>& slot,
                                  std::map<std::string, Dim>& m) {
  const std::string fname = q(callee.ast->name);
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t j = 0; j < callee.params.size(); ++j) {
      const Val& a = args[slot[j]];
      if (a.lit) continue;
      for (size_t ax = 0; ax < a.type().shape.size(); ++ax) {
        const Dim& pat = callee.params[j].type.shape[ax];
        std::set<std::string> vars;
        pat.collect_vars(vars);
        std::vector<std::string> unknown;
        for (const auto& v : vars)
          if (!m.count(v)) unknown.push_back(v);
        if (unknown.size() != 1) continue;
        const Dim::Term* lin = nullptr;
        Dim rest;
        for (const auto& t : pat.terms()) {
          bool has = false;
          for (const auto& at : t.atoms) has = has || (!at.quot && at.key == unknown[0]);
          if (has && t.atoms.size() == 1 && !lin) lin = &t;
          else if (has) { lin = nullptr; break; }
        }
        if (!lin) continue;
        rest = pat - Dim::constant(lin->coef) * Dim::var(unknown[0]);
        Dim num = a.type().shape[ax] - rest.subst(m);
        Dim c = Dim::constant(lin->coef);
        if (!facts_.prove({Pred::Op::kModZero, num, c})) continue;
        Dim solved = Dim::exact_div(num, c);
        if (!prove_or_report({Pred::Op::kGe, solved, Dim::constant(1)}, a.span,
                             "inferring " + q(unknown[0]) + " = " + q(solved.str()) + " for " + fname, ""))
          return false;
        m[unknown[0]] = solved;
        progress = true;
      }
    }
  }
  return true;
}

// The call's node, once every dimension of the callee has a value in `m`:
// operands coerced and their shapes checked, refinements proven.
Val FnChecker::call_node(const ast::Expr& e, const Signature& callee, const std::vector<Val>& args,
                         const std::vector<int>& slot, std::map<std::string, Dim>& m) {
  const std::string fname = q(callee.ast->name);
  ir::Node n;
  n.op = ir::Op::kCall;
  n.callee = callee.ast->name;
  for (const auto& v : callee.dims) n.dims.push_back(m[v]);
  for (size_t j = 0; j < callee.params.size(); ++j) {
    Val a = args[slot[j]];
    ir::Type want{callee.params[j].type.dtype, {}};
    for (const Dim& d : callee.params[j].type.shape) want.shape.push_back(d.subst(m));
    a = coerce(a, want);
    if (a.error) return Val::Error(e.span);
    for (size_t ax = 0; ax < want.shape.size(); ++ax)
      if (!facts_.prove({Pred::Op::kEq, a.type().shape[ax], want.shape[ax]})) {
        std::vector<Dim> all = a.type().shape;
        if (!callee.vmap_batch.empty() && callee.params[j].type.shape[ax] == Dim::var(callee.vmap_batch)) {
          error(DiagKind::VmapSize, a.span,
                "argument " + q(callee.params[j].name) + " of " + fname + " has batch size " +
                    q(a.type().shape[ax].str()) + " at axis " + std::to_string(ax) +
                    ", but the mapped arguments before it have batch size " + q(want.shape[ax].str()) +
                    "; every argument a `vmap` maps must have the same batch size" + where_bound(all));
          return Val::Error(e.span);
        }
        error(DiagKind::ShapeMismatch, a.span,
              "argument " + q(callee.params[j].name) + " of " + fname + " must have shape " +
                  shape_str(callee.params[j].type.shape) + " = " + shape_str(want.shape) + " here, found " +
                  shape_str(a.type().shape) + where_bound(all));
        return Val::Error(e.span);
      }
    n.operands.push_back(a.node);
  }
  for (const Pred& p : callee.refinements) {
    Pred inst = p.subst(m);
    if (!facts_.prove(inst)) {
      std::vector<Dim> dims = {inst.lhs, inst.rhs};
      std::string subj = param_mentioning(inst.lhs);
      error(DiagKind::Unproven, e.callee_span,
            "call of " + fname + " needs " + q(inst.str()) + " (its refinement " + q(p.str()) +
                "), which the facts in scope do not prove; add [" + inst.str() + "] to " +
                (subj.empty() ? std::string("a parameter's type") : "the type of " + q(subj)) + where_bound(dims));
      return Val::Error(e.span);
    }
  }
  n.type.dtype = callee.result.dtype;
  for (const Dim& d : callee.result.shape) {
    Dim r = d.subst(m);
    if (r.overflowed()) {
      error(DiagKind::DimOverflow, e.span, "the result shape of " + fname + " overflows 64 bits here");
      return Val::Error(e.span);
    }
    n.type.shape.push_back(r);
  }
  Val r;
  r.node = ir::make(std::move(n));
  r.span = e.span;
  return r;
}

}  // namespace check

namespace {

using check::Signature;

// Resolves a written type: dtype, shape dims (each proven >= 1), refinements.
std::optional<ir::Type> resolve_type(const ast::Type& t, const std::vector<std::string>& dims, const Facts& facts,
                                     bool prove, DiagnosticSink& sink, std::vector<Pred>* preds) {
  ir::Type out{*parse_dtype(t.dtype), {}};
  bool ok = true;
  for (const auto& d : t.shape) {
    auto v = check::resolve_dim(*d, dims, facts, prove, sink);
    if (!v) {
      ok = false;
      continue;
    }
    if (prove && !facts.prove({Pred::Op::kGe, *v, Dim::constant(1)})) {
      sink.error(DiagKind::Unproven, d->span,
                 "dimension `" + v->str() + "` must be at least 1, which the facts in scope do not prove; add [" +
                     v->str() + " >= 1] to a parameter's type");
      ok = false;
      continue;
    }
    out.shape.push_back(*v);
  }
  for (const auto& p : t.preds) {
    auto a = check::resolve_dim(*p.lhs, dims, facts, prove, sink);
    auto b = check::resolve_dim(*p.rhs, dims, facts, prove, sink);
    if (!a || !b) {
      ok = false;
      continue;
    }
    if (p.op == ast::Pred::Op::kModZero && *b == Dim()) {
      sink.error(DiagKind::DimOverflow, p.rhs->span, "refinement `mod 0` divides by zero");
      ok = false;
      continue;
    }
    if (preds) preds->push_back({static_cast<Pred::Op>(p.op), *a, *b});
  }
  if (!ok) return std::nullopt;
  return out;
}

Signature check_signature(const ast::Function& f, DiagnosticSink& sink) {
  Signature s;
  s.ast = &f;
  size_t before = sink.count();
  for (const auto& [name, span] : f.dims) {
    for (const auto& d : s.dims)
      if (d == name) sink.error(DiagKind::Duplicate, span, "dimension `" + name + "` is declared twice in `" + f.name + "`");
    s.dims.push_back(name);
  }
  // Pass 1: collect every refinement as a fact, without proofs.
  Facts facts;
  {
    DiagnosticSink scratch;
    for (const auto& p : f.params) {
      std::vector<Pred> preds;
      (void)resolve_type(p.type, s.dims, facts, false, scratch, &preds);
      for (const auto& x : preds) facts.add(x);
    }
  }
  // Pass 2: resolve for real, proving divisions and extents.
  for (const auto& p : f.params) {
    for (const auto& q : s.params)
      if (q.name == p.name) sink.error(DiagKind::Duplicate, p.name_span, "parameter `" + p.name + "` is declared twice in `" + f.name + "`");
    for (const auto& d : s.dims)
      if (d == p.name) {
        sink.error(DiagKind::Duplicate, p.name_span, "`" + p.name + "` is both a dimension and a parameter of `" + f.name + "`");
        break;
      }
    auto t = resolve_type(p.type, s.dims, facts, true, sink, &s.refinements);
    s.params.push_back({p.name, t ? *t : ir::Type{}});
  }
  auto r = resolve_type(f.result, s.dims, facts, true, sink, nullptr);
  if (r) s.result = *r;
  for (const auto& m : f.more_results)
    if (auto t = resolve_type(m, s.dims, facts, true, sink, nullptr)) s.more_results.push_back(*t);
  std::vector<const ast::Type*> results = {&f.result};
  for (const auto& m : f.more_results) results.push_back(&m);
  if (results.size() > ir::kMaxResults)
    sink.error(DiagKind::Syntax, f.more_results[ir::kMaxResults - 1].span,
               "`" + f.name + "` declares " + std::to_string(results.size()) + " results; a fn has at most " +
                   std::to_string(ir::kMaxResults));
  for (const ast::Type* t : results)
    if (!t->preds.empty())
      sink.error(DiagKind::Syntax, t->preds.front().span,
                 "a result type takes no refinements; put them on the parameters");
  s.valid = sink.count() == before;
  return s;
}

void check_tunes(const ast::Program& p, const std::map<std::string, Signature>& sigs, ir::Module& m,
                 DiagnosticSink& sink) {
  for (const auto& t : p.tunes) {
    auto it = sigs.find(t.name);
    if (it == sigs.end() || !it->second.ast->is_public) {
      sink.error(DiagKind::TuneDecl, t.name_span,
                 it == sigs.end() ? "`tune` names unknown function `" + t.name + "`"
                                  : "`tune` names `" + t.name + "`, which is not public");
      continue;
    }
    const Signature& s = it->second;
    if (!s.valid) continue;
    ir::TuneBucket b{t.name, {}};
    bool ok = true;
    for (size_t i = 0; i < t.dims.size(); ++i) {
      const auto& [name, value] = t.dims[i];
      bool known = false;
      for (const auto& d : s.dims) known = known || d == name;
      if (!known || b.dims.count(name)) {
        sink.error(DiagKind::TuneDecl, t.dim_spans[i],
                   known ? "dimension `" + name + "` is given twice" : "`" + t.name + "` has no dimension `" + name + "`");
        ok = false;
        continue;
      }
      if (value < 1) {
        sink.error(DiagKind::TuneDecl, t.dim_spans[i], "dimension `" + name + "` must be at least 1");
        ok = false;
      }
      b.dims[name] = value;
    }
    if (!ok) continue;
    for (const auto& d : s.dims)
      if (!b.dims.count(d)) {
        sink.error(DiagKind::TuneDecl, t.span, "`tune " + t.name + "` does not give dimension `" + d + "`");
        ok = false;
      }
    if (!ok) continue;
    for (const Pred& r : s.refinements) {
      auto holds = r.eval(b.dims);
      if (!holds || !*holds) {
        sink.error(DiagKind::TuneDecl, t.span, "this bucket breaks the refinement `" + r.str() + "` of `" + t.name + "`");
        ok = false;
      }
    }
    // Every extent must be a whole dimension >= 1 (exact divisions included).
    for (const auto& param : s.params)
      for (const Dim& d : param.type.shape) {
        auto v = d.eval(b.dims);
        if (ok && (!v || *v < 1 || *v > 2147483647)) {
          sink.error(DiagKind::TuneDecl, t.span,
                     "this bucket gives parameter `" + param.name + "` the extent `" + d.str() + "`, which is not a whole dimension in [1, 2147483647]");
          ok = false;
        }
      }
    if (ok) m.tunes.push_back(std::move(b));
  }
}

}  // namespace

ir::Module check_program(const SourceFile& file, const ast::Program& program, DiagnosticSink& sink) {
  std::map<std::string, Signature> sigs;
  Provenance provenance;
  transform::Transforms transforms;
  for (const auto& f : program.functions) {
    if (f.name.empty()) continue;  // the signature did not parse far enough
    if (sigs.count(f.name)) {
      sink.error(DiagKind::Duplicate, f.name_span, "function `" + f.name + "` is defined twice");
      continue;
    }
    if (check::is_builtin(f.name)) {
      sink.error(DiagKind::Duplicate, f.name_span, "`" + f.name + "` is a builtin; choose another name for this fn");
      continue;
    }
    if (!f.signature_complete) {
      // Known by name, so calls of it are not "unknown function", but unchecked.
      sigs[f.name].ast = &f;
      continue;
    }
    sigs[f.name] = check_signature(f, sink);
  }
  transforms.declare(program, sigs, sink);
  ir::Module m;
  for (const auto& f : program.functions) {
    auto it = sigs.find(f.name);
    if (it == sigs.end() || it->second.ast != &f || !it->second.valid || f.had_syntax_error) continue;
    check::FnChecker fc(file, sink, sigs, it->second);
    fc.provenance = &provenance;
    std::vector<ir::NodeRef> bodies = fc.check_body();
    if (bodies.empty()) continue;
    ir::Function out;
    out.name = f.name;
    out.is_public = f.is_public;
    out.dim_vars = it->second.dims;
    out.params = it->second.params;
    out.refinements = it->second.refinements;
    out.result_type = it->second.result;
    out.body = bodies[0];
    for (size_t i = 1; i < bodies.size(); ++i) out.more_results.push_back({it->second.more_results[i - 1], bodies[i]});
    m.functions.push_back(std::move(out));
  }
  transforms.build(file, m, provenance, sink);
  check_tunes(program, sigs, m, sink);
  ir::debug_verify(m, "checking");
  return m;
}

}  // namespace mlk
