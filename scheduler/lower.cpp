// Lowering of the typed IR to Halide Funcs; one rule per op (kLowerRules,
// keyed by the op registry's ir::Op). The numerics
// follow docs/numerics.md: F16/BF16 widen to F32 for arithmetic and round
// back once per op; reductions accumulate in F32 (F64 for F64, the dtype itself
// for integers).
#include "scheduler/lower.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <mutex>
#include <optional>
#include <sstream>

#include "lang/cancel_reshapes.h"
#include "lang/inline.h"
#include "lang/ops.h"

#include "base/log.h"
#include "targets/amx.h"
#include "targets/detect.h"
#include "scheduler/test_faults.h"

namespace mlk::lower {

using Halide::Expr;
using Halide::Func;
using Halide::Var;

Halide::Type storage_type(DType t) {
  switch (t) {
    case DType::F16: return Halide::Float(16);
    case DType::BF16: return Halide::BFloat(16);
    case DType::F32: return Halide::Float(32);
    case DType::F64: return Halide::Float(64);
    case DType::I8: return Halide::Int(8);
    case DType::I16: return Halide::Int(16);
    case DType::I32: return Halide::Int(32);
    case DType::I64: return Halide::Int(64);
    case DType::U8: return Halide::UInt(8);
    case DType::Bool: return Halide::UInt(8);
  }
  return Halide::Float(32);
}

namespace {

// Type in which values of a dtype are computed.
Halide::Type compute_type(DType t) {
  if (t == DType::F16 || t == DType::BF16) return Halide::Float(32);
  if (t == DType::Bool) return Halide::Bool();
  return storage_type(t);
}

// Accumulator type of reductions over a dtype.
Halide::Type accum_type(DType t) { return compute_type(t); }

// A lowered value: a Func holding values of its dtype's compute type (Bool as
// Halide bool), indexed in .tl axis order through at().
struct Value {
  Func f;
  DType dtype;
  int rank = 0;
  Expr at(const std::vector<Expr>& tl_idx) const {
    std::vector<Expr> h(tl_idx.rbegin(), tl_idx.rend());
    return rank == 0 ? f() : f(h);
  }
};

std::vector<Var> make_vars(int rank) {
  std::vector<Var> v;
  for (int i = 0; i < rank; ++i) v.push_back(Var("a" + std::to_string(i)));  // a_i = .tl axis i
  return v;
}
std::vector<Expr> as_exprs(const std::vector<Var>& v) { return std::vector<Expr>(v.begin(), v.end()); }

// Defines f at .tl-ordered vars.
void define(Func& f, const std::vector<Var>& tl_vars, Expr e) {
  std::vector<Var> h(tl_vars.rbegin(), tl_vars.rend());
  if (h.empty()) f() = e;
  else f(h) = e;
}

// Rounds a compute-typed value to its dtype's precision (F16/BF16 only).
Expr round_to_dtype(DType t, Expr e) {
  if (t == DType::F16 || t == DType::BF16) return Halide::cast(Halide::Float(32), Halide::cast(storage_type(t), e));
  return e;
}

// erf by Abramowitz & Stegun 7.1.26 refined: |error| < 1.5e-7, computed in F32
// or F64 (Halide has no erf).
Expr konst(Halide::Type t, double v) { return Halide::Internal::make_const(t, v); }

Expr erf_approx(Expr x) {
  Halide::Type t = x.type();
  Expr ax = Halide::abs(x);
  Expr k = konst(t, 1.0) / (konst(t, 1.0) + konst(t, 0.3275911) * ax);
  Expr poly = ((((konst(t, 1.061405429) * k + konst(t, -1.453152027)) * k + konst(t, 1.421413741)) * k +
                konst(t, -0.284496736)) * k + konst(t, 0.254829592)) * k;
  Expr y = konst(t, 1.0) - poly * Halide::exp(-ax * ax);
  return Halide::select(x < 0, -y, y);
}

// tanh of an F32 value without libm: Halide lowers tanh to a call of tanhf
// per lane (about 25 times slower than a vectorised expression: the tanh
// GELU of an MLP took as long as its second product). Below |x| = 0.55 its
// Taylor polynomial to x^17 (the first omitted term is under 1e-8 of the
// result there); above, 1 - 2 / (exp(2|x|) + 1) with x's sign, which loses
// no digits once the quotient is below 1/2. Within a few ulp of tanh
// (Halide's exp is vectorised); NaN stays NaN; |x| >= 20 gives +-1 exactly
// (tanh(20) rounds to 1 in F32). F64 keeps libm's tanh.
Expr tanh_approx(Expr x) {
  Halide::Type t = x.type();
  if (t.bits() > 32) return Halide::tanh(x);
  static const double kTaylor[] = {1.0, -1.0 / 3, 2.0 / 15, -17.0 / 315, 62.0 / 2835, -1382.0 / 155925,
                                   21844.0 / 6081075, -929569.0 / 638512875, 6404582.0 / 10854718875};
  Expr ax = Halide::abs(x), x2 = x * x;
  Expr poly = konst(t, kTaylor[8]);
  for (int i = 7; i >= 0; --i) poly = poly * x2 + konst(t, kTaylor[i]);
  Expr large = konst(t, 1.0) - konst(t, 2.0) / (Halide::exp(konst(t, 2.0) * Halide::min(ax, konst(t, 20.0))) + konst(t, 1.0));
  Expr y = Halide::select(ax < konst(t, 0.55), x * poly, Halide::select(x < 0, -large, large));
  return Halide::select(Halide::is_nan(x), x, y);
}

// .tl integer division rounds toward negative infinity (as numpy's and
// PyTorch's floor division do) and defines x / 0 = 0. Halide's division is
// Euclidean (remainder always >= 0), which differs for negative divisors.
Expr floor_div_int(Expr a, Expr b) {
  Expr q = a / b;
  Expr r = a - q * b;
  return Halide::select(b < 0 && r != 0, q - 1, q);
}

// A transpose of the last two axes, the others in place.
bool swaps_last_two(const ir::Node& n) {
  if (n.op != ir::Op::kTranspose || n.ints.size() < 2) return false;
  const size_t r = n.ints.size();
  for (size_t i = 0; i + 2 < r; ++i)
    if (n.ints[i] != static_cast<int64_t>(i)) return false;
  return n.ints[r - 2] == static_cast<int64_t>(r - 1) && n.ints[r - 1] == static_cast<int64_t>(r - 2);
}

class Lowerer {
 public:
  Lowerer(const ir::Module& m, Pipeline& p, const LowerOptions& o) : m_(m), p_(p), opts_(o) {}

  // One activation of a function body: its arguments and dimension values.
  struct Frame {
    std::vector<Value> args;
    std::map<std::string, Expr> dims;
    // A callee's dimension variables as Dims of the lowered fn's own (empty
    // for the fn itself): stage shapes are stated in the fn's dimensions, so
    // that schedules see their extents.
    std::map<std::string, Dim> sym;
    std::map<const ir::Node*, Value> memo;
  };

  Value lower(const ir::NodeRef& n, Frame& fr) {
    auto it = fr.memo.find(n.get());
    if (it != fr.memo.end()) return it->second;
    Frame* outer = cur_;
    cur_ = &fr;
    Value v = lower_node(*n, fr);
    cur_ = outer;
    fr.memo[n.get()] = v;
    return v;
  }

  // `s` in the lowered fn's dimensions.
  Shape top_shape(Shape s) const {
    if (cur_ && !cur_->sym.empty())
      for (Dim& d : s) d = d.subst(cur_->sym);
    return s;
  }

  Expr dim(const Dim& d, const Frame& fr, Halide::Type t = Halide::Int(32)) {
    Expr sum = Halide::cast(t, 0);
    for (const auto& term : d.terms()) {
      Expr p = Halide::cast(t, Expr(static_cast<int64_t>(term.coef)));
      for (const auto& a : term.atoms) {
        Expr x;
        if (a.quot) {
          x = dim(a.quot->num, fr, t) / dim(a.quot->den, fr, t);
        } else {
          auto it = fr.dims.find(a.key);
          MLK_CHECK(it != fr.dims.end(), "lower: unbound dimension variable");
          x = Halide::cast(t, it->second);
        }
        p = p * x;
      }
      sum = sum + p;
    }
    return Halide::Internal::simplify(sum);
  }

  std::string fresh(const char* what) { return "f" + std::to_string(counter_++) + "_" + what; }

  // `tl_vars`: the Func's pure vars in .tl axis order.
  Stage& add_stage(Stage::Kind k, Func f, const std::vector<Var>& tl_vars, std::vector<Halide::RVar> rvars = {},
                   bool reduces_innermost = false, Shape shape = {}, Shape rshape = {}) {
    static const char* kNames[] = {"reduction", "matmul", "softmax_max", "softmax_exp", "softmax_sum", "output", "load",
                                   "operand"};
    int n = kind_count_[k]++;
    std::string name = k == Stage::Kind::kOutput ? (n == 0 ? "output" : "output" + std::to_string(n))
                                                 : std::string(kNames[static_cast<int>(k)]) + std::to_string(n);
    std::vector<Var> h(tl_vars.rbegin(), tl_vars.rend());
    p_.stages.push_back({name, k, f, h, std::move(rvars), reduces_innermost, top_shape(std::move(shape)),
                         top_shape(std::move(rshape))});
    return p_.stages.back();
  }

 public:
  // --- what the lowering rules (kLowerRules below) build from ---

  // A Func of the node's rank and dtype defined as `e` (over make_vars(rank)).
  Value pure(const ir::Node& n, const char* what, Expr e) {
    auto v = make_vars(n.type.shape.size());
    Func f(fresh(what));
    define(f, v, e);
    return Value{f, n.type.dtype, static_cast<int>(v.size())};
  }

  Value unary(const ir::Node& n, Frame& fr, const std::function<Expr(Expr)>& op) {
    Value a = lower(n.operands[0], fr);
    Func f(fresh(ir::op_name(n.op)));
    auto v = make_vars(n.type.shape.size());
    define(f, v, round_to_dtype(n.type.dtype, op(a.at(as_exprs(v)))));
    return {f, n.type.dtype, static_cast<int>(v.size())};
  }

  Value binary(const ir::Node& n, Frame& fr, const std::function<Expr(Expr, Expr)>& op) {
    Value a = lower(n.operands[0], fr), b = lower(n.operands[1], fr);
    Func f(fresh(ir::op_name(n.op)));
    auto v = make_vars(n.type.shape.size());
    define(f, v, round_to_dtype(n.type.dtype, op(a.at(as_exprs(v)), b.at(as_exprs(v)))));
    return {f, n.type.dtype, static_cast<int>(v.size())};
  }

  // sum / mean / reduce_max / reduce_min over n.ints.
  Value reduce(const ir::Node& n, Frame& fr) {
    Value x = lower(n.operands[0], fr);
    const ir::Type& in_t = n.operands[0]->type;
    int in_rank = static_cast<int>(in_t.shape.size());
    Halide::Region ranges;
    for (int64_t ax : n.ints) ranges.push_back(Halide::Range(0, dim(in_t.shape[ax], fr)));
    Halide::RDom r(ranges, fresh("r"));
    auto v = make_vars(n.type.shape.size());
    std::vector<Expr> idx;
    int ov = 0, rv = 0;
    for (int ax = 0; ax < in_rank; ++ax) {
      bool reduced = std::count(n.ints.begin(), n.ints.end(), ax) > 0;
      idx.push_back(reduced ? Expr(r[rv++]) : Expr(v[ov++]));
    }
    Halide::Type acc = accum_type(n.type.dtype);
    Func red(fresh(ir::op_name(n.op)));
    Expr val = Halide::cast(acc, x.at(idx));
    std::vector<Var> h(v.rbegin(), v.rend());
    std::vector<Expr> hx(h.begin(), h.end());
    auto lhs = [&]() { return h.empty() ? red() : red(hx); };
    switch (n.op) {
      case ir::Op::kSum:
      case ir::Op::kMean:
        define(red, v, Halide::cast(acc, 0));
        // Test seam (scheduler/test_faults.h): an F16 sum rounded to F16 at every step.
        if (test_fault("f16_accumulate") && n.type.dtype == DType::F16) lhs() = round_to_dtype(DType::F16, lhs() + val);
        else lhs() = lhs() + val;
        break;
      case ir::Op::kReduceMax:
        define(red, v, acc.is_float() ? konst(acc, -INFINITY) : acc.min());
        lhs() = Halide::max(lhs(), val);
        break;
      default:
        define(red, v, acc.is_float() ? konst(acc, INFINITY) : acc.max());
        lhs() = Halide::min(lhs(), val);
        break;
    }
    std::vector<Halide::RVar> rvars;
    for (int i = 0; i < r.dimensions(); ++i) rvars.push_back(r[i]);
    bool innermost = std::count(n.ints.begin(), n.ints.end(), in_rank - 1) > 0;
    Shape rshape;
    for (int64_t ax : n.ints) rshape.push_back(in_t.shape[ax]);
    add_stage(Stage::Kind::kReduction, red, v, rvars, innermost, n.type.shape, rshape);
    Func out(fresh("rd"));
    Expr res = h.empty() ? red() : red(hx);
    if (n.op == ir::Op::kMean) {
      Expr count = Halide::cast(acc, 1);
      for (int64_t ax : n.ints) count = count * Halide::cast(acc, dim(in_t.shape[ax], fr));
      res = res / count;
    }
    define(out, v, round_to_dtype(n.type.dtype, res));
    return {out, n.type.dtype, static_cast<int>(v.size())};
  }

  // `x` as a stage of its own when it is a view computed inline (not an
  // input or another stage), so that schedules can materialise it.
  Value operand(Value x, const Shape& shape) {
    for (const Stage& s : p_.stages)
      if (s.func.name() == x.f.name()) return x;
    if (x.rank < 2) return x;
    Func f(fresh("operand"));
    auto v = make_vars(x.rank);
    define(f, v, x.at(as_exprs(v)));
    add_stage(Stage::Kind::kOperand, f, v, {}, false, shape);
    return {f, x.dtype, x.rank};
  }

  // The operand stage of IR value `x`, which later readers of `x` read too
  // (the same values): where a schedule materialises it, a value that
  // several products and reductions read (a gradient's elementwise
  // cotangent) is computed once, not once per reader.
  Value shared_operand(const ir::NodeRef& x, Frame& fr, const Shape& shape) {
    Value v = operand(lower(x, fr), shape);
    fr.memo[x.get()] = v;
    return v;
  }

  Value matmul(const ir::Node& n, Frame& fr) {
    // BF16 operands: a BF16 product or a widening one (an F32 result).
    if (opts_.amx_bf16 && n.operands[0]->type.dtype == DType::BF16 && n.operands[1]->type.shape.size() == 2)
      return matmul_amx(n, fr);
    if (opts_.bf16_pairs && n.operands[0]->type.dtype == DType::BF16) return matmul_pairs(n, fr);
    const ir::Type& ta = n.operands[0]->type;
    const ir::Type& tb = n.operands[1]->type;
    Value a = shared_operand(n.operands[0], fr, ta.shape), b = shared_operand(n.operands[1], fr, tb.shape);
    if (swaps_last_two(*n.operands[0]))
      for (Stage& s : p_.stages)
        if (s.func.name() == a.f.name() && s.kind == Stage::Kind::kOperand) s.transposed = true;
    int r = static_cast<int>(n.type.shape.size());
    Halide::RDom k(0, dim(ta.shape.back(), fr), fresh("k"));
    auto v = make_vars(r);
    std::vector<Expr> ia(v.begin(), v.end() - 1), ib;
    ia.back() = v[r - 2];
    ia.push_back(k);  // a[..., m, k]
    if (tb.shape.size() > 2) ib.assign(v.begin(), v.end() - 2);
    ib.push_back(k);
    ib.push_back(v[r - 1]);  // b[..., k, n]
    Halide::Type acc = accum_type(n.type.dtype);
    Func mm(fresh("matmul"));
    define(mm, v, Halide::cast(acc, 0));
    std::vector<Var> h(v.rbegin(), v.rend());
    std::vector<Expr> hx(h.begin(), h.end());
    mm(hx) = mm(hx) + Halide::cast(acc, a.at(ia)) * Halide::cast(acc, b.at(ib));
    Stage& st = add_stage(Stage::Kind::kMatmul, mm, v, {k}, false, n.type.shape, {ta.shape.back()});
    for (int d = r - 1; d >= 0; --d) st.extents.push_back(dim(n.type.shape[d], fr));
    for (const Value* x : {&a, &b}) {
      if (x->f.name().rfind("load_", 0) == 0) st.direct_inputs.push_back(x->f.name());
      for (const Stage& o : p_.stages)
        if (o.func.name() == x->f.name()) st.operands.push_back(o.name);
    }
    if (n.type.dtype == DType::F16 || n.type.dtype == DType::BF16) {
      Func out(fresh("mm_round"));
      define(out, v, round_to_dtype(n.type.dtype, mm(hx)));
      return {out, n.type.dtype, r};
    }
    return {mm, n.type.dtype, r};
  }

  // The copy of a product's a under `key` (its Func and the copy's form):
  // made by `make` (which defines it and returns its stage) the
  // first time, the same Func and stage after, so that the products of one
  // operand (Q, K and V of one x) read one copy. Marked a pair copy: its
  // first product's rule materialises it.
  std::pair<Func, std::string> a_copy(const std::string& key, const std::function<Stage&(Func&)>& make) {
    if (auto it = a_copies_.find(key); it != a_copies_.end()) return it->second;
    Func ab(fresh("pairs_a"));
    Stage& st = make(ab);
    st.pair_copy = true;
    return a_copies_[key] = {ab, st.name};
  }

  // The parameter `b` is a function of, alone (dims and literals aside):
  // its index, else -1. Such a b is a weight, whose pairs can be packed once.
  // A stage other than the load on the way (a materialised operand) keeps
  // its schedule in the product's pipeline: -1.
  int weight_of(const Value& b) const {
    if (!opts_.pack_weights) return -1;
    int found = -1;
    auto note = [&](const std::string& name) {
      auto it = loads_.find(name);
      if (it == loads_.end()) {
        for (const Stage& st : p_.stages)
          if (st.func.name() == name) return false;
        return true;
      }
      if (found >= 0 && found != it->second) return false;
      found = it->second;
      return true;
    };
    if (!note(b.f.name())) return -1;
    for (const auto& [name, fn] : Halide::Internal::find_transitive_calls(b.f.function()))
      if (!note(name)) return -1;
    return found;
  }

  // The pairs of a weight b (a function of parameter `w`, of K rows and N
  // columns), bp[k2, n, i] = b[2 k2 + i, n] as BF16 (at `vb`), read from a
  // packed input (Pack, scheduler/packed.h) whose pipeline `pairs` defines:
  // the BF16 value of b at (k, n), zero for k >= K (n is clamped below N).
  // K rounded up to `kq`, N to `nq` (AMX tiles: 32 and 16; the pair form: 2
  // and 1). The products' copy of b per panel copies from it (in place, a
  // tile's rows 2 c apart, the tiles ran slower: a row of 16 columns per
  // page, where the panel's copy holds them together).
  Expr packed_pairs(int w, const std::vector<Var>& vb, const Dim& kd, const Dim& nd, Expr nx, int kq, int nq,
                    const std::function<Expr(Expr, Expr)>& pairs) {
    Pack pk;
    pk.param = w;
    pk.k = top_shape({kd})[0];
    pk.n = top_shape({nd})[0];
    pk.k_quantum = kq;
    pk.n_quantum = nq;
    pk.packed = Halide::ImageParam(Halide::BFloat(16), 4, "packed" + std::to_string(p_.packs.size()));
    Halide::ImageParam& in = pk.packed;  // Halide's i, c, k2, t
    for (int d = 0; d < 4; ++d) in.dim(d).set_min(0);
    in.dim(0).set_extent(2).set_stride(1);
    in.dim(1).set_stride(2);
    in.dim(2).set_stride(2 * in.dim(1).extent());
    in.dim(3).set_extent(1);
    pk.func = Func("pack" + std::to_string(p_.packs.size()));
    Var i("i"), c("c"), k2("k2"), t("t");
    pk.func(i, c, k2, t) = pairs(2 * k2 + i, Halide::min(c, nx - 1));
    p_.packs.push_back(pk);
    return in(vb[2], Halide::min(Halide::likely(vb[1]), in.dim(1).extent() - 1), vb[0], 0);
  }

  // A product of BF16 operands in pair form, for a dot product that sums
  // adjacent pairs of BF16 products into F32 lanes (vdpbf16ps):
  //   ab[.., m, k]         = bf16(a[.., m, k])                 (a's rows)
  //   bp[.., k2, n, i]     = bf16(b[.., 2 k2 + i, n])           (b, its rows in pairs)
  //   out[.., m, n] = sum_{k2, i} f32(ab[.., m, 2 k2 + i]) * f32(bp[.., k2, n, i])
  // with r0 = i (extent 2) inside r1 = k2, so k runs in the order of the
  // plain form and the sum is the same; an odd K reads zeros past its end.
  // The copies are exact (the operands hold BF16 values) and are stages
  // (pair_copy) that the product's rule materialises: b's pairs are then
  // one vector per column group, a's pair one 32-bit broadcast.
  Value matmul_pairs(const ir::Node& n, Frame& fr) {
    const ir::Type& ta = n.operands[0]->type;
    const ir::Type& tb = n.operands[1]->type;
    Value a = lower(n.operands[0], fr), b = lower(n.operands[1], fr);
    const int r = static_cast<int>(n.type.shape.size()), ra = a.rank, rb = b.rank;
    Expr kx = dim(ta.shape.back(), fr);
    const std::optional<int64_t> kc = Halide::Internal::as_const_int(kx);
    const bool even = kc && *kc % 2 == 0;
    // x's value at .tl index `idx` whose axis `ax` is k, zero past K.
    auto padded = [&](const Value& x, std::vector<Expr> idx, int ax) {
      Expr k = idx[ax];
      if (even) return Halide::cast(Halide::BFloat(16), x.at(idx));
      idx[ax] = Halide::clamp(k, 0, kx - 1);
      return Halide::cast(Halide::BFloat(16), Halide::select(k < kx, x.at(idx), Halide::cast(Halide::Float(32), 0)));
    };
    auto [ab, a_name] = a_copy("pairs " + a.f.name() + " " + std::to_string(ra), [&](Func& ab) -> Stage& {
      auto va = make_vars(ra);
      define(ab, va, padded(a, as_exprs(va), ra - 1));
      return add_stage(Stage::Kind::kOperand, ab, va, {}, false, ta.shape);
    });
    Func bp(fresh("pairs_b"));
    auto vb = make_vars(rb + 1);  // [.., k2, n, i]
    std::vector<Expr> ib(vb.begin(), vb.end() - 1);
    ib[rb - 2] = 2 * vb[rb - 2] + vb[rb];
    if (const int w = rb == 2 ? weight_of(b) : -1; w >= 0) {
      Expr nx = dim(tb.shape.back(), fr);
      define(bp, vb, packed_pairs(w, vb, ta.shape.back(), tb.shape.back(), nx, 2, 1, [&](Expr k, Expr n) {
               return padded(b, {k, n}, 0);
             }));
    } else {
      define(bp, vb, padded(b, ib, rb - 2));
    }
    // K / 2 pairs (rounded up); of a K unknown here, known when even.
    const Dim half = kc ? Dim::constant((*kc + 1) / 2) : Dim::exact_div(ta.shape.back(), Dim::constant(2));
    Shape bshape(tb.shape.begin(), tb.shape.end() - 2);
    bshape.insert(bshape.end(), {half, tb.shape.back(), Dim::constant(2)});
    Stage& sb = add_stage(Stage::Kind::kOperand, bp, vb, {}, false, bshape);
    sb.pair_copy = true;
    const std::string b_name = sb.name;
    Halide::RDom k({{0, 2}, {0, (kx + 1) / 2}}, fresh("k"));
    auto v = make_vars(r);
    std::vector<Expr> ia(v.begin(), v.end() - 1), jb;
    ia.push_back(2 * k.y + k.x);  // ab[.., m, 2 k2 + i]
    if (rb > 2) jb.assign(v.begin(), v.end() - 2);
    jb.insert(jb.end(), {k.y, v[r - 1], k.x});  // bp[.., k2, n, i]
    Func mm(fresh("matmul"));
    define(mm, v, Halide::cast(Halide::Float(32), 0));
    std::vector<Var> h(v.rbegin(), v.rend());
    std::vector<Expr> hx(h.begin(), h.end());
    std::vector<Expr> ha(ia.rbegin(), ia.rend()), hb(jb.rbegin(), jb.rend());
    mm(hx) = mm(hx) + Halide::cast(Halide::Float(32), ab(ha)) * Halide::cast(Halide::Float(32), bp(hb));
    return copied_product(n, fr, mm, v, {k.x, k.y}, {Dim::constant(2), half}, a_name, b_name, /*amx=*/false);
  }

  // The product stage `mm` (over vars `v` and `rvars`) of a pair-form or
  // AMX product that reads the copies `a_name` and `b_name`, and the value
  // of its result: F32 as it is (a widening product), else rounded.
  Value copied_product(const ir::Node& n, Frame& fr, Func mm, const std::vector<Var>& v,
                       const std::vector<Halide::RVar>& rvars, const Shape& rshape, const std::string& a_name,
                       const std::string& b_name, bool amx) {
    const int r = static_cast<int>(v.size());
    Stage& st = add_stage(Stage::Kind::kMatmul, mm, v, rvars, false, n.type.shape, rshape);
    for (int d = r - 1; d >= 0; --d) st.extents.push_back(dim(n.type.shape[d], fr));
    st.operands = {a_name, b_name};
    (amx ? st.amx : st.pairs) = true;
    if (n.type.dtype == DType::F32) return {mm, DType::F32, r};
    std::vector<Var> h(v.rbegin(), v.rend());
    Func out(fresh("mm_round"));
    define(out, v, round_to_dtype(n.type.dtype, mm(std::vector<Expr>(h.begin(), h.end()))));
    return {out, n.type.dtype, r};
  }

  // A product of BF16 operands by a rank-2 b (a weight) in AMX tiles: Halide
  // emits tdpbf16ps for a product computed in MemoryType::AMXTile whose a is
  // read as rows of BF16 and whose b is in VNNI pairs (rule: `amx_tiles`).
  //   ab[.., m, k]  = bf16(a[.., min(m, M - 1), k]), zero for k >= K
  //   bp[k2, n, i]  = bf16(b[2 k2 + i, min(n, N - 1)]), zero past K
  //   out[.., m, n] = sum_{t, j} f32(ab[.., m, 32 t + j]) * f32(bp[(32 t + j) / 2, n, (32 t + j) % 2])
  // K is padded with zeros to whole tiles of 32 (a zero adds nothing), and
  // rows and columns are clamped, so that the rule rounds the 16 x 16 tiles
  // up past the edges: the values of a tile beyond M or N are never read.
  // The copies are exact (the operands hold BF16 values).
  Value matmul_amx(const ir::Node& n, Frame& fr) {
    const ir::Type& ta = n.operands[0]->type;
    const ir::Type& tb = n.operands[1]->type;
    Value a = lower(n.operands[0], fr), b = lower(n.operands[1], fr);
    const int r = static_cast<int>(n.type.shape.size()), ra = a.rank;
    Expr kx = dim(ta.shape.back(), fr), mx = dim(ta.shape[ra - 2], fr), nx = dim(tb.shape.back(), fr);
    Expr tiles = (kx + 31) / 32;
    // As Halide's boundary conditions write them: `likely` lets loop
    // partitioning drop the clamps and the select from the copies' steady
    // state (clamped, a vector of k is a gather: the copy ran 2x slower).
    // The operands hold BF16 values, so their top 16 bits are the BF16
    // value: a shift, where a cast would round again (generic code on x86).
    auto bf16 = [](Expr k, Expr kx, Expr v) {
      Expr x = Halide::select(Halide::likely(k < kx), Halide::cast(Halide::Float(32), v), Halide::cast(Halide::Float(32), 0));
      return Halide::reinterpret(Halide::BFloat(16), Halide::cast(Halide::UInt(16), Halide::reinterpret(Halide::UInt(32), x) >> 16));
    };
    auto below = [](Expr i, Expr n) { return Halide::min(Halide::likely(i), n - 1); };
    auto [ab, a_name] = a_copy("amx " + a.f.name() + " " + std::to_string(ra), [&](Func& ab) -> Stage& {
      auto va = make_vars(ra);
      std::vector<Expr> ia = as_exprs(va);
      ia[ra - 2] = below(va[ra - 2], mx);
      ia[ra - 1] = below(va[ra - 1], kx);
      define(ab, va, bf16(va[ra - 1], kx, a.at(ia)));
      return add_stage(Stage::Kind::kOperand, ab, va, {}, false, ta.shape);
    });
    Func bp(fresh("pairs_b"));
    auto vb = make_vars(3);  // [k2, n, i]
    Expr kb = 2 * vb[0] + vb[2];
    const int w = weight_of(b);
    if (w >= 0)
      define(bp, vb, packed_pairs(w, vb, ta.shape.back(), tb.shape.back(), nx, 32, 16, [&](Expr k, Expr n) {
               return bf16(k, kx, b.at({below(k, kx), n}));
             }));
    else
      define(bp, vb, bf16(kb, kx, b.at({below(kb, kx), below(vb[1], nx)})));
    // K / q rounded up: known when K is; of a K unknown here, an estimate
    // known when exact (the stage table's extents are estimates).
    const Dim& kd = ta.shape.back();
    auto up = [&](int64_t q) {
      return kd.is_constant() ? Dim::constant((kd.constant_value() + q - 1) / q) : Dim::exact_div(kd, Dim::constant(q));
    };
    Stage& sb = add_stage(Stage::Kind::kOperand, bp, vb, {}, false, {up(2), tb.shape.back(), Dim::constant(2)});
    sb.pair_copy = true;
    const std::string b_name = sb.name;
    Halide::RDom k({{0, 32}, {0, tiles}}, fresh("k"));
    Expr kk = 32 * k.y + k.x;
    auto v = make_vars(r);
    std::vector<Expr> xa(v.begin(), v.end() - 1);
    xa.push_back(kk);  // ab[.., m, k]
    std::vector<Expr> xb = {kk / 2, v[r - 1], kk % 2};  // bp[k2, n, i]
    Func mm(fresh("matmul"));
    define(mm, v, Halide::cast(Halide::Float(32), 0));
    std::vector<Var> h(v.rbegin(), v.rend());
    std::vector<Expr> hx(h.begin(), h.end()), ha(xa.rbegin(), xa.rend()), hb(xb.rbegin(), xb.rend());
    mm(hx) = mm(hx) + Halide::cast(Halide::Float(32), Halide::cast(Halide::Float(32), ab(ha))) *
                          Halide::cast(Halide::Float(32), bp(hb));
    return copied_product(n, fr, mm, v, {k.x, k.y}, {Dim::constant(32), up(32)}, a_name, b_name, /*amx=*/true);
  }

  Value softmax(const ir::Node& n, Frame& fr) {
    Value x = lower(n.operands[0], fr);
    int r = static_cast<int>(n.type.shape.size());
    int axis = static_cast<int>(n.ints[0]);
    Halide::RDom rd(0, dim(n.type.shape[axis], fr), fresh("r"));
    auto v = make_vars(r);
    std::vector<Var> other;  // vars of the reduced-away shape
    for (int i = 0; i < r; ++i)
      if (i != axis) other.push_back(v[i]);
    std::vector<Expr> at_r = as_exprs(v);
    at_r[axis] = rd;
    std::vector<Var> ho(other.rbegin(), other.rend());
    std::vector<Expr> hox(ho.begin(), ho.end());
    auto call = [&](Func& f) { return ho.empty() ? f() : f(hox); };
    Halide::Type acc = accum_type(n.type.dtype);
    Func mx(fresh("softmax_max")), e(fresh("softmax_exp")), s(fresh("softmax_sum")), out(fresh("softmax"));
    define(mx, other, konst(acc, -INFINITY));
    call(mx) = Halide::max(call(mx), Halide::cast(acc, x.at(at_r)));
    define(e, v, Halide::exp(Halide::cast(acc, x.at(as_exprs(v))) - call(mx)));
    std::vector<Var> hv(v.rbegin(), v.rend());
    std::vector<Expr> e_at_r(at_r.rbegin(), at_r.rend());
    define(s, other, Halide::cast(acc, 0));
    call(s) = call(s) + e(e_at_r);
    define(out, v, round_to_dtype(n.type.dtype, e(std::vector<Expr>(hv.begin(), hv.end())) / call(s)));
    Shape oshape;
    for (int i = 0; i < r; ++i)
      if (i != axis) oshape.push_back(n.type.shape[i]);
    add_stage(Stage::Kind::kSoftmaxMax, mx, other, {rd}, axis == r - 1, oshape, {n.type.shape[axis]});
    add_stage(Stage::Kind::kSoftmaxExp, e, v, {}, false, n.type.shape);
    add_stage(Stage::Kind::kSoftmaxSum, s, other, {rd}, axis == r - 1, oshape, {n.type.shape[axis]});
    return {out, n.type.dtype, r};
  }

  Value literal(const ir::Node& n) {
    const DType dt = n.type.dtype;
    const Halide::Type ct = compute_type(dt);
    const std::string& t = n.literal;
    Expr c = t == "true" ? Expr(true) : t == "false" ? Expr(false) : konst(ct, std::strtod(t.c_str(), nullptr));
    if (dt == DType::Bool) c = Halide::cast(Halide::Bool(), c);
    if (is_integer(dt)) {
      // Parse integers exactly (doubles lose I64 precision).
      c = Halide::cast(ct, Expr(static_cast<int64_t>(std::strtoll(t.c_str(), nullptr, 10))));
    }
    return pure(n, "const", round_to_dtype(dt, c));
  }

  Value where(const ir::Node& n, Frame& fr) {
    auto vx = as_exprs(make_vars(n.type.shape.size()));
    Value c = lower(n.operands[0], fr), a = lower(n.operands[1], fr), b = lower(n.operands[2], fr);
    return pure(n, "where", Halide::select(c.at(vx), a.at(vx), b.at(vx)));
  }

  Value cast(const ir::Node& n, Frame& fr) {
    const DType dt = n.type.dtype;
    const Halide::Type ct = compute_type(dt);
    Value a = lower(n.operands[0], fr);
    Expr x = a.at(as_exprs(make_vars(n.type.shape.size())));
    DType from = n.operands[0]->type.dtype;
    Expr y;
    if (dt == DType::Bool) y = x != Halide::cast(x.type(), 0);
    else if (from == DType::Bool) y = Halide::cast(ct, Halide::select(x, 1, 0));
    else y = Halide::cast(storage_type(dt), x);  // rounds to the target dtype
    if (dt != DType::Bool) y = Halide::cast(ct, y);
    // One Func per distinct cast: a value a precision policy rounds for
    // several products, each in its own call (x for Q, K and V, through
    // three calls of `linear`), is rounded, and copied for them, once.
    std::ostringstream key;
    key << y << " rank " << n.type.shape.size();
    if (auto it = casts_.find(key.str()); it != casts_.end()) return it->second;
    return casts_[key.str()] = pure(n, "cast", y);
  }

  Value broadcast(const ir::Node& n, Frame& fr) {
    auto v = make_vars(n.type.shape.size());
    Value a = lower(n.operands[0], fr);
    std::vector<Expr> idx;
    for (int64_t ax : n.ints) idx.push_back(v[ax]);
    return pure(n, "broadcast", a.at(idx));
  }

  Value transpose(const ir::Node& n, Frame& fr) {
    const int rank = static_cast<int>(n.type.shape.size());
    auto v = make_vars(rank);
    Value a = lower(n.operands[0], fr);
    std::vector<Expr> idx(rank);
    for (int i = 0; i < rank; ++i) idx[n.ints[i]] = v[i];  // out axis i reads input axis perm[i]
    if (test_fault("transpose_axes"))  // test seam (scheduler/test_faults.h): the inverse permutation
      for (int i = 0; i < rank; ++i) idx[i] = v[n.ints[i]];
    return pure(n, "transpose", a.at(idx));
  }

  // Axes are matched in groups whose extents have equal products (D and
  // [H, D / H]; [S, H, E] and [S, H * E]); index arithmetic stays within a
  // group, so the common split of one axis needs no division at all. A
  // group with one axis on a side (a split, a merge) has its flat index below
  // that axis's extent, so below 2^31, and is computed in 32 bits: Halide
  // then sees a vectorised split index as a dense ramp and loads a vector
  // rather than gathering lanes. A merge (E of H * E) divides by a run-time
  // extent; see div_mod. Only a group of several axes on both sides, whose
  // product may pass 2^31 in a tensor never stored, computes in 64 bits.
  Value reshape(const ir::Node& n, Frame& fr) {
    auto v = make_vars(n.type.shape.size());
    Value a = lower(n.operands[0], fr);
    const Shape& in = n.operands[0]->type.shape;
    const Shape& out = n.type.shape;
    std::vector<Expr> idx(in.size());
    size_t i = 0, j = 0;
    while (i < out.size() || j < in.size()) {
      const size_t i0 = i, j0 = j, ro = out.size() - i, ri = in.size() - j;
      if (ro == 0 || ri == 0) {  // what is left has extent 1 (the checker proved the products equal)
        for (; j < in.size(); ++j) idx[j] = Expr(0);
        break;
      }
      auto [k, l] = reshape_group(in, out, i, j);
      i += k;
      j += l;
      reshape_group_index(in, out, v, i0, i, j0, j, fr, idx);
    }
    return pure(n, "reshape", a.at(idx));
  }

  // The smallest group (k output axes from i, l input axes from j) with equal
  // extents; failing that, everything left.
  static std::pair<size_t, size_t> reshape_group(const Shape& in, const Shape& out, size_t i, size_t j) {
    auto prod = [](const Shape& sh, size_t from, size_t count) {
      Dim p = Dim::constant(1);
      for (size_t k = from; k < from + count; ++k) p = p * sh[k];
      return p;
    };
    const size_t ro = out.size() - i, ri = in.size() - j;
    for (size_t total = 2; total <= ro + ri; ++total)
      for (size_t kk = 1; kk < total; ++kk) {
        size_t ll = total - kk;
        if (kk <= ro && ll <= ri && prod(out, i, kk) == prod(in, j, ll)) return {kk, ll};
      }
    return {ro, ri};
  }

  // The input indices [j0, j) of the output axes [i0, i): flatten, then
  // unflatten over the group's input axes; axes of extent 1 read index 0.
  void reshape_group_index(const Shape& in, const Shape& out, const std::vector<Var>& v, size_t i0, size_t i, size_t j0,
                           size_t j, const Frame& fr, std::vector<Expr>& idx) {
    std::vector<size_t> real;
    for (size_t q = j0; q < j; ++q) {
      if (in[q] == Dim::constant(1)) idx[q] = Expr(0);
      else real.push_back(q);
    }
    const Halide::Type t = i - i0 == 1 || real.size() <= 1 ? Halide::Int(32) : Halide::Int(64);
    Expr flat = Halide::cast(t, 0);
    for (size_t q = i0; q < i; ++q) flat = flat * dim(out[q], fr, t) + Halide::cast(t, v[q]);
    // After a division, an index is clamped to its axis: a no-op on the
    // values, but it gives bounds inference the interval that it cannot
    // derive through a floating-point quotient.
    bool divided = false;
    for (size_t r = real.size(); r-- > 0;) {
      const size_t q = real[r];
      Expr extent = dim(in[q], fr, t);
      Expr e;
      if (r == 0) {
        e = divided ? Halide::clamp(flat, Halide::cast(t, 0), extent - 1) : flat;
      } else {
        auto [quot, rem] = div_mod(flat, extent);
        e = Halide::clamp(rem, Halide::cast(t, 0), extent - 1);
        flat = quot;
        divided = true;
      }
      idx[q] = Halide::cast(Halide::Int(32), e);  // a no-op in 32 bits
    }
  }

  // n / d and n % d (of n's type) for 0 <= n < 2^53 and d >= 1 a run-time
  // value. Integer division by a non-constant is a scalar instruction per
  // lane (some 15-40 cycles each on x86), so the quotient is floor(n / d) in
  // double precision, which vectorises: n and d are exact doubles and the
  // correctly rounded quotient of two integers below 2^53 never crosses an
  // integer boundary, so its floor is the integer quotient. The lowering is
  // the same for every target: on GPUs with a low FP64 rate (sm_86) a merge
  // would be cheaper as an integer division, which is not done yet.
  static std::pair<Expr, Expr> div_mod(const Expr& n, const Expr& d) {
    const Halide::Type f64 = Halide::Float(64);
    Expr q = Halide::cast(n.type(), Halide::floor(Halide::cast(f64, n) / Halide::cast(f64, d)));
    return {q, n - q * d};
  }

  Value gather(const ir::Node& n, Frame& fr) {
    auto vx = as_exprs(make_vars(n.type.shape.size()));
    Value t = lower(n.operands[0], fr), ix = lower(n.operands[1], fr);
    int axis = static_cast<int>(n.ints[0]);
    int ir = static_cast<int>(n.operands[1]->type.shape.size());
    std::vector<Expr> iidx(vx.begin() + axis, vx.begin() + axis + ir);
    Expr i = Halide::cast(Halide::Int(32), ix.at(iidx));
    Expr extent = dim(n.operands[0]->type.shape[axis], fr);
    std::vector<Expr> tidx(vx.begin(), vx.begin() + axis);
    if (test_fault("gather_next_row")) i = i + 1;  // test seam (scheduler/test_faults.h)
    tidx.push_back(Halide::clamp(i, 0, extent - 1));
    tidx.insert(tidx.end(), vx.begin() + axis + ir, vx.end());
    Expr raw = ix.at(iidx);
    // The message is tidied by Kernel::Run (see clean_runtime_error).
    return pure(n, "gather", Halide::require(raw >= 0 && raw < Halide::cast(raw.type(), extent), t.at(tidx),
                                             "gather index", raw, "is outside [0,", extent, ")"));
  }

  Value repeat_interleave(const ir::Node& n, Frame& fr) {
    auto vx = as_exprs(make_vars(n.type.shape.size()));
    Value a = lower(n.operands[0], fr);
    std::vector<Expr> idx = vx;
    idx[n.ints[0]] = idx[n.ints[0]] / dim(n.dims[0], fr);
    return pure(n, "repeat", a.at(idx));
  }

  Value concat(const ir::Node& n, Frame& fr) {
    auto vx = as_exprs(make_vars(n.type.shape.size()));
    int axis = static_cast<int>(n.ints[0]);
    Expr offset = 0;
    Expr result;
    std::vector<Value> xs;
    std::vector<Expr> starts;
    for (const auto& o : n.operands) {
      xs.push_back(lower(o, fr));
      starts.push_back(offset);
      offset = offset + dim(o->type.shape[axis], fr);
    }
    for (size_t i = 0; i < xs.size(); ++i) {
      std::vector<Expr> idx = vx;
      Expr ext = dim(n.operands[i]->type.shape[axis], fr);
      idx[axis] = Halide::clamp(vx[axis] - starts[i], 0, ext - 1);
      Expr val = xs[i].at(idx);
      result = result.defined() ? Halide::select(vx[axis] >= starts[i], val, result) : val;
    }
    return pure(n, "concat", result);
  }

  Value slice(const ir::Node& n, Frame& fr) {
    auto vx = as_exprs(make_vars(n.type.shape.size()));
    Value a = lower(n.operands[0], fr);
    std::vector<Expr> idx = vx;
    idx[n.ints[0]] = idx[n.ints[0]] + dim(n.dims[0], fr);
    return pure(n, "slice", a.at(idx));
  }

  Value iota(const ir::Node& n) {
    auto v = make_vars(n.type.shape.size());
    return pure(n, "iota", Halide::cast(compute_type(n.type.dtype), v[n.ints[0]]));
  }

  Value call(const ir::Node& n, Frame& fr) {
    const ir::Function* callee = m_.find(n.callee);
    MLK_CHECK(callee != nullptr, "lower: call of a function missing from the module");
    Frame inner;
    for (const auto& o : n.operands) inner.args.push_back(lower(o, fr));
    for (size_t i = 0; i < callee->dim_vars.size(); ++i) {
      inner.dims[callee->dim_vars[i]] = dim(n.dims[i], fr);
      inner.sym[callee->dim_vars[i]] = fr.sym.empty() ? n.dims[i] : n.dims[i].subst(fr.sym);
    }
    return call_function(*callee, inner);
  }

 private:
  Value lower_node(const ir::Node& n, Frame& fr);

  const ir::Module& m_;
  Pipeline& p_;
  int counter_ = 0;
  std::map<Stage::Kind, int> kind_count_;
  LowerOptions opts_;
  std::map<std::string, Value> casts_;  // cast(): by definition
  // A product's copy of its a (pairs_a) by the Func it copies and how, so
  // that products of one operand share one copy: (Func, stage name).
  std::map<std::string, std::pair<Func, std::string>> a_copies_;
  std::map<std::string, int> loads_;  // the Func of load_<param> by name -> the parameter's index
  Frame* cur_ = nullptr;  // the frame lower() is in

 public:
  Value call_function(const ir::Function& f, Frame& fr) { return lower(f.body, fr); }
  // Every result of the lowered fn, lowered in one frame: nodes the results
  // share become one Func.
  std::vector<Value> results(const ir::Function& f, Frame& fr) {
    std::vector<Value> out;
    for (const ir::Result& r : f.results()) out.push_back(lower(r.body, fr));
    return out;
  }
  void add_input_stage(const std::string& name, Func f, const std::vector<Var>& tl_vars, const Shape& shape) {
    std::vector<Var> h(tl_vars.rbegin(), tl_vars.rend());
    p_.stages.push_back({name, Stage::Kind::kInput, f, h, {}, false, shape, {}});
    const int index = static_cast<int>(loads_.size());
    loads_[f.name()] = index;  // Halide's name: unique in the process ("load_w$2")
  }
};

// The Halide lowering of each op, keyed by ir::Op: the scheduler's half of
// the op registry (lang/ops.def names the ops; lang/ stays Halide-free). The
// static_asserts below prove it has one row per op, in ops.def's order.
using Frame = Lowerer::Frame;
using LowerFn = Value (*)(Lowerer&, const ir::Node&, Frame&);
struct LowerRule {
  ir::Op op;
  LowerFn fn;
};
using N = const ir::Node;

constexpr LowerRule kLowerRules[] = {
    {ir::Op::kParam, [](Lowerer&, N& n, Frame& fr) { return fr.args.at(n.index); }},
    {ir::Op::kLiteral, [](Lowerer& l, N& n, Frame&) { return l.literal(n); }},
    {ir::Op::kNeg, [](Lowerer& l, N& n, Frame& fr) { return l.unary(n, fr, [](Expr a) { return -a; }); }},
    {ir::Op::kNot, [](Lowerer& l, N& n, Frame& fr) { return l.unary(n, fr, [](Expr a) { return !a; }); }},
    {ir::Op::kAdd, [](Lowerer& l, N& n, Frame& fr) { return l.binary(n, fr, [](Expr a, Expr b) { return a + b; }); }},
    {ir::Op::kSub, [](Lowerer& l, N& n, Frame& fr) { return l.binary(n, fr, [](Expr a, Expr b) { return a - b; }); }},
    {ir::Op::kMul, [](Lowerer& l, N& n, Frame& fr) { return l.binary(n, fr, [](Expr a, Expr b) { return a * b; }); }},
    {ir::Op::kDiv,
     [](Lowerer& l, N& n, Frame& fr) {
       bool integer = is_integer(n.type.dtype);
       return l.binary(n, fr, [integer](Expr a, Expr b) { return integer ? floor_div_int(a, b) : a / b; });
     }},
    {ir::Op::kEq, [](Lowerer& l, N& n, Frame& fr) { return l.binary(n, fr, [](Expr a, Expr b) { return a == b; }); }},
    {ir::Op::kNe, [](Lowerer& l, N& n, Frame& fr) { return l.binary(n, fr, [](Expr a, Expr b) { return a != b; }); }},
    {ir::Op::kLt, [](Lowerer& l, N& n, Frame& fr) { return l.binary(n, fr, [](Expr a, Expr b) { return a < b; }); }},
    {ir::Op::kLe, [](Lowerer& l, N& n, Frame& fr) { return l.binary(n, fr, [](Expr a, Expr b) { return a <= b; }); }},
    {ir::Op::kGt, [](Lowerer& l, N& n, Frame& fr) { return l.binary(n, fr, [](Expr a, Expr b) { return a > b; }); }},
    {ir::Op::kGe, [](Lowerer& l, N& n, Frame& fr) { return l.binary(n, fr, [](Expr a, Expr b) { return a >= b; }); }},
    {ir::Op::kAnd, [](Lowerer& l, N& n, Frame& fr) { return l.binary(n, fr, [](Expr a, Expr b) { return a && b; }); }},
    {ir::Op::kOr, [](Lowerer& l, N& n, Frame& fr) { return l.binary(n, fr, [](Expr a, Expr b) { return a || b; }); }},
    {ir::Op::kExp, [](Lowerer& l, N& n, Frame& fr) { return l.unary(n, fr, [](Expr a) { return Halide::exp(a); }); }},
    {ir::Op::kLog, [](Lowerer& l, N& n, Frame& fr) { return l.unary(n, fr, [](Expr a) { return Halide::log(a); }); }},
    {ir::Op::kSqrt, [](Lowerer& l, N& n, Frame& fr) { return l.unary(n, fr, [](Expr a) { return Halide::sqrt(a); }); }},
    {ir::Op::kRsqrt,
     [](Lowerer& l, N& n, Frame& fr) {
       return l.unary(n, fr, [](Expr a) { return Halide::cast(a.type(), 1) / Halide::sqrt(a); });
     }},
    {ir::Op::kTanh, [](Lowerer& l, N& n, Frame& fr) { return l.unary(n, fr, [](Expr a) { return tanh_approx(a); }); }},
    {ir::Op::kSigmoid,
     [](Lowerer& l, N& n, Frame& fr) {
       return l.unary(n, fr, [](Expr a) {
         return Halide::cast(a.type(), 1) / (Halide::cast(a.type(), 1) + Halide::exp(-a));
       });
     }},
    {ir::Op::kAbs,
     [](Lowerer& l, N& n, Frame& fr) { return l.unary(n, fr, [](Expr a) { return Halide::cast(a.type(), Halide::abs(a)); }); }},
    {ir::Op::kRelu,
     [](Lowerer& l, N& n, Frame& fr) {
       return l.unary(n, fr, [](Expr a) { return Halide::max(a, Halide::cast(a.type(), 0)); });
     }},
    {ir::Op::kErf, [](Lowerer& l, N& n, Frame& fr) { return l.unary(n, fr, [](Expr a) { return erf_approx(a); }); }},
    {ir::Op::kMax,
     [](Lowerer& l, N& n, Frame& fr) { return l.binary(n, fr, [](Expr a, Expr b) { return Halide::max(a, b); }); }},
    {ir::Op::kMin,
     [](Lowerer& l, N& n, Frame& fr) { return l.binary(n, fr, [](Expr a, Expr b) { return Halide::min(a, b); }); }},
    {ir::Op::kPow,
     [](Lowerer& l, N& n, Frame& fr) { return l.binary(n, fr, [](Expr a, Expr b) { return Halide::pow(a, b); }); }},
    {ir::Op::kWhere, [](Lowerer& l, N& n, Frame& fr) { return l.where(n, fr); }},
    {ir::Op::kCast, [](Lowerer& l, N& n, Frame& fr) { return l.cast(n, fr); }},
    {ir::Op::kSum, [](Lowerer& l, N& n, Frame& fr) { return l.reduce(n, fr); }},
    {ir::Op::kMean, [](Lowerer& l, N& n, Frame& fr) { return l.reduce(n, fr); }},
    {ir::Op::kReduceMax, [](Lowerer& l, N& n, Frame& fr) { return l.reduce(n, fr); }},
    {ir::Op::kReduceMin, [](Lowerer& l, N& n, Frame& fr) { return l.reduce(n, fr); }},
    {ir::Op::kBroadcast, [](Lowerer& l, N& n, Frame& fr) { return l.broadcast(n, fr); }},
    {ir::Op::kMatmul, [](Lowerer& l, N& n, Frame& fr) { return l.matmul(n, fr); }},
    {ir::Op::kTranspose, [](Lowerer& l, N& n, Frame& fr) { return l.transpose(n, fr); }},
    {ir::Op::kReshape, [](Lowerer& l, N& n, Frame& fr) { return l.reshape(n, fr); }},
    {ir::Op::kSoftmax, [](Lowerer& l, N& n, Frame& fr) { return l.softmax(n, fr); }},
    {ir::Op::kGather, [](Lowerer& l, N& n, Frame& fr) { return l.gather(n, fr); }},
    {ir::Op::kRepeatInterleave, [](Lowerer& l, N& n, Frame& fr) { return l.repeat_interleave(n, fr); }},
    {ir::Op::kConcat, [](Lowerer& l, N& n, Frame& fr) { return l.concat(n, fr); }},
    {ir::Op::kSlice, [](Lowerer& l, N& n, Frame& fr) { return l.slice(n, fr); }},
    {ir::Op::kIota, [](Lowerer& l, N& n, Frame&) { return l.iota(n); }},
    {ir::Op::kFull, [](Lowerer& l, N& n, Frame&) { return l.literal(n); }},
    {ir::Op::kCall, [](Lowerer& l, N& n, Frame& fr) { return l.call(n, fr); }},
};

constexpr bool lower_rules_in_order() {
  for (size_t i = 0; i < std::size(kLowerRules); ++i)
    if (static_cast<size_t>(kLowerRules[i].op) != i) return false;
  return true;
}
static_assert(std::size(kLowerRules) == ir::kOpCount, "a lowering for every op of lang/ops.def");
static_assert(lower_rules_in_order(), "kLowerRules follows the order of lang/ops.def");

Value Lowerer::lower_node(const ir::Node& n, Frame& fr) {
  size_t i = static_cast<size_t>(n.op);
  MLK_CHECK(i < ir::kOpCount, "lower: not an op");
  return kLowerRules[i].fn(*this, n, fr);
}


}  // namespace

namespace {

// Halide's compile-time warnings (about schedules it considers odd) would
// interleave with mlk's own output; they are shown only with
// MLK_HALIDE_WARNINGS=1. Errors are thrown as Halide would, without the
// default reporter's copy on stderr (mlk reports them as Status).
class Reporter : public Halide::CompileTimeErrorReporter {
 public:
  void warning(const char* msg) override {
    if (!std::getenv("MLK_HALIDE_WARNINGS")) return;
    std::string_view m(msg);  // ends with a newline; the sink adds its own
    log_line(LogLevel::kWarning, "Halide warning: " + std::string(m.substr(0, m.size() - m.ends_with('\n'))));
  }
  [[noreturn]] void error(const char* msg) override { throw Halide::CompileError(msg); }
};

void install_reporter() {
  static Reporter reporter;
  static std::once_flag once;
  std::call_once(once, [] { Halide::set_custom_compile_time_error_reporter(&reporter); });
}

}  // namespace

// The pair form where the BF16 dot product outruns the F32 FMAs: AMD's
// Zen 4 and Zen 5. Not on Intel's Sapphire Rapids and later, which have
// vdpbf16ps too: on such a Xeon the pair form's products ran at 42-53% of
// the FMA peak and its pair copies took 15% of a MiniLM layer, against 78%
// for the same products on operands widened to F32 (docs/benchmarks.md,
// M16); their BF16 speed is in AMX tiles.
//
// AMX tiles for BF16 products on Sapphire Rapids-class targets (AMX-BF16),
// where a product of BF16 operands in tiles ran at 1.1-1.3 TFLOP/s on two
// cores against 0.35 for the F32 FMAs (docs/benchmarks.md, K24).
LowerOptions options_for(const Halide::Target& t) {
  LowerOptions o;
  const bool x86 = t.arch == Halide::Target::X86 && !t.has_gpu_feature();
  const bool amd = t.has_feature(Halide::Target::AVX512_Zen4) || t.has_feature(Halide::Target::AVX512_Zen5);
  o.bf16_pairs = x86 && amd;
  o.amx_bf16 = x86 && !amd && t.has_feature(Halide::Target::AVX512_SapphireRapids);
  return o;
}

// `host`: Halide calls a CPU with AVX-VNNI and AVX512_BF16 Sapphire
// Rapids-class, which a CPU without AMX (or a virtual machine that leaves
// the AMX state off in XCR0) may be too: tiles only where cpuid says
// AMX-BF16 and the OS enables its state, and where Linux offers the tile
// state (targets/amx.h, without asking for it: a seccomp filter or an old
// kernel may refuse, and the products then lower as elsewhere).
LowerOptions options_for(const std::string& halide_target) {
  if (halide_target.empty()) return {};
  if (halide_target == "host") {
    LowerOptions o = options_for(Halide::get_host_target());
    static const bool amx = detect_cpu().has("amx_bf16");
    o.amx_bf16 = o.amx_bf16 && amx && amx_tiles_offered();
    return o;
  }
  if (!Halide::Target::validate_target_string(halide_target)) return {};
  return options_for(Halide::Target(halide_target));
}

std::vector<Halide::Func> Pipeline::output_funcs() const {
  std::vector<Halide::Func> fs;
  for (const Output& o : outputs) fs.push_back(o.func);
  return fs;
}

// `f` with its reshape round trips cancelled (lang/cancel_reshapes.h) in its
// call-free body; nullopt when it has none, so that a fn without them lowers
// exactly as written (its calls lowered frame by frame).
std::optional<ir::Function> without_round_trips(const ir::Module& m, const ir::Function& f) {
  Provenance prov;
  std::string missing;
  auto bodies = inline_results(m, f, prov, missing);
  if (!bodies) return std::nullopt;  // lowered as written, which reports the missing callee
  std::vector<ir::NodeRef> out = cancel_reshapes(*bodies);
  if (out == *bodies) return std::nullopt;
  ir::Function g = f;
  g.body = out[0];
  for (size_t i = 1; i < out.size(); ++i) g.more_results[i - 1].body = out[i];
  return g;
}

Expected<Pipeline> lower_function(const ir::Module& m, const std::string& fn, const LowerOptions& o) {
  install_reporter();
  const ir::Function* f = m.find(fn);
  if (!f) return Status::NotFound("no function `" + fn + "` in the module");
  const std::optional<ir::Function> cancelled = without_round_trips(m, *f);
  if (cancelled) f = &*cancelled;
  try {
    Pipeline p;
    Lowerer low(m, p, o);
    Lowerer::Frame fr;
    for (size_t i = 0; i < f->params.size(); ++i) {
      const ir::Type& t = f->params[i].type;
      int rank = static_cast<int>(t.shape.size());
      // Halide names of user names are prefixed (in_P, dim_D, load_P): the AOT
      // header's parameters (_in_P_buffer, _dim_D) are then never a C keyword
      // or macro, and no user name meets an internal Func (fN_..., output, the
      // stage names). JIT and AOT share these names; schedules cite load_P.
      Halide::ImageParam ip(storage_type(t.dtype), rank, "in_" + f->params[i].name);
      p.inputs.push_back(ip);
      // Bare-variable extents bind dimension variables.
      for (int ax = 0; ax < rank; ++ax) {
        const auto& terms = t.shape[ax].terms();
        if (terms.size() == 1 && terms[0].coef == 1 && terms[0].atoms.size() == 1 && !terms[0].atoms[0].quot &&
            !fr.dims.count(terms[0].atoms[0].key))
          fr.dims[terms[0].atoms[0].key] = ip.dim(halide_dim(rank, ax)).extent();
      }
      // Loads widen to the compute type (Bool: non-zero).
      Func load("load_" + f->params[i].name);  // a stage name too (stage_shared)
      auto v = make_vars(rank);
      std::vector<Expr> h;
      for (int ax = rank - 1; ax >= 0; --ax) h.push_back(v[ax]);
      Expr x = rank == 0 ? ip() : ip(h);
      x = t.dtype == DType::Bool ? x != 0 : Halide::cast(compute_type(t.dtype), x);
      define(load, v, x);
      fr.args.push_back({load, t.dtype, rank});
      low.add_input_stage("load_" + f->params[i].name, load, v, t.shape);
    }
    for (const auto& d : f->dim_vars)
      if (!fr.dims.count(d)) {
        Halide::Param<int32_t> prm("dim_" + d);
        p.dim_params.emplace(d, prm);
        fr.dims[d] = prm;
      }
    const std::vector<ir::Result> results = f->results();
    const std::vector<Value> bodies = low.results(*f, fr);
    for (size_t i = 0; i < bodies.size(); ++i) {
      const Value& body = bodies[i];
      Func out(i == 0 ? "output" : "output" + std::to_string(i));
      auto v = make_vars(body.rank);
      define(out, v, Halide::cast(storage_type(results[i].type.dtype), body.at(as_exprs(v))));
      p.outputs.push_back({out, results[i].type.dtype, body.rank});
      Stage& os = low.add_stage(Stage::Kind::kOutput, out, v, {}, false, results[i].type.shape);
      for (int d = 0; d < body.rank; ++d) os.extents.push_back(out.output_buffer().dim(d).extent());
    }
    return p;
  } catch (const Halide::Error& e) {
    return Status::Internal(std::string("Halide rejected the lowered pipeline of `") + fn + "`: " + e.what());
  }
}

}  // namespace mlk::lower
