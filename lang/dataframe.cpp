// Dataframe parameters to tensor parameters (lang/dataframe.h).
#include "lang/dataframe.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>

#include "lang/ast_clone.h"
#include "lang/dtype.h"

namespace mlk {
namespace {

std::string q(const std::string& s) { return "`" + s + "`"; }

// The dtypes the Arrow reader reads (interop/arrow_columns.h).
bool is_column_dtype(DType t) {
  return t == DType::I32 || t == DType::I64 || t == DType::F16 || t == DType::BF16 || t == DType::F32 ||
         t == DType::F64 || t == DType::Bool;
}

using ast::clone;

bool declared(const ast::Function& f, const std::string& name) {
  for (const auto& [d, span] : f.dims)
    if (d == name) return true;
  return false;
}

// A row dimension or list size: a declared dimension name or an integer >= 1.
std::optional<Dim> frame_dim(const ast::DimExpr& d, const ast::Function& f, const std::string& what,
                             DiagnosticSink& sink) {
  if (d.kind == ast::DimExpr::Kind::kName) {
    if (declared(f, d.name)) return Dim::var(d.name);
    sink.error(DiagKind::UnknownDim, d.span,
               "unknown dimension " + q(d.name) + "; declare it in the function's dimension list `[..]`");
    return std::nullopt;
  }
  if (d.kind == ast::DimExpr::Kind::kInt && d.value >= 1) return Dim::constant(d.value);
  sink.error(DiagKind::ColumnType, d.span, what + " is a dimension name or an integer of at least 1");
  return std::nullopt;
}

// The `K` of `Category[I32, K]` (the codes' dtype is I32 only: Arrow's int8
// and int16 indices are widened to it by the reader), or nullopt after a diagnostic.
std::optional<Dim> category_dim(const ast::ColumnDecl& c, DType t, const ast::Function& f, DiagnosticSink& sink) {
  if (t != DType::I32) {
    sink.error(DiagKind::ColumnType, c.dtype_span,
               "column " + q(c.name) + " is Category[" + dtype_name(t) + ", ..]; a Category's codes are I32 "
               "(Arrow indices int8, int16 and int32 are read as I32)");
    return std::nullopt;
  }
  return frame_dim(*c.categories, f, "the number of categories of a Category", sink);
}

// A dimension as written: `K`, `4`.
std::string dim_text(const ast::DimExpr& d) {
  return d.kind == ast::DimExpr::Kind::kName ? d.name : std::to_string(d.value);
}

ir::ColumnRule::Op rule_op(ast::Pred::Op op) {
  switch (op) {
    case ast::Pred::Op::kEq: return ir::ColumnRule::Op::kEq;
    case ast::Pred::Op::kNe: return ir::ColumnRule::Op::kNe;
    case ast::Pred::Op::kLt: return ir::ColumnRule::Op::kLt;
    case ast::Pred::Op::kLe: return ir::ColumnRule::Op::kLe;
    case ast::Pred::Op::kGt: return ir::ColumnRule::Op::kGt;
    default: return ir::ColumnRule::Op::kGe;
  }
}

// One `where` rule of column `c` of `frame`, or nullopt after a diagnostic.
std::optional<ir::ColumnRule> column_rule(const ast::ColumnRule& r, const ast::ColumnDecl& c, DType t,
                                          const ast::FrameType& frame, const ast::Function& f, DiagnosticSink& sink) {
  if (r.subject != c.name) {
    sink.error(DiagKind::ColumnRule, r.subject_span,
               "a refinement of column " + q(c.name) + " compares " + q(c.name) + ", found " + q(r.subject));
    return std::nullopt;
  }
  if (t == DType::Bool) {
    sink.error(DiagKind::ColumnRule, r.subject_span,
               "column " + q(c.name) + " is Bool; a Bool column takes no `where` rule");
    return std::nullopt;
  }
  if (c.categories) {
    sink.error(DiagKind::ColumnRule, r.subject_span,
               "column " + q(c.name) + " is a Category; its codes are in [0, " + dim_text(*c.categories) +
                   ") by construction, and it takes no `where` rule");
    return std::nullopt;
  }
  ir::ColumnRule out;
  out.op = rule_op(r.op);
  if (r.bound == ast::ColumnRule::Bound::kName) {
    for (const auto& other : frame.columns)
      if (other.name == r.bound_text) {
        sink.error(DiagKind::ColumnRule, r.bound_span,
                   q(r.bound_text) + " is a column; a column refinement compares with a literal or a dimension");
        return std::nullopt;
      }
    if (!declared(f, r.bound_text)) {
      sink.error(DiagKind::UnknownDim, r.bound_span,
                 "unknown dimension " + q(r.bound_text) + "; declare it in the function's dimension list `[..]`");
      return std::nullopt;
    }
    out.dim = r.bound_text;
    return out;
  }
  out.text = r.bound_text;
  if (r.bound == ast::ColumnRule::Bound::kFloat) {
    if (is_integer(t)) {
      sink.error(DiagKind::ColumnRule, r.bound_span,
                 "column " + q(c.name) + " is " + dtype_name(t) + "; compare it with an integer or a dimension, not " +
                     q(r.bound_text));
      return std::nullopt;
    }
    out.literal = std::strtod(r.bound_text.c_str(), nullptr);
    return out;
  }
  long long v = 0;
  const char* b = r.bound_text.data();
  auto [p, ec] = std::from_chars(b, b + r.bound_text.size(), v);
  const double limit = t == DType::I32 ? 2147483647.0 : t == DType::F16 ? 65504.0 : 9007199254740992.0;
  if (ec != std::errc() || p != b + r.bound_text.size() || std::fabs(static_cast<double>(v)) > limit) {
    sink.error(DiagKind::ColumnRule, r.bound_span,
               q(r.bound_text) + " is out of the range of " + dtype_name(t) + " column " + q(c.name) +
                   (t == DType::I64 ? " (an I64 bound is at most 2^53 in magnitude)" : ""));
    return std::nullopt;
  }
  out.literal = static_cast<double>(v);
  return out;
}

// The frame of parameter `p`; its column parameters are appended to `params`
// only when it has no errors (`ok`). The frame is returned either way, so
// that the body's column references resolve without cascades.
ir::Frame frame_of(const ast::Param& p, const ast::Function& f, std::vector<ast::Param>& params, bool& ok,
                   DiagnosticSink& sink) {
  const ast::FrameType& ft = *p.type.frame;
  size_t before = sink.count();
  ir::Frame frame;
  frame.name = p.name;
  auto rows = frame_dim(*ft.rows, f, "the row dimension of a Dataframe", sink);
  if (rows) frame.rows = *rows;
  if (ft.columns.empty()) sink.error(DiagKind::ColumnType, p.type.span, "a Dataframe has at least one column");
  std::vector<ast::Param> out;
  for (const ast::ColumnDecl& c : ft.columns) {
    for (const auto& seen : frame.columns)
      if (seen.name == c.name)
        sink.error(DiagKind::Duplicate, c.name_span, "column " + q(c.name) + " is declared twice in " + q(p.name));
    ir::FrameColumn col;
    col.name = c.name;
    col.dtype = *parse_dtype(c.dtype);
    col.nullable = c.nullable;
    if (!is_column_dtype(col.dtype))
      sink.error(DiagKind::ColumnType, c.dtype_span,
                 "column " + q(c.name) + " has dtype " + dtype_name(col.dtype) +
                     "; a column is I32, I64, F16, BF16, F32, F64 or Bool, or a FixedSizeList of one");
    if (c.list_size) col.list_size = frame_dim(*c.list_size, f, "the size of a FixedSizeList", sink);
    if (c.categories) col.categories = category_dim(c, col.dtype, f, sink);
    for (const auto& r : c.rules)
      if (auto rule = column_rule(r, c, col.dtype, ft, f, sink)) col.rules.push_back(*rule);
    if (!c.nullable) {
      ast::Param cp;
      cp.name = ir::column_param_name(p.name, c.name);
      cp.name_span = c.name_span;
      cp.type.span = c.span;
      cp.type.dtype_span = c.dtype_span;
      cp.type.dtype = c.dtype;
      cp.type.shape.push_back(clone(*ft.rows));
      if (c.list_size) cp.type.shape.push_back(clone(*c.list_size));
      col.param = static_cast<int>(params.size() + out.size());
      out.push_back(std::move(cp));
    }
    frame.columns.push_back(std::move(col));
  }
  ok = sink.count() == before;
  if (ok)
    for (auto& cp : out) params.push_back(std::move(cp));
  return frame;
}

// Rewrites the column references of one fn's body (see the header).
class BodyRewriter {
 public:
  // `own`: the names of the fn's other (tensor) parameters.
  BodyRewriter(const std::vector<ir::Frame>& frames, std::set<std::string> own, DiagnosticSink& sink)
      : frames_(frames), own_(std::move(own)), sink_(sink) {}

  bool failed() const { return failed_; }

  void expr(ast::ExprPtr& e) {
    if (e->kind == ast::Expr::Kind::kCall && e->name == "to_tensor") return to_tensor(e);
    if (e->kind == ast::Expr::Kind::kName) return name(*e, false);
    for (auto& a : e->args) expr(a);
  }

  void let_name(const ast::Let& l) {
    if (frame(l.name))
      error(DiagKind::Duplicate, l.name_span, q(l.name) + " is already a Dataframe parameter of this fn");
  }

 private:
  const ir::Frame* frame(const std::string& n) const {
    for (const auto& f : frames_)
      if (f.name == n) return &f;
    return nullptr;
  }

  void error(DiagKind k, Span s, const std::string& m) {
    sink_.error(k, s, m);
    failed_ = true;
  }

  // The column `e` names (`df.col`), or nullptr after a diagnostic.
  const ir::FrameColumn* column(const ast::Expr& e) {
    size_t dot = e.name.find('.');
    std::string base = e.name.substr(0, dot), col = e.name.substr(dot + 1);
    const ir::Frame* fr = frame(base);
    if (fr == nullptr) {
      error(DiagKind::FrameUse, e.span, q(base) + " is not a Dataframe parameter; `.` selects a column of one");
      return nullptr;
    }
    std::string names;
    for (const auto& c : fr->columns) {
      if (c.name == col) return &c;
      names += (names.empty() ? "" : ", ") + c.name;
    }
    error(DiagKind::UnknownColumn, e.span, "Dataframe " + q(base) + " has no column " + q(col) + " (its columns: " + names + ")");
    return nullptr;
  }

  void name(const ast::Expr& e, bool converted) {
    if (e.name.find('.') == std::string::npos) {
      if (frame(e.name))
        error(DiagKind::FrameUse, e.span,
              q(e.name) + " is a Dataframe, not a value; take a column's tensor with `to_tensor(" + e.name + ".name)`");
      for (const auto& f : frames_)
        for (const auto& c : f.columns)
          if (c.param >= 0 && !own_.count(e.name) && e.name == ir::column_param_name(f.name, c.name))
            error(DiagKind::FrameUse, e.span,
                  q(e.name) + " is the tensor of column `" + f.name + "." + c.name + "`; write `to_tensor(" + f.name + "." +
                      c.name + ")`");
      return;
    }
    const ir::FrameColumn* c = column(e);
    if (c == nullptr || converted) return;
    error(DiagKind::FrameUse, e.span, "column " + q(e.name) + " is not a tensor; convert it with `to_tensor(" + e.name + ")`");
  }

  void to_tensor(ast::ExprPtr& e) {
    if (e->args.size() != 1 || !e->arg_keywords[0].empty() || e->args[0]->kind != ast::Expr::Kind::kName ||
        e->args[0]->name.find('.') == std::string::npos) {
      error(DiagKind::FrameUse, e->span, "`to_tensor` takes one column of a Dataframe parameter, `to_tensor(df.name)`");
      return;
    }
    const ir::FrameColumn* c = column(*e->args[0]);
    if (c == nullptr) return;
    if (c->nullable) {
      error(DiagKind::NullableColumn, e->span,
            "column " + q(e->args[0]->name) + " is nullable and has no tensor; declare it non-nullable (drop `Nullable[..]`) "
            "to convert it");
      return;
    }
    ast::ExprPtr inner = std::move(e->args[0]);
    inner->name = ir::column_param_name(inner->name.substr(0, inner->name.find('.')), c->name);
    inner->span = e->span;
    e = std::move(inner);
  }

  const std::vector<ir::Frame>& frames_;
  std::set<std::string> own_;
  DiagnosticSink& sink_;
  bool failed_ = false;
};

}  // namespace

std::map<std::string, std::vector<ir::Frame>> lower_dataframes(ast::Program& program, DiagnosticSink& sink) {
  std::map<std::string, std::vector<ir::Frame>> out;
  for (ast::Function& f : program.functions) {
    std::vector<ast::Param> params;
    std::vector<ir::Frame> frames;
    std::set<std::string> own;
    bool failed = false;
    for (ast::Param& p : f.params) {
      if (p.type.frame == nullptr) {
        own.insert(p.name);
        params.push_back(std::move(p));
        continue;
      }
      bool ok = false;
      frames.push_back(frame_of(p, f, params, ok, sink));
      failed = failed || !ok;
    }
    f.params = std::move(params);
    BodyRewriter rw(frames, std::move(own), sink);
    for (auto& l : f.lets) {
      if (l.value) rw.expr(l.value);
      rw.let_name(l);
    }
    if (f.body) rw.expr(f.body);
    if (failed || rw.failed()) f.had_syntax_error = true;
    if (!failed && !rw.failed() && !frames.empty()) out[f.name] = std::move(frames);
  }
  return out;
}

}  // namespace mlk
