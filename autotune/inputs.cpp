// The tuner's random inputs (autotune/inputs.h).
#include "autotune/inputs.h"

#include <cmath>
#include <map>
#include <set>

namespace mlk::tune {

using nlohmann::json;

namespace {

// Float inputs: a random sign and a magnitude 10^u, u uniform in
// [kFloatLog10Min, kFloatLog10Max], i.e. from 1e-3 to 4, log-uniform, so that
// small and large values, both signs, mix in every tensor. Why these bounds:
// 1e-3 keeps F16 and BF16 values normal (F16's smallest normal is 6.1e-5), so
// they compare within their tolerances; 4 keeps every function's math far
// from F32 (and F16: 65504) overflow where the double-precision reasoning of
// the reference would not overflow: exp(4) = 55, x^3 = 64, a sum of K
// products at most 16 K. It also bounds how much an exp amplifies rounding:
// a softmax over scores that are dot products of such values (attention)
// sees exp(score) with scores of order 10-100, whose F32 rounding (~1e-7
// relative) moves the result well within rtol 1e-4; at 10 and above that no
// longer holds for D = 64 heads with a scale of 10.
constexpr double kFloatLog10Min = -3;
const double kFloatLog10Max = std::log10(4.0);


// What a function does with its parameters: which integer params feed a
// gather's index (through views only: reshape, transpose, broadcast, slice,
// concat, repeat_interleave, where, integer casts; in callees too), and over
// which extent; which integer params reach integer arithmetic.
class ParamUses {
 public:
  ParamUses(const ir::Module& m, const ir::Function& f, const DimEnv& env) : m_(m), index_extent_(f.params.size(), -1),
                                                                             arith_(f.params.size(), false) {
    auto top = std::make_unique<Ctx>();
    top->f = &f;
    top->env = env;
    for (size_t i = 0; i < f.params.size(); ++i) {
      top->deps.push_back({static_cast<int>(i)});
      top->views.push_back({static_cast<int>(i)});
    }
    params_ = &f.params;
    for (const ir::Result& r : f.results()) deps(*top, r.body);
  }
  // The smallest extent of a gathered axis the param indexes; -1: none.
  int64_t index_extent(size_t p) const { return index_extent_[p]; }
  bool integer_arithmetic(size_t p) const { return arith_[p]; }

 private:
  struct Ctx {
    const ir::Function* f = nullptr;
    DimEnv env;
    std::vector<std::set<int>> deps, views;  // per param of f: the top-level params it derives from / is a view of
    std::map<const ir::Node*, std::set<int>> dmemo, vmemo;
    std::map<const ir::Node*, std::unique_ptr<Ctx>> callees;
  };

  Ctx& callee(Ctx& c, const ir::Node& n) {
    auto it = c.callees.find(&n);
    if (it != c.callees.end()) return *it->second;
    auto k = std::make_unique<Ctx>();
    k->f = m_.find(n.callee);
    if (k->f) {
      for (size_t i = 0; i < k->f->dim_vars.size() && i < n.dims.size(); ++i)
        if (auto v = n.dims[i].eval(c.env)) k->env[k->f->dim_vars[i]] = *v;
      for (const auto& o : n.operands) {
        k->deps.push_back(deps(c, o));
        k->views.push_back(views(c, o));
      }
    }
    return *(c.callees[&n] = std::move(k));
  }

  static bool int_arith_op(ir::Op op) {
    using ir::Op;
    switch (op) {
      case Op::kNeg: case Op::kAbs: case Op::kAdd: case Op::kSub: case Op::kMul: case Op::kDiv:
      case Op::kSum: case Op::kMean: case Op::kMatmul: case Op::kPow: return true;
      default: return false;
    }
  }

  // Every node is visited once per context; gathers and integer arithmetic
  // are noted on the way.
  std::set<int> deps(Ctx& c, const ir::NodeRef& n) {
    auto it = c.dmemo.find(n.get());
    if (it != c.dmemo.end()) return it->second;
    std::set<int> out;
    if (n->op == ir::Op::kParam) {
      if (n->index >= 0 && static_cast<size_t>(n->index) < c.deps.size()) out = c.deps[n->index];
    } else if (n->op == ir::Op::kCall) {
      Ctx& k = callee(c, *n);
      if (k.f) out = deps(k, k.f->body);
    } else {
      std::set<int> operand_deps;
      for (const auto& o : n->operands) {
        auto d = deps(c, o);
        operand_deps.insert(d.begin(), d.end());
      }
      out = operand_deps;
      if (is_integer(n->type.dtype) && int_arith_op(n->op))
        for (int p : operand_deps)
          if (is_integer((*params_)[p].type.dtype)) arith_[p] = true;
      if (n->op == ir::Op::kGather && n->operands.size() == 2 && !n->ints.empty()) {
        const Shape& ts = n->operands[0]->type.shape;
        int64_t axis = n->ints[0] < 0 ? n->ints[0] + static_cast<int64_t>(ts.size()) : n->ints[0];
        if (axis >= 0 && axis < static_cast<int64_t>(ts.size()))
          if (auto v = ts[axis].eval(c.env))
            for (int p : views(c, n->operands[1]))
              if (index_extent_[p] < 0 || *v < index_extent_[p]) index_extent_[p] = *v;
      }
    }
    return c.dmemo[n.get()] = out;
  }

  std::set<int> views(Ctx& c, const ir::NodeRef& n) {
    auto it = c.vmemo.find(n.get());
    if (it != c.vmemo.end()) return it->second;
    using ir::Op;
    std::set<int> out;
    auto add = [&](const ir::NodeRef& o) {
      auto v = views(c, o);
      out.insert(v.begin(), v.end());
    };
    switch (n->op) {
      case Op::kParam:
        if (n->index >= 0 && static_cast<size_t>(n->index) < c.views.size()) out = c.views[n->index];
        break;
      case Op::kReshape: case Op::kTranspose: case Op::kBroadcast: case Op::kSlice: case Op::kRepeatInterleave:
        if (!n->operands.empty()) add(n->operands[0]);
        break;
      case Op::kCast:
        if (is_integer(n->type.dtype) && !n->operands.empty()) add(n->operands[0]);
        break;
      case Op::kConcat:
        for (const auto& o : n->operands) add(o);
        break;
      case Op::kWhere:
        for (size_t i = 1; i < n->operands.size(); ++i) add(n->operands[i]);
        break;
      case Op::kCall: {
        Ctx& k = callee(c, *n);
        if (k.f) out = views(k, k.f->body);
        break;
      }
      default: break;
    }
    return c.vmemo[n.get()] = out;
  }

  const ir::Module& m_;
  const std::vector<ir::Param>* params_ = nullptr;
  std::vector<int64_t> index_extent_;
  std::vector<bool> arith_;
};

// `r` of parameter `i` within the rules of the column it is, if it is one.
void within_column_rules(const ir::Function& f, size_t i, const DimEnv& env, InputRange& r) {
  const ir::FrameColumn* c = ir::column_of_param(f.frames, static_cast<int>(i));
  if (c != nullptr && c->categories) {  // a Category's codes: [0, K - 1] (just 0 when K is not known at `env`)
    const auto k = c->categories->eval(env);
    const double top = k ? static_cast<double>(std::max<int64_t>(*k - 1, 0)) : 0;
    if (r.kind != InputRange::Kind::kIndex) r.kind = InputRange::Kind::kInt, r.hi = top;
    r.lo = 0, r.hi = std::min(r.hi, top);
    r.why += "; a Category's codes, in [0, " + c->categories->str() + ")";
    return;
  }
  if (c == nullptr || c->rules.empty()) return;
  r.column = c;
  for (const auto& rule : c->rules) r.rules.push_back(ir::rule_str(*c, rule));
  if (r.kind == InputRange::Kind::kFloat) {
    r.alt_lo = -4, r.alt_hi = 4;
    ir::narrow_to_rules(*c, env, r.alt_lo, r.alt_hi);
    r.alt_hi = std::max(r.alt_hi, r.alt_lo);
  } else {
    ir::narrow_to_rules(*c, env, r.lo, r.hi);
    r.hi = std::max(r.hi, r.lo);  // rules no value passes: the reader refuses every table anyway
  }
  r.why += "; within the column's rules";
}

// The range of every parameter at shape `env`:
// - floats: see kFloatLog10Min;
// - a gather index: the whole table, [0, V - 1] (V the smallest gathered
//   extent it indexes), since anything else is a run-time error;
// - integers that reach integer arithmetic: I8, I16 and U8 over their whole
//   range (8- and 16-bit arithmetic wraps in Halide as in the reference);
//   I32 within +-2^10 and I64 within +-2^20, since Halide assumes that 32-
//   and 64-bit signed arithmetic does not overflow: a product of two such
//   values summed over up to 2^10 (I32) or 2^22 (I64) terms still fits;
// - other integers (compared, cast, selected): the whole range, I64 within
//   +-2^53 (what the double-valued tensor API holds exactly);
// - Bool: both values;
// - a Dataframe column's parameter: within the column's rules as well.
}  // namespace

std::vector<InputRange> input_ranges(const ir::Module& m, const ir::Function& f, const DimEnv& env) {
  ParamUses uses(m, f, env);
  std::vector<InputRange> out;
  for (size_t i = 0; i < f.params.size(); ++i) {
    DType dt = f.params[i].type.dtype;
    InputRange r;
    if (dt == DType::Bool) {
      r = {InputRange::Kind::kBool, 0, 1, "both values"};
    } else if (is_float(dt)) {
      r = {InputRange::Kind::kFloat, std::pow(10.0, kFloatLog10Min), std::pow(10.0, kFloatLog10Max),
           "random sign, magnitude log-uniform"};
    } else if (uses.index_extent(i) >= 0) {
      r = {InputRange::Kind::kIndex, 0, static_cast<double>(std::max<int64_t>(uses.index_extent(i), 1) - 1),
           "gather index: the whole gathered axis"};
    } else {
      r.kind = InputRange::Kind::kInt;
      bool arith = uses.integer_arithmetic(i);
      switch (dt) {
        case DType::I8: r.lo = -128, r.hi = 127; break;
        case DType::I16: r.lo = -32768, r.hi = 32767; break;
        case DType::U8: r.lo = 0, r.hi = 255; break;
        case DType::I32: r.lo = arith ? -1024 : -2147483648.0, r.hi = arith ? 1024 : 2147483647.0; break;
        default: r.lo = arith ? -1048576.0 : -9007199254740992.0, r.hi = arith ? 1048576.0 : 9007199254740992.0; break;
      }
      r.why = arith && (dt == DType::I32 || dt == DType::I64) ? "integer arithmetic: bounded so that it cannot overflow"
                                                              : "the whole range";
    }
    within_column_rules(f, i, env, r);
    out.push_back(r);
  }
  return out;
}

HostTensor random_input(const ir::Param& p, const InputRange& r, const DimEnv& env, std::mt19937_64& rng) {
  std::vector<int64_t> shape;
  for (const Dim& d : p.type.shape) shape.push_back(*d.eval(env));
  HostTensor t(p.type.dtype, shape);
  std::uniform_real_distribution<double> u(kFloatLog10Min, kFloatLog10Max);
  std::uniform_int_distribution<int64_t> iu(static_cast<int64_t>(r.lo), static_cast<int64_t>(r.hi));
  std::uniform_real_distribution<double> alt(r.alt_lo, r.alt_hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    // Redrawn (as stored: F16 rounds) until the column's rules pass.
    for (int tries = 0;; ++tries) {
      if (r.kind == InputRange::Kind::kFloat && r.column != nullptr && tries >= 16) {
        t.set(i, alt(rng));
      } else if (r.kind == InputRange::Kind::kFloat) {
        double mag = std::pow(10.0, u(rng));
        t.set(i, (rng() & 1) ? -mag : mag);
      } else {
        t.set(i, static_cast<double>(iu(rng)));
      }
      if (r.column == nullptr || tries >= 64 || ir::passes_rules(*r.column, t.get(i), env)) break;
    }
  }
  return t;
}

json range_json(const ir::Param& p, const InputRange& r) {
  static const char* kinds[] = {"float", "integer", "gather_index", "bool"};
  json j = {{"param", p.name}, {"dtype", dtype_name(p.type.dtype)}, {"kind", kinds[static_cast<int>(r.kind)]},
            {"why", r.why}};
  if (r.kind == InputRange::Kind::kFloat) {
    j["magnitude"] = {r.lo, r.hi};
    j["sign"] = "random";
  } else {
    j["range"] = {static_cast<int64_t>(r.lo), static_cast<int64_t>(r.hi)};
  }
  if (!r.rules.empty()) j["rules"] = r.rules;
  return j;
}

}  // namespace mlk::tune
