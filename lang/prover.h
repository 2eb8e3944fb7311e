// Decides refinements over symbolic dimensions from the facts in scope.
//
// Facts are the refinements of a function's parameters (plus the standing fact
// that every dimension variable is at least 1). prove() is sound and
// incomplete: true means the predicate holds for every assignment of the
// variables that satisfies the facts; false means "not proven", and the
// checker reports the predicate as a missing fact. The procedures:
//   - A mod B = 0: constants; B dividing every term of A as a monomial; a fact
//     F mod G = 0 with F dividing a term t and B dividing G * (t / F).
//   - comparisons: A - B bounded by interval arithmetic over variable bounds
//     taken from facts `V op c`, optionally after subtracting one general fact.
//   - equality: canonical equality, or an equality fact.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lang/dim.h"

namespace mlk {

struct Pred {
  enum class Op { kModZero, kEq, kNe, kLt, kLe, kGt, kGe };
  Op op = Op::kEq;
  Dim lhs, rhs;
  std::string str() const;  // "D mod H = 0", "S <= 4096"
  Pred subst(const std::map<std::string, Dim>& m) const { return {op, lhs.subst(m), rhs.subst(m)}; }
  // Truth under a complete assignment; nullopt when a side cannot be evaluated.
  std::optional<bool> eval(const std::map<std::string, int64_t>& env) const;
};

class Facts {
 public:
  void add(const Pred& p) { facts_.push_back(p); }
  const std::vector<Pred>& all() const { return facts_; }
  bool prove(const Pred& p) const;

 private:
  bool divides(const Dim& a, const Dim& b, int depth) const;  // b | a
  bool nonneg(const Dim& p) const;                            // p >= 0
  bool equal(const Dim& a, const Dim& b) const;
  std::vector<Pred> facts_;
};

}  // namespace mlk
