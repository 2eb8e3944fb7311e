// The sharding rule of each op (the slot lang/ops.def keeps keyed by ID): the
// op at per-shard shapes from its operands' values, the layout of its
// result, and the collectives it needs (see spmd.h and the table of
// phase-0/transforms.md, section 4).
#include <algorithm>
#include <cstdio>
#include <set>

#include "lang/ir_build.h"
#include "lang/spmd_internal.h"

namespace mlk::spmd {
namespace {

std::string op_q(const ir::NodeRef& g) { return q(ir::op_name(g->op)); }

// Elementwise ops and concat: one layout for every operand (the first cut of
// each dimension), the others conformed to it.
SVal aligned(Lowering& lw, const ir::NodeRef& g, int64_t along = -1) {
  std::vector<SVal> ops;
  for (const auto& o : g->operands) ops.push_back(lw.value(o));
  if (lw.failed()) return {};
  Layout want(g->type.shape.size());
  for (size_t d = 0; d < want.size(); ++d)
    for (const SVal& v : ops)
      if (v.layout[d].axis >= 0 && want[d].axis < 0) want[d] = v.layout[d];
  std::set<int> used;
  for (size_t d = 0; d < want.size(); ++d) {
    if (want[d].axis < 0) continue;
    if (static_cast<int64_t>(d) == along)
      return lw.fail(g, DiagKind::ShardMismatch,
                     op_q(g) + " along dimension " + std::to_string(d) + ", which is sharded over " +
                         q(lw.axis_name(want[d].axis)) + "; only reductions, matmul and softmax run along a sharded "
                         "dimension");
    if (!used.insert(want[d].axis).second)
      return lw.fail(g, DiagKind::ShardMismatch,
                     op_q(g) + " would cut two dimensions of its result over " + q(lw.axis_name(want[d].axis)));
  }
  std::vector<ir::NodeRef> locals;
  for (size_t i = 0; i < ops.size(); ++i) {
    auto x = lw.conform(g->operands[i], want);
    if (lw.failed()) return {};
    if (!x) {
      size_t d = 0;
      while (d + 1 < want.size() && ops[i].layout[d] == want[d]) ++d;
      std::string mine = ops[i].layout[d].axis < 0 ? "whole" : "sharded over " + q(lw.axis_name(ops[i].layout[d].axis));
      std::string theirs = want[d].axis < 0 ? "whole" : "sharded over " + q(lw.axis_name(want[d].axis));
      return lw.fail(g, DiagKind::ShardMismatch,
                     "operands of " + op_q(g) + " are sharded differently along dimension " + std::to_string(d) +
                         ": operand " + std::to_string(i + 1) + " is " + mine + ", another is " + theirs +
                         " (only broadcasts and constants are cut to match); give them the same layout in `spec`");
    }
    locals.push_back(*x);
  }
  return {lw.rebuild(g, locals, want), want};
}

std::string literal_of(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// sum, mean, reduce_max, reduce_min: a reduction along sharded dimensions is
// reduced locally, then all-reduced over their axes (a mean's sum of local
// means divided by the shard count).
SVal reduce(Lowering& lw, const ir::NodeRef& g) {
  SVal x = lw.value(g->operands[0]);
  if (lw.failed()) return {};
  Layout kept;
  std::vector<int> axes;
  std::string why;
  for (size_t d = 0; d < x.layout.size(); ++d) {
    bool reduced = std::count(g->ints.begin(), g->ints.end(), static_cast<int64_t>(d)) > 0;
    if (!reduced) {
      kept.push_back(x.layout[d]);
    } else if (x.layout[d].axis >= 0) {
      axes.push_back(x.layout[d].axis);
      why = op_q(g) + " over " + q(g->operands[0]->type.shape[d].str()) + ", sharded over " +
            q(lw.axis_name(x.layout[d].axis));
    }
  }
  ir::NodeRef local = lw.rebuild(g, {x.local}, kept);
  if (axes.empty()) return {local, kept};
  using K = ir::Collective::Kind;
  K kind = g->op == ir::Op::kReduceMax ? K::kAllReduceMax : g->op == ir::Op::kReduceMin ? K::kAllReduceMin
                                                                                          : K::kAllReduceSum;
  int64_t shards = 1;
  for (int a : axes) shards *= lw.axis_size(a);
  ir::NodeRef c = lw.collect(local, kind, axes, why);
  if (g->op == ir::Op::kMean) c = irb::scale(c, literal_of(1.0 / static_cast<double>(shards)));
  return {c, kept};
}

// softmax along a sharded dimension: all-reduce(max) of the local maxima,
// then all-reduce(sum) of the local sums of exponentials.
SVal softmax(Lowering& lw, const ir::NodeRef& g) {
  SVal x = lw.value(g->operands[0]);
  if (lw.failed()) return {};
  int64_t a = g->ints[0];
  int k = x.layout[a].axis;
  if (k < 0) return {lw.rebuild(g, {x.local}, x.layout), x.layout};
  std::vector<int64_t> others;
  for (int64_t d = 0; d < static_cast<int64_t>(x.layout.size()); ++d)
    if (d != a) others.push_back(d);
  std::string dim = q(g->operands[0]->type.shape[a].str()) + ", sharded over " + q(lw.axis_name(k));
  using K = ir::Collective::Kind;
  ir::NodeRef m = lw.collect(irb::reduce(ir::Op::kReduceMax, x.local, {a}), K::kAllReduceMax, {k},
                             "the maximum of `softmax` over " + dim);
  ir::NodeRef e = irb::unary(ir::Op::kExp, irb::sub(x.local, irb::broadcast(m, x.local->type.shape, others)));
  ir::NodeRef s = lw.collect(irb::reduce(ir::Op::kSum, e, {a}), K::kAllReduceSum, {k},
                             "the normaliser of `softmax` over " + dim);
  return {irb::div(e, irb::broadcast(s, x.local->type.shape, others)), x.layout};
}

// matmul: rows from `a`, columns from `b`; a contraction over a sharded
// dimension is a partial sum, all-reduced.
SVal matmul(Lowering& lw, const ir::NodeRef& g) {
  SVal a = lw.value(g->operands[0]), b = lw.value(g->operands[1]);
  if (lw.failed()) return {};
  size_t ra = a.layout.size(), rb = b.layout.size();
  Entry ak = a.layout[ra - 1], bk = b.layout[rb - 2];
  if (ak != bk) {
    auto side = [&](const Entry& e) { return e.axis < 0 ? std::string("whole") : "sharded over " + q(lw.axis_name(e.axis)); };
    return lw.fail(g, DiagKind::ShardMismatch,
                   "the contraction dimension of `matmul` is " + side(ak) + " in its first operand but " + side(bk) +
                       " in its second; shard both over the same axis");
  }
  Layout l(a.layout.begin(), a.layout.end() - 1);
  l.push_back(b.layout[rb - 1]);
  for (size_t d = 0; rb > 2 && d + 2 < ra; ++d)
    if (a.layout[d] != b.layout[d])
      return lw.fail(g, DiagKind::ShardMismatch,
                     "the batch dimension " + std::to_string(d) + " of `matmul` is sharded differently in its operands");
  std::set<int> used;
  for (const Entry& e : l)
    if (e.axis >= 0 && !used.insert(e.axis).second)
      return lw.fail(g, DiagKind::ShardMismatch,
                     "`matmul` would cut two dimensions of its result over " + q(lw.axis_name(e.axis)) +
                         "; shard one operand's free dimension only");
  ir::NodeRef local = lw.rebuild(g, {a.local, b.local}, l);
  if (ak.axis < 0) return {local, l};
  return {lw.collect(local, ir::Collective::Kind::kAllReduceSum, {ak.axis},
                     "`matmul` contracting " + q(g->operands[0]->type.shape[ra - 1].str()) + ", sharded over " +
                         q(lw.axis_name(ak.axis))),
          l};
}

SVal transpose(Lowering& lw, const ir::NodeRef& g) {
  SVal x = lw.value(g->operands[0]);
  if (lw.failed()) return {};
  Layout l;
  for (int64_t p : g->ints) l.push_back(x.layout[p]);
  return {lw.rebuild(g, {x.local}, l), l};
}

SVal broadcast(Lowering& lw, const ir::NodeRef& g) {
  SVal x = lw.value(g->operands[0]);
  if (lw.failed()) return {};
  Layout l(g->type.shape.size());
  for (size_t i = 0; i < g->ints.size(); ++i) l[g->ints[i]] = x.layout[i];
  return {lw.rebuild(g, {x.local}, l), l};
}

// reshape: sharded dimensions in a prefix the reshape keeps stay blocks;
// otherwise the shards land in a dimension the axis size divides, but are no
// longer blocks of it (mixed).
SVal reshape(Lowering& lw, const ir::NodeRef& g) {
  SVal x = lw.value(g->operands[0]);
  if (lw.failed()) return {};
  const Shape &in = g->operands[0]->type.shape, &out = g->type.shape;
  int last = -1, axis = -1;
  for (size_t d = 0; d < x.layout.size(); ++d)
    if (x.layout[d].axis >= 0) {
      if (axis >= 0 && axis != x.layout[d].axis)
        return lw.fail(g, DiagKind::ShardMismatch, "`reshape` of a value sharded over two mesh axes");
      last = static_cast<int>(d);
      axis = x.layout[d].axis;
    }
  Layout l(out.size());
  if (last < 0) return {lw.rebuild(g, {x.local}, l), l};
  bool prefix = static_cast<size_t>(last) < out.size();
  for (int d = 0; prefix && d <= last; ++d) prefix = in[d] == out[d];
  if (prefix) {
    for (int d = 0; d <= last; ++d) l[d] = x.layout[d];
    return {lw.rebuild(g, {x.local}, l), l};
  }
  for (size_t d = 0; d < out.size(); ++d)
    if (lw.facts().prove({Pred::Op::kModZero, out[d], Dim::constant(lw.axis_size(axis))})) {
      l[d] = {axis, g.get()};
      return {lw.rebuild(g, {x.local}, l), l};
    }
  return lw.fail(g, DiagKind::ShardMismatch,
                 "`reshape` of a value sharded over " + q(lw.axis_name(axis)) + " to " + shape_str(out) +
                     ", none of whose extents is proven a multiple of " + std::to_string(lw.axis_size(axis)));
}

SVal gather(Lowering& lw, const ir::NodeRef& g) {
  SVal t = lw.value(g->operands[0]), idx = lw.value(g->operands[1]);
  if (lw.failed()) return {};
  int64_t a = g->ints[0];
  if (t.layout[a].axis >= 0)
    return lw.fail(g, DiagKind::ShardMismatch,
                   "`gather` indexes dimension " + std::to_string(a) + " of its table, which is sharded over " +
                       q(lw.axis_name(t.layout[a].axis)) + "; shard the index instead");
  Layout l(t.layout.begin(), t.layout.begin() + a);
  l.insert(l.end(), idx.layout.begin(), idx.layout.end());
  l.insert(l.end(), t.layout.begin() + a + 1, t.layout.end());
  std::set<int> used;
  for (const Entry& e : l)
    if (e.axis >= 0 && !used.insert(e.axis).second)
      return lw.fail(g, DiagKind::ShardMismatch, "`gather` would cut two dimensions of its result over " +
                                                     q(lw.axis_name(e.axis)));
  return {lw.rebuild(g, {t.local, idx.local}, l), l};
}

}  // namespace

SVal apply_rule(Lowering& lw, const ir::NodeRef& g) {
  switch (g->op) {
    case ir::Op::kLiteral:
    case ir::Op::kFull:
    case ir::Op::kIota:
      return {g, Layout(g->type.shape.size())};
    case ir::Op::kSum:
    case ir::Op::kMean:
    case ir::Op::kReduceMax:
    case ir::Op::kReduceMin:
      return reduce(lw, g);
    case ir::Op::kBroadcast: return broadcast(lw, g);
    case ir::Op::kMatmul: return matmul(lw, g);
    case ir::Op::kTranspose: return transpose(lw, g);
    case ir::Op::kReshape: return reshape(lw, g);
    case ir::Op::kSoftmax: return softmax(lw, g);
    case ir::Op::kGather: return gather(lw, g);
    case ir::Op::kRepeatInterleave:
    case ir::Op::kConcat:
    case ir::Op::kSlice:
      return aligned(lw, g, g->ints[0]);
    case ir::Op::kParam:
    case ir::Op::kCall:
      MLK_CHECK(false, "spmd: parameters are the driver's, calls are inlined before");
      return {};
    default:
      MLK_CHECK(g->op >= ir::Op::kNeg && g->op <= ir::Op::kCast, "spmd: an op without a sharding rule");
      return aligned(lw, g);
  }
}

}  // namespace mlk::spmd
