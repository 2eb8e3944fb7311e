#include "lang/dim.h"

#include <algorithm>
#include <numeric>

namespace mlk {
namespace {

using Term = Dim::Term;
using Atom = Dim::Atom;

bool add_ovf(int64_t a, int64_t b, int64_t* r) { return __builtin_add_overflow(a, b, r); }
bool mul_ovf(int64_t a, int64_t b, int64_t* r) { return __builtin_mul_overflow(a, b, r); }

bool atoms_less(const std::vector<Atom>& a, const std::vector<Atom>& b) {
  // Higher degree first, then lexicographic: the order terms are printed in.
  if (a.size() != b.size()) return a.size() > b.size();
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
}

// Removes the atoms of `sub` (a sub-multiset) from `from`; false if not contained.
bool remove_atoms(std::vector<Atom> from, const std::vector<Atom>& sub, std::vector<Atom>* out) {
  for (const Atom& s : sub) {
    auto it = std::find(from.begin(), from.end(), s);
    if (it == from.end()) return false;
    from.erase(it);
  }
  *out = std::move(from);
  return true;
}

std::vector<Atom> common_atoms(const std::vector<Atom>& a, const std::vector<Atom>& b) {
  std::vector<Atom> out;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

int64_t gcd64(int64_t a, int64_t b) {
  if (a == INT64_MIN || b == INT64_MIN) return 1;
  return std::gcd(a < 0 ? -a : a, b < 0 ? -b : b);
}

std::string term_str(const Term& t, bool abs_coef) {
  int64_t c = abs_coef && t.coef < 0 ? -t.coef : t.coef;
  if (t.atoms.empty()) return std::to_string(c);
  std::string s = c == 1 ? "" : c == -1 ? "-" : std::to_string(c) + "*";
  bool lone = t.atoms.size() == 1 && (c == 1 || c == -1);
  for (size_t i = 0; i < t.atoms.size(); ++i) {
    if (i) s += "*";
    const Atom& a = t.atoms[i];
    s += (a.quot && !lone) ? "(" + a.key + ")" : a.key;
  }
  return s;
}

}  // namespace

Dim Dim::constant(int64_t v) {
  Dim d;
  if (v != 0) d.terms_.push_back({v, {}});
  return d;
}

Dim Dim::var(const std::string& name) {
  Dim d;
  d.terms_.push_back({1, {Atom{name, nullptr}}});
  return d;
}

Dim Dim::overflow() {
  Dim d;
  d.overflow_ = true;
  return d;
}

Dim Dim::from_terms(std::vector<Term> terms, bool overflowed) {
  Dim d;
  d.overflow_ = overflowed;
  if (overflowed) return d;
  for (auto& t : terms) std::sort(t.atoms.begin(), t.atoms.end());
  std::sort(terms.begin(), terms.end(), [](const Term& a, const Term& b) { return atoms_less(a.atoms, b.atoms); });
  for (auto& t : terms) {
    if (!d.terms_.empty() && d.terms_.back().atoms == t.atoms) {
      if (add_ovf(d.terms_.back().coef, t.coef, &d.terms_.back().coef)) return overflow();
    } else {
      d.terms_.push_back(std::move(t));
    }
  }
  d.terms_.erase(std::remove_if(d.terms_.begin(), d.terms_.end(), [](const Term& t) { return t.coef == 0; }),
                 d.terms_.end());
  return d;
}

Dim operator+(const Dim& a, const Dim& b) {
  std::vector<Term> t = a.terms_;
  t.insert(t.end(), b.terms_.begin(), b.terms_.end());
  return Dim::from_terms(std::move(t), a.overflow_ || b.overflow_);
}

Dim operator-(const Dim& a, const Dim& b) {
  std::vector<Term> t = a.terms_;
  for (Term x : b.terms_) {
    if (x.coef == INT64_MIN) return Dim::overflow();
    x.coef = -x.coef;
    t.push_back(std::move(x));
  }
  return Dim::from_terms(std::move(t), a.overflow_ || b.overflow_);
}

namespace {

// Multiplies two terms, cancelling a quotient atom N / D against the rest of
// the product when D (a single term) divides it: c*D*r * (N / D) = c*r*N.
Dim mul_terms(const Term& a, const Term& b) {
  Term t;
  if (mul_ovf(a.coef, b.coef, &t.coef)) return Dim::overflow();
  t.atoms = a.atoms;
  t.atoms.insert(t.atoms.end(), b.atoms.begin(), b.atoms.end());
  std::sort(t.atoms.begin(), t.atoms.end());
  for (size_t i = 0; i < t.atoms.size(); ++i) {
    const auto& q = t.atoms[i].quot;
    if (!q || q->den.terms().size() != 1) continue;
    const Term& den = q->den.terms()[0];
    if (den.coef == 0 || t.coef % den.coef != 0) continue;
    std::vector<Atom> rest = t.atoms;
    rest.erase(rest.begin() + static_cast<long>(i));
    std::vector<Atom> left;
    if (!remove_atoms(rest, den.atoms, &left)) continue;
    Dim factor = Dim::from_terms({Term{t.coef / den.coef, left}}, false);
    return factor * q->num;
  }
  return Dim::from_terms({std::move(t)}, false);
}

}  // namespace

Dim operator*(const Dim& a, const Dim& b) {
  if (a.overflow_ || b.overflow_) return Dim::overflow();
  Dim sum;
  for (const Term& x : a.terms_)
    for (const Term& y : b.terms_) sum = sum + mul_terms(x, y);
  return sum;
}

Dim Dim::exact_div(const Dim& num, const Dim& den) {
  if (num.overflow_ || den.overflow_ || den.terms_.empty()) return overflow();
  if (num.terms_.empty()) return Dim();
  // Divide both by their common content: the gcd of all coefficients and the
  // atoms every term shares.
  int64_t g = 0;
  std::vector<Atom> common = num.terms_[0].atoms;
  for (const Dim* d : {&num, &den})
    for (const Term& t : d->terms_) {
      g = gcd64(g, t.coef);
      common = common_atoms(common, t.atoms);
    }
  if (den.terms_.size() == 1 && den.terms_[0].coef < 0) g = -g;  // keep a single-term denominator positive
  if (g == 0) g = 1;
  auto reduce = [&](const Dim& d) {
    std::vector<Term> out;
    for (const Term& t : d.terms_) {
      Term r{t.coef / g, {}};
      bool ok = remove_atoms(t.atoms, common, &r.atoms);
      (void)ok;
      out.push_back(std::move(r));
    }
    return from_terms(std::move(out), false);
  };
  Dim n = reduce(num), d = reduce(den);
  if (d == constant(1)) return n;
  if (n == d) return constant(1);
  // A single-term denominator divides the numerator term by term?
  if (d.terms_.size() == 1) {
    const Term& dt = d.terms_[0];
    std::vector<Term> out;
    bool all = true;
    for (const Term& t : n.terms_) {
      Term r;
      if (t.coef % dt.coef != 0 || !remove_atoms(t.atoms, dt.atoms, &r.atoms)) {
        all = false;
        break;
      }
      r.coef = t.coef / dt.coef;
      out.push_back(std::move(r));
    }
    if (all) return from_terms(std::move(out), false);
  } else if (n.terms_.size() == d.terms_.size() && n.terms_[0].atoms == d.terms_[0].atoms &&
             d.terms_[0].coef != 0 && n.terms_[0].coef % d.terms_[0].coef == 0) {
    // numerator = k * denominator for a constant k?
    Dim k = constant(n.terms_[0].coef / d.terms_[0].coef);
    if (n - k * d == Dim()) return k;
  }
  auto q = std::make_shared<Quot>(Quot{n, d});
  std::string nk = n.terms_.size() > 1 ? "(" + n.str() + ")" : n.str();
  // The denominator is bracketed unless it is a constant or one variable:
  // `A / (B / C)` and `(A / B) / C` must not print (nor key their atom) alike.
  std::string dk = d.is_atomic() ? d.str() : "(" + d.str() + ")";
  Dim out;
  out.terms_.push_back({1, {Atom{nk + " / " + dk, q}}});
  return out;
}

bool Dim::operator==(const Dim& o) const {
  if (overflow_ || o.overflow_) return false;
  if (terms_.size() != o.terms_.size()) return false;
  for (size_t i = 0; i < terms_.size(); ++i)
    if (terms_[i].coef != o.terms_[i].coef || terms_[i].atoms != o.terms_[i].atoms) return false;
  return true;
}

std::string Dim::str() const {
  if (overflow_) return "<overflow>";
  if (terms_.empty()) return "0";
  std::string s;
  for (size_t i = 0; i < terms_.size(); ++i) {
    const Term& t = terms_[i];
    if (i == 0) {
      s += term_str(t, false);
    } else {
      s += t.coef < 0 ? " - " : " + ";
      s += term_str(t, true);
    }
  }
  return s;
}

std::optional<int64_t> Dim::eval(const std::map<std::string, int64_t>& env) const {
  if (overflow_) return std::nullopt;
  int64_t sum = 0;
  for (const Term& t : terms_) {
    int64_t p = t.coef;
    for (const Atom& a : t.atoms) {
      int64_t v;
      if (a.quot) {
        auto n = a.quot->num.eval(env), d = a.quot->den.eval(env);
        if (!n || !d || *d == 0 || *n % *d != 0) return std::nullopt;
        v = *n / *d;
      } else {
        auto it = env.find(a.key);
        if (it == env.end()) return std::nullopt;
        v = it->second;
      }
      if (mul_ovf(p, v, &p)) return std::nullopt;
    }
    if (add_ovf(sum, p, &sum)) return std::nullopt;
  }
  return sum;
}

Dim Dim::subst(const std::map<std::string, Dim>& m) const {
  if (overflow_) return *this;
  Dim sum;
  for (const Term& t : terms_) {
    Dim p = constant(t.coef);
    for (const Atom& a : t.atoms) {
      if (a.quot) {
        p = p * exact_div(a.quot->num.subst(m), a.quot->den.subst(m));
      } else {
        auto it = m.find(a.key);
        p = p * (it == m.end() ? var(a.key) : it->second);
      }
    }
    sum = sum + p;
  }
  return sum;
}

void Dim::collect_vars(std::set<std::string>& out) const {
  for (const Term& t : terms_)
    for (const Atom& a : t.atoms) {
      if (a.quot) {
        a.quot->num.collect_vars(out);
        a.quot->den.collect_vars(out);
      } else {
        out.insert(a.key);
      }
    }
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + s[i].str();
  return out + "]";
}

Dim element_count(const Shape& s) {
  Dim p = Dim::constant(1);
  for (const Dim& d : s) p = p * d;
  return p;
}

}  // namespace mlk
