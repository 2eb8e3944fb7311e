// The argument and type rules of `shard` (see shard_check.h).
#include "lang/shard_check.h"

#include <algorithm>
#include <set>

namespace mlk::transform {
namespace {

std::string q(const std::string& s) { return "`" + s + "`"; }

const ast::Expr* keyword(const ast::Transform& t, const std::string& kw) {
  for (size_t i = 0; i < t.keywords.size(); ++i)
    if (t.keywords[i] == kw) return t.values[i].get();
  return nullptr;
}

bool keywords_ok(const ast::Transform& t, DiagnosticSink& sink) {
  std::set<std::string> seen;
  for (size_t i = 0; i < t.keywords.size(); ++i) {
    const std::string& k = t.keywords[i];
    if (k != "mesh" && k != "spec" && k != "out") {
      sink.error(DiagKind::TransformDecl, t.keyword_spans[i],
                 "`shard` has no argument " + q(k) + " (it takes the fn, then mesh, spec, out)");
      return false;
    }
    if (!seen.insert(k).second) {
      sink.error(DiagKind::TransformDecl, t.keyword_spans[i], "argument " + q(k) + " is given twice");
      return false;
    }
  }
  return true;
}

// mesh=mesh(x=2, y=4): named axes with sizes >= 1, in order.
bool check_mesh(const ast::Transform& t, ShardSpec& out, DiagnosticSink& sink) {
  const ast::Expr* m = keyword(t, "mesh");
  const char* form = "`shard` needs `mesh=mesh(NAME=SIZE, ..)`, one or more named axes, each size an integer >= 1";
  if (!m || m->kind != ast::Expr::Kind::kCall || m->name != "mesh" || m->args.empty()) {
    sink.error(DiagKind::TransformDecl, m ? m->span : t.kind_span, form);
    return false;
  }
  for (size_t i = 0; i < m->args.size(); ++i) {
    const ast::Expr& v = *m->args[i];
    const std::string& name = m->arg_keywords[i];
    Span at = name.empty() ? v.span : m->arg_keyword_spans[i];
    if (name.empty() || v.kind != ast::Expr::Kind::kInt || v.text.size() > 6 || std::stoll(v.text) < 1) {
      sink.error(DiagKind::TransformDecl, at, form);
      return false;
    }
    for (const auto& a : out.mesh)
      if (a.name == name) {
        sink.error(DiagKind::TransformDecl, at, "mesh axis " + q(name) + " is declared twice");
        return false;
      }
    out.mesh.push_back({name, std::stoll(v.text)});
  }
  return true;
}

int axis_index(const ShardSpec& s, const std::string& name) {
  for (size_t k = 0; k < s.mesh.size(); ++k)
    if (s.mesh[k].name == name) return static_cast<int>(k);
  return -1;
}

std::string axes_list(const ShardSpec& s) {
  std::string l;
  for (const auto& a : s.mesh) l += (l.empty() ? "" : ", ") + q(a.name);
  return l;
}

// One layout: `none` (every dimension replicated) or a list with one entry
// per dimension, a mesh axis name or `none`. `what` names the value.
bool layout_of(const ast::Expr& e, size_t rank, const std::string& what, ShardSpec& s, std::vector<int>& out,
               DiagnosticSink& sink) {
  out.assign(rank, -1);
  if (e.kind == ast::Expr::Kind::kName && e.name == "none") return true;
  if (e.kind != ast::Expr::Kind::kList || e.args.size() != rank) {
    sink.error(DiagKind::ShardSpec, e.span,
               "the layout of " + what + " is `none` or a list of " + std::to_string(rank) +
                   " entries (one per dimension), each a mesh axis or `none`");
    return false;
  }
  for (size_t d = 0; d < rank; ++d) {
    const ast::Expr& a = *e.args[d];
    if (a.kind == ast::Expr::Kind::kName && a.name == "none") continue;
    int k = a.kind == ast::Expr::Kind::kName ? axis_index(s, a.name) : -1;
    if (k < 0) {
      sink.error(DiagKind::ShardSpec, a.span,
                 (a.kind == ast::Expr::Kind::kName ? q(a.name) + " is not an axis of the mesh"
                                                   : std::string("a layout entry is a mesh axis or `none`")) +
                     " (its axes are " + axes_list(s) + ")");
      return false;
    }
    if (std::count(out.begin(), out.end(), k)) {
      sink.error(DiagKind::ShardSpec, a.span,
                 "mesh axis " + q(a.name) + " shards two dimensions of " + what + "; an axis cuts one dimension");
      return false;
    }
    out[d] = k;
  }
  return true;
}

// Every sharded dimension of a parameter is a multiple of its axis's size.
bool divisible(const ast::Expr& e, const ir::Param& p, const std::vector<int>& layout, const ShardSpec& s,
               const Facts& facts, DiagnosticSink& sink) {
  bool ok = true;
  for (size_t d = 0; d < layout.size(); ++d) {
    if (layout[d] < 0) continue;
    const ir::MeshAxis& a = s.mesh[layout[d]];
    const Dim& ext = p.type.shape[d];
    Pred need{Pred::Op::kModZero, ext, Dim::constant(a.size)};
    if (facts.prove(need)) continue;
    sink.error(DiagKind::ShardDivisible, e.args[d]->span,
               "dimension " + std::to_string(d) + " of " + q(p.name) + " (" + ext.str() + ") is sharded over mesh axis " +
                   q(a.name) + " of size " + std::to_string(a.size) + ", but `" + need.str() +
                   "` is not proven; add `[" + need.str() + "]` to the type of " + q(p.name));
    ok = false;
  }
  return ok;
}

}  // namespace

bool check_shard(const ast::Transform& t, const check::Signature& src, ShardSpec& out, DiagnosticSink& sink) {
  if (!keywords_ok(t, sink) || !check_mesh(t, out, sink)) return false;
  if (t.names.size() != 1) {
    sink.error(DiagKind::TransformDecl, t.names.front().second,
               "`shard` of " + q(t.source) + " defines 1 fn (the sharded fn), but " + std::to_string(t.names.size()) +
                   " names are given");
    return false;
  }
  const ast::Expr* spec = keyword(t, "spec");
  if (!spec || spec->kind != ast::Expr::Kind::kList || spec->args.size() != src.params.size()) {
    sink.error(DiagKind::TransformDecl, spec ? spec->span : t.kind_span,
               "`shard` needs `spec=[..]` with one layout per parameter of " + q(t.source) + " (" +
                   std::to_string(src.params.size()) + ")");
    return false;
  }
  Facts facts;
  for (const Pred& p : src.refinements) facts.add(p);
  bool ok = true;
  out.in.resize(src.params.size());
  for (size_t j = 0; j < src.params.size(); ++j) {
    const ir::Param& p = src.params[j];
    const ast::Expr& e = *spec->args[j];
    if (!layout_of(e, p.type.shape.size(), q(p.name), out, out.in[j], sink)) {
      ok = false;
      continue;
    }
    ok = (e.kind != ast::Expr::Kind::kList || divisible(e, p, out.in[j], out, facts, sink)) && ok;
  }
  out.out.assign(src.result.shape.size(), -1);
  if (const ast::Expr* o = keyword(t, "out"))
    ok = layout_of(*o, src.result.shape.size(), "the result of " + q(t.source), out, out.out, sink) && ok;
  return ok;
}

}  // namespace mlk::transform
