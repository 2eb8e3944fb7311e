// SPMD lowering (see spmd.h): the driver. Values are rebuilt at per-shard
// shapes by their op's sharding rule (spmd_rules.cpp); a collective ends the
// current kernel, whose result becomes a parameter of the next one (later
// kernels recompute what they need of the earlier ones' values, as the
// gradient fns do).
#include "lang/spmd.h"

#include <cstdio>

#include "lang/ir_build.h"
#include "lang/spmd_internal.h"

namespace mlk {
namespace spmd {

std::string q(const std::string& s) { return "`" + s + "`"; }

Lowering::Lowering(const ir::Function& f, const transform::ShardSpec& spec, const std::string& name, bool is_public)
    : f_(f), spec_(spec), name_(name), is_public_(is_public) {
  for (const Pred& p : f.refinements) facts_.add(p);
  for (size_t j = 0; j < f.params.size(); ++j) {
    Layout l;
    for (int a : spec.in[j]) l.push_back({a, nullptr});
    base_params_.push_back({f.params[j].name, {f.params[j].type.dtype, local_shape(f.params[j].type.shape, l)}});
  }
}

Shape Lowering::local_shape(const Shape& global, const Layout& l) const {
  Shape s = global;
  for (size_t d = 0; d < s.size(); ++d)
    if (l[d].axis >= 0) s[d] = Dim::exact_div(s[d], Dim::constant(axis_size(l[d].axis)));
  return s;
}

ir::NodeRef Lowering::rebuild(const ir::NodeRef& g, std::vector<ir::NodeRef> operands, const Layout& l) const {
  ir::Node n = *g;
  n.operands = std::move(operands);
  n.type.shape = local_shape(g->type.shape, l);
  return ir::make(std::move(n));
}

SVal Lowering::fail(const ir::NodeRef& at, DiagKind kind, std::string message) {
  if (!error_) error_ = SpmdError{kind, at, std::move(message)};
  return {};
}

SVal Lowering::param(const ir::NodeRef& g) {
  ir::Node p;
  p.op = ir::Op::kParam;
  p.index = g->index;
  p.type = base_params_[g->index].type;
  Layout l;
  for (int a : spec_.in[g->index]) l.push_back({a, nullptr});
  return {ir::make(std::move(p)), l};
}

SVal Lowering::value(const ir::NodeRef& g) {
  if (failed()) return {};
  auto it = memo_.find(g.get());
  if (it != memo_.end()) return it->second;
  SVal v = g->op == ir::Op::kParam ? param(g) : apply_rule(*this, g);
  if (failed()) return {};
  keep_.push_back(g);
  return memo_[g.get()] = v;
}

std::optional<ir::NodeRef> Lowering::conform(const ir::NodeRef& g, const Layout& want) {
  SVal v = value(g);
  if (failed()) return std::nullopt;
  if (v.layout == want) return v.local;
  for (const Entry& e : v.layout)
    if (e.axis >= 0) return std::nullopt;  // only whole dimensions can be cut to match
  if (g->op == ir::Op::kLiteral || g->op == ir::Op::kFull) return rebuild(g, {}, want);
  if (g->op == ir::Op::kIota && want[g->ints[0]].axis < 0) return rebuild(g, {}, want);  // cut across its axis
  if (g->op == ir::Op::kBroadcast) {
    Layout inner;
    for (int64_t ax : g->ints) inner.push_back(want[ax]);
    auto x = conform(g->operands[0], inner);
    if (!x) return std::nullopt;
    return rebuild(g, {*x}, want);
  }
  if (g->op >= ir::Op::kNeg && g->op <= ir::Op::kCast) {
    std::vector<ir::NodeRef> ops;
    for (const auto& o : g->operands) {
      auto x = conform(o, want);
      if (!x) return std::nullopt;
      ops.push_back(*x);
    }
    return rebuild(g, ops, want);
  }
  return std::nullopt;
}

ir::NodeRef Lowering::collect(const ir::NodeRef& local, ir::Collective::Kind kind, std::vector<int> axes,
                              const std::string& why) {
  size_t i = out_.plan.steps.size();
  ir::Function k;
  k.name = name_ + "__step" + std::to_string(i);
  k.is_public = is_public_;
  k.dim_vars = f_.dim_vars;
  k.params = base_params_;
  k.params.insert(k.params.end(), collected_.begin(), collected_.end());
  k.refinements = f_.refinements;
  k.result_type = local->type;
  k.body = local;
  out_.kernels.push_back(std::move(k));
  out_.plan.steps.push_back({name_ + "__step" + std::to_string(i), {{kind, std::move(axes), -1}}, why});
  collected_.push_back({"collected_" + std::to_string(i), local->type});
  ir::Node p;
  p.op = ir::Op::kParam;
  p.index = static_cast<int>(base_params_.size() + i);
  p.type = local->type;
  last_collected_ = ir::make(std::move(p));
  return last_collected_;
}

// The result's layout against `out`: a block-sharded dimension `out` declares
// whole is all-gathered; any other difference is a ShardVaries error.
void Lowering::finish(const SVal& r) {
  std::vector<ir::Collective> gathers;
  for (size_t d = 0; d < r.layout.size(); ++d) {
    const Entry& v = r.layout[d];
    int o = spec_.out[d];
    std::string dim = "dimension " + std::to_string(d) + " of the result of " + q(f_.name);
    if (v.mixed_by) {
      fail(nullptr, DiagKind::ShardVaries,
           "`out` declares " + dim + (o < 0 ? " replicated over " + q(axis_name(v.axis))
                                            : " sharded over " + q(axis_name(o))) +
               ", but it still varies over " + q(axis_name(v.axis)) + " and its shards are not blocks of it (" +
               q(ir::op_name(v.mixed_by->op)) + " interleaved them), so no all-gather reassembles it");
      return;
    }
    if (v.axis == o) continue;
    if (v.axis >= 0 && o < 0) {
      gathers.push_back({ir::Collective::Kind::kAllGather, {v.axis}, static_cast<int64_t>(d)});
      continue;
    }
    fail(nullptr, DiagKind::ShardVaries,
         "`out` declares " + dim + " sharded over " + q(axis_name(o)) + ", but it is " +
             (v.axis < 0 ? "replicated; declare it `none`" : "sharded over " + q(axis_name(v.axis))));
    return;
  }
  if (r.local == last_collected_ && !out_.plan.steps.empty()) {
    auto& after = out_.plan.steps.back().after;
    after.insert(after.end(), gathers.begin(), gathers.end());
  } else {
    collect(r.local, ir::Collective::Kind::kNone, {}, "the result");
    auto& after = out_.plan.steps.back().after;
    after = gathers;
    collected_.pop_back();
  }
  for (const auto& g : gathers)
    out_.plan.steps.back().why += (out_.plan.steps.back().why.empty() ? "" : "; ") +
                                  std::string("the result replicated over ") + q(axis_name(g.axes[0]));
}

SpmdResult Lowering::run() {
  out_.plan.fn = name_;
  out_.plan.mesh = spec_.mesh;
  out_.plan.param_layout = spec_.in;
  out_.plan.result_layout = spec_.out;
  SVal r = value(f_.body);
  if (!failed()) finish(r);
  out_.error = error_;
  if (error_) {
    out_.kernels.clear();
    out_.plan.steps.clear();
  }
  return out_;
}

}  // namespace spmd

SpmdResult spmd_lower(const ir::Function& f, const transform::ShardSpec& spec, const std::string& name,
                      bool is_public) {
  spmd::Lowering lw(f, spec, name, is_public);
  return lw.run();
}

}  // namespace mlk
