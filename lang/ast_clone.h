// Copies of syntax-tree dimension expressions and expressions, for the
// front-end steps that rewrite the tree (lang/records.cpp,
// lang/dataframe.cpp). Spans are kept.
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <string>

#include "lang/ast.h"

namespace mlk::ast {

// `d` with each name in `subst` replaced by a copy of its expression.
inline std::unique_ptr<DimExpr> clone(const DimExpr& d, const std::map<std::string, const DimExpr*>& subst = {}) {
  if (d.kind == DimExpr::Kind::kName)
    if (auto it = subst.find(d.name); it != subst.end()) return clone(*it->second);
  auto c = std::make_unique<DimExpr>();
  c->kind = d.kind;
  c->span = d.span;
  c->value = d.value;
  c->name = d.name;
  if (d.lhs) c->lhs = clone(*d.lhs, subst);
  if (d.rhs) c->rhs = clone(*d.rhs, subst);
  c->depth = 1 + std::max(c->lhs ? c->lhs->depth : 0, c->rhs ? c->rhs->depth : 0);
  return c;
}

// A deep copy of `e`.
inline ExprPtr clone(const Expr& e) {
  auto c = std::make_unique<Expr>();
  c->kind = e.kind;
  c->span = e.span;
  c->depth = e.depth;
  c->name = e.name;
  c->text = e.text;
  c->bool_value = e.bool_value;
  for (const auto& a : e.args) c->args.push_back(clone(*a));
  c->arg_keywords = e.arg_keywords;
  c->arg_keyword_spans = e.arg_keyword_spans;
  for (const auto& [n, d] : e.dim_args) c->dim_args.emplace_back(n, clone(*d));
  c->dim_arg_spans = e.dim_arg_spans;
  c->callee_span = e.callee_span;
  return c;
}

}  // namespace mlk::ast
