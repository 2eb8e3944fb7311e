// The term builders of scheduler/algorithm_terms.h (Halide-free): integer
// constants fold, so that index arithmetic stays concrete.
#include <cmath>
#include <cstdio>

#include "scheduler/algorithm_terms.h"

namespace mlk::sym {

namespace {

int64_t wrap(int64_t v, int bits, bool is_signed) {
  if (bits >= 64) return v;
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  uint64_t u = static_cast<uint64_t>(v) & mask;
  if (is_signed && (u >> (bits - 1)) & 1) u |= ~mask;
  return static_cast<int64_t>(u);
}

TermRef mk(Term t) { return std::make_shared<const Term>(std::move(t)); }

int64_t euclid_div(int64_t a, int64_t b) {
  if (b == 0) return 0;
  int64_t q = a / b, r = a % b;
  if (r < 0) q = b > 0 ? q - 1 : q + 1;
  return q;
}
int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) return 0;
  int64_t q = a / b, r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) --q;
  return q;
}

// Folds an integer or bool op whose operands are all constants; null if not.
TermRef fold(TOp op, const std::vector<TermRef>& a) {
  for (const auto& x : a)
    if (!is_const(x) || x->sort == Sort::kReal) return nullptr;
  if (op == TOp::kSelect) return const_int(a[0]) ? a[1] : a[2];
  const int64_t x = const_int(a[0]), y = a.size() > 1 ? const_int(a[1]) : 0;
  const int bits = a[0]->bits;
  const bool sg = a[0]->is_signed;
  auto num = [&](int64_t v) { return int_const(v, bits, sg); };
  auto cmp_lt = [&](int64_t p, int64_t q) {
    return sg ? p < q : static_cast<uint64_t>(p) < static_cast<uint64_t>(q);
  };
  switch (op) {
    case TOp::kAdd: return num(x + y);
    case TOp::kSub: return num(x - y);
    case TOp::kMul: return num(x * y);
    case TOp::kDiv: return num(euclid_div(x, y));
    case TOp::kMod: return num(y == 0 ? 0 : x - euclid_div(x, y) * y);
    case TOp::kFloorDiv: return num(floor_div(x, y));
    case TOp::kNeg: return num(-x);
    case TOp::kMin: return cmp_lt(y, x) ? a[1] : a[0];
    case TOp::kMax: return cmp_lt(x, y) ? a[1] : a[0];
    case TOp::kEq: return bool_const(x == y);
    case TOp::kNe: return bool_const(x != y);
    case TOp::kLt: return bool_const(cmp_lt(x, y));
    case TOp::kLe: return bool_const(!cmp_lt(y, x));
    case TOp::kAnd: return bool_const(x && y);
    case TOp::kOr: return bool_const(x || y);
    case TOp::kNot: return bool_const(!x);
    default: return nullptr;
  }
}

bool is_inf(const TermRef& t, int sign) {
  return t->op == TOp::kConst && t->sort == Sort::kReal && std::isinf(t->real) && (t->real > 0) == (sign > 0);
}

}  // namespace

TermRef input(const std::string& name, int64_t index, Sort s, int bits, bool is_signed) {
  return mk({.op = TOp::kInput, .sort = s, .bits = bits, .is_signed = is_signed, .name = name, .index = index});
}
TermRef real_const(double v) { return mk({.op = TOp::kConst, .sort = Sort::kReal, .real = v}); }
TermRef int_const(int64_t v, int bits, bool is_signed) {
  return mk({.op = TOp::kConst, .sort = Sort::kInt, .bits = bits, .is_signed = is_signed, .integer = wrap(v, bits, is_signed)});
}
TermRef bool_const(bool v) { return mk({.op = TOp::kConst, .sort = Sort::kBool, .integer = v ? 1 : 0}); }

bool is_const(const TermRef& t) { return t->op == TOp::kConst; }
int64_t const_int(const TermRef& t) { return t->integer; }

TermRef make(TOp op, std::vector<TermRef> args, const std::string& name) {
  if (TermRef f = fold(op, args)) return f;
  if (op == TOp::kToReal && is_const(args[0]))
    return real_const(args[0]->is_signed ? static_cast<double>(args[0]->integer)
                                         : static_cast<double>(static_cast<uint64_t>(args[0]->integer)));
  if (op == TOp::kMax && is_inf(args[0], -1)) return args[1];
  if (op == TOp::kMax && is_inf(args[1], -1)) return args[0];
  if (op == TOp::kMin && is_inf(args[0], 1)) return args[1];
  if (op == TOp::kMin && is_inf(args[1], 1)) return args[0];
  Term t{.op = op, .sort = Sort::kReal, .name = name};
  switch (op) {
    case TOp::kEq: case TOp::kNe: case TOp::kLt: case TOp::kLe: case TOp::kAnd: case TOp::kOr: case TOp::kNot:
      t.sort = Sort::kBool;
      break;
    case TOp::kSelect:
      t.sort = args[1]->sort, t.bits = args[1]->bits, t.is_signed = args[1]->is_signed;
      break;
    case TOp::kToReal: t.sort = Sort::kReal; break;
    case TOp::kCall: t.sort = Sort::kReal; break;
    default:
      t.sort = args[0]->sort, t.bits = args[0]->bits, t.is_signed = args[0]->is_signed;
  }
  t.args = std::move(args);
  return mk(std::move(t));
}

TermRef int_cast(TermRef a, int bits, bool is_signed) {
  if (is_const(a)) return int_const(const_int(a), bits, is_signed);
  if (a->bits == bits && a->is_signed == is_signed) return a;
  return mk({.op = TOp::kIntCast, .sort = Sort::kInt, .bits = bits, .is_signed = is_signed, .args = {std::move(a)}});
}

std::string term_str(const TermRef& t, size_t max_chars) {
  static const char* kOps[] = {"input", "const", "+", "-", "*", "/", "%", "floordiv", "neg", "min", "max", "select",
                               "==", "!=", "<", "<=", "&&", "||", "!", "call", "to_real", "int_cast"};
  std::string s;
  if (t->op == TOp::kInput) {
    s = t->name + "[" + std::to_string(t->index) + "]";
  } else if (t->op == TOp::kConst) {
    char b[40];
    if (t->sort == Sort::kReal) std::snprintf(b, sizeof b, "%.9g", t->real);
    else std::snprintf(b, sizeof b, "%lld", static_cast<long long>(t->integer));
    s = b;
  } else if (t->args.size() == 2 && t->op != TOp::kCall && t->op != TOp::kMin && t->op != TOp::kMax &&
             t->op != TOp::kFloorDiv) {
    s = "(" + term_str(t->args[0], max_chars) + " " + kOps[static_cast<int>(t->op)] + " " + term_str(t->args[1], max_chars) + ")";
  } else {
    s = t->op == TOp::kCall ? t->name : kOps[static_cast<int>(t->op)];
    s += "(";
    for (size_t i = 0; i < t->args.size() && s.size() < max_chars; ++i) s += (i ? ", " : "") + term_str(t->args[i], max_chars);
    s += ")";
  }
  if (s.size() > max_chars) s = s.substr(0, max_chars) + "...";
  return s;
}

}  // namespace mlk::sym
