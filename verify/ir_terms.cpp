#include "verify/ir_terms.h"

#include <cmath>
#include <cstdlib>
#include <functional>

namespace mlk::verify {

namespace {

using sym::Sort;
using sym::TermRef;
using sym::TOp;

struct Val {
  std::vector<int64_t> shape;
  std::vector<TermRef> e;  // row-major
};

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t x : s) n *= x;
  return n;
}
std::vector<int64_t> unflat(int64_t flat, const std::vector<int64_t>& s) {
  std::vector<int64_t> idx(s.size());
  for (size_t a = s.size(); a-- > 0;) idx[a] = flat % s[a], flat /= s[a];
  return idx;
}
int64_t flat_of(const std::vector<int64_t>& idx, const std::vector<int64_t>& s) {
  int64_t f = 0;
  for (size_t a = 0; a < s.size(); ++a) f = f * s[a] + idx[a];
  return f;
}

Sort sort_of(DType t) { return is_float(t) ? Sort::kReal : t == DType::Bool ? Sort::kBool : Sort::kInt; }
bool is_signed_dt(DType t) { return t != DType::U8 && t != DType::Bool; }

TermRef zero_of(const TermRef& a) {
  return a->sort == Sort::kReal ? sym::real_const(0) : sym::int_const(0, a->bits, a->is_signed);
}
TermRef konst(DType t, double v) {
  if (is_float(t)) {
    if (t != DType::F64) v = static_cast<double>(static_cast<float>(v));  // the lowering's F32 constant
    return sym::real_const(v);
  }
  if (t == DType::Bool) return sym::bool_const(v != 0);
  return sym::int_const(static_cast<int64_t>(v), dtype_bits(t), is_signed_dt(t));
}

class IrEval {
 public:
  IrEval(const ir::Module& m) : m_(m) {}

  struct Frame {
    std::vector<Val> args;
    DimEnv dims;
    std::map<const ir::Node*, Val> memo;
  };

  Expected<Val> eval(const ir::NodeRef& n, Frame& fr) {
    if (auto it = fr.memo.find(n.get()); it != fr.memo.end()) return it->second;
    Val v;
    for (const Dim& d : n->type.shape) {
      auto x = d.eval(fr.dims);
      if (!x) return Status::InvalidArgument("the extent `" + d.str() + "` has no value");
      v.shape.push_back(*x);
    }
    std::vector<Val> ops;
    if (n->op != ir::Op::kCall || true)
      for (const auto& o : n->operands) {
        auto x = eval(o, fr);
        if (!x.ok()) return x;
        ops.push_back(std::move(x).value());
      }
    Status s = node(*n, fr, ops, v);
    if (!s.ok()) return s;
    fr.memo[n.get()] = v;
    return v;
  }

 private:
  // The value of op `n` on element-wise operands, in the node's compute sorts.
  Expected<TermRef> elementwise(const ir::Node& n, const std::vector<TermRef>& a) {
    const DType dt = n.type.dtype;
    const DType in = n.operands.empty() ? dt : n.operands[0]->type.dtype;
    using ir::Op;
    auto mk = [](TOp op, std::vector<TermRef> x) { return sym::make(op, std::move(x)); };
    switch (n.op) {
      case Op::kNeg: return mk(TOp::kNeg, {a[0]});
      case Op::kNot: return mk(TOp::kNot, {a[0]});
      case Op::kAdd: return mk(TOp::kAdd, {a[0], a[1]});
      case Op::kSub: return mk(TOp::kSub, {a[0], a[1]});
      case Op::kMul: return mk(TOp::kMul, {a[0], a[1]});
      case Op::kDiv: return mk(is_integer(dt) ? TOp::kFloorDiv : TOp::kDiv, {a[0], a[1]});
      case Op::kEq: return mk(TOp::kEq, {a[0], a[1]});
      case Op::kNe: return mk(TOp::kNe, {a[0], a[1]});
      case Op::kLt: return mk(TOp::kLt, {a[0], a[1]});
      case Op::kLe: return mk(TOp::kLe, {a[0], a[1]});
      case Op::kGt: return mk(TOp::kLt, {a[1], a[0]});
      case Op::kGe: return mk(TOp::kLe, {a[1], a[0]});
      case Op::kAnd: return mk(TOp::kAnd, {a[0], a[1]});
      case Op::kOr: return mk(TOp::kOr, {a[0], a[1]});
      case Op::kExp: return sym::make(TOp::kCall, {a[0]}, "exp");
      case Op::kLog: return sym::make(TOp::kCall, {a[0]}, "log");
      case Op::kSqrt: return sym::make(TOp::kCall, {a[0]}, "sqrt");
      case Op::kTanh: return dt == DType::F64 ? sym::make(TOp::kCall, {a[0]}, "tanh") : tanh(dt, a[0]);
      case Op::kPow: return sym::make(TOp::kCall, {a[0], a[1]}, "pow");
      case Op::kRsqrt: return mk(TOp::kDiv, {konst(dt, 1), sym::make(TOp::kCall, {a[0]}, "sqrt")});
      case Op::kSigmoid:
        return mk(TOp::kDiv, {konst(dt, 1), mk(TOp::kAdd, {konst(dt, 1), sym::make(TOp::kCall, {mk(TOp::kNeg, {a[0]})}, "exp")})});
      case Op::kAbs: return mk(TOp::kSelect, {mk(TOp::kLt, {a[0], zero_of(a[0])}), mk(TOp::kNeg, {a[0]}), a[0]});
      case Op::kRelu: return mk(TOp::kMax, {a[0], zero_of(a[0])});
      case Op::kMax: return mk(TOp::kMax, {a[0], a[1]});
      case Op::kMin: return mk(TOp::kMin, {a[0], a[1]});
      case Op::kWhere: return mk(TOp::kSelect, {a[0], a[1], a[2]});
      case Op::kErf: return erf(dt, a[0]);
      case Op::kCast: return cast(in, dt, a[0]);
      default: return Status::Unsupported(std::string("op `") + ir::op_name(n.op) + "` is not modelled");
    }
  }

  // erf as docs/numerics.md defines the compiled one (Abramowitz & Stegun 7.1.26).
  TermRef erf(DType dt, TermRef x) {
    auto c = [&](double v) { return konst(dt, v); };
    auto mk = [](TOp op, std::vector<TermRef> a) { return sym::make(op, std::move(a)); };
    TermRef ax = mk(TOp::kSelect, {mk(TOp::kLt, {x, zero_of(x)}), mk(TOp::kNeg, {x}), x});
    TermRef k = mk(TOp::kDiv, {c(1.0), mk(TOp::kAdd, {c(1.0), mk(TOp::kMul, {c(0.3275911), ax})})});
    TermRef p = mk(TOp::kMul, {c(1.061405429), k});
    for (double co : {-1.453152027, 1.421413741, -0.284496736, 0.254829592})
      p = mk(TOp::kMul, {mk(TOp::kAdd, {p, c(co)}), k});
    TermRef y = mk(TOp::kSub, {c(1.0), mk(TOp::kMul, {p, sym::make(TOp::kCall, {mk(TOp::kMul, {mk(TOp::kNeg, {ax}), ax})}, "exp")})});
    return mk(TOp::kSelect, {mk(TOp::kLt, {x, zero_of(x)}), mk(TOp::kNeg, {y}), y});
  }

  // tanh below 64 bits as the compiled one (scheduler/lower.cpp tanh_approx,
  // docs/numerics.md): Taylor to x^17 below |x| = 0.55, 1 - 2/(exp(2 min(|x|,
  // 20)) + 1) above, x itself where x != x (never, over the reals).
  TermRef tanh(DType dt, TermRef x) {
    auto c = [&](double v) { return konst(dt, v); };
    auto mk = [](TOp op, std::vector<TermRef> a) { return sym::make(op, std::move(a)); };
    static const double kTaylor[] = {1.0, -1.0 / 3, 2.0 / 15, -17.0 / 315, 62.0 / 2835, -1382.0 / 155925,
                                     21844.0 / 6081075, -929569.0 / 638512875, 6404582.0 / 10854718875};
    TermRef ax = mk(TOp::kSelect, {mk(TOp::kLt, {x, zero_of(x)}), mk(TOp::kNeg, {x}), x});
    TermRef x2 = mk(TOp::kMul, {x, x});
    TermRef poly = c(kTaylor[8]);
    for (int i = 7; i >= 0; --i) poly = mk(TOp::kAdd, {mk(TOp::kMul, {poly, x2}), c(kTaylor[i])});
    TermRef e = sym::make(TOp::kCall, {mk(TOp::kMul, {c(2.0), mk(TOp::kMin, {ax, c(20.0)})})}, "exp");
    TermRef large = mk(TOp::kSub, {c(1.0), mk(TOp::kDiv, {c(2.0), mk(TOp::kAdd, {e, c(1.0)})})});
    TermRef y = mk(TOp::kSelect, {mk(TOp::kLt, {ax, c(0.55)}), mk(TOp::kMul, {x, poly}),
                                   mk(TOp::kSelect, {mk(TOp::kLt, {x, zero_of(x)}), mk(TOp::kNeg, {large}), large})});
    return mk(TOp::kSelect, {mk(TOp::kNe, {x, x}), x, y});
  }

  Expected<TermRef> cast(DType from, DType to, TermRef x) {
    if (to == DType::Bool) return sym::make(TOp::kNe, {x, zero_of(x)});
    if (from == DType::Bool) return sym::make(TOp::kSelect, {x, konst(to, 1), konst(to, 0)});
    if (is_float(to)) return is_float(from) ? x : sym::make(TOp::kToReal, {x});
    if (is_float(from)) return Status::Unsupported("a float-to-integer cast is not modelled");
    return sym::int_cast(x, dtype_bits(to), is_signed_dt(to));
  }

  Expected<TermRef> reduce_terms(const ir::Node& n, const std::vector<TermRef>& xs) {
    TermRef acc = xs[0];
    TOp op = n.op == ir::Op::kReduceMax ? TOp::kMax : n.op == ir::Op::kReduceMin ? TOp::kMin : TOp::kAdd;
    for (size_t i = 1; i < xs.size(); ++i) acc = sym::make(op, {acc, xs[i]});
    if (n.op == ir::Op::kMean) acc = sym::make(TOp::kDiv, {acc, konst(n.type.dtype, static_cast<double>(xs.size()))});
    return acc;
  }

  // The element of `x` at index `idx`.
  static TermRef element_at(const Val& x, const std::vector<int64_t>& idx) { return x.e[flat_of(idx, x.shape)]; }

  // Element `o` of a reduction node `n` (sum, mean, max, min over the axes
  // n.ints of ops[0]): the elements it reduces, combined by reduce_terms.
  Expected<TermRef> reduction_at(const ir::Node& n, const std::vector<Val>& ops, const std::vector<int64_t>& o) {
    const auto& ish = ops[0].shape;
    std::vector<int64_t> red;
    for (int64_t ax : n.ints) red.push_back(ish[ax]);
    std::vector<TermRef> xs;
    for (int64_t r = 0; r < numel(red); ++r) {
      std::vector<int64_t> ri = unflat(r, red), idx;
      size_t ov = 0, rv = 0;
      for (size_t ax = 0; ax < ish.size(); ++ax)
        idx.push_back(std::count(n.ints.begin(), n.ints.end(), static_cast<int64_t>(ax)) ? ri[rv++] : o[ov++]);
      xs.push_back(element_at(ops[0], idx));
    }
    return reduce_terms(n, xs);
  }

  // Element `o` of the matmul ops[0] @ ops[1] (ops[1] batched when it has
  // more than two axes): the products over the shared axis, summed in order.
  static TermRef matmul_at(const std::vector<Val>& ops, const std::vector<int64_t>& o) {
    const int64_t k = ops[0].shape.back();
    TermRef acc;
    for (int64_t i = 0; i < k; ++i) {
      std::vector<int64_t> ia(o.begin(), o.end() - 1), ib;
      ia.push_back(i);
      if (ops[1].shape.size() > 2) ib.assign(o.begin(), o.end() - 2);
      ib.push_back(i), ib.push_back(o.back());
      TermRef p = sym::make(TOp::kMul, {element_at(ops[0], ia), element_at(ops[1], ib)});
      acc = acc ? sym::make(TOp::kAdd, {acc, p}) : p;
    }
    return acc;
  }

  // Element `o` of softmax(x) along `axis` (of `extent` elements):
  // exp(x - max) over the sum of exp(x_j - max) along the axis.
  // Element `o` of gather(table, idx, axis): out[pre, i.., post] =
  // table[pre, idx[i..], post], a choice among the table's rows by the
  // index's value. An index outside [0, E) is refused at run time (the
  // interpreter and the compiled require() alike), so there the model takes
  // the lowering's clamp of the index as int32.
  static TermRef gather_at(const std::vector<Val>& ops, int axis, const std::vector<int64_t>& o) {
    const int64_t extent = ops[0].shape[axis];
    const auto ir = static_cast<std::ptrdiff_t>(ops[1].shape.size());
    TermRef i = sym::int_cast(element_at(ops[1], std::vector<int64_t>(o.begin() + axis, o.begin() + axis + ir)), 32, true);
    std::vector<int64_t> t(o.begin(), o.begin() + axis);
    t.push_back(extent - 1);
    t.insert(t.end(), o.begin() + axis + ir, o.end());
    TermRef acc = element_at(ops[0], t);
    for (int64_t row = extent - 2; row >= 0; --row) {
      t[static_cast<size_t>(axis)] = row;
      TermRef cond = sym::make(row == 0 ? TOp::kLe : TOp::kEq, {i, sym::int_const(row, 32, true)});
      acc = sym::make(TOp::kSelect, {cond, element_at(ops[0], t), acc});
    }
    return acc;
  }

  static TermRef softmax_at(const Val& x, int axis, int64_t extent, const std::vector<int64_t>& o) {
    std::vector<int64_t> idx = o;
    TermRef mx, sum;
    for (int64_t j = 0; j < extent; ++j) {
      idx[axis] = j;
      mx = mx ? sym::make(TOp::kMax, {mx, element_at(x, idx)}) : element_at(x, idx);
    }
    auto e = [&](const std::vector<int64_t>& i) {
      return sym::make(TOp::kCall, {sym::make(TOp::kSub, {element_at(x, i), mx})}, "exp");
    };
    for (int64_t j = 0; j < extent; ++j) {
      idx[axis] = j;
      sum = sum ? sym::make(TOp::kAdd, {sum, e(idx)}) : e(idx);
    }
    return sym::make(TOp::kDiv, {e(o), sum});
  }

  Status node(const ir::Node& n, Frame& fr, const std::vector<Val>& ops, Val& v);

  const ir::Module& m_;
};

Status IrEval::node(const ir::Node& n, Frame& fr, const std::vector<Val>& ops, Val& v) {
  using ir::Op;
  const int64_t count = numel(v.shape);
  const int rank = static_cast<int>(v.shape.size());
  auto each = [&](const std::function<Expected<TermRef>(const std::vector<int64_t>&)>& f) -> Status {
    for (int64_t i = 0; i < count; ++i) {
      auto t = f(unflat(i, v.shape));
      if (!t.ok()) return t.status();
      v.e.push_back(*t);
    }
    return Status::Ok();
  };
  auto at = [](const Val& x, const std::vector<int64_t>& idx) { return x.e[flat_of(idx, x.shape)]; };
  switch (n.op) {
    case Op::kParam: v = fr.args.at(n.index); return Status::Ok();
    case Op::kLiteral:
    case Op::kFull: {
      TermRef c = n.literal == "true" || n.literal == "false" ? sym::bool_const(n.literal == "true")
                  : is_integer(n.type.dtype) ? sym::int_const(std::strtoll(n.literal.c_str(), nullptr, 10), dtype_bits(n.type.dtype), is_signed_dt(n.type.dtype))
                                             : konst(n.type.dtype, std::strtod(n.literal.c_str(), nullptr));
      v.e.assign(count, c);
      return Status::Ok();
    }
    case Op::kSum: case Op::kMean: case Op::kReduceMax: case Op::kReduceMin:
      return each([&](const std::vector<int64_t>& o) -> Expected<TermRef> { return reduction_at(n, ops, o); });
    case Op::kBroadcast:
      return each([&](const std::vector<int64_t>& o) -> Expected<TermRef> {
        std::vector<int64_t> idx;
        for (int64_t ax : n.ints) idx.push_back(o[ax]);
        return at(ops[0], idx);
      });
    case Op::kMatmul:
      return each([&](const std::vector<int64_t>& o) -> Expected<TermRef> { return matmul_at(ops, o); });
    case Op::kTranspose:
      return each([&](const std::vector<int64_t>& o) -> Expected<TermRef> {
        std::vector<int64_t> idx(rank);
        for (int i = 0; i < rank; ++i) idx[n.ints[i]] = o[i];  // out axis i is input axis perm[i]
        return at(ops[0], idx);
      });
    case Op::kReshape:
      v.e = ops[0].e;
      return Status::Ok();
    case Op::kSoftmax: {
      const int axis = static_cast<int>(n.ints[0]);
      return each([&](const std::vector<int64_t>& o) -> Expected<TermRef> {
        return softmax_at(ops[0], axis, v.shape[axis], o);
      });
    }
    case Op::kRepeatInterleave: {
      auto rep = n.dims[0].eval(fr.dims);
      return each([&](const std::vector<int64_t>& o) -> Expected<TermRef> {
        std::vector<int64_t> idx = o;
        idx[n.ints[0]] /= *rep;
        return at(ops[0], idx);
      });
    }
    case Op::kConcat: {
      const int axis = static_cast<int>(n.ints[0]);
      return each([&](const std::vector<int64_t>& o) -> Expected<TermRef> {
        std::vector<int64_t> idx = o;
        for (const Val& x : ops) {
          if (idx[axis] < x.shape[axis]) return at(x, idx);
          idx[axis] -= x.shape[axis];
        }
        return Status::Internal("concat index");
      });
    }
    case Op::kSlice: {
      auto start = n.dims[0].eval(fr.dims);
      return each([&](const std::vector<int64_t>& o) -> Expected<TermRef> {
        std::vector<int64_t> idx = o;
        idx[n.ints[0]] += *start;
        return at(ops[0], idx);
      });
    }
    case Op::kIota:
      return each([&](const std::vector<int64_t>& o) -> Expected<TermRef> {
        return konst(n.type.dtype, static_cast<double>(o[n.ints[0]]));
      });
    case Op::kGather: {
      const int axis = static_cast<int>(n.ints[0]);
      if (ops[0].shape[axis] < 1) return Status::InvalidArgument("`gather` from an empty table");
      return each([&](const std::vector<int64_t>& o) -> Expected<TermRef> { return gather_at(ops, axis, o); });
    }
    case Op::kCall: {
      const ir::Function* callee = m_.find(n.callee);
      if (!callee) return Status::Internal("call of a missing fn");
      Frame inner;
      inner.args = ops;
      for (size_t i = 0; i < callee->dim_vars.size(); ++i) inner.dims[callee->dim_vars[i]] = n.dims[i].eval(fr.dims).value_or(0);
      auto r = eval(callee->body, inner);
      if (!r.ok()) return r.status();
      v.e = r->e;
      return Status::Ok();
    }
    default:
      return each([&](const std::vector<int64_t>& o) -> Expected<TermRef> {
        std::vector<TermRef> a;
        for (const Val& x : ops) a.push_back(at(x, o));
        return elementwise(n, a);
      });
  }
}

}  // namespace

Expected<sym::EvaluatedAlgorithm> evaluate_ir(const ir::Module& m, const std::string& fn, const DimEnv& dims) {
  const ir::Function* f = m.find(fn);
  if (!f) return Status::NotFound("no fn `" + fn + "` in the program");
  IrEval ev(m);
  IrEval::Frame fr;
  fr.dims = dims;
  for (const auto& p : f->params) {
    Val v;
    for (const Dim& d : p.type.shape) v.shape.push_back(d.eval(dims).value_or(0));
    const DType t = p.type.dtype;
    for (int64_t i = 0; i < numel(v.shape); ++i) {
      if (t == DType::Bool) {  // stored as one byte; non-zero is true
        TermRef b = sym::input(p.name, i, Sort::kInt, 8, false);
        v.e.push_back(sym::make(TOp::kNe, {b, sym::int_const(0, 8, false)}));
      } else {
        v.e.push_back(sym::input(p.name, i, sort_of(t), is_float(t) ? 0 : dtype_bits(t), is_signed_dt(t)));
      }
    }
    fr.args.push_back(std::move(v));
  }
  auto r = ev.eval(f->body, fr);
  if (!r.ok()) return r.status();
  sym::EvaluatedAlgorithm out{r->shape, {}};
  for (const TermRef& t : r->e)
    out.elements.push_back(f->result_type.dtype == DType::Bool
                               ? sym::make(TOp::kSelect, {t, sym::int_const(1, 8, false), sym::int_const(0, 8, false)})
                               : t);
  return out;
}

}  // namespace mlk::verify
