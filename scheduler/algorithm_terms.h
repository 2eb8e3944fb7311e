// Symbolic terms: the value of each output element of a fn at one small
// concrete shape, as an expression over the input elements. Made two ways and
// compared by `mlk verify`'s bounded-equivalence level: from the lowered
// Halide algorithm (evaluate_algorithm, here: Halide IR walked, every index
// computed concretely) and from the typed IR (verify/ir_terms.h).
//
// Semantics are real-number semantics: float values are reals (a cast between
// float types is the identity, so rounding is not modelled), integers are
// bit-vectors of their width (two's complement), Bool is a truth value; exp,
// log, sqrt, tanh and pow are uninterpreted functions. Halide-free.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "lang/bind.h"
#include "lang/ir.h"

namespace mlk::sym {

enum class Sort { kReal, kInt, kBool };

enum class TOp {
  kInput,     // name = parameter, index = flat row-major element
  kConst,     // real: `real`; int: `integer`; bool: integer != 0
  kAdd, kSub, kMul, kDiv,  // ints: Halide's Euclidean division (x / 0 = 0)
  kMod,       // ints: Euclidean remainder (x % 0 = 0)
  kFloorDiv,  // ints: rounds toward negative infinity (x / 0 = 0): .tl's division
  kNeg, kMin, kMax,
  kSelect,    // args: condition, then, else
  kEq, kNe, kLt, kLe, kAnd, kOr, kNot,
  kCall,      // name: "exp", "log", "sqrt", "tanh", "pow" (uninterpreted)
  kToReal,    // an integer as a real (signed by the argument's signedness)
  kIntCast,   // an integer to `bits` (sign- or zero-extended, or truncated)
};

struct Term;
using TermRef = std::shared_ptr<const Term>;

struct Term {
  TOp op;
  Sort sort;
  int bits = 0;          // kInt: the width
  bool is_signed = true; // kInt
  std::string name;
  int64_t index = 0;
  double real = 0;
  int64_t integer = 0;
  std::vector<TermRef> args;
};

// Builders; integer constants are folded, so concrete index arithmetic never
// reaches the solver, and max(x, -inf) / min(x, +inf) fold to x.
TermRef input(const std::string& name, int64_t index, Sort s, int bits, bool is_signed);
TermRef real_const(double v);
TermRef int_const(int64_t v, int bits, bool is_signed);
TermRef bool_const(bool v);
TermRef make(TOp op, std::vector<TermRef> args, const std::string& name = "");
TermRef int_cast(TermRef a, int bits, bool is_signed);
// Whether `t` is a constant (and its value as an integer: bools 0/1).
bool is_const(const TermRef& t);
int64_t const_int(const TermRef& t);
// Short text for reports ("(x[0] * y[1]) + ..."), cut after `max_chars`.
std::string term_str(const TermRef& t, size_t max_chars = 200);

// The output of fn `fn` of `m`, lowered as lower::lower_function does, at
// `dims` (every dimension variable): one term per element, row-major.
// Unsupported names what is not modelled (a data-dependent index, a
// float-to-integer cast, an intrinsic); InvalidArgument names an element the
// algorithm reads outside its input's shape.
struct EvaluatedAlgorithm {
  std::vector<int64_t> shape;
  std::vector<TermRef> elements;
};
Expected<EvaluatedAlgorithm> evaluate_algorithm(const ir::Module& m, const std::string& fn, const DimEnv& dims,
                                               const std::string& halide_target = "");

}  // namespace mlk::sym
