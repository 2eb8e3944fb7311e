// Symbolic dimensions and the prover, checked against brute-force evaluation
// over small ranges of the variables: every rewrite is checked by evaluating both sides.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "lang/dim.h"
#include "lang/prover.h"

namespace mlk {
namespace {

using Env = std::map<std::string, int64_t>;
const std::vector<std::string> kVars = {"A", "B", "C"};

// A random expression tree, kept as a pair of evaluators: the Dim built by
// canonicalising arithmetic, and a direct evaluation of the tree.
struct Expr {
  Dim dim;
  std::function<std::optional<int64_t>(const Env&)> eval;
  std::string text;
};

Expr leaf(std::mt19937& rng) {
  if (rng() % 3 == 0) {
    int64_t c = static_cast<int64_t>(rng() % 5);
    return {Dim::constant(c), [c](const Env&) { return std::optional<int64_t>(c); }, std::to_string(c)};
  }
  std::string v = kVars[rng() % kVars.size()];
  return {Dim::var(v), [v](const Env& e) { return std::optional<int64_t>(e.at(v)); }, v};
}

Expr random_expr(std::mt19937& rng, int depth, bool with_div) {
  if (depth == 0 || rng() % 4 == 0) return leaf(rng);
  Expr a = random_expr(rng, depth - 1, with_div), b = random_expr(rng, depth - 1, with_div);
  int op = static_cast<int>(rng() % (with_div ? 4 : 3));
  auto fa = a.eval, fb = b.eval;
  switch (op) {
    case 0:
      return {a.dim + b.dim, [=](const Env& e) -> std::optional<int64_t> {
                auto x = fa(e), y = fb(e);
                if (!x || !y) return std::nullopt;
                return *x + *y;
              }, "(" + a.text + " + " + b.text + ")"};
    case 1:
      return {a.dim - b.dim, [=](const Env& e) -> std::optional<int64_t> {
                auto x = fa(e), y = fb(e);
                if (!x || !y) return std::nullopt;
                return *x - *y;
              }, "(" + a.text + " - " + b.text + ")"};
    case 2:
      return {a.dim * b.dim, [=](const Env& e) -> std::optional<int64_t> {
                auto x = fa(e), y = fb(e);
                if (!x || !y) return std::nullopt;
                return *x * *y;
              }, "(" + a.text + " * " + b.text + ")"};
    default: {
      // (a * b) / b: always exact where b != 0, so the tree is defined there.
      Dim num = a.dim * b.dim;
      if (b.dim == Dim()) return a;
      return {Dim::exact_div(num, b.dim), [=](const Env& e) -> std::optional<int64_t> {
                auto x = fa(e), y = fb(e);
                if (!x || !y || *y == 0) return std::nullopt;
                return (*x * *y) / *y;
              }, "((" + a.text + " * " + b.text + ") / " + b.text + ")"};
    }
  }
}

void for_all_points(int hi, const std::function<void(const Env&)>& f) {
  for (int64_t a = 1; a <= hi; ++a)
    for (int64_t b = 1; b <= hi; ++b)
      for (int64_t c = 1; c <= hi; ++c) f({{"A", a}, {"B", b}, {"C", c}});
}

TEST(Dim, CanonicalFormAgreesWithEvaluation) {
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 2000; ++iter) {
    Expr e = random_expr(rng, 4, true);
    ASSERT_FALSE(e.dim.overflowed()) << e.text;
    for_all_points(4, [&](const Env& env) {
      auto want = e.eval(env);
      if (!want) return;
      auto got = e.dim.eval(env);
      ASSERT_TRUE(got.has_value()) << e.text << " canonical " << e.dim.str();
      ASSERT_EQ(*want, *got) << e.text << " canonical " << e.dim.str();
    });
  }
}

TEST(Dim, EqualCanonicalFormsMeanEqualFunctions) {
  std::mt19937 rng(99);
  int equal_pairs = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    Expr a = random_expr(rng, 3, false), b = random_expr(rng, 3, false);
    bool same_everywhere = true;
    for_all_points(5, [&](const Env& env) { same_everywhere = same_everywhere && a.eval(env) == b.eval(env); });
    // Polynomials that agree on a 5x5x5 grid and have degree < 5 per variable
    // are identical, so canonical equality must match exactly.
    EXPECT_EQ(a.dim == b.dim, same_everywhere) << a.text << " vs " << b.text;
    equal_pairs += same_everywhere;
  }
  EXPECT_GT(equal_pairs, 10);  // the generator does produce equal pairs
}

TEST(Dim, QuotientsCancelAndReduce) {
  Dim D = Dim::var("D"), H = Dim::var("H"), B = Dim::var("B"), S = Dim::var("S");
  Dim dh = Dim::exact_div(D, H);
  EXPECT_EQ(dh.str(), "D / H");
  EXPECT_EQ(dh * H, D);
  EXPECT_EQ(B * S * H * dh, B * S * D);
  EXPECT_EQ(Dim::exact_div(Dim::constant(2) * D, Dim::constant(2) * H), dh);
  EXPECT_EQ(Dim::exact_div(D * H, H), D);
  EXPECT_EQ(Dim::exact_div(Dim::constant(6) * S, Dim::constant(3)), Dim::constant(2) * S);
  EXPECT_EQ((S - Dim::constant(1)).str(), "S - 1");
  EXPECT_EQ((Dim::constant(2) * S + Dim::constant(1)).str(), "2*S + 1");
  EXPECT_TRUE(Dim::exact_div(D, Dim()).overflowed());
  Dim big = Dim::constant(INT64_MAX);
  EXPECT_TRUE((big + Dim::constant(1)).overflowed());
  EXPECT_TRUE((big * Dim::constant(2)).overflowed());
}

// A quotient in a denominator is bracketed: A / (B / C) and (A / B) / C
// differ (16 / (4 / 2) = 8, (16 / 4) / 2 = 2), so they must neither print
// nor compare alike (a checked handle's proof is matched by its text).
TEST(Dim, NestedQuotientsPrintAndCompareApart) {
  Dim A = Dim::var("A"), B = Dim::var("B"), C = Dim::var("C"), H = Dim::var("H"), K = Dim::var("K");
  Dim right = Dim::exact_div(A, Dim::exact_div(B, C)), left = Dim::exact_div(Dim::exact_div(A, B), C);
  EXPECT_EQ(right.str(), "A / (B / C)");
  EXPECT_EQ(left.str(), "A / B / C");
  EXPECT_FALSE(right == left);
  const std::map<std::string, int64_t> env = {{"A", 16}, {"B", 4}, {"C", 2}};
  EXPECT_EQ(right.eval(env), 8);
  EXPECT_EQ(left.eval(env), 2);
  EXPECT_EQ(Dim::exact_div(A, H * K).str(), "A / (H*K)");
  EXPECT_EQ((Pred{Pred::Op::kModZero, A, Dim::exact_div(B, C)}).str(), "A mod (B / C) = 0");
}

TEST(Dim, SubstitutionAgreesWithEvaluation) {
  Dim D = Dim::var("D"), H = Dim::var("H");
  Dim t = Dim::exact_div(D, H) * Dim::constant(3) + H;
  Dim s = t.subst({{"H", Dim::constant(8)}, {"D", Dim::constant(64)}});
  ASSERT_TRUE(s.is_constant());
  EXPECT_EQ(s.constant_value(), 3 * 8 + 8);
}

// --- The prover -----------------------------------------------------------------

Pred P(Pred::Op op, Dim a, Dim b) { return {op, std::move(a), std::move(b)}; }

TEST(Prover, SoundAgainstBruteForce) {
  std::mt19937 rng(7);
  Dim A = Dim::var("A"), B = Dim::var("B"), C = Dim::var("C");
  const std::vector<std::vector<Pred>> fact_sets = {
      {},
      {P(Pred::Op::kModZero, A, B)},
      {P(Pred::Op::kGe, A, Dim::constant(3)), P(Pred::Op::kLe, B, Dim::constant(2))},
      {P(Pred::Op::kEq, A, Dim::constant(2) * C)},
      {P(Pred::Op::kModZero, A, Dim::constant(2) * C), P(Pred::Op::kLt, B, A)},
      {P(Pred::Op::kGt, A + B, C * C)},
  };
  const Pred::Op ops[] = {Pred::Op::kModZero, Pred::Op::kEq, Pred::Op::kNe, Pred::Op::kLt,
                          Pred::Op::kLe,      Pred::Op::kGt, Pred::Op::kGe};
  int proven = 0;
  for (const auto& facts_list : fact_sets) {
    Facts facts;
    for (const auto& f : facts_list) facts.add(f);
    for (int iter = 0; iter < 1500; ++iter) {
      Pred goal = P(ops[rng() % 7], random_expr(rng, 2, false).dim, random_expr(rng, 2, false).dim);
      if (!facts.prove(goal)) continue;
      ++proven;
      for_all_points(6, [&](const Env& env) {
        for (const auto& f : facts_list)
          if (f.eval(env) != std::optional<bool>(true)) return;  // point outside the facts
        auto holds = goal.eval(env);
        ASSERT_TRUE(holds.has_value() && *holds) << "proved " << goal.str() << " but it fails at A=" << env.at("A")
                                                 << " B=" << env.at("B") << " C=" << env.at("C");
      });
    }
  }
  EXPECT_GT(proven, 500);  // the check above is not vacuous
}

TEST(Prover, ProvesWhatTheExamplesNeed) {
  Dim B = Dim::var("B"), S = Dim::var("S"), D = Dim::var("D"), H = Dim::var("H"), E = Dim::var("E");
  Dim one = Dim::constant(1);
  Facts f;
  f.add(P(Pred::Op::kModZero, D, H));
  f.add(P(Pred::Op::kGe, S, Dim::constant(2)));
  f.add(P(Pred::Op::kLe, E, S));
  EXPECT_TRUE(f.prove(P(Pred::Op::kModZero, D, H)));
  EXPECT_TRUE(f.prove(P(Pred::Op::kModZero, Dim::constant(2) * D, H)));
  EXPECT_TRUE(f.prove(P(Pred::Op::kModZero, D * S, H)));
  EXPECT_TRUE(f.prove(P(Pred::Op::kModZero, Dim::constant(8) * E, Dim::constant(4))));
  EXPECT_TRUE(f.prove(P(Pred::Op::kEq, B * S * H * Dim::exact_div(D, H), B * S * D)));
  EXPECT_TRUE(f.prove(P(Pred::Op::kGe, S - one, one)));
  EXPECT_TRUE(f.prove(P(Pred::Op::kLe, E, S)));
  EXPECT_TRUE(f.prove(P(Pred::Op::kLe, E + one, S + one)));
  EXPECT_TRUE(f.prove(P(Pred::Op::kGe, Dim::exact_div(D, H), one)));
  // And what must stay unproven.
  EXPECT_FALSE(f.prove(P(Pred::Op::kModZero, D, Dim::constant(2))));
  EXPECT_FALSE(f.prove(P(Pred::Op::kModZero, H, D)));
  EXPECT_FALSE(f.prove(P(Pred::Op::kGe, S - Dim::constant(2), one)));
  EXPECT_FALSE(f.prove(P(Pred::Op::kEq, D, H)));
  EXPECT_FALSE(f.prove(P(Pred::Op::kLt, E, S)));
}

TEST(Prover, PredicateText) {
  Dim D = Dim::var("D"), H = Dim::var("H");
  EXPECT_EQ(P(Pred::Op::kModZero, D, H).str(), "D mod H = 0");
  EXPECT_EQ(P(Pred::Op::kModZero, D + H, H).str(), "(D + H) mod H = 0");
  EXPECT_EQ(P(Pred::Op::kLe, D, Dim::constant(4096)).str(), "D <= 4096");
}

}  // namespace
}  // namespace mlk
