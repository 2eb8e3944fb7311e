// Cancelling reshape round trips (see cancel_reshapes.h): one memoised
// rebuild of the DAG, and at each reshape a memoised push of it inwards.
#include "lang/cancel_reshapes.h"

#include <map>
#include <optional>
#include <set>
#include <utility>

#include "lang/ir_build.h"

namespace mlk {
namespace {

using ir::NodeRef;
using ir::Op;

bool elementwise(Op op) { return op >= Op::kNeg && op <= Op::kCast; }

// One group of a reshape from `a` to `b`: a[a0, a1) holds the same elements,
// in the same order, as b[b0, b1) (equal products of extents).
struct Group {
  size_t a0, a1, b0, b1;
};

Dim product(const Shape& s, size_t from, size_t to) {
  Dim p = Dim::constant(1);
  for (size_t i = from; i < to; ++i) p = p * s[i];
  return p;
}

// The finest split of a reshape from `a` to `b` into groups; nullopt when
// the extents' products cannot be matched (symbolically) group by group.
std::optional<std::vector<Group>> groups(const Shape& a, const Shape& b) {
  std::vector<Group> out;
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (i == a.size() || j == b.size()) return std::nullopt;
    std::optional<Group> g;
    for (size_t i1 = i + 1; i1 <= a.size() && !g; ++i1)
      for (size_t j1 = j + 1; j1 <= b.size() && !g; ++j1)
        if (product(a, i, i1) == product(b, j, j1)) g = Group{i, i1, j, j1};
    if (!g) return std::nullopt;
    out.push_back(*g);
    i = g->a1;
    j = g->b1;
  }
  return out;
}

// What a push of a reshape into a node gave.
enum class Kind {
  kFail,     // not moved: the reshape stays where it is
  kNeutral,  // moved with no reshape left below (a literal, a scalar broadcast)
  kCancel,   // moved, and at least one reshape below it cancelled
};

struct Pushed {
  Kind kind = Kind::kFail;
  NodeRef node;
};

class Canceller {
 public:
  NodeRef rebuild(const NodeRef& n) {
    auto it = rebuilt_.find(n.get());
    if (it != rebuilt_.end()) return it->second;
    std::vector<NodeRef> ops;
    for (const NodeRef& o : n->operands) ops.push_back(rebuild(o));
    NodeRef out = n;
    Pushed p;
    if (n->op == Op::kReshape) p = push(ops[0], n->type.shape);
    if (p.kind != Kind::kFail) {
      out = p.node;
    } else if (ops != n->operands) {
      ir::Node c = *n;
      c.operands = std::move(ops);
      out = ir::make(std::move(c));
    }
    return rebuilt_[n.get()] = out;
  }

 private:
  // reshape(n, s) with the reshape moved below n where that cancels one.
  Pushed push(const NodeRef& n, const Shape& s) {
    if (n->type.shape == s) return {Kind::kCancel, n};
    auto key = std::make_pair(n.get(), shape_str(s));
    auto it = pushed_.find(key);
    if (it != pushed_.end()) return it->second;
    Pushed p = push_new(n, s);
    keep_.push_back(n);
    return pushed_[key] = p;
  }

  Pushed push_new(const NodeRef& n, const Shape& s) {
    if (n->op == Op::kReshape) return {Kind::kCancel, irb::reshape(n->operands[0], s)};
    if (n->op == Op::kLiteral || n->op == Op::kFull) {
      ir::Node c = *n;
      c.type.shape = s;
      return {Kind::kNeutral, ir::make(std::move(c))};
    }
    if (elementwise(n->op)) return push_elementwise(n, s);
    if (n->op == Op::kBroadcast) return push_broadcast(n, s);
    if (n->op == Op::kSum || n->op == Op::kMean || n->op == Op::kReduceMax || n->op == Op::kReduceMin)
      return push_reduce(n, s);
    return {};
  }

  Pushed push_elementwise(const NodeRef& n, const Shape& s) {
    bool cancelled = false, failed = false;
    ir::Node c = *n;
    c.type.shape = s;
    for (NodeRef& o : c.operands) {
      Pushed p = push(o, s);
      cancelled |= p.kind == Kind::kCancel;
      failed |= p.kind == Kind::kFail;
      o = p.kind == Kind::kFail ? irb::reshape(o, s) : p.node;
    }
    if (!cancelled && failed) return {};
    return {cancelled ? Kind::kCancel : Kind::kNeutral, ir::make(std::move(c))};
  }

  // The operand `y` of a broadcast or reduction reshaped to `s`: pushed
  // where that works, else left to a reshape of its own (which is then no
  // gain, so the caller's kind is kFail).
  Pushed operand(const NodeRef& y, const Shape& s) {
    if (y->type.shape == s) return {Kind::kNeutral, y};
    return push(y, s);
  }

  Pushed push_broadcast(const NodeRef& n, const Shape& s) {
    const std::vector<int64_t>& axes = n->ints;
    for (size_t k = 1; k < axes.size(); ++k)
      if (axes[k] <= axes[k - 1]) return {};
    auto gs = groups(n->type.shape, s);
    if (!gs) return {};
    Shape y2;
    std::vector<int64_t> axes2;
    size_t k = 0;  // the next axis of y
    for (const Group& g : *gs) {
      size_t kept = 0;
      while (k + kept < axes.size() && static_cast<size_t>(axes[k + kept]) < g.a1) ++kept;
      if (kept == 0) continue;  // broadcast along the whole group
      if (kept != g.a1 - g.a0) return {};  // some axes y's, some broadcast
      for (size_t b = g.b0; b < g.b1; ++b) {
        y2.push_back(s[b]);
        axes2.push_back(static_cast<int64_t>(b));
      }
      k += kept;
    }
    Pushed y = operand(n->operands[0], y2);
    if (y.kind == Kind::kFail) return {};
    return {y.kind, irb::broadcast(y.node, s, axes2)};
  }

  Pushed push_reduce(const NodeRef& n, const Shape& s) {
    const Shape& in = n->operands[0]->type.shape;
    const std::set<int64_t> reduced(n->ints.begin(), n->ints.end());
    std::vector<size_t> kept;  // the input axis of each output axis
    for (size_t ax = 0; ax < in.size(); ++ax)
      if (!reduced.count(static_cast<int64_t>(ax))) kept.push_back(ax);
    auto gs = groups(n->type.shape, s);
    if (!gs) return {};
    for (const Group& g : *gs)
      if (kept[g.a1 - 1] - kept[g.a0] != g.a1 - 1 - g.a0) return {};  // a reduced axis inside
    Shape in2;
    std::vector<int64_t> axes2;
    size_t o = 0, gi = 0;
    for (size_t ax = 0; ax < in.size(); ++ax) {
      if (reduced.count(static_cast<int64_t>(ax))) {
        axes2.push_back(static_cast<int64_t>(in2.size()));
        in2.push_back(in[ax]);
        continue;
      }
      const Group& g = (*gs)[gi];
      if (o == g.a0)
        for (size_t b = g.b0; b < g.b1; ++b) in2.push_back(s[b]);
      if (++o == g.a1) ++gi;
    }
    Pushed x = operand(n->operands[0], in2);
    if (x.kind == Kind::kFail) return {};
    return {x.kind, irb::reduce(n->op, x.node, axes2)};
  }

  std::map<const ir::Node*, NodeRef> rebuilt_;
  std::map<std::pair<const ir::Node*, std::string>, Pushed> pushed_;
  std::vector<NodeRef> keep_;  // keeps the memo's keys alive (addresses unique)
};

// The nodes that compute (not params, literals or views), reachable from `rs`.
size_t computing_nodes(const std::vector<NodeRef>& rs) {
  std::set<const ir::Node*> seen;
  std::vector<const ir::Node*> todo;
  for (const NodeRef& r : rs) todo.push_back(r.get());
  size_t count = 0;
  while (!todo.empty()) {
    const ir::Node* n = todo.back();
    todo.pop_back();
    if (!seen.insert(n).second) continue;
    switch (n->op) {
      case Op::kParam:
      case Op::kLiteral:
      case Op::kFull:
      case Op::kReshape:
      case Op::kBroadcast:
      case Op::kTranspose:
        break;
      default:
        ++count;
    }
    for (const NodeRef& o : n->operands) todo.push_back(o.get());
  }
  return count;
}

}  // namespace

std::vector<ir::NodeRef> cancel_reshapes(const std::vector<ir::NodeRef>& results) {
  Canceller c;
  std::vector<NodeRef> out;
  for (const NodeRef& r : results) out.push_back(c.rebuild(r));
  if (out == results || computing_nodes(out) > computing_nodes(results)) return results;
  return out;
}

}  // namespace mlk
