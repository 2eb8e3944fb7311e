// Transforms as definitions (see transforms.h): their argument and type rules,
// and the driver that builds their bodies.
#include "lang/transforms.h"

#include <algorithm>
#include <set>

#include "lang/grad.h"
#include "lang/residuals.h"
#include "lang/spmd.h"
#include "lang/vmap.h"

namespace mlk::transform {
namespace {

std::string q(const std::string& s) { return "`" + s + "`"; }

std::string at(const SourceFile& file, Span s) {
  LineCol lc = file.line_col(s.begin);
  return std::to_string(lc.line) + ":" + std::to_string(lc.col);
}

// The keyword argument `kw` of `t`, or null. Unknown keywords are reported.
const ast::Expr* keyword(const ast::Transform& t, const std::string& kw) {
  for (size_t i = 0; i < t.keywords.size(); ++i)
    if (t.keywords[i] == kw) return t.values[i].get();
  return nullptr;
}

bool known_keywords(const ast::Transform& t, const std::vector<std::string>& allowed, DiagnosticSink& sink) {
  std::set<std::string> seen;
  for (size_t i = 0; i < t.keywords.size(); ++i) {
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
    if (std::find(allowed.begin(), allowed.end(), t.keywords[i]) == allowed.end()) {
      sink.error(DiagKind::TransformDecl, t.keyword_spans[i],
                 q(t.kind) + " has no argument " + q(t.keywords[i]) + " (it takes the fn, then " + list + ")");
      return false;
    }
    if (!seen.insert(t.keywords[i]).second) {
      sink.error(DiagKind::TransformDecl, t.keyword_spans[i], "argument " + q(t.keywords[i]) + " is given twice");
      return false;
    }
  }
  return true;
}

bool names_count(const ast::Transform& t, size_t want, const std::string& why, DiagnosticSink& sink) {
  if (t.names.size() == want) return true;
  sink.error(DiagKind::TransformDecl, t.names.front().second,
             q(t.kind) + " of " + q(t.source) + " defines " + std::to_string(want) + (want == 1 ? " fn" : " fns") +
                 " (" + why + "), but " + std::to_string(t.names.size()) +
                 (t.names.size() == 1 ? " name is" : " names are") + " given");
  return false;
}

// grad / value_and_grad / vjp: `wrt` lists float parameters. Without it,
// grad and value_and_grad differentiate the first parameter (jax.grad's
// argnums=0; for a record, its float leaves: lang/records.cpp writes that
// `wrt`), vjp and vjp_split every float parameter, in order (jax.vjp's
// primals). The result is a float Scalar (any float tensor for vjp, whose
// cotangent is a parameter).
bool check_grad(const ast::Transform& t, const check::Signature& src, Checked& c, DiagnosticSink& sink) {
  if (!known_keywords(t, {"wrt"}, sink)) return false;
  const ast::Expr* wrt = keyword(t, "wrt");
  const bool every = t.kind == "vjp" || t.kind == "vjp_split";
  if (wrt && (wrt->kind != ast::Expr::Kind::kList || wrt->args.empty())) {
    sink.error(DiagKind::TransformDecl, wrt->span,
               "`wrt` is a non-empty list of parameters of " + q(t.source) +
                   (every ? " (leave it out for every float parameter)" : " (leave it out for the first parameter)"));
    return false;
  }
  bool ok = true;
  if (!wrt && every) {  // every float parameter, in order
    for (size_t j = 0; j < src.params.size(); ++j)
      if (is_float(src.params[j].type.dtype)) c.wrt.push_back(static_cast<int>(j));
    if (c.wrt.empty()) {
      sink.error(DiagKind::GradWrt, t.source_span, q(t.source) + " has no float parameter to differentiate with respect to");
      return false;
    }
  } else if (!wrt) {  // the first parameter
    if (src.params.empty()) {
      sink.error(DiagKind::GradWrt, t.source_span, q(t.source) + " has no parameter to differentiate with respect to");
      return false;
    }
    if (!is_float(src.params[0].type.dtype)) {
      sink.error(DiagKind::GradWrt, t.source_span,
                 q(t.kind) + " differentiates the first parameter of " + q(t.source) + ", " + q(src.params[0].name) +
                     ", which is " + src.params[0].type.str() + " (not float); name the parameters with `wrt=[..]`");
      return false;
    }
    c.wrt.push_back(0);
  }
  static const std::vector<ast::ExprPtr> kNone;
  for (const auto& e : wrt ? wrt->args : kNone) {
    int found = -1;
    for (size_t j = 0; j < src.params.size(); ++j)
      if (e->kind == ast::Expr::Kind::kName && src.params[j].name == e->name) found = static_cast<int>(j);
    if (found < 0) {
      sink.error(DiagKind::GradWrt, e->span,
                 e->kind == ast::Expr::Kind::kName ? q(t.source) + " has no parameter " + q(e->name)
                                                   : "`wrt` lists parameter names only");
      ok = false;
    } else if (std::count(c.wrt.begin(), c.wrt.end(), found)) {
      sink.error(DiagKind::GradWrt, e->span, "parameter " + q(e->name) + " is listed twice in `wrt`");
      ok = false;
    } else if (!is_float(src.params[found].type.dtype)) {
      sink.error(DiagKind::GradWrt, e->span,
                 "cannot differentiate with respect to " + q(e->name) + ", which is " +
                     src.params[found].type.str() + "; only float parameters (F16, BF16, F32, F64) have gradients");
      ok = false;
    } else {
      c.wrt.push_back(found);
    }
  }
  const bool split = t.kind == "vjp_split";
  bool vjp = t.kind == "vjp" || split;
  if (vjp && !is_float(src.result.dtype)) {
    sink.error(DiagKind::GradResult, t.source_span,
               "`vjp` needs " + q(t.source) + " to return a float tensor, but it returns " + src.result.str() +
                   "; only float results have cotangents");
    ok = false;
  } else if (!vjp && (!is_float(src.result.dtype) || !src.result.shape.empty())) {
    sink.error(DiagKind::GradResult, t.source_span,
               q(t.kind) + " needs " + q(t.source) + " to return a float Scalar, but it returns " + src.result.str() +
                   "; reduce the result to a scalar loss first (e.g. with `sum` or `mean`), or take its `vjp`");
    ok = false;
  }
  if (split)  // the forward with its residuals, then the backward
    return ok && names_count(t, 2, "the forward, which also returns what the backward reads, then the backward", sink);
  bool value = t.kind == "value_and_grad";
  size_t results = c.wrt.size() + (value ? 1 : 0);
  // One name for several results: one fn returning them all.
  c.one_fn = ok && results > 1 && t.names.size() == 1;
  if (c.one_fn && results > ir::kMaxResults) {
    sink.error(DiagKind::TransformDecl, wrt ? wrt->span : t.source_span,
               q(t.kind) + " of " + q(t.source) + " as one fn would have " + std::to_string(results) +
                   " results; a fn has at most " + std::to_string(ir::kMaxResults) + " (give one name per result)");
    return false;
  }
  return ok && (c.one_fn || names_count(t, results,
                                        std::string(value ? "the value, then one per `wrt` entry" : "one per `wrt` entry") +
                                            (results > 1 ? "; or give one name for one fn with every result" : ""),
                                        sink));
}

std::optional<int64_t> axis_literal(const ast::Expr& e) {
  if (e.kind != ast::Expr::Kind::kInt || e.text.size() > 9) return std::nullopt;
  return std::stoll(e.text);
}

// vmap: one axis (or `none`) per parameter, `out_axis`, `batch`.
bool check_vmap(const ast::Transform& t, const check::Signature& src, Checked& c, DiagnosticSink& sink) {
  if (!known_keywords(t, {"axes", "out_axis", "batch"}, sink) || !names_count(t, 1, "the mapped fn", sink))
    return false;
  const ast::Expr* axes = keyword(t, "axes");
  if (!axes || axes->kind != ast::Expr::Kind::kList || axes->args.size() != src.params.size()) {
    sink.error(DiagKind::TransformDecl, axes ? axes->span : t.kind_span,
               "`vmap` needs `axes=[..]` with one entry per parameter of " + q(t.source) + " (" +
                   std::to_string(src.params.size()) + "), each an axis or `none`");
    return false;
  }
  bool any = false;
  for (size_t j = 0; j < axes->args.size(); ++j) {
    const ast::Expr& e = *axes->args[j];
    if (e.kind == ast::Expr::Kind::kName && e.name == "none") {
      c.in_axes.push_back(std::nullopt);
      continue;
    }
    auto a = axis_literal(e);
    int64_t rank = static_cast<int64_t>(src.params[j].type.shape.size());
    if (!a || *a > rank) {
      sink.error(DiagKind::BadAxis, e.span,
                 a ? "batch axis " + std::to_string(*a) + " is out of range for " + q(src.params[j].name) +
                         " of rank " + std::to_string(rank) + " (it may go at 0.." + std::to_string(rank) + ")"
                   : "a `vmap` axis is an integer literal or `none`");
      return false;
    }
    c.in_axes.push_back(a);
    any = true;
  }
  if (!any) {
    sink.error(DiagKind::TransformDecl, axes->span, "`vmap` maps no parameter; give at least one an axis");
    return false;
  }
  int64_t rank = static_cast<int64_t>(src.result.shape.size());
  if (const ast::Expr* o = keyword(t, "out_axis")) {
    auto a = axis_literal(*o);
    if (!a || *a > rank) {
      sink.error(DiagKind::BadAxis, o->span,
                 "`out_axis` must be an integer literal in 0.." + std::to_string(rank) + " for the result " +
                     src.result.str());
      return false;
    }
    c.out_axis = *a;
  }
  if (const ast::Expr* b = keyword(t, "batch")) {
    if (b->kind != ast::Expr::Kind::kName) {
      sink.error(DiagKind::TransformDecl, b->span, "`batch` names the new dimension (an identifier)");
      return false;
    }
    if (std::count(src.dims.begin(), src.dims.end(), b->name)) {
      sink.error(DiagKind::Duplicate, b->span, q(b->name) + " is already a dimension of " + q(t.source));
      return false;
    }
    c.batch = b->name;
  } else {
    c.batch = "B";
    for (int k = 1; std::count(src.dims.begin(), src.dims.end(), c.batch); ++k) c.batch = "B" + std::to_string(k);
  }
  return true;
}

Shape insert_axis(const Shape& s, int64_t axis, const Dim& d) {
  Shape out = s;
  out.insert(out.begin() + axis, d);
  return out;
}

// The name of a vjp fn's cotangent parameter: `g`, or `g1`, `g2`, .. when
// the source has a parameter `g`.
std::string cotangent_name(const check::Signature& src) {
  auto taken = [&](const std::string& n) {
    for (const auto& p : src.params)
      if (p.name == n) return true;
    return false;
  };
  std::string name = "g";
  for (int k = 1; taken(name); ++k) name = "g" + std::to_string(k);
  return name;
}

// The signatures of the fns `c` defines, from the source's.
std::vector<check::Signature> derived(const Checked& c, const check::Signature& src) {
  std::vector<check::Signature> out;
  check::Signature base = src;
  base.valid = true;
  if (c.t->kind == "shard") return {base};
  if (c.t->kind == "vmap") {
    Dim b = Dim::var(c.batch);
    base.dims.push_back(c.batch);
    for (size_t j = 0; j < base.params.size(); ++j)
      if (c.in_axes[j]) base.params[j].type.shape = insert_axis(base.params[j].type.shape, *c.in_axes[j], b);
    base.result.shape = insert_axis(src.result.shape, c.out_axis, b);
    base.vmap_batch = c.batch;
    return {base};
  }
  if (c.t->kind == "vjp_split") {
    // Its residuals are known once the body is: the two fns are not called
    // from .tl (their signatures here are the source's parameters only).
    check::Signature fwd = base, bwd = base;
    fwd.split_part = bwd.split_part = true;
    bwd.result = src.params[c.wrt[0]].type;
    return {fwd, bwd};
  }
  if (c.t->kind == "value_and_grad") out.push_back(base);
  if (c.t->kind == "vjp") base.params.push_back({cotangent_name(src), src.result});
  for (int w : c.wrt) {
    check::Signature g = base;
    g.result = src.params[w].type;
    out.push_back(g);
  }
  if (c.one_fn) {
    check::Signature all = out[0];
    for (size_t i = 1; i < out.size(); ++i) all.more_results.push_back(out[i].result);
    return {all};
  }
  return out;
}

}  // namespace

void Transforms::declare(const ast::Program& program, std::map<std::string, check::Signature>& sigs,
                         DiagnosticSink& sink) {
  for (const ast::Transform& t : program.transforms) {
    Checked c;
    c.t = &t;
    std::vector<const ast::Function*> stubs;
    for (size_t i = 0; i < t.names.size(); ++i) {
      const auto& [name, span] = t.names[i];
      bool dup = sigs.count(name) > 0;
      for (size_t k = 0; k < i; ++k) dup = dup || t.names[k].first == name;
      if (dup || check::is_builtin(name)) {
        sink.error(DiagKind::Duplicate, span,
                   dup ? "function " + q(name) + " is defined twice"
                       : q(name) + " is a builtin; choose another name for this fn");
        stubs.push_back(nullptr);
        continue;
      }
      Defined& d = defined_.emplace_back();
      d.name = name;
      d.which = i;
      d.stub.is_public = t.is_public;
      d.stub.span = t.span;
      d.stub.name_span = span;
      d.stub.name = name;
      d.stub.signature_complete = true;
      stubs.push_back(&d.stub);
    }
    auto src = sigs.find(t.source);
    if (t.had_error) {
      // reported by the front end (a record path, a failed import); its fns are invalid, silently
    } else if (t.kind != "grad" && t.kind != "value_and_grad" && t.kind != "vjp" && t.kind != "vjp_split" &&
        t.kind != "vmap" && t.kind != "shard") {
      sink.error(DiagKind::TransformDecl, t.kind_span,
                 "unknown transform " + q(t.kind) +
                     "; the transforms are `grad`, `value_and_grad`, `vjp`, `vjp_split`, `vmap` and `shard`");
    } else if (src == sigs.end() || !src->second.ast) {
      sink.error(DiagKind::TransformDecl, t.source_span, q(t.kind) + " of unknown function " + q(t.source));
    } else if (!src->second.more_results.empty()) {
      sink.error(DiagKind::TransformDecl, t.source_span,
                 q(t.kind) + " of " + q(t.source) + ", which has " +
                     std::to_string(1 + src->second.more_results.size()) +
                     " results; transforms take a fn with one result");
    } else if (src->second.valid) {
      c.valid = t.kind == "vmap"    ? check_vmap(t, src->second, c, sink)
                : t.kind == "shard" ? check_shard(t, src->second, c.shard, sink)
                                    : check_grad(t, src->second, c, sink);
    }
    if (c.valid) c.sigs = derived(c, src->second);
    for (size_t i = 0; i < stubs.size(); ++i) {
      if (!stubs[i]) continue;
      check::Signature s = c.valid && i < c.sigs.size() ? c.sigs[i] : check::Signature{};
      s.valid = c.valid && i < c.sigs.size() && std::count(stubs.begin(), stubs.end(), nullptr) == 0;
      s.ast = stubs[i];
      sigs[t.names[i].first] = s;
      if (c.valid && i < c.sigs.size()) c.sigs[i].ast = stubs[i];
    }
    c.valid = c.valid && std::count(stubs.begin(), stubs.end(), nullptr) == 0;
    checked_.push_back(std::move(c));
  }
}

namespace {

ir::Function function_of(const check::Signature& s, ir::NodeRef body) {
  ir::Function f;
  f.name = s.ast->name;
  f.is_public = s.ast->is_public;
  f.dim_vars = s.dims;
  f.params = s.params;
  f.refinements = s.refinements;
  f.result_type = s.result;
  f.body = std::move(body);
  return f;
}

// The bodies of the fns of one transform; empty after reporting an error.
std::vector<ir::NodeRef> bodies(const Checked& c, const ir::Function& src, const ir::NodeRef& body,
                                const SourceFile& file, const Provenance& prov, DiagnosticSink& sink) {
  const ast::Transform& t = *c.t;
  if (t.kind == "shard") return {body};
  if (t.kind == "vmap") return {vmap_body(body, c.sigs[0].params, c.in_axes, c.out_axis, Dim::var(c.batch))};
  Facts facts;
  for (const Pred& p : src.refinements) facts.add(p);
  ir::NodeRef seed;  // grad: 1; vjp: the cotangent, its last parameter
  if (t.kind == "vjp" || t.kind == "vjp_split") {
    ir::Node n;
    n.op = ir::Op::kParam;
    n.type = src.result_type;
    n.index = static_cast<int>(src.params.size());
    seed = ir::make(std::move(n));
  }
  GradResult g = grad_body(body, src.params, c.wrt, facts, seed);
  if (g.not_differentiable) {
    auto p = prov.find(g.not_differentiable);
    Span where = p != prov.end() ? p->second : t.source_span;
    sink.error(DiagKind::NotDifferentiable, where,
               q(ir::op_name(g.not_differentiable->op)) + " is not differentiable here: " + g.why + "; " +
                   q(t.kind + "(" + t.source + ", ..)") + " at " + at(file, t.span) +
                   " differentiates " + q(src.name) + " through it");
    return {};
  }
  std::vector<ir::NodeRef> out;
  // One fn with every result shares the forward's nodes (the inlined body)
  // between its value and its gradients.
  if (t.kind == "value_and_grad") out.push_back(c.one_fn ? body : src.body);
  out.insert(out.end(), g.cotangents.begin(), g.cotangents.end());
  return out;
}

// A name for a new parameter of `f`'s backward: `base`, else `base` with a
// number, whichever no parameter of `f` has.
std::string fresh_param(const ir::Function& f, const std::string& base, const std::set<std::string>& more) {
  auto taken = [&](const std::string& n) {
    if (more.count(n)) return true;
    for (const auto& p : f.params)
      if (p.name == n) return true;
    return false;
  };
  std::string name = base;
  for (int k = 1; taken(name); ++k) name = base + "_" + std::to_string(k);
  return name;
}

// The two fns of `vjp_split(f, wrt=[..])` (lang/residuals.h): the forward
// returns f's result, then the residuals; the backward takes f's
// parameters, the residuals (`res0`, `res1`, ..) and the cotangent, and
// returns the cotangents of the `wrt` parameters.
void add_split(const Checked& c, const ir::Function& src, const ir::NodeRef& body,
               const std::vector<ir::NodeRef>& cotangents, ir::Module& m, DiagnosticSink& sink) {
  const int n = static_cast<int>(src.params.size());
  VjpSplit s = split_vjp(body, cotangents, n);
  if (s.residuals.size() + 1 > ir::kMaxResults || cotangents.size() > ir::kMaxResults) {
    sink.error(DiagKind::TransformDecl, c.t->source_span,
               "`vjp_split` of " + q(c.t->source) + " would return " + std::to_string(s.residuals.size() + 1) +
                   " values from its forward and " + std::to_string(cotangents.size()) +
                   " from its backward; a fn has at most " + std::to_string(ir::kMaxResults) +
                   " results (split a smaller fn)");
    return;
  }
  ir::Function fwd = function_of(c.sigs[0], body);
  for (const auto& r : s.residuals) fwd.more_results.push_back({r->type, r});
  ir::Function bwd = function_of(c.sigs[1], s.cotangents[0]);
  std::set<std::string> names;
  for (size_t i = 0; i < s.residuals.size(); ++i) {
    std::string name = fresh_param(src, "res" + std::to_string(i), names);
    names.insert(name);
    bwd.params.push_back({name, s.residuals[i]->type});
  }
  bwd.params.push_back({fresh_param(src, "g", names), src.result_type});
  for (size_t i = 1; i < s.cotangents.size(); ++i)
    bwd.more_results.push_back({src.params[c.wrt[i]].type, s.cotangents[i]});
  m.functions.push_back(std::move(fwd));
  m.functions.push_back(std::move(bwd));
}

// The per-rank kernels and the plan of the shard `c` defines (`f`, global).
void add_spmd(const Checked& c, const ir::Function& f, const SourceFile& file, const Provenance& prov, ir::Module& m,
              DiagnosticSink& sink) {
  const ast::Transform& t = *c.t;
  SpmdResult r = spmd_lower(f, c.shard, f.name, f.is_public);
  if (r.error) {
    Span where = t.span;
    for (size_t i = 0; i < t.keywords.size(); ++i)
      if (t.keywords[i] == "out") where = t.values[i]->span;
    if (r.error->at) {
      auto p = prov.find(r.error->at);
      where = p != prov.end() ? p->second : t.source_span;
    }
    sink.error(r.error->kind, where,
               r.error->message + " (in " + q("shard(" + t.source + ", ..)") + " at " + at(file, t.span) + ")");
    return;
  }
  for (auto& k : r.kernels) {
    if (m.find(k.name)) {
      sink.error(DiagKind::Duplicate, t.names.front().second,
                 q(f.name) + "'s per-rank kernel " + q(k.name) + " is already a fn; rename one of them");
      return;
    }
  }
  for (auto& k : r.kernels) m.functions.push_back(std::move(k));
  m.shards.push_back(std::move(r.plan));
}

}  // namespace

void Transforms::build(const SourceFile& file, ir::Module& m, Provenance& prov, DiagnosticSink& sink) const {
  for (const Checked& c : checked_) {
    if (!c.valid) continue;
    const ir::Function* src = m.find(c.t->source);
    if (!src) continue;  // its body had errors, already reported
    std::string missing;
    auto body = inline_calls(m, *src, prov, missing);
    if (!body) {
      sink.error(DiagKind::TransformDecl, c.t->source_span,
                 q(c.t->kind) + " of " + q(c.t->source) + " needs " + q(missing) +
                     ", which has errors, is on a cycle of calls or is defined by a later transform");
      continue;
    }
    ir::Function source = *src;
    auto bs = bodies(c, source, *body, file, prov, sink);
    if (c.t->kind == "vjp_split" && !bs.empty()) {
      add_split(c, source, *body, bs, m, sink);
      continue;
    }
    if (c.one_fn && !bs.empty()) {
      ir::Function f = function_of(c.sigs[0], bs[0]);
      for (size_t i = 1; i < bs.size(); ++i) f.more_results.push_back({c.sigs[0].more_results[i - 1], bs[i]});
      m.functions.push_back(std::move(f));
      continue;
    }
    for (size_t i = 0; i < bs.size(); ++i) m.functions.push_back(function_of(c.sigs[i], bs[i]));
    if (c.t->kind == "shard" && !bs.empty()) add_spmd(c, ir::Function(m.functions.back()), file, prov, m, sink);
  }
}

}  // namespace mlk::transform
