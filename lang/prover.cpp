#include "lang/prover.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mlk {

std::string Pred::str() const {
  switch (op) {
    case Op::kModZero: {
      auto wrap = [](const Dim& d) { return d.terms().size() > 1 ? "(" + d.str() + ")" : d.str(); };
      return wrap(lhs) + " mod " + (rhs.is_atomic() ? rhs.str() : "(" + rhs.str() + ")") + " = 0";
    }
    case Op::kEq: return lhs.str() + " = " + rhs.str();
    case Op::kNe: return lhs.str() + " != " + rhs.str();
    case Op::kLt: return lhs.str() + " < " + rhs.str();
    case Op::kLe: return lhs.str() + " <= " + rhs.str();
    case Op::kGt: return lhs.str() + " > " + rhs.str();
    case Op::kGe: return lhs.str() + " >= " + rhs.str();
  }
  return "?";
}

std::optional<bool> Pred::eval(const std::map<std::string, int64_t>& env) const {
  auto a = lhs.eval(env), b = rhs.eval(env);
  if (!a || !b) return std::nullopt;
  switch (op) {
    case Op::kModZero: return *b != 0 && *a % *b == 0;
    case Op::kEq: return *a == *b;
    case Op::kNe: return *a != *b;
    case Op::kLt: return *a < *b;
    case Op::kLe: return *a <= *b;
    case Op::kGt: return *a > *b;
    case Op::kGe: return *a >= *b;
  }
  return std::nullopt;
}

namespace {

using Term = Dim::Term;
constexpr long double kInf = std::numeric_limits<long double>::infinity();

struct Interval {
  long double lo = 1, hi = kInf;
};

// Single-term monomial division: does `d` divide `t` (coefficients and atoms)?
bool term_divides(const Term& t, const Term& d, Term* rest) {
  if (d.coef == 0 || t.coef % d.coef != 0) return false;
  std::vector<Dim::Atom> left = t.atoms;
  for (const auto& a : d.atoms) {
    auto it = std::find(left.begin(), left.end(), a);
    if (it == left.end()) return false;
    left.erase(it);
  }
  *rest = {t.coef / d.coef, std::move(left)};
  return true;
}

Dim term_dim(const Term& t) {
  Dim d = Dim::constant(t.coef);
  for (const auto& a : t.atoms) d = d * (a.quot ? Dim::exact_div(a.quot->num, a.quot->den) : Dim::var(a.key));
  return d;
}

// Bounds of each variable, from facts of the form `a*V + b OP 0`.
std::map<std::string, Interval> var_bounds(const std::vector<Pred>& facts) {
  std::map<std::string, Interval> b;
  for (const Pred& f : facts) {
    if (f.op == Pred::Op::kModZero || f.op == Pred::Op::kNe) continue;
    Dim p = f.lhs - f.rhs;  // p OP 0
    const auto& ts = p.terms();
    const Term* lin = nullptr;
    int64_t c = 0;
    bool ok = true;
    for (const Term& t : ts) {
      if (t.atoms.empty()) c = t.coef;
      else if (t.atoms.size() == 1 && !t.atoms[0].quot && !lin) lin = &t;
      else ok = false;
    }
    if (!ok || !lin) continue;
    // a*V + c OP 0  =>  V OP' -c/a
    long double a = lin->coef, bound = -static_cast<long double>(c) / a;
    Pred::Op op = f.op;
    if (a < 0) {
      switch (op) {
        case Pred::Op::kLt: op = Pred::Op::kGt; break;
        case Pred::Op::kLe: op = Pred::Op::kGe; break;
        case Pred::Op::kGt: op = Pred::Op::kLt; break;
        case Pred::Op::kGe: op = Pred::Op::kLe; break;
        default: break;
      }
    }
    Interval& iv = b[lin->atoms[0].key];
    auto lower = [&](long double v) { iv.lo = std::max(iv.lo, v); };
    auto upper = [&](long double v) { iv.hi = std::min(iv.hi, v); };
    switch (op) {
      case Pred::Op::kEq: lower(std::ceil(bound)); upper(std::floor(bound)); break;
      case Pred::Op::kLt: upper(std::ceil(bound) - 1); break;
      case Pred::Op::kLe: upper(std::floor(bound)); break;
      case Pred::Op::kGt: lower(std::floor(bound) + 1); break;
      case Pred::Op::kGe: lower(std::ceil(bound)); break;
      default: break;
    }
  }
  return b;
}

Interval eval_interval(const Dim& d, const std::map<std::string, Interval>& vb);

Interval atom_interval(const Dim::Atom& a, const std::map<std::string, Interval>& vb) {
  if (a.quot) {
    // An exact quotient of dimensions is itself a dimension: at least 1, at
    // most the numerator over the denominator's lower bound.
    Interval n = eval_interval(a.quot->num, vb), d = eval_interval(a.quot->den, vb);
    Interval r;
    if (d.lo >= 1 && n.hi < kInf) r.hi = std::max<long double>(1, std::floor(n.hi / d.lo));
    return r;
  }
  auto it = vb.find(a.key);
  return it == vb.end() ? Interval{} : it->second;
}

Interval eval_interval(const Dim& d, const std::map<std::string, Interval>& vb) {
  Interval sum{0, 0};
  for (const Term& t : d.terms()) {
    Interval p{1, 1};
    for (const auto& a : t.atoms) {
      Interval x = atom_interval(a, vb);  // all factors are >= 1, so products are monotone
      p = {p.lo * x.lo, p.hi * x.hi};
    }
    long double c = t.coef;
    Interval term = c >= 0 ? Interval{c * p.lo, c * p.hi} : Interval{c * p.hi, c * p.lo};
    if (std::isnan(term.lo)) term.lo = -kInf;
    if (std::isnan(term.hi)) term.hi = kInf;
    sum = {sum.lo + term.lo, sum.hi + term.hi};
  }
  // Beyond 2^62 long double still orders correctly but may not be exact; such
  // bounds are treated as unknown so that rounding can never prove a falsehood.
  const long double kExact = 4.6e18L;
  if (sum.lo < -kExact) sum.lo = -kInf;
  if (sum.hi > kExact) sum.hi = kInf;
  return sum;
}

}  // namespace

bool Facts::divides(const Dim& a, const Dim& b, int depth) const {
  // b must be provably non-zero: `x mod 0` is undefined, never true.
  if (b == Dim() || !(nonneg(b - Dim::constant(1)) || nonneg(Dim::constant(-1) - b))) return false;
  if (a == Dim()) return true;
  if (b == Dim::constant(1) || b == Dim::constant(-1)) return true;
  if (a.is_constant() && b.is_constant()) return b.constant_value() != 0 && a.constant_value() % b.constant_value() == 0;
  if (a == b) return true;
  for (const Pred& f : facts_)
    if (f.op == Pred::Op::kModZero && f.lhs == a && f.rhs == b) return true;
  if (b.terms().size() != 1) return false;
  const Term& bt = b.terms()[0];
  // Every term of a must be divisible by the monomial b.
  for (const Term& t : a.terms()) {
    Term rest;
    if (term_divides(t, bt, &rest)) continue;
    bool ok = false;
    if (depth > 0) {
      for (const Pred& f : facts_) {
        if (f.op != Pred::Op::kModZero || f.lhs.terms().size() != 1) continue;
        Term r;
        if (!term_divides(t, f.lhs.terms()[0], &r)) continue;
        // t = F * r and G | F, so G * r | t; it suffices that b | G * r.
        if (divides(f.rhs * term_dim(r), b, depth - 1)) {
          ok = true;
          break;
        }
      }
    }
    if (!ok) return false;
  }
  return true;
}

bool Facts::nonneg(const Dim& p) const {
  if (p.overflowed()) return false;
  auto vb = var_bounds(facts_);
  if (eval_interval(p, vb).lo >= 0) return true;
  // P >= g >= 0 for a general fact g >= 0.
  for (const Pred& f : facts_) {
    Dim g;
    switch (f.op) {
      case Pred::Op::kGe: g = f.lhs - f.rhs; break;
      case Pred::Op::kGt: g = f.lhs - f.rhs - Dim::constant(1); break;
      case Pred::Op::kLe: g = f.rhs - f.lhs; break;
      case Pred::Op::kLt: g = f.rhs - f.lhs - Dim::constant(1); break;
      case Pred::Op::kEq:
        if (eval_interval(p - (f.lhs - f.rhs), vb).lo >= 0) return true;
        g = f.rhs - f.lhs;
        break;
      default: continue;
    }
    if (eval_interval(p - g, vb).lo >= 0) return true;
  }
  return false;
}

bool Facts::equal(const Dim& a, const Dim& b) const {
  Dim p = a - b;
  if (p.overflowed()) return false;
  if (p == Dim()) return true;
  for (const Pred& f : facts_) {
    if (f.op != Pred::Op::kEq) continue;
    Dim g = f.lhs - f.rhs;
    if (p - g == Dim() || p + g == Dim()) return true;
  }
  return nonneg(p) && nonneg(Dim() - p);
}

bool Facts::prove(const Pred& p) const {
  if (p.lhs.overflowed() || p.rhs.overflowed()) return false;
  const Dim one = Dim::constant(1);
  switch (p.op) {
    case Pred::Op::kModZero: return divides(p.lhs, p.rhs, 2);
    case Pred::Op::kEq: return equal(p.lhs, p.rhs);
    case Pred::Op::kNe: {
      for (const Pred& f : facts_)
        if (f.op == Pred::Op::kNe && ((f.lhs == p.lhs && f.rhs == p.rhs) || (f.lhs == p.rhs && f.rhs == p.lhs)))
          return true;
      return nonneg(p.lhs - p.rhs - one) || nonneg(p.rhs - p.lhs - one);
    }
    case Pred::Op::kLt: return nonneg(p.rhs - p.lhs - one);
    case Pred::Op::kLe: return nonneg(p.rhs - p.lhs);
    case Pred::Op::kGt: return nonneg(p.lhs - p.rhs - one);
    case Pred::Op::kGe: return nonneg(p.lhs - p.rhs);
  }
  return false;
}

}  // namespace mlk

