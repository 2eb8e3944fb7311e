// Typing rules of the builtins of language-core.md (and phase-0/builtins.md).
#include <algorithm>
#include <set>

#include "lang/checker_internal.h"

namespace mlk::check {
namespace {

std::string q(const std::string& s) { return "`" + s + "`"; }

const std::set<std::string>& float_unary() {
  static const std::set<std::string> s = {"exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf"};
  return s;
}

const std::map<std::string, ir::Op>& op_table() {
  static const std::map<std::string, ir::Op> m = {
      {"exp", ir::Op::kExp}, {"log", ir::Op::kLog}, {"sqrt", ir::Op::kSqrt}, {"rsqrt", ir::Op::kRsqrt},
      {"tanh", ir::Op::kTanh}, {"sigmoid", ir::Op::kSigmoid}, {"abs", ir::Op::kAbs}, {"relu", ir::Op::kRelu},
      {"erf", ir::Op::kErf}, {"max", ir::Op::kMax}, {"min", ir::Op::kMin}, {"pow", ir::Op::kPow},
      {"where", ir::Op::kWhere}, {"cast", ir::Op::kCast}, {"sum", ir::Op::kSum}, {"mean", ir::Op::kMean},
      {"reduce_max", ir::Op::kReduceMax}, {"reduce_min", ir::Op::kReduceMin}, {"broadcast", ir::Op::kBroadcast},
      {"matmul", ir::Op::kMatmul}, {"transpose", ir::Op::kTranspose}, {"reshape", ir::Op::kReshape},
      {"softmax", ir::Op::kSoftmax}, {"gather", ir::Op::kGather}, {"repeat_interleave", ir::Op::kRepeatInterleave},
      {"concat", ir::Op::kConcat}, {"slice", ir::Op::kSlice}, {"iota", ir::Op::kIota}, {"full", ir::Op::kFull}};
  return m;
}

struct ArgSpec {
  const char* name;
  bool required;
};

// Builds one builtin call's typed node; every method reports its own errors.
class Call {
 public:
  Call(FnChecker& c, const ast::Expr& e) : c_(c), e_(e), name_(e.name) {}

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

  Val make(ir::Op op, ir::Type t, std::vector<ir::NodeRef> operands, std::vector<int64_t> ints = {},
           std::vector<Dim> dims = {}, std::string literal = {}) {
    ir::Node n;
    n.op = op;
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
  const char* spec_name(size_t) const { return "axes"; }
  const std::string& name() const { return name_; }
  const ast::Expr& expr() const { return e_; }
  FnChecker& checker() { return c_; }

 private:
  FnChecker& c_;
  const ast::Expr& e_;
  std::string name_;
  std::vector<const ast::Expr*> args_;
};

Val err(const ast::Expr& e) { return Val::Error(e.span); }

}  // namespace

bool is_builtin(const std::string& name) { return op_table().count(name) > 0; }

Val FnChecker::builtin(const ast::Expr& e) {
  Call c(*this, e);
  const std::string& nm = e.name;
  ir::Op op = op_table().at(nm);

  if (float_unary().count(nm) || nm == "abs" || nm == "relu") {
    if (!c.bind({{"x", true}})) return err(e);
    auto x = c.value(0);
    if (!x) return err(e);
    DType t = x->type().dtype;
    bool ok = float_unary().count(nm) ? is_float(t) : nm == "abs" ? is_signed(t) : t != DType::Bool;
    if (!c.dtype_ok(*x, ok, float_unary().count(nm) ? "a floating-point tensor" : nm == "abs" ? "a signed or floating-point tensor" : "a numeric tensor"))
      return err(e);
    return c.make(op, x->type(), {x->node});
  }
  if (nm == "max" || nm == "min" || nm == "pow") {
    if (!c.bind({{"a", true}, {"b", true}})) return err(e);
    auto a = c.value(0, true), b = c.value(1, true);
    if (!a || !b || !c.same_type(*a, *b)) return err(e);
    DType t = a->type().dtype;
    if (!c.dtype_ok(*a, nm == "pow" ? is_float(t) : t != DType::Bool, nm == "pow" ? "floating-point tensors" : "numeric tensors"))
      return err(e);
    return c.make(op, a->type(), {a->node, b->node});
  }
  if (nm == "where") {
    if (!c.bind({{"c", true}, {"a", true}, {"b", true}})) return err(e);
    auto cond = c.value(0), a = c.value(1, true), b = c.value(2, true);
    if (!cond || !a || !b) return err(e);
    if (!c.dtype_ok(*cond, cond->type().dtype == DType::Bool, "a Bool condition")) return err(e);
    if (!c.same_type(*a, *b)) return err(e);
    if (!c.same_shape(cond->type().shape, a->type().shape)) {
      error(DiagKind::ShapeMismatch, e.span,
            "`where` needs the condition's shape " + shape_str(cond->type().shape) + " to equal the branches' " +
                shape_str(a->type().shape));
      return err(e);
    }
    return c.make(op, a->type(), {cond->node, a->node, b->node});
  }
  if (nm == "cast") {
    if (!c.bind({{"x", true}, {"dtype", true}})) return err(e);
    auto x = c.value(0);
    auto t = c.dtype(1);
    if (!x || !t) return err(e);
    return c.make(op, {*t, x->type().shape}, {x->node});
  }
  if (nm == "sum" || nm == "mean" || nm == "reduce_max" || nm == "reduce_min") {
    if (!c.bind({{"x", true}, {"axes", true}})) return err(e);
    auto x = c.value(0);
    if (!x) return err(e);
    auto axes = c.axes(1, x->rank(), true);
    if (!axes) return err(e);
    if (axes->empty()) {
      error(DiagKind::BadAxis, c.arg(1)->span, q(nm) + " needs at least one axis");
      return err(e);
    }
    DType t = x->type().dtype;
    if (!c.dtype_ok(*x, nm == "mean" ? is_float(t) : t != DType::Bool, nm == "mean" ? "a floating-point tensor" : "a numeric tensor"))
      return err(e);
    std::sort(axes->begin(), axes->end());
    Shape out;
    for (int i = 0; i < x->rank(); ++i)
      if (!std::count(axes->begin(), axes->end(), i)) out.push_back(x->type().shape[i]);
    return c.make(op, {t, out}, {x->node}, *axes);
  }
  if (nm == "broadcast") {
    if (!c.bind({{"x", true}, {"shape", true}, {"axes", false}})) return err(e);
    auto x = c.value(0);
    if (!x) return err(e);
    auto shape = c.dims(1);
    if (!shape) return err(e);
    int out_rank = static_cast<int>(shape->size());
    std::vector<int64_t> axes;
    if (c.arg(2)) {
      auto a = c.axes(2, out_rank, true);
      if (!a) return err(e);
      axes = *a;
    } else if (x->rank() != 0) {
      error(DiagKind::BadArguments, e.span,
            "`broadcast` of a rank-" + std::to_string(x->rank()) + " tensor needs `axes=[..]`: the output axis of each input axis");
      return err(e);
    }
    if (static_cast<int>(axes.size()) != x->rank()) {
      error(DiagKind::BadAxis, c.arg(2) ? c.arg(2)->span : e.span,
            "`broadcast` needs one output axis per input axis: the input has rank " + std::to_string(x->rank()) +
                " but `axes` lists " + std::to_string(axes.size()));
      return err(e);
    }
    for (size_t i = 0; i < axes.size(); ++i)
      if (!facts().prove({Pred::Op::kEq, x->type().shape[i], (*shape)[axes[i]]})) {
        error(DiagKind::ShapeMismatch, e.span,
              "`broadcast` maps input axis " + std::to_string(i) + " (" + x->type().shape[i].str() + ") to output axis " +
                  std::to_string(axes[i]) + " (" + (*shape)[axes[i]].str() + "), which differ" +
                  where_bound({x->type().shape[i], (*shape)[axes[i]]}));
        return err(e);
      }
    return c.make(op, {x->type().dtype, *shape}, {x->node}, axes);
  }
  if (nm == "matmul") {
    if (!c.bind({{"a", true}, {"b", true}})) return err(e);
    auto a = c.value(0), b = c.value(1);
    if (!a || !b) return err(e);
    if (a->type().dtype != b->type().dtype) {
      error(DiagKind::DTypeMismatch, e.span,
            "`matmul` needs identical dtypes, found " + std::string(dtype_name(a->type().dtype)) + " and " + dtype_name(b->type().dtype));
      return err(e);
    }
    if (!c.dtype_ok(*a, a->type().dtype != DType::Bool, "numeric tensors")) return err(e);
    int ra = a->rank(), rb = b->rank();
    if (ra < 2 || rb < 2) {
      error(DiagKind::MatmulDims, e.span,
            "`matmul` needs operands of rank >= 2, found rank " + std::to_string(ra) + " and " + std::to_string(rb));
      return err(e);
    }
    const Shape& sa = a->type().shape;
    const Shape& sb = b->type().shape;
    if (!facts().prove({Pred::Op::kEq, sa[ra - 1], sb[rb - 2]})) {
      error(DiagKind::MatmulDims, e.span,
            "`matmul` inner dims differ: the left operand's last axis is " + q(sa[ra - 1].str()) +
                " but the right operand's axis " + std::to_string(rb - 2) + " is " + q(sb[rb - 2].str()) +
                where_bound({sa[ra - 1], sb[rb - 2]}));
      return err(e);
    }
    Shape batch(sa.begin(), sa.end() - 2);
    if (rb > 2) {
      Shape bb(sb.begin(), sb.end() - 2);
      if (!c.same_shape(batch, bb)) {
        error(DiagKind::MatmulDims, e.span,
              "`matmul` batch dims differ: " + shape_str(batch) + " and " + shape_str(bb) +
                  " (the right operand is either [K, N] or has the same batch dims)");
        return err(e);
      }
    }
    Shape out = batch;
    out.push_back(sa[ra - 2]);
    out.push_back(sb[rb - 1]);
    return c.make(op, {a->type().dtype, out}, {a->node, b->node});
  }
  if (nm == "transpose") {
    if (!c.bind({{"x", true}, {"perm", true}})) return err(e);
    auto x = c.value(0);
    if (!x) return err(e);
    auto perm = c.axes(1, x->rank(), true);
    if (!perm) return err(e);
    if (static_cast<int>(perm->size()) != x->rank()) {
      error(DiagKind::BadAxis, c.arg(1)->span,
            "`transpose` needs a permutation of all " + std::to_string(x->rank()) + " axes, found " +
                std::to_string(perm->size()));
      return err(e);
    }
    Shape out;
    for (int64_t p : *perm) out.push_back(x->type().shape[p]);
    return c.make(op, {x->type().dtype, out}, {x->node}, *perm);
  }
  if (nm == "reshape") {
    if (!c.bind({{"x", true}, {"shape", true}})) return err(e);
    auto x = c.value(0);
    if (!x) return err(e);
    auto shape = c.dims(1);
    if (!shape) return err(e);
    Dim from = element_count(x->type().shape), to = element_count(*shape);
    if (from.overflowed() || to.overflowed()) {
      error(DiagKind::DimOverflow, e.span, "`reshape` element count overflows 64 bits");
      return err(e);
    }
    if (!facts().prove({Pred::Op::kEq, from, to})) {
      error(DiagKind::ElementCount, e.span,
            "`reshape` must keep the element count: " + shape_str(x->type().shape) + " has " + q(from.str()) +
                " elements but " + shape_str(*shape) + " has " + q(to.str()) + where_bound({from, to}));
      return err(e);
    }
    return c.make(op, {x->type().dtype, *shape}, {x->node});
  }
  if (nm == "softmax") {
    if (!c.bind({{"x", true}, {"axis", true}})) return err(e);
    auto x = c.value(0);
    if (!x) return err(e);
    if (!c.dtype_ok(*x, is_float(x->type().dtype), "a floating-point tensor")) return err(e);
    if (x->rank() == 0) {
      error(DiagKind::BadAxis, e.span, "`softmax` needs a tensor of rank >= 1");
      return err(e);
    }
    auto a = c.axis(1, x->rank());
    if (!a) return err(e);
    return c.make(op, x->type(), {x->node}, {*a});
  }
  if (nm == "gather") {
    if (!c.bind({{"table", true}, {"idx", true}, {"axis", false}})) return err(e);
    auto t = c.value(0), idx = c.value(1);
    if (!t || !idx) return err(e);
    if (!c.dtype_ok(*idx, is_integer(idx->type().dtype), "an integer index tensor")) return err(e);
    if (t->rank() == 0) {
      error(DiagKind::BadAxis, e.span, "`gather` needs a table of rank >= 1");
      return err(e);
    }
    int axis = 0;
    if (c.arg(2)) {
      auto a = c.axis(2, t->rank());
      if (!a) return err(e);
      axis = *a;
    }
    const Shape& ts = t->type().shape;
    Shape out(ts.begin(), ts.begin() + axis);
    out.insert(out.end(), idx->type().shape.begin(), idx->type().shape.end());
    out.insert(out.end(), ts.begin() + axis + 1, ts.end());
    return c.make(op, {t->type().dtype, out}, {t->node, idx->node}, {axis});
  }
  if (nm == "repeat_interleave") {
    if (!c.bind({{"x", true}, {"repeats", true}, {"axis", true}})) return err(e);
    auto x = c.value(0);
    if (!x) return err(e);
    auto r = c.positive_dim(*c.arg(1));
    if (!r) return err(e);
    if (x->rank() == 0) {
      error(DiagKind::BadAxis, e.span, "`repeat_interleave` needs a tensor of rank >= 1");
      return err(e);
    }
    auto a = c.axis(2, x->rank());
    if (!a) return err(e);
    Shape out = x->type().shape;
    out[*a] = out[*a] * *r;
    if (out[*a].overflowed()) {
      error(DiagKind::DimOverflow, e.span, "`repeat_interleave` extent overflows 64 bits");
      return err(e);
    }
    return c.make(op, {x->type().dtype, out}, {x->node}, {*a}, {*r});
  }
  if (nm == "concat") {
    if (!c.bind({{"xs", true}, {"axis", true}})) return err(e);
    const ast::Expr* l = c.arg(0);
    if (l->kind != ast::Expr::Kind::kList || l->args.empty()) {
      error(DiagKind::BadArguments, l->span, "`concat` needs a non-empty list of tensors like `[a, b]`");
      return err(e);
    }
    std::vector<Val> xs;
    for (const auto& item : l->args) {
      Val v = expr(*item);
      if (v.error || !require_typed(v, "an argument of `concat`")) return err(e);
      xs.push_back(v);
    }
    if (xs[0].rank() == 0) {
      error(DiagKind::BadAxis, e.span, "`concat` needs tensors of rank >= 1");
      return err(e);
    }
    auto a = c.axis(1, xs[0].rank());
    if (!a) return err(e);
    Shape out = xs[0].type().shape;
    std::vector<ir::NodeRef> nodes = {xs[0].node};
    for (size_t i = 1; i < xs.size(); ++i) {
      const ir::Type& t = xs[i].type();
      if (t.dtype != xs[0].type().dtype) {
        error(DiagKind::DTypeMismatch, xs[i].span,
              "`concat` needs identical dtypes, found " + std::string(dtype_name(xs[0].type().dtype)) + " and " + dtype_name(t.dtype));
        return err(e);
      }
      bool ok = t.shape.size() == out.size();
      for (size_t ax = 0; ok && ax < out.size(); ++ax)
        ok = static_cast<int>(ax) == *a || facts().prove({Pred::Op::kEq, t.shape[ax], out[ax]});
      if (!ok) {
        error(DiagKind::ShapeMismatch, xs[i].span,
              "`concat` along axis " + std::to_string(*a) + " needs every other axis equal, found " +
                  shape_str(xs[0].type().shape) + " and " + shape_str(t.shape));
        return err(e);
      }
      out[*a] = out[*a] + t.shape[*a];
      nodes.push_back(xs[i].node);
    }
    return c.make(op, {xs[0].type().dtype, out}, nodes, {*a});
  }
  if (nm == "slice") {
    if (!c.bind({{"x", true}, {"axis", true}, {"start", true}, {"len", true}})) return err(e);
    auto x = c.value(0);
    if (!x) return err(e);
    if (x->rank() == 0) {
      error(DiagKind::BadAxis, e.span, "`slice` needs a tensor of rank >= 1");
      return err(e);
    }
    auto a = c.axis(1, x->rank());
    auto start = dim_of(*c.arg(2));
    auto len = c.arg(3) ? c.positive_dim(*c.arg(3)) : std::nullopt;
    if (!a || !start || !len) return err(e);
    if (!prove_or_report({Pred::Op::kGe, *start, Dim()}, c.arg(2)->span, "`slice` start", "")) return err(e);
    const Dim& extent = x->type().shape[*a];
    if (!prove_or_report({Pred::Op::kLe, *start + *len, extent}, e.span, "`slice` of axis " + std::to_string(*a), ""))
      return err(e);
    Shape out = x->type().shape;
    out[*a] = *len;
    return c.make(op, {x->type().dtype, out}, {x->node}, {*a}, {*start, *len});
  }
  if (nm == "iota" || nm == "full") {
    if (!c.bind({{"dtype", true}, {"shape", true}, {nm == "iota" ? "axis" : "value", true}})) return err(e);
    auto t = c.dtype(0);
    auto shape = c.dims(1);
    if (!t || !shape) return err(e);
    if (nm == "iota") {
      if (*t == DType::Bool) {
        error(DiagKind::BadOperandDType, c.arg(0)->span, "`iota` needs a numeric dtype, found Bool");
        return err(e);
      }
      if (shape->empty()) {
        error(DiagKind::BadAxis, e.span, "`iota` needs a shape of rank >= 1");
        return err(e);
      }
      auto a = c.axis(2, static_cast<int>(shape->size()));
      if (!a) return err(e);
      return c.make(op, {*t, *shape}, {}, {*a});
    }
    Val v = expr(*c.arg(2));
    if (v.error) return err(e);
    if (!v.lit) {
      error(DiagKind::BadArguments, c.arg(2)->span, "`full` needs a literal value such as `0.0` or `true`");
      return err(e);
    }
    Val typed = coerce(v, {*t, *shape});
    if (typed.error) return err(e);
    return c.make(op, {*t, *shape}, {}, {}, {}, typed.node->literal);
  }
  error(DiagKind::UnknownFunction, e.callee_span, "unknown function " + q(nm));  // unreachable: table and cases agree
  return err(e);
}

}  // namespace mlk::check
