// The error-envelope level: the artifact against the reference interpreter
// on random and adversarial inputs. Where the program is a sum of products of
// its inputs (only + * matmul sum mean, views, max/relu and non-negative
// literals), each element gets Higham's bound, valid for any summation
// order: |y - y_ref| <= 2 gamma_n (f(|x|))_i + ulp(y_ref) + n * min_normal,
// with gamma_n = n u / (1 - n u), n the reduction lengths plus the op count,
// and f(|x|) the program run on the inputs' magnitudes (for a dot product,
// |A||B|). Elsewhere the numerics policy's envelope (runtime/testing.h).
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <set>

#include "lang/compare.h"
#include "lang/interpreter.h"
#include "runtime/testing.h"
#include "verify/levels.h"

namespace mlk::verify {

namespace {

// Whether |f(x)| <= f(|x|) holds op by op, and the sizes of the bound.
struct Shape_ {
  bool monotone = true;
  std::string why;       // the first op that is not
  int64_t reductions = 0;  // the sum of every reduction's length
  int64_t ops = 0;
};

void walk(const ir::Module& m, const ir::NodeRef& n, const DimEnv& dims, std::set<const ir::Node*>& seen, Shape_& s) {
  if (!seen.insert(n.get()).second) return;
  ++s.ops;
  using ir::Op;
  static const std::set<Op> kOk = {Op::kParam, Op::kAdd, Op::kMul, Op::kMatmul, Op::kSum, Op::kMean, Op::kBroadcast,
                                   Op::kTranspose, Op::kReshape, Op::kSlice, Op::kConcat, Op::kRepeatInterleave,
                                   Op::kCall, Op::kCast, Op::kRelu, Op::kMax, Op::kReduceMax, Op::kLiteral, Op::kFull};
  if (s.monotone && (!kOk.count(n->op) || ((n->op == Op::kLiteral || n->op == Op::kFull) && n->literal.starts_with("-")) ||
                     (n->op == Op::kCast && (!is_float(n->type.dtype) || !is_float(n->operands[0]->type.dtype))))) {
    s.monotone = false;
    s.why = ir::op_name(n->op);
  }
  if (n->op == Op::kSum || n->op == Op::kMean)
    for (int64_t ax : n->ints) s.reductions += n->operands[0]->type.shape[ax].eval(dims).value_or(1);
  if (n->op == Op::kMatmul) s.reductions += n->operands[0]->type.shape.back().eval(dims).value_or(1);
  for (const auto& o : n->operands) walk(m, o, dims, seen, s);
  if (n->op == Op::kCall)
    if (const ir::Function* callee = m.find(n->callee)) {
      DimEnv inner;
      for (size_t i = 0; i < callee->dim_vars.size() && i < n->dims.size(); ++i)
        if (auto v = n->dims[i].eval(dims)) inner[callee->dim_vars[i]] = *v;
      walk(m, callee->body, inner, seen, s);
    }
}

double unit_roundoff(DType t) {
  switch (t) {
    case DType::F16: return std::ldexp(1.0, -11);
    case DType::BF16: return std::ldexp(1.0, -8);
    case DType::F32: return std::ldexp(1.0, -24);
    default: return std::ldexp(1.0, -53);
  }
}

bool same_special(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return false;
}

struct Worst {
  double ratio = -1, err = 0, bound = 0, got = 0, want = 0;
  int64_t at = -1;
  std::string set;
  std::vector<int64_t> shape;
};

}  // namespace

LevelReport check_envelope(const Context& c) {
  LevelReport r;
  r.checked = "the artifact's results against the F64 reference interpreter (rounded per op as docs/numerics.md says) "
              "on random and adversarial inputs, element by element";
  if (c.profile.is_gpu()) {
    r.not_run = "CUDA artifacts are not run by `mlk verify` on this machine (it runs CPU code only)";
    return r;
  }
  const DType dt = c.f.result_type.dtype;
  Shape_ sh;
  std::set<const ir::Node*> seen;
  walk(c.m, c.f.body, c.dims, seen, sh);
  const bool exact = !is_float(dt);
  const bool higham = sh.monotone && !exact;
  auto env = rt::envelope_of(c.m, c.f, c.dims);
  if (!env.ok()) {
    r.counterexample = env.status().message();
    return r;
  }
  const double u_acc = dt == DType::F64 ? std::ldexp(1.0, -53) : std::ldexp(1.0, -24);
  const double n = static_cast<double>(sh.reductions + sh.ops);
  const double e = n * u_acc + static_cast<double>(sh.ops) * unit_roundoff(dt);
  const double gamma = e / (1 - e);
  const double floor = n * (dt == DType::F64 ? std::numeric_limits<double>::min() : std::numeric_limits<float>::min());
  if (exact) r.guarantee = "on every input tested, each element equals the reference exactly (integer results)";
  else if (higham)
    r.guarantee = "on every input tested, each element is within an error bound that holds for any summation order "
                  "(so any correct schedule meets it); nothing is claimed for inputs not tested";
  else
    r.guarantee = "on every input tested, each element is within the numerics policy's envelope (atol + rtol |y_ref|, "
                  "docs/numerics.md), which is calibrated, not derived for every order; nothing is claimed for inputs "
                  "not tested";
  // Sets whose values cancel or are huge only where the bound is order-independent.
  std::vector<std::string> sets = {"random", "subnormal", "ties"};
  if (higham || exact) sets = input_set_names();
  std::vector<std::vector<HostTensor>> inputs;
  std::vector<HostTensor> wants, mags;
  for (const std::string& set : sets) {
    auto in = make_inputs(c.f, c.dims, set, env->reduction_length, c.seed);
    if (!in.ok()) {
      r.counterexample = in.status().message();
      return r;
    }
    auto want = interpret(c.m, c.fn, *in, c.dims);
    if (!want.ok()) {
      r.counterexample = "the reference rejects the " + set + " inputs: " + want.status().message();
      return r;
    }
    HostTensor mag;
    if (higham) {
      std::vector<HostTensor> abs_in = *in;
      for (auto& t : abs_in)
        for (int64_t i = 0; i < t.numel(); ++i) t.set(i, std::fabs(t.get(i)));
      auto m = interpret(c.m, c.fn, abs_in, c.dims);
      if (!m.ok()) {
        r.counterexample = m.status().message();
        return r;
      }
      mag = *m;
    }
    inputs.push_back(std::move(*in));
    wants.push_back(std::move(*want));
    mags.push_back(std::move(mag));
  }
  // The artifact's results, computed where c.isolate says (verify/isolated.cpp).
  auto gots = artifact_outputs(c, inputs, wants);
  if (!gots.ok()) {
    r.counterexample = gots.status().message();
    return r;
  }
  Worst w;
  int64_t elements = 0;
  for (size_t s = 0; s < sets.size(); ++s) {
    const HostTensor *got = &(*gots)[s], *want = &wants[s];
    const HostTensor& mag = mags[s];
    const std::string& set = sets[s];
    for (int64_t i = 0; i < want->numel(); ++i, ++elements) {
      const double y = got->get(i), yr = want->get(i);
      if (same_special(y, yr)) continue;
      const double err = std::isfinite(y) && std::isfinite(yr) ? std::fabs(y - yr) : INFINITY;
      double bound = 0;
      if (higham) bound = 2 * gamma * std::fabs(mag.get(i)) + unit_roundoff(dt) * std::fabs(yr) + floor;
      else if (!exact) bound = env->atol + env->rtol * std::fabs(yr);
      const double ratio = bound > 0 ? err / bound : (err > 0 ? INFINITY : 0);
      if (ratio > w.ratio) w = {ratio, err, bound, y, yr, i, set, want->shape};
    }
  }
  char line[400];
  std::string where = w.at >= 0 ? "element " + multi_index_str(w.shape, w.at) : "none";
  if (c.isolate) {  // the artifact chose the values: only a decade of their ratio goes into what is signed
    int k = 0;
    while (k < 6 && w.ratio <= std::pow(10.0, -(k + 1))) ++k;
    std::string within = w.ratio == 0 ? "0" : !(w.ratio <= 1) ? "more than 1" : "at most 1e-" + std::to_string(k);
    if (within == "at most 1e-0") within = "at most 1";
    std::snprintf(line, sizeof line, "worst: error %s of its bound (the element and its values are kept out of "
                  "a signed report; run without --sign to see them)", within.c_str());
  } else {
    std::snprintf(line, sizeof line, "worst: %s of the %s inputs: got %.9g, reference %.9g, error %.3g, bound %.3g",
                  where.c_str(), w.set.c_str(), w.got, w.want, w.err, w.bound);
  }
  std::string sets_str;
  for (const auto& s : sets) sets_str += (sets_str.empty() ? "" : ", ") + s;
  r.evidence.push_back(std::to_string(elements) + " elements over the input sets " + sets_str);
  if (higham) {
    char b[200];
    std::snprintf(b, sizeof b, "bound: 2 gamma_n |f|(|x|) + ulp + n*min_normal with n = %lld (reductions %lld, ops %lld), gamma_n = %.3g",
                  static_cast<long long>(n), static_cast<long long>(sh.reductions), static_cast<long long>(sh.ops), gamma);
    r.evidence.push_back(b);
  } else if (!exact) {
    char b[200];
    std::snprintf(b, sizeof b, "bound: the policy envelope atol %.3g + rtol %.3g |y_ref| (K = %lld; `%s` has no order-independent bound here)",
                  env->atol, env->rtol, static_cast<long long>(env->reduction_length), sh.why.c_str());
    r.evidence.push_back(b);
  }
  r.evidence.push_back(line);
  r.pass = w.ratio <= 1;
  if (!r.pass) r.counterexample = std::string(line) + " (exceeds the bound)";
  return r;
}

}  // namespace mlk::verify
