// Symbolic dimensions in canonical form.
//
// A Dim is a polynomial with int64 coefficients over atoms, where an atom is a
// dimension variable or an exact quotient N / D of two Dims that could not be
// simplified. Every Dim is kept canonical (terms merged and sorted, zero terms
// dropped, quotients reduced by their common content, and `H * (D / H)`
// cancelled to `D`), so two Dims are equal as polynomials iff operator== says
// so. Dims are immutable values; arithmetic that overflows int64 or divides by
// zero yields a Dim with overflowed() set, which the checker reports.
//
// exact_div() does not decide divisibility: the caller proves `N mod D = 0`
// (lang/prover.h) before forming N / D.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace mlk {

class Dim {
 public:
  struct Quot;
  struct Atom {
    std::string key;                    // the variable name, or the quotient's text
    std::shared_ptr<const Quot> quot;   // non-null for a quotient atom
    bool operator<(const Atom& o) const { return key < o.key; }
    bool operator==(const Atom& o) const { return key == o.key; }
  };
  struct Term {
    int64_t coef = 0;
    std::vector<Atom> atoms;  // sorted by key, with repetition for powers
  };

  Dim() = default;  // the constant 0
  static Dim constant(int64_t v);
  static Dim var(const std::string& name);
  static Dim overflow();

  friend Dim operator+(const Dim& a, const Dim& b);
  friend Dim operator-(const Dim& a, const Dim& b);
  friend Dim operator*(const Dim& a, const Dim& b);
  static Dim exact_div(const Dim& num, const Dim& den);

  bool operator==(const Dim& o) const;
  bool operator!=(const Dim& o) const { return !(*this == o); }

  bool is_constant() const { return !overflow_ && (terms_.empty() || (terms_.size() == 1 && terms_[0].atoms.empty())); }
  // A constant or one variable: printed, it needs no brackets as an operand
  // of `/` or `mod` (a product or quotient does: `D / (H * K)`).
  bool is_atomic() const {
    return is_constant() || (!overflow_ && terms_.size() == 1 && terms_[0].coef == 1 && terms_[0].atoms.size() == 1 &&
                             !terms_[0].atoms[0].quot);
  }
  int64_t constant_value() const { return terms_.empty() ? 0 : terms_[0].coef; }
  bool overflowed() const { return overflow_; }
  const std::vector<Term>& terms() const { return terms_; }

  // Human and canonical text: `B*S*D`, `D / H`, `2*N + 1`, `S - 1`.
  std::string str() const;
  // Value under a complete assignment; nullopt when a variable is missing, a
  // quotient is not exact, or arithmetic overflows.
  std::optional<int64_t> eval(const std::map<std::string, int64_t>& env) const;
  // Replaces variables by Dims (absent variables stay).
  Dim subst(const std::map<std::string, Dim>& m) const;
  // The variables it mentions, quotients included.
  void collect_vars(std::set<std::string>& out) const;

  // Canonicalises a list of terms (for dim.cpp's helpers; not for general use).
  static Dim from_terms(std::vector<Term> terms, bool overflowed);

 private:
  std::vector<Term> terms_;
  bool overflow_ = false;
};

struct Dim::Quot {
  Dim num, den;
};

using Shape = std::vector<Dim>;
std::string shape_str(const Shape& s);  // "[B, S, D / H]"
// Product of all extents (the element count).
Dim element_count(const Shape& s);

}  // namespace mlk
