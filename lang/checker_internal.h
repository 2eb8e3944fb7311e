// Shared state of the checker's passes (checker.cpp: names, operators, calls;
// builtins.cpp: builtin calls). Internal to lang/.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lang/ast.h"
#include "lang/diagnostics.h"
#include "lang/ir.h"
#include "lang/prover.h"

namespace mlk::check {

// A checked function signature. `valid` is false when the signature itself
// had errors; calls of it then yield error values without further reports.
struct Signature {
  const ast::Function* ast = nullptr;
  bool valid = false;
  std::vector<std::string> dims;
  std::vector<ir::Param> params;
  std::vector<Pred> refinements;
  ir::Type result;
  std::vector<ir::Type> more_results;  // a fn with several results: the second and later
  // For a fn defined by `vmap` (lang/transforms.h): its batch dimension,
  // which every mapped parameter's extent must agree on at a call.
  std::string vmap_batch;
  // One of the two fns of a `vjp_split` (lang/transforms.h): its residuals
  // are known only once its body is, so it is not called from .tl.
  bool split_part = false;
};

// The value of a checked expression: a typed node, an untyped literal still
// waiting for the type of its context, or an error value.
struct Val {
  ir::NodeRef node;
  Span span;
  bool error = false;
  bool lit = false;
  bool lit_bool = false;      // `true` / `false`
  bool lit_integral = false;  // written without `.` or exponent
  double lit_value = 0;
  std::string lit_text;
  std::string name;  // the parameter or let name when the expression is just that name

  static Val Error(Span s) {
    Val v;
    v.error = true;
    v.span = s;
    return v;
  }
  const ir::Type& type() const { return node->type; }
  int rank() const { return static_cast<int>(node->type.shape.size()); }
};

// Where a dimension variable got its meaning, for messages:
// "D bound by `w`.shape[0] at 3:7".
struct Binding {
  std::string text;
};

class FnChecker {
 public:
  FnChecker(const SourceFile& file, DiagnosticSink& sink, const std::map<std::string, Signature>& sigs,
            const Signature& self);

  // Checks the body: the value of each result (one but for a fn with
  // several); empty when it has errors.
  std::vector<ir::NodeRef> check_body();

  // --- used by builtins.cpp ---
  Val expr(const ast::Expr& e);
  void error(DiagKind k, Span s, std::string msg) { sink_.error(k, s, std::move(msg)); }
  // A dimension written as an expression (`[B, S / 2]`, `start=S`), with its
  // divisions proven. nullopt after reporting an error.
  std::optional<Dim> dim_of(const ast::Expr& e);
  // An integer literal (possibly negated), as in `axes=[0, -1]`.
  std::optional<int64_t> int_of(const ast::Expr& e, const char* what);
  // Gives a literal the type `t` (range-checked); a typed value passes through.
  Val coerce(const Val& v, const ir::Type& t);
  // A value that must have a type of its own (not a bare literal).
  bool require_typed(const Val& v, const std::string& what);
  bool prove_or_report(const Pred& p, Span s, const std::string& what, const std::string& hint_subject);
  // Shapes and types equal under the facts in scope (not just canonically).
  bool same_shape(const Shape& a, const Shape& b) const;
  std::string broadcast_hint(const Val& small, const Val& big) const;
  bool same_type(const ir::Type& a, const ir::Type& b) const;
  // "(D bound by `x`.shape[2] at 3:5; S by ...)" for the variables in dims.
  std::string where_bound(const std::vector<Dim>& dims) const;
  // A parameter whose type mentions a variable of `d`, for "add [..] to the type of `x`".
  std::string param_mentioning(const Dim& d) const;
  const Facts& facts() const { return facts_; }

  Val builtin(const ast::Expr& call);  // builtins.cpp; the name must be a builtin

  // Where each node built for an operator or call was written (for the
  // transforms' diagnostics, lang/transforms.h); not recorded when null.
  std::map<ir::NodeRef, Span>* provenance = nullptr;

 private:
  Val expr_at(const ast::Expr& e);  // expr() without recording provenance
  Val name_ref(const ast::Expr& e);
  Val unary(const ast::Expr& e);
  Val binary(const ast::Expr& e);
  Val call_fn(const ast::Expr& e, const Signature& callee);
  // The steps of call_fn; each reports its own errors (false / nullopt then).
  std::optional<std::vector<int>> match_args(const ast::Expr& e, const Signature& callee);
  bool unify_dims(const ast::Expr& e, const Signature& callee, const std::vector<Val>& args,
                  const std::vector<int>& slot, std::map<std::string, Dim>& m);
  bool solve_linear_dims(const Signature& callee, const std::vector<Val>& args, const std::vector<int>& slot,
                         std::map<std::string, Dim>& m);
  Val call_node(const ast::Expr& e, const Signature& callee, const std::vector<Val>& args,
                const std::vector<int>& slot, std::map<std::string, Dim>& m);
  std::optional<Dim> dim_of_ast(const ast::DimExpr& d);

  const SourceFile& file_;
  DiagnosticSink& sink_;
  const std::map<std::string, Signature>& sigs_;
  const Signature& self_;
  Facts facts_;
  std::map<std::string, Binding> bindings_;
  std::map<std::string, Val> locals_;
  int depth_ = 0;
};

bool is_builtin(const std::string& name);

// Resolves a written dimension in the scope of `dims`; divisions are proven
// from `facts` when `prove` is set. Reports through `sink`.
std::optional<Dim> resolve_dim(const ast::DimExpr& d, const std::vector<std::string>& dims, const Facts& facts,
                               bool prove, DiagnosticSink& sink);

}  // namespace mlk::check
