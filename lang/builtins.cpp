// Typing rules of the builtins of language-core.md (and phase-0/builtins.md),
// one function per rule, dispatched through the op registry (lang/ops.def).
#include <algorithm>
#include <set>

#include "lang/checker_internal.h"
#include "lang/ops.h"

namespace mlk::check {
namespace {

std::string q(const std::string& s) { return "`" + s + "`"; }

struct ArgSpec {
  const char* name;
  bool required;
};

// Builds one builtin call's typed node; every method reports its own errors.
class Call {
 public:
  Call(FnChecker& c, const ast::Expr& e, ir::Op op) : c_(c), e_(e), name_(e.name), op_(op) {}

  // Matches the call's arguments to `specs` (positional, then by keyword).
  bool bind(std::initializer_list<ArgSpec> specs) {
    std::vector<ArgSpec> sp(specs);
    args_.assign(sp.size(), nullptr);
    for (size_t i = 0; i < e_.args.size(); ++i) {
      size_t t = i;
      if (!e_.arg_keywords[i].empty()) {
        t = sp.size();
        for (size_t j = 0; j < sp.size(); ++j)
          if (e_.arg_keywords[i] == sp[j].name) t = j;
        if (t == sp.size()) {
          std::string names;
          for (const auto& s : sp) names += (names.empty() ? "" : ", ") + std::string(s.name);
          return fail(DiagKind::BadArguments, e_.arg_keyword_spans[i],
                      q(name_) + " has no argument " + q(e_.arg_keywords[i]) + " (it takes " + names + ")");
        }
      } else if (t >= sp.size()) {
        return fail(DiagKind::BadArguments, e_.args[i]->span,
                    q(name_) + " takes at most " + std::to_string(sp.size()) + (sp.size() == 1 ? " argument" : " arguments") + ", found " +
                        std::to_string(e_.args.size()));
      }
      if (args_[t])
        return fail(DiagKind::BadArguments, e_.args[i]->span, "argument " + q(sp[t].name) + " of " + q(name_) + " is given twice");
      args_[t] = e_.args[i].get();
    }
    for (size_t j = 0; j < sp.size(); ++j)
      if (sp[j].required && !args_[j])
        return fail(DiagKind::BadArguments, e_.span, q(name_) + " needs argument " + q(sp[j].name));
    return true;
  }

  const ast::Expr* arg(size_t i) const { return args_[i]; }

  // A value argument; `allow_literal` keeps bare literals untyped for coercion.
  std::optional<Val> value(size_t i, bool allow_literal = false) {
    Val v = c_.expr(*args_[i]);
    if (v.error) return std::nullopt;
    if (v.lit && !allow_literal) {
      c_.require_typed(v, "an argument of " + q(name_));
      return std::nullopt;
    }
    return v;
  }

  std::optional<int> axis(size_t i, int rank) {
    auto a = c_.int_of(*args_[i], "an axis");
    if (!a) return std::nullopt;
    if (*a < -rank || *a >= rank) {
      fail(DiagKind::BadAxis, args_[i]->span,
           "axis " + std::to_string(*a) + " is out of range for rank " + std::to_string(rank) + " (valid: " +
               std::to_string(-rank) + " to " + std::to_string(rank - 1) + ")");
      return std::nullopt;
    }
    return static_cast<int>(*a < 0 ? *a + rank : *a);
  }

  std::optional<std::vector<int64_t>> axes(size_t i, int rank, bool distinct) {
    const ast::Expr* l = args_[i];
    if (l->kind != ast::Expr::Kind::kList) {
      fail(DiagKind::BadArguments, l->span, "argument " + q(std::string(spec_name(i))) + " of " + q(name_) + " must be a list of axes like `[0, 2]`");
      return std::nullopt;
    }
    std::vector<int64_t> out;
    for (const auto& item : l->args) {
      auto a = c_.int_of(*item, "an axis");
      if (!a) return std::nullopt;
      if (*a < -rank || *a >= rank) {
        fail(DiagKind::BadAxis, item->span,
             "axis " + std::to_string(*a) + " is out of range for rank " + std::to_string(rank));
        return std::nullopt;
      }
      int64_t n = *a < 0 ? *a + rank : *a;
      if (distinct && std::count(out.begin(), out.end(), n)) {
        fail(DiagKind::BadAxis, item->span, "axis " + std::to_string(n) + " is listed twice");
        return std::nullopt;
      }
      out.push_back(n);
    }
    return out;
  }

  // A list of dimensions, each proven >= 1.
  std::optional<Shape> dims(size_t i) {
    const ast::Expr* l = args_[i];
    if (l->kind != ast::Expr::Kind::kList) {
      fail(DiagKind::BadArguments, l->span, q(name_) + " needs a shape like `[B, S]` here");
      return std::nullopt;
    }
    Shape out;
    for (const auto& item : l->args) {
      auto d = positive_dim(*item);
      if (!d) return std::nullopt;
      out.push_back(*d);
    }
    return out;
  }

  std::optional<Dim> positive_dim(const ast::Expr& x) {
    auto d = c_.dim_of(x);
    if (!d) return std::nullopt;
    if (!c_.prove_or_report({Pred::Op::kGe, *d, Dim::constant(1)}, x.span, "dimension " + q(d->str()), "")) return std::nullopt;
    return d;
  }

  std::optional<DType> dtype(size_t i) {
    const ast::Expr* x = args_[i];
    if (x->kind != ast::Expr::Kind::kDType) {
      fail(DiagKind::BadArguments, x->span, q(name_) + " needs a dtype (such as `F32`) here");
      return std::nullopt;
    }
    return *parse_dtype(x->name);
  }

  bool dtype_ok(const Val& v, bool ok, const char* needs) {
    if (ok) return true;
    return fail(DiagKind::BadOperandDType, v.span,
                q(name_) + " needs " + needs + ", found " + dtype_name(v.type().dtype) +
                    (v.name.empty() ? "" : " (" + q(v.name) + ")"));
  }

  // Makes `a` and `b` agree (coercing a literal to the other's type).
  bool same_type(Val& a, Val& b) {
    if (a.lit && b.lit) {
      return fail(DiagKind::LiteralRange, e_.span, "the arguments of " + q(name_) + " are all literals, so the result has no type");
    }
    if (a.lit) a = c_.coerce(a, b.type());
    if (b.lit) b = c_.coerce(b, a.type());
    if (a.error || b.error) return false;
    if (a.type().dtype != b.type().dtype)
      return fail(DiagKind::DTypeMismatch, e_.span,
                  q(name_) + " needs identical dtypes, found " + dtype_name(a.type().dtype) + " and " + dtype_name(b.type().dtype));
    if (!same_shape(a.type().shape, b.type().shape))
      return fail(DiagKind::ShapeMismatch, e_.span,
                  q(name_) + " needs identical shapes, found " + shape_str(a.type().shape) + " and " +
                      shape_str(b.type().shape) + c_.where_bound(concat(a.type().shape, b.type().shape)));
    return true;
  }

  bool same_shape(const Shape& a, const Shape& b) const { return c_.same_shape(a, b); }
  static Shape concat(Shape a, const Shape& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }

  // The call's node, of the builtin's op.
  Val make(ir::Type t, std::vector<ir::NodeRef> operands, std::vector<int64_t> ints = {},
           std::vector<Dim> dims = {}, std::string literal = {}) {
    ir::Node n;
    n.op = op_;
    n.type = std::move(t);
    n.operands = std::move(operands);
    n.ints = std::move(ints);
    n.dims = std::move(dims);
    n.literal = std::move(literal);
    Val v;
    v.node = ir::make(std::move(n));
    v.span = e_.span;
    return v;
  }

  bool fail(DiagKind k, Span s, std::string msg) {
    c_.error(k, s, std::move(msg));
    return false;
  }
  // Reports `msg` and gives the call's error value.
  Val error(DiagKind k, Span s, std::string msg) {
    c_.error(k, s, std::move(msg));
    return err();
  }
  Val err() const { return Val::Error(e_.span); }
  const char* spec_name(size_t) const { return "axes"; }
  const std::string& name() const { return name_; }
  ir::Op op() const { return op_; }
  const ast::Expr& expr() const { return e_; }
  Span span() const { return e_.span; }
  FnChecker& checker() { return c_; }

 private:
  FnChecker& c_;
  const ast::Expr& e_;
  std::string name_;
  ir::Op op_;
  std::vector<const ast::Expr*> args_;
};

// --- The typing rules, one per builtin (or per family with one rule); the
// registry (lang/ops.def, column RULE) says which op uses which. Each binds
// the call's arguments, reports the user's mistakes and builds the node.

using Rule = Val (*)(Call&);

// exp log sqrt rsqrt tanh sigmoid erf; abs; relu.
Val unary_rule(Call& c, bool (*ok)(DType), const char* needs) {
  if (!c.bind({{"x", true}})) return c.err();
  auto x = c.value(0);
  if (!x || !c.dtype_ok(*x, ok(x->type().dtype), needs)) return c.err();
  return c.make(x->type(), {x->node});
}
Val rule_float_unary(Call& c) { return unary_rule(c, is_float, "a floating-point tensor"); }
Val rule_abs(Call& c) { return unary_rule(c, is_signed, "a signed or floating-point tensor"); }
bool is_numeric(DType t) { return t != DType::Bool; }
Val rule_relu(Call& c) { return unary_rule(c, is_numeric, "a numeric tensor"); }

// max min; pow.
Val pair_rule(Call& c, bool (*ok)(DType), const char* needs) {
  if (!c.bind({{"a", true}, {"b", true}})) return c.err();
  auto a = c.value(0, true), b = c.value(1, true);
  if (!a || !b || !c.same_type(*a, *b)) return c.err();
  if (!c.dtype_ok(*a, ok(a->type().dtype), needs)) return c.err();
  return c.make(a->type(), {a->node, b->node});
}
Val rule_numeric_pair(Call& c) { return pair_rule(c, is_numeric, "numeric tensors"); }
Val rule_pow(Call& c) { return pair_rule(c, is_float, "floating-point tensors"); }

Val rule_where(Call& c) {
  if (!c.bind({{"c", true}, {"a", true}, {"b", true}})) return c.err();
  auto cond = c.value(0), a = c.value(1, true), b = c.value(2, true);
  if (!cond || !a || !b) return c.err();
  if (!c.dtype_ok(*cond, cond->type().dtype == DType::Bool, "a Bool condition")) return c.err();
  if (!c.same_type(*a, *b)) return c.err();
  if (!c.same_shape(cond->type().shape, a->type().shape))
    return c.error(DiagKind::ShapeMismatch, c.span(),
                   "`where` needs the condition's shape " + shape_str(cond->type().shape) + " to equal the branches' " +
                       shape_str(a->type().shape));
  return c.make(a->type(), {cond->node, a->node, b->node});
}

Val rule_cast(Call& c) {
  if (!c.bind({{"x", true}, {"dtype", true}})) return c.err();
  auto x = c.value(0);
  auto t = c.dtype(1);
  if (!x || !t) return c.err();
  return c.make({*t, x->type().shape}, {x->node});
}

// sum mean reduce_max reduce_min.
Val rule_reduce(Call& c) {
  if (!c.bind({{"x", true}, {"axes", true}})) return c.err();
  auto x = c.value(0);
  if (!x) return c.err();
  auto axes = c.axes(1, x->rank(), true);
  if (!axes) return c.err();
  if (axes->empty()) return c.error(DiagKind::BadAxis, c.arg(1)->span, q(c.name()) + " needs at least one axis");
  DType t = x->type().dtype;
  bool mean = c.op() == ir::Op::kMean;
  if (!c.dtype_ok(*x, mean ? is_float(t) : t != DType::Bool, mean ? "a floating-point tensor" : "a numeric tensor"))
    return c.err();
  std::sort(axes->begin(), axes->end());
  Shape out;
  for (int i = 0; i < x->rank(); ++i)
    if (!std::count(axes->begin(), axes->end(), i)) out.push_back(x->type().shape[i]);
  return c.make({t, out}, {x->node}, *axes);
}

Val rule_broadcast(Call& c) {
  FnChecker& k = c.checker();
  if (!c.bind({{"x", true}, {"shape", true}, {"axes", false}})) return c.err();
  auto x = c.value(0);
  if (!x) return c.err();
  auto shape = c.dims(1);
  if (!shape) return c.err();
  int out_rank = static_cast<int>(shape->size());
  std::vector<int64_t> axes;
  if (c.arg(2)) {
    auto a = c.axes(2, out_rank, true);
    if (!a) return c.err();
    axes = *a;
  } else if (x->rank() != 0) {
    return c.error(DiagKind::BadArguments, c.span(),
                   "`broadcast` of a rank-" + std::to_string(x->rank()) +
                       " tensor needs `axes=[..]`: the output axis of each input axis");
  }
  if (static_cast<int>(axes.size()) != x->rank())
    return c.error(DiagKind::BadAxis, c.arg(2) ? c.arg(2)->span : c.span(),
                   "`broadcast` needs one output axis per input axis: the input has rank " + std::to_string(x->rank()) +
                       " but `axes` lists " + std::to_string(axes.size()));
  for (size_t i = 0; i < axes.size(); ++i)
    if (!k.facts().prove({Pred::Op::kEq, x->type().shape[i], (*shape)[axes[i]]}))
      return c.error(DiagKind::ShapeMismatch, c.span(),
                     "`broadcast` maps input axis " + std::to_string(i) + " (" + x->type().shape[i].str() +
                         ") to output axis " + std::to_string(axes[i]) + " (" + (*shape)[axes[i]].str() +
                         "), which differ" + k.where_bound({x->type().shape[i], (*shape)[axes[i]]}));
  return c.make({x->type().dtype, *shape}, {x->node}, axes);
}

Val rule_matmul(Call& c) {
  FnChecker& k = c.checker();
  if (!c.bind({{"a", true}, {"b", true}})) return c.err();
  auto a = c.value(0), b = c.value(1);
  if (!a || !b) return c.err();
  if (a->type().dtype != b->type().dtype)
    return c.error(DiagKind::DTypeMismatch, c.span(),
                   "`matmul` needs identical dtypes, found " + std::string(dtype_name(a->type().dtype)) + " and " +
                       dtype_name(b->type().dtype));
  if (!c.dtype_ok(*a, a->type().dtype != DType::Bool, "numeric tensors")) return c.err();
  int ra = a->rank(), rb = b->rank();
  if (ra < 2 || rb < 2)
    return c.error(DiagKind::MatmulDims, c.span(),
                   "`matmul` needs operands of rank >= 2, found rank " + std::to_string(ra) + " and " +
                       std::to_string(rb));
  const Shape& sa = a->type().shape;
  const Shape& sb = b->type().shape;
  if (!k.facts().prove({Pred::Op::kEq, sa[ra - 1], sb[rb - 2]}))
    return c.error(DiagKind::MatmulDims, c.span(),
                   "`matmul` inner dims differ: the left operand's last axis is " + q(sa[ra - 1].str()) +
                       " but the right operand's axis " + std::to_string(rb - 2) + " is " + q(sb[rb - 2].str()) +
                       k.where_bound({sa[ra - 1], sb[rb - 2]}));
  Shape batch(sa.begin(), sa.end() - 2);
  if (rb > 2) {
    Shape bb(sb.begin(), sb.end() - 2);
    if (!c.same_shape(batch, bb))
      return c.error(DiagKind::MatmulDims, c.span(),
                     "`matmul` batch dims differ: " + shape_str(batch) + " and " + shape_str(bb) +
                         " (the right operand is either [K, N] or has the same batch dims)");
  }
  Shape out = batch;
  out.push_back(sa[ra - 2]);
  out.push_back(sb[rb - 1]);
  return c.make({a->type().dtype, out}, {a->node, b->node});
}

Val rule_transpose(Call& c) {
  if (!c.bind({{"x", true}, {"perm", true}})) return c.err();
  auto x = c.value(0);
  if (!x) return c.err();
  auto perm = c.axes(1, x->rank(), true);
  if (!perm) return c.err();
  if (static_cast<int>(perm->size()) != x->rank())
    return c.error(DiagKind::BadAxis, c.arg(1)->span,
                   "`transpose` needs a permutation of all " + std::to_string(x->rank()) + " axes, found " +
                       std::to_string(perm->size()));
  Shape out;
  for (int64_t p : *perm) out.push_back(x->type().shape[p]);
  return c.make({x->type().dtype, out}, {x->node}, *perm);
}

Val rule_reshape(Call& c) {
  FnChecker& k = c.checker();
  if (!c.bind({{"x", true}, {"shape", true}})) return c.err();
  auto x = c.value(0);
  if (!x) return c.err();
  auto shape = c.dims(1);
  if (!shape) return c.err();
  Dim from = element_count(x->type().shape), to = element_count(*shape);
  if (from.overflowed() || to.overflowed())
    return c.error(DiagKind::DimOverflow, c.span(), "`reshape` element count overflows 64 bits");
  if (!k.facts().prove({Pred::Op::kEq, from, to}))
    return c.error(DiagKind::ElementCount, c.span(),
                   "`reshape` must keep the element count: " + shape_str(x->type().shape) + " has " + q(from.str()) +
                       " elements but " + shape_str(*shape) + " has " + q(to.str()) + k.where_bound({from, to}));
  return c.make({x->type().dtype, *shape}, {x->node});
}

Val rule_softmax(Call& c) {
  if (!c.bind({{"x", true}, {"axis", true}})) return c.err();
  auto x = c.value(0);
  if (!x) return c.err();
  if (!c.dtype_ok(*x, is_float(x->type().dtype), "a floating-point tensor")) return c.err();
  if (x->rank() == 0) return c.error(DiagKind::BadAxis, c.span(), "`softmax` needs a tensor of rank >= 1");
  auto a = c.axis(1, x->rank());
  if (!a) return c.err();
  return c.make(x->type(), {x->node}, {*a});
}

Val rule_gather(Call& c) {
  if (!c.bind({{"table", true}, {"idx", true}, {"axis", false}})) return c.err();
  auto t = c.value(0), idx = c.value(1);
  if (!t || !idx) return c.err();
  if (!c.dtype_ok(*idx, is_integer(idx->type().dtype), "an integer index tensor")) return c.err();
  if (t->rank() == 0) return c.error(DiagKind::BadAxis, c.span(), "`gather` needs a table of rank >= 1");
  int axis = 0;
  if (c.arg(2)) {
    auto a = c.axis(2, t->rank());
    if (!a) return c.err();
    axis = *a;
  }
  const Shape& ts = t->type().shape;
  Shape out(ts.begin(), ts.begin() + axis);
  out.insert(out.end(), idx->type().shape.begin(), idx->type().shape.end());
  out.insert(out.end(), ts.begin() + axis + 1, ts.end());
  return c.make({t->type().dtype, out}, {t->node, idx->node}, {axis});
}

Val rule_repeat_interleave(Call& c) {
  if (!c.bind({{"x", true}, {"repeats", true}, {"axis", true}})) return c.err();
  auto x = c.value(0);
  if (!x) return c.err();
  auto r = c.positive_dim(*c.arg(1));
  if (!r) return c.err();
  if (x->rank() == 0) return c.error(DiagKind::BadAxis, c.span(), "`repeat_interleave` needs a tensor of rank >= 1");
  auto a = c.axis(2, x->rank());
  if (!a) return c.err();
  Shape out = x->type().shape;
  out[*a] = out[*a] * *r;
  if (out[*a].overflowed()) return c.error(DiagKind::DimOverflow, c.span(), "`repeat_interleave` extent overflows 64 bits");
  return c.make({x->type().dtype, out}, {x->node}, {*a}, {*r});
}

Val rule_concat(Call& c) {
  FnChecker& k = c.checker();
  if (!c.bind({{"xs", true}, {"axis", true}})) return c.err();
  const ast::Expr* l = c.arg(0);
  if (l->kind != ast::Expr::Kind::kList || l->args.empty())
    return c.error(DiagKind::BadArguments, l->span, "`concat` needs a non-empty list of tensors like `[a, b]`");
  std::vector<Val> xs;
  for (const auto& item : l->args) {
    Val v = k.expr(*item);
    if (v.error || !k.require_typed(v, "an argument of `concat`")) return c.err();
    xs.push_back(v);
  }
  if (xs[0].rank() == 0) return c.error(DiagKind::BadAxis, c.span(), "`concat` needs tensors of rank >= 1");
  auto a = c.axis(1, xs[0].rank());
  if (!a) return c.err();
  Shape out = xs[0].type().shape;
  std::vector<ir::NodeRef> nodes = {xs[0].node};
  for (size_t i = 1; i < xs.size(); ++i) {
    const ir::Type& t = xs[i].type();
    if (t.dtype != xs[0].type().dtype)
      return c.error(DiagKind::DTypeMismatch, xs[i].span,
                     "`concat` needs identical dtypes, found " + std::string(dtype_name(xs[0].type().dtype)) + " and " +
                         dtype_name(t.dtype));
    bool ok = t.shape.size() == out.size();
    for (size_t ax = 0; ok && ax < out.size(); ++ax)
      ok = static_cast<int>(ax) == *a || k.facts().prove({Pred::Op::kEq, t.shape[ax], out[ax]});
    if (!ok)
      return c.error(DiagKind::ShapeMismatch, xs[i].span,
                     "`concat` along axis " + std::to_string(*a) + " needs every other axis equal, found " +
                         shape_str(xs[0].type().shape) + " and " + shape_str(t.shape));
    out[*a] = out[*a] + t.shape[*a];
    nodes.push_back(xs[i].node);
  }
  return c.make({xs[0].type().dtype, out}, nodes, {*a});
}

Val rule_slice(Call& c) {
  FnChecker& k = c.checker();
  if (!c.bind({{"x", true}, {"axis", true}, {"start", true}, {"len", true}})) return c.err();
  auto x = c.value(0);
  if (!x) return c.err();
  if (x->rank() == 0) return c.error(DiagKind::BadAxis, c.span(), "`slice` needs a tensor of rank >= 1");
  auto a = c.axis(1, x->rank());
  auto start = k.dim_of(*c.arg(2));
  auto len = c.arg(3) ? c.positive_dim(*c.arg(3)) : std::nullopt;
  if (!a || !start || !len) return c.err();
  if (!k.prove_or_report({Pred::Op::kGe, *start, Dim()}, c.arg(2)->span, "`slice` start", "")) return c.err();
  const Dim& extent = x->type().shape[*a];
  if (!k.prove_or_report({Pred::Op::kLe, *start + *len, extent}, c.span(), "`slice` of axis " + std::to_string(*a), ""))
    return c.err();
  Shape out = x->type().shape;
  out[*a] = *len;
  return c.make({x->type().dtype, out}, {x->node}, {*a}, {*start, *len});
}

Val rule_iota(Call& c) {
  if (!c.bind({{"dtype", true}, {"shape", true}, {"axis", true}})) return c.err();
  auto t = c.dtype(0);
  auto shape = c.dims(1);
  if (!t || !shape) return c.err();
  if (*t == DType::Bool) return c.error(DiagKind::BadOperandDType, c.arg(0)->span, "`iota` needs a numeric dtype, found Bool");
  if (shape->empty()) return c.error(DiagKind::BadAxis, c.span(), "`iota` needs a shape of rank >= 1");
  auto a = c.axis(2, static_cast<int>(shape->size()));
  if (!a) return c.err();
  return c.make({*t, *shape}, {}, {*a});
}

Val rule_full(Call& c) {
  FnChecker& k = c.checker();
  if (!c.bind({{"dtype", true}, {"shape", true}, {"value", true}})) return c.err();
  auto t = c.dtype(0);
  auto shape = c.dims(1);
  if (!t || !shape) return c.err();
  Val v = k.expr(*c.arg(2));
  if (v.error) return c.err();
  if (!v.lit)
    return c.error(DiagKind::BadArguments, c.arg(2)->span, "`full` needs a literal value such as `0.0` or `true`");
  Val typed = k.coerce(v, {*t, *shape});
  if (typed.error) return c.err();
  return c.make({*t, *shape}, {}, {}, {}, typed.node->literal);
}

// The rule of each op, by ir::Op (null: not a builtin).
constexpr Rule kRules[] = {
#define none nullptr
#define MLK_OP(ID, NAME, ARITY, CALL, RULE, ...) RULE,
#include "lang/ops.def"
#undef MLK_OP
#undef none
};
static_assert(sizeof(kRules) / sizeof(kRules[0]) == ir::kOpCount, "one rule slot per op");

}  // namespace

bool is_builtin(const std::string& name) { return ir::builtin_op(name).has_value(); }

Val FnChecker::builtin(const ast::Expr& e) {
  auto op = ir::builtin_op(e.name);
  MLK_CHECK(op && kRules[static_cast<size_t>(*op)], "builtin: not a builtin (the caller checks is_builtin)");
  Call c(*this, e, *op);
  return kRules[static_cast<size_t>(*op)](c);
}

}  // namespace mlk::check
