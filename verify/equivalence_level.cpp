// The bounded-equivalence level: the typed IR (verify/ir_terms.h) and the
// lowered Halide algorithm (scheduler/algorithm_terms.h) evaluated
// symbolically at small concrete shapes, each output element proved equal
// with z3: reals for + - * /, uninterpreted functions for exp, log, sqrt,
// tanh and pow, bit-vectors for integers (index arithmetic is concrete at a
// concrete shape). The one file that includes z3++.h.
#include <z3++.h>

#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "lang/bind.h"
#include "lang/compare.h"
#include "runtime/testing.h"
#include "verify/ir_terms.h"
#include "verify/levels.h"

namespace mlk::verify {

namespace {

using sym::Sort;
using sym::TermRef;
using sym::TOp;

// 2^k in decimal.
std::string pow2(int k) {
  std::string d = "1";
  for (int i = 0; i < k; ++i) {
    int carry = 0;
    for (size_t j = d.size(); j-- > 0;) {
      int x = (d[j] - '0') * 2 + carry;
      d[j] = static_cast<char>('0' + x % 10), carry = x / 10;
    }
    if (carry) d.insert(d.begin(), static_cast<char>('0' + carry));
  }
  return d;
}

class ToZ3 {
 public:
  explicit ToZ3(z3::context& c) : c_(c) {}

  Expected<z3::expr> conv(const TermRef& t) {
    if (auto it = memo_.find(t.get()); it != memo_.end()) return it->second;
    auto e = build(t);
    if (e.ok()) memo_.emplace(t.get(), *e);
    return e;
  }
  const std::map<std::string, z3::expr>& inputs() const { return inputs_; }

 private:
  Expected<z3::expr> real(double v) {
    if (!std::isfinite(v)) return Status::Unsupported("a non-finite constant is not modelled");
    if (v == 0) return c_.real_val(0);
    int e = 0;
    double fr = std::frexp(v, &e);
    auto m = static_cast<int64_t>(std::ldexp(fr, 53));
    e -= 53;
    std::string s = std::to_string(m);
    if (e >= 0) return c_.real_val(s.c_str()) * c_.real_val(pow2(e).c_str());
    return c_.real_val((s + "/" + pow2(-e)).c_str());
  }

  Expected<z3::expr> build(const TermRef& t) {
    std::vector<z3::expr> a;
    for (const auto& x : t->args) {
      auto e = conv(x);
      if (!e.ok()) return e;
      a.push_back(*e);
    }
    const bool bv = !t->args.empty() && t->args[0]->sort == Sort::kInt;
    const bool sg = !t->args.empty() && t->args[0]->is_signed;
    auto lt = [&](const z3::expr& x, const z3::expr& y) { return bv ? (sg ? x < y : z3::ult(x, y)) : x < y; };
    auto le = [&](const z3::expr& x, const z3::expr& y) { return bv ? (sg ? x <= y : z3::ule(x, y)) : x <= y; };
    switch (t->op) {
      case TOp::kInput: {
        std::string n = t->name + "[" + std::to_string(t->index) + "]";
        z3::expr e = t->sort == Sort::kReal ? c_.real_const(n.c_str()) : c_.bv_const(n.c_str(), t->bits);
        inputs_.emplace(n, e);
        return e;
      }
      case TOp::kConst:
        if (t->sort == Sort::kReal) return real(t->real);
        if (t->sort == Sort::kBool) return c_.bool_val(t->integer != 0);
        return c_.bv_val(static_cast<int64_t>(t->integer), t->bits);
      case TOp::kAdd: return a[0] + a[1];
      case TOp::kSub: return a[0] - a[1];
      case TOp::kMul: return a[0] * a[1];
      case TOp::kNeg: return -a[0];
      case TOp::kDiv:
      case TOp::kMod:
      case TOp::kFloorDiv: {
        if (!bv) return a[0] / a[1];
        z3::expr zero = c_.bv_val(0, t->bits), one = c_.bv_val(1, t->bits);
        z3::expr q0 = sg ? a[0] / a[1] : z3::udiv(a[0], a[1]);
        z3::expr r0 = sg ? z3::srem(a[0], a[1]) : z3::urem(a[0], a[1]);
        z3::expr q = q0;
        if (sg && t->op == TOp::kFloorDiv) q = z3::ite(r0 != zero && ((r0 < zero) != (a[1] < zero)), q0 - one, q0);
        else if (sg) q = z3::ite(r0 < zero, z3::ite(a[1] > zero, q0 - one, q0 + one), q0);
        q = z3::ite(a[1] == zero, zero, q);
        if (t->op == TOp::kMod) return z3::ite(a[1] == zero, zero, a[0] - q * a[1]);
        return q;
      }
      case TOp::kMin: return z3::ite(lt(a[1], a[0]), a[1], a[0]);
      case TOp::kMax: return z3::ite(lt(a[0], a[1]), a[1], a[0]);
      case TOp::kSelect: return z3::ite(a[0], a[1], a[2]);
      case TOp::kEq: return a[0] == a[1];
      case TOp::kNe: return a[0] != a[1];
      case TOp::kLt: return lt(a[0], a[1]);
      case TOp::kLe: return le(a[0], a[1]);
      case TOp::kAnd: return a[0] && a[1];
      case TOp::kOr: return a[0] || a[1];
      case TOp::kNot: return !a[0];
      case TOp::kCall: {
        z3::sort_vector dom(c_);
        for (size_t i = 0; i < a.size(); ++i) dom.push_back(c_.real_sort());
        z3::func_decl f = c_.function(t->name.c_str(), dom, c_.real_sort());
        z3::expr_vector args(c_);
        for (const auto& x : a) args.push_back(x);
        return f(args);
      }
      case TOp::kToReal: return z3::to_real(z3::bv2int(a[0], sg));
      case TOp::kIntCast: {
        const int from = t->args[0]->bits;
        if (t->bits == from) return a[0];
        if (t->bits < from) return a[0].extract(t->bits - 1, 0);
        return sg ? z3::sext(a[0], t->bits - from) : z3::zext(a[0], t->bits - from);
      }
    }
    return Status::Internal("term op");
  }

  z3::context& c_;
  std::map<const sym::Term*, z3::expr> memo_;
  std::map<std::string, z3::expr> inputs_;
};

// The first shape, of a few small candidates, that satisfies the refinements
// and keeps the terms small; empty when none does.
DimEnv small_shape(const ir::Function& f, const DimEnv& dims) {
  for (int64_t cap : {3, 4, 2, 8}) {
    DimEnv d = dims;
    for (auto& [k, v] : d) v = std::min<int64_t>(v, cap);
    if (rt::param_shapes(f, d).ok()) return d;
  }
  return {};
}

}  // namespace

LevelReport check_equivalence(const Context& c) {
  LevelReport r;
  r.checked = "every output element of the typed IR and of the lowered Halide algorithm, evaluated symbolically at a "
              "small concrete shape, proved equal by z3 (reals for + - * /, uninterpreted exp, log, sqrt, tanh, pow; "
              "bit-vectors for integers)";
  r.guarantee = "at the shape named, the lowering computes the typed IR's function in real arithmetic for every input "
                "(a bounded proof: not for other shapes, and not of IEEE rounding, which the envelope level tests)";
  DimEnv d = small_shape(c.f, c.dims);
  if (d.empty() && !c.f.dim_vars.empty()) {
    r.counterexample = "not checked: no small shape (every dimension at most 8) satisfies the refinements";
    return r;
  }
  r.evidence.push_back("shape " + (d.empty() ? std::string("(scalar)") : dims_str(d)));
  auto want = evaluate_ir(c.m, c.fn, d);
  if (!want.ok()) {
    r.counterexample = "not checked: " + want.status().message();
    return r;
  }
  auto got = sym::evaluate_algorithm(c.m, c.fn, d, c.profile.halide_target);
  if (!got.ok()) {
    r.counterexample = (got.status().code() == Status::Code::kUnsupported ? "not checked: " : "at " + dims_str(d) + ": ") +
                       got.status().message();
    return r;
  }
  if (want->elements.size() != got->elements.size()) {
    r.counterexample = "the algorithm has " + std::to_string(got->elements.size()) + " output elements, the IR " +
                       std::to_string(want->elements.size());
    return r;
  }
  z3::context ctx;
  ToZ3 conv(ctx);
  int64_t proved = 0;
  for (size_t i = 0; i < want->elements.size(); ++i) {
    auto l = conv.conv(want->elements[i]);
    auto g = conv.conv(got->elements[i]);
    if (!l.ok() || !g.ok()) {
      r.counterexample = "not checked: " + (!l.ok() ? l.status() : g.status()).message();
      return r;
    }
    z3::solver s(ctx);
    z3::params p(ctx);
    p.set("timeout", 10000u);
    s.set(p);
    s.add(*l != *g);
    z3::check_result res = s.check();
    if (res == z3::unsat) {
      ++proved;
      continue;
    }
    const std::string idx = multi_index_str(want->shape, static_cast<int64_t>(i));
    if (res == z3::unknown) {
      r.counterexample = "not proved at element " + idx + ": z3 gave up (" + s.reason_unknown() + ")";
      return r;
    }
    z3::model m = s.get_model();
    std::string vals;
    int shown = 0;
    std::set<std::string> used;  // the inputs the two terms read
    std::function<void(const TermRef&)> collect = [&](const TermRef& t) {
      if (t->op == TOp::kInput) used.insert(t->name + "[" + std::to_string(t->index) + "]");
      for (const auto& a : t->args)
        if (used.size() < 6) collect(a);
    };
    collect(want->elements[i]);
    collect(got->elements[i]);
    for (const auto& [name, e] : conv.inputs())
      if (used.count(name) && shown < 6) vals += (shown++ ? ", " : "") + name + " = " + m.eval(e, true).to_string();
    r.counterexample = "at " + dims_str(d) + ", element " + idx + " differs: the typed IR computes " +
                       sym::term_str(want->elements[i], 120) + ", the lowered algorithm " +
                       sym::term_str(got->elements[i], 120) + "; e.g. with " + vals + ": " +
                       m.eval(*l, true).to_string() + " vs " + m.eval(*g, true).to_string();
    return r;
  }
  r.evidence.push_back(std::to_string(proved) + " output elements proved equal (z3 " + Z3_get_full_version() + ")");
  r.pass = true;
  return r;
}

}  // namespace mlk::verify
