// The unscheduled algorithm outside scheduler/: its canonical text and hash
// (scheduler/algorithm.h) and its symbolic value at a concrete shape
// (scheduler/algorithm_terms.h), both by walking the Funcs lower_function
// builds, before any schedule touches them.
#include "scheduler/algorithm.h"
#include "scheduler/packed.h"

#include <cctype>
#include <cmath>
#include <functional>
#include <optional>
#include <tuple>
#include <utility>
#include <sstream>

#include "base/sha256.h"
#include "lang/bind.h"
#include "scheduler/algorithm_terms.h"
#include "scheduler/lower.h"

namespace mlk {

namespace HI = Halide::Internal;

namespace {

std::string type_str(const Halide::Type& t) {
  std::ostringstream s;
  s << t;
  return s.str();
}

void print_definition(std::ostream& out, const std::string& name, const std::vector<Halide::Expr>& args,
                      const HI::Definition& d, bool update) {
  out << "  " << name << "(";
  for (size_t i = 0; i < args.size(); ++i) out << (i ? ", " : "") << args[i];
  out << ") = ";
  for (size_t i = 0; i < d.values().size(); ++i) out << (i ? ", " : "") << d.values()[i];
  if (update) {
    for (const auto& rv : d.schedule().rvars()) out << "  for " << rv.var << " in [" << rv.min << ", +" << rv.extent << ")";
    if (d.predicate().defined()) out << "  where " << d.predicate();
  }
  out << "\n";
}

// Halide makes Func names unique per process ("output$1" for the second
// lowering of a fn); within one lowering mlk's names are unique already, so
// the suffixes are dropped: the text is then the same in every process.
std::string strip_uniquifiers(const std::string& t) {
  std::string o;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '$' && i + 1 < t.size() && std::isdigit(static_cast<unsigned char>(t[i + 1]))) {
      while (i + 1 < t.size() && std::isdigit(static_cast<unsigned char>(t[i + 1]))) ++i;
      continue;
    }
    o += t[i];
  }
  // Let variables Halide's CSE names from a process-wide counter ("t189"),
  // renumbered by first appearance. (mlk's own names never look like that.)
  std::map<std::string, std::string> lets;
  std::string out;
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '.'; };
  for (size_t i = 0; i < o.size(); ++i) {
    if (o[i] == 't' && (i == 0 || !ident(o[i - 1])) && i + 1 < o.size() && std::isdigit(static_cast<unsigned char>(o[i + 1]))) {
      size_t j = i + 1;
      while (j < o.size() && std::isdigit(static_cast<unsigned char>(o[j]))) ++j;
      if (j == o.size() || !ident(o[j])) {
        std::string name = o.substr(i, j - i);
        auto it = lets.emplace(name, "t" + std::to_string(lets.size())).first;
        out += it->second;
        i = j - 1;
        continue;
      }
    }
    out += o[i];
  }
  return out;
}

}  // namespace

AlgorithmSummary summarize_pipeline(const lower::Pipeline& p) {
  AlgorithmSummary s;
  std::ostringstream out;
  for (const auto& ip : p.inputs) {
    s.inputs.push_back({ip.name(), type_str(ip.type()), ip.dimensions()});
    out << "input " << ip.name() << ": " << type_str(ip.type()) << " rank " << ip.dimensions() << "\n";
  }
  for (const auto& [name, prm] : p.dim_params) {
    s.dim_params.push_back(name);
    out << "param dim_" << name << ": int32\n";
  }
  std::map<std::string, HI::Function> funcs;
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    HI::Function outf = p.outputs[i].func.function();
    AlgorithmBuffer b{strip_uniquifiers(outf.name()), type_str(outf.output_types()[0]), outf.dimensions()};
    (i == 0 ? s.output : s.more_outputs.emplace_back()) = b;
    out << "output " << outf.name() << ": " << b.type << " rank " << b.rank << "\n";
    for (auto& [name, f] : HI::find_transitive_calls(outf)) funcs.emplace(name, f);
    funcs.emplace(outf.name(), outf);
  }
  // A weight read packed: its input and the pipeline that fills it.
  for (const auto& pk : p.packs) {
    HI::Function pf = pk.func.function();
    out << "pack " << pk.packed.name() << " from " << p.inputs[pk.param].name() << " by " << pf.name() << " quanta "
        << pk.k_quantum << " " << pk.n_quantum << "\n";
    for (auto& [name, f] : HI::find_transitive_calls(pf)) funcs.emplace(name, f);
    funcs.emplace(pf.name(), pf);
  }
  for (const auto& [name, f] : funcs) {
    out << "func " << name << "\n";
    std::vector<Halide::Expr> pure;
    for (const auto& a : f.args()) pure.push_back(Halide::Var(a));
    print_definition(out, name, pure, f.definition(), false);
    for (const auto& u : f.updates()) print_definition(out, name, u.args(), u, true);
  }
  s.text = strip_uniquifiers(out.str());
  s.hash = sha256_hex(s.text);
  return s;
}

Expected<AlgorithmSummary> summarize_algorithm(const ir::Module& m, const std::string& fn,
                                               const std::string& halide_target) {
  auto p = lower::lower_function(m, fn, lower::options_for(halide_target));
  if (!p.ok()) return p.status();
  return summarize_pipeline(*p);
}

}  // namespace mlk

namespace mlk::sym {

namespace {

namespace HI = Halide::Internal;
using Halide::Expr;

Sort sort_of(const Halide::Type& t) {
  if (t.is_float()) return Sort::kReal;
  if (t.is_bool()) return Sort::kBool;
  return Sort::kInt;
}

// Evaluates the lowered Funcs at concrete points: every index is a folded
// integer constant; values are terms over the inputs.
class Evaluator {
 public:
  Evaluator(const lower::Pipeline& p, const std::map<std::string, std::vector<int64_t>>& shapes, const DimEnv& dims)
      : p_(p), shapes_(shapes), dims_(dims) {
    // A packed weight's input (lower::Pack) is its pack's pipeline, of the
    // extents the runtime gives it: read through that pipeline.
    for (const auto& pk : p.packs) {
      auto k = pk.k.eval(dims), n = pk.n.eval(dims);
      if (!k || !n) continue;
      packs_[pk.packed.name()] = {pk.func.function(), packed_shape(*k, *n, pk.k_quantum, pk.n_quantum)};
    }
  }

  Expected<TermRef> func_at(const HI::Function& f, const std::vector<int64_t>& idx) {
    const std::string key = f.name() + key_of(idx);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    std::map<std::string, TermRef> saved = env_;
    for (size_t i = 0; i < f.args().size(); ++i) env_[f.args()[i]] = int_const(idx[i], 32, true);
    auto v = eval(f.definition().values()[0]);
    if (!v.ok()) return v;
    TermRef cur = *v;
    for (const auto& u : f.updates()) {
      auto r = run_update(f, u, idx, cur);
      if (!r.ok()) return r;
      cur = *r;
    }
    env_ = saved;
    memo_[key] = cur;
    return cur;
  }

 private:
  static std::string key_of(const std::vector<int64_t>& idx) {
    std::string k = "(";
    for (int64_t i : idx) k += std::to_string(i) + ",";
    return k + ")";
  }

  // One update over its whole reduction domain (rvars[0] innermost).
  Expected<TermRef> run_update(const HI::Function& f, const HI::Definition& u, const std::vector<int64_t>& idx, TermRef cur) {
    const auto& rvs = u.schedule().rvars();
    std::vector<int64_t> mins, exts;
    for (const auto& rv : rvs) {
      auto mn = eval_int(rv.min), ex = eval_int(rv.extent);
      if (!mn.ok()) return mn.status();
      if (!ex.ok()) return ex.status();
      mins.push_back(*mn), exts.push_back(*ex);
    }
    std::vector<int64_t> at(rvs.size(), 0);
    for (size_t i = 0; i < rvs.size(); ++i)
      if (exts[i] <= 0) return cur;
    while (true) {
      for (size_t i = 0; i < rvs.size(); ++i) env_[rvs[i].var] = int_const(mins[i] + at[i], 32, true);
      bool take = true;
      if (u.predicate().defined()) {
        auto pr = eval_int(u.predicate());
        if (!pr.ok()) return pr.status();
        take = *pr != 0;
      }
      for (size_t i = 0; take && i < u.args().size(); ++i) {
        auto a = eval_int(u.args()[i]);
        if (!a.ok()) return a.status();
        take = *a == idx[i];
      }
      if (take) {
        self_ = {true, f.name(), idx, cur};
        auto v = eval(u.values()[0]);
        self_ = {};
        if (!v.ok()) return v;
        cur = *v;
      }
      size_t i = 0;
      while (i < rvs.size() && ++at[i] == exts[i]) at[i++] = 0;
      if (i == rvs.size()) break;
    }
    return cur;
  }

  Expected<int64_t> eval_int(const Expr& e) {
    auto t = eval(e);
    if (!t.ok()) return t.status();
    if (!is_const(*t) || (*t)->sort == Sort::kReal)
      return Status::Unsupported("an index or extent that depends on data (" + term_str(*t, 80) + ") is not modelled");
    return const_int(*t);
  }

  Expected<TermRef> variable(const HI::Variable* v) {
    if (auto it = env_.find(v->name); it != env_.end()) return it->second;
    if (v->name.rfind("dim_", 0) == 0)
      if (auto it = dims_.find(v->name.substr(4)); it != dims_.end()) return int_const(it->second, 32, true);
    // in_P.extent.D / in_P.min.D / in_P.stride.D (packedK's too)
    size_t dot = v->name.find('.');
    if (dot != std::string::npos) {
      const std::string buffer = v->name.substr(0, dot);
      const std::vector<int64_t>* shape = nullptr;
      if (auto pk = packs_.find(buffer); pk != packs_.end()) shape = &pk->second.shape;
      if (auto sh = shapes_.find(buffer); sh != shapes_.end()) shape = &sh->second;
      std::string rest = v->name.substr(dot + 1);
      size_t dot2 = rest.find('.');
      if (shape && dot2 != std::string::npos) {
        const std::string what = rest.substr(0, dot2);
        const int d = std::stoi(rest.substr(dot2 + 1));
        const int rank = static_cast<int>(shape->size());
        if (d >= 0 && d < rank) {
          if (what == "extent") return int_const((*shape)[rank - 1 - d], 32, true);
          if (what == "min") return int_const(0, 32, true);
          if (what == "stride") {
            int64_t s = 1;
            for (int k = 0; k < d; ++k) s *= (*shape)[rank - 1 - k];
            return int_const(s, 32, true);
          }
        }
      }
    }
    return Status::Unsupported("the variable `" + v->name + "` of the lowered algorithm is not modelled");
  }

  Expected<TermRef> cast(const Halide::Type& to, TermRef v) {
    if (to.is_float()) {
      if (v->sort == Sort::kReal) return v;
      if (v->sort == Sort::kInt) return make(TOp::kToReal, {v});
      return make(TOp::kSelect, {v, real_const(1), real_const(0)});
    }
    if (to.is_bool()) {
      if (v->sort == Sort::kBool) return v;
      return make(TOp::kNe, {v, v->sort == Sort::kReal ? real_const(0) : int_const(0, v->bits, v->is_signed)});
    }
    if (v->sort == Sort::kInt) return int_cast(v, to.bits(), to.is_int());
    if (v->sort == Sort::kBool)
      return make(TOp::kSelect, {v, int_const(1, to.bits(), to.is_int()), int_const(0, to.bits(), to.is_int())});
    if (is_const(v)) return int_const(static_cast<int64_t>(v->real), to.bits(), to.is_int());
    if (TermRef q = exact_quotient(v)) return int_cast(q, to.bits(), to.is_int());
    return Status::Unsupported("a float-to-integer cast is not modelled");
  }

  // floor(real(n) / real(d)) of two integers, as a reshape's index divides
  // (scheduler/lower.cpp, div_mod: exact for 0 <= n < 2^53, d >= 1): the
  // integer quotient. Null for any other real.
  static TermRef exact_quotient(const TermRef& v) {
    if (v->op != TOp::kCall || v->name != "floor" || v->args.size() != 1 || v->args[0]->op != TOp::kDiv) return nullptr;
    auto integer = [](const TermRef& x) -> TermRef {
      if (x->op == TOp::kToReal && x->args[0]->sort == Sort::kInt) return x->args[0];
      if (is_const(x) && x->sort == Sort::kReal && x->real == std::floor(x->real) && std::fabs(x->real) < 0x1p53)
        return int_const(static_cast<int64_t>(x->real), 64, true);
      return nullptr;
    };
    TermRef n = integer(v->args[0]->args[0]), d = integer(v->args[0]->args[1]);
    if (!n || !d) return nullptr;
    return make(TOp::kFloorDiv, {int_cast(n, 64, true), int_cast(d, 64, true)});
  }

  // [lo, hi] of an integer clamped by constants, max(min(x, hi), lo) or
  // min(max(x, lo), hi), as a gather's lowering clamps its index; nullopt
  // for any other term.
  static std::optional<std::pair<int64_t, int64_t>> clamp_range(const TermRef& t) {
    if (t->sort != Sort::kInt || (t->op != TOp::kMax && t->op != TOp::kMin) || !is_const(t->args[1])) return std::nullopt;
    const TermRef& inner = t->args[0];
    const TOp other = t->op == TOp::kMax ? TOp::kMin : TOp::kMax;
    if (inner->op != other || !is_const(inner->args[1])) return std::nullopt;
    int64_t lo = const_int(t->op == TOp::kMax ? t->args[1] : inner->args[1]);
    int64_t hi = const_int(t->op == TOp::kMax ? inner->args[1] : t->args[1]);
    if (lo > hi || hi - lo >= 4096) return std::nullopt;
    return std::make_pair(lo, hi);
  }

  // A call of a Func or an input at concrete indices, but for at most one
  // data-dependent index clamped to constants (a gather's): then the choice
  // among the values at each index it may take, select(i == lo, .., select(
  // .., value at hi)).
  Expected<TermRef> call_at(const HI::Call* c) {
    std::vector<int64_t> idx;
    int dep = -1;
    TermRef dep_term;
    int64_t lo = 0, hi = 0;
    for (size_t k = 0; k < c->args.size(); ++k) {
      auto t = eval(c->args[k]);
      if (!t.ok()) return t.status();
      if (is_const(*t) && (*t)->sort != Sort::kReal) {
        idx.push_back(const_int(*t));
        continue;
      }
      auto range = clamp_range(*t);
      if (dep >= 0 || !range)
        return Status::Unsupported("an index that depends on data (" + term_str(*t, 80) +
                                   ") is modelled only as a gather's: one index, clamped to constants");
      dep = static_cast<int>(k);
      dep_term = *t;
      std::tie(lo, hi) = *range;
      idx.push_back(hi);
    }
    auto value_at = [&](const std::vector<int64_t>& at) -> Expected<TermRef> {
      if (c->call_type == HI::Call::Image) return image(c, at);
      if (self_.defined && c->name == self_.name && at == self_.idx) return self_.value;
      return func_at(HI::Function(c->func), at);
    };
    auto acc = value_at(idx);
    if (!acc.ok() || dep < 0) return acc;
    TermRef out = *acc;
    for (int64_t v = hi - 1; v >= lo; --v) {
      idx[static_cast<size_t>(dep)] = v;
      auto x = value_at(idx);
      if (!x.ok()) return x;
      out = make(TOp::kSelect, {make(TOp::kEq, {dep_term, int_const(v, dep_term->bits, dep_term->is_signed)}), *x, out});
    }
    return out;
  }

  Expected<TermRef> call(const HI::Call* c) {
    std::vector<TermRef> args;
    auto arg = [&](size_t i) -> Expected<TermRef> { return eval(c->args[i]); };
    if (c->call_type == HI::Call::Halide || c->call_type == HI::Call::Image) return call_at(c);
    if (c->is_intrinsic(HI::Call::require) || c->is_intrinsic(HI::Call::likely) ||
        c->is_intrinsic(HI::Call::likely_if_innermost) || c->is_intrinsic(HI::Call::promise_clamped))
      return arg(c->is_intrinsic(HI::Call::require) ? 1 : 0);
    if (c->is_intrinsic(HI::Call::abs)) {
      auto a = arg(0);
      if (!a.ok()) return a;
      TermRef zero = (*a)->sort == Sort::kReal ? real_const(0) : int_const(0, (*a)->bits, (*a)->is_signed);
      TermRef r = make(TOp::kSelect, {make(TOp::kLt, {*a, zero}), make(TOp::kNeg, {*a}), *a});
      return r->sort == Sort::kInt ? int_cast(r, c->type.bits(), c->type.is_int()) : r;
    }
    if (c->call_type == HI::Call::PureExtern) {
      std::string name = c->name;
      for (const char* suf : {"_f16", "_f32", "_f64"})
        if (name.size() > 4 && name.ends_with(suf)) name = name.substr(0, name.size() - 4);
      for (size_t i = 0; i < c->args.size(); ++i) {
        auto a = arg(i);
        if (!a.ok()) return a;
        args.push_back(*a);
      }
      // is_nan(x) is x != x: a truth value (false over the reals).
      if (name == "is_nan" && args.size() == 1) return make(TOp::kNe, {args[0], args[0]});
      return make(TOp::kCall, args, name);
    }
    return Status::Unsupported("the call `" + c->name + "` in the lowered algorithm is not modelled");
  }

  Expected<TermRef> image(const HI::Call* c, const std::vector<int64_t>& hidx) {
    if (auto pk = packs_.find(c->name); pk != packs_.end()) {
      const auto& shape = pk->second.shape;
      for (int a = 0; a < 4; ++a)
        if (hidx[3 - a] < 0 || hidx[3 - a] >= shape[a])
          return Status::InvalidArgument("the lowered algorithm reads the packed weight `" + c->name + "` outside its shape");
      return func_at(pk->second.func, hidx);
    }
    auto sh = shapes_.find(c->name);
    if (sh == shapes_.end()) return Status::Unsupported("unknown input `" + c->name + "`");
    const auto& shape = sh->second;
    const int rank = static_cast<int>(shape.size());
    int64_t flat = 0;
    std::string where;
    for (int a = 0; a < rank; ++a) {
      int64_t i = hidx[rank - 1 - a];
      where += (a ? ", " : "") + std::to_string(i);
      if (i < 0 || i >= shape[a]) flat = -1;
      if (flat >= 0) flat = flat * shape[a] + i;
    }
    if (flat < 0)
      return Status::InvalidArgument("the lowered algorithm reads `" + c->name.substr(3) + "` at [" + where +
                                     "], outside its shape");
    return input(c->name.substr(3), flat, sort_of(c->type), c->type.bits(), c->type.is_int());
  }

  template <class T>
  Expected<TermRef> bin(const T* op, TOp k, bool swap = false) {
    auto a = eval(op->a);
    if (!a.ok()) return a;
    auto b = eval(op->b);
    if (!b.ok()) return b;
    return swap ? make(k, {*b, *a}) : make(k, {*a, *b});
  }

 public:
  Expected<TermRef> eval(const Expr& e) {
    if (auto* i = e.as<HI::IntImm>()) return int_const(i->value, i->type.bits(), true);
    if (auto* u = e.as<HI::UIntImm>()) return e.type().is_bool() ? bool_const(u->value != 0) : int_const(static_cast<int64_t>(u->value), u->type.bits(), false);
    if (auto* f = e.as<HI::FloatImm>()) return real_const(f->value);
    if (auto* c = e.as<HI::Cast>()) {
      auto v = eval(c->value);
      if (!v.ok()) return v;
      return cast(c->type, *v);
    }
    if (auto* v = e.as<HI::Variable>()) return variable(v);
    if (auto* o = e.as<HI::Add>()) return bin(o, TOp::kAdd);
    if (auto* o = e.as<HI::Sub>()) return bin(o, TOp::kSub);
    if (auto* o = e.as<HI::Mul>()) return bin(o, TOp::kMul);
    if (auto* o = e.as<HI::Div>()) return bin(o, TOp::kDiv);
    if (auto* o = e.as<HI::Mod>()) return bin(o, TOp::kMod);
    if (auto* o = e.as<HI::Min>()) return bin(o, TOp::kMin);
    if (auto* o = e.as<HI::Max>()) return bin(o, TOp::kMax);
    if (auto* o = e.as<HI::EQ>()) return bin(o, TOp::kEq);
    if (auto* o = e.as<HI::NE>()) return bin(o, TOp::kNe);
    if (auto* o = e.as<HI::LT>()) return bin(o, TOp::kLt);
    if (auto* o = e.as<HI::LE>()) return bin(o, TOp::kLe);
    if (auto* o = e.as<HI::GT>()) return bin(o, TOp::kLt, true);
    if (auto* o = e.as<HI::GE>()) return bin(o, TOp::kLe, true);
    if (auto* o = e.as<HI::And>()) return bin(o, TOp::kAnd);
    if (auto* o = e.as<HI::Or>()) return bin(o, TOp::kOr);
    if (auto* o = e.as<HI::Not>()) {
      auto a = eval(o->a);
      if (!a.ok()) return a;
      return make(TOp::kNot, {*a});
    }
    if (auto* s = e.as<HI::Select>()) {
      auto c = eval(s->condition);
      if (!c.ok()) return c;
      if (is_const(*c)) return eval(const_int(*c) ? s->true_value : s->false_value);
      auto t = eval(s->true_value);
      if (!t.ok()) return t;
      auto f = eval(s->false_value);
      if (!f.ok()) return f;
      return make(TOp::kSelect, {*c, *t, *f});
    }
    if (auto* l = e.as<HI::Let>()) {
      auto v = eval(l->value);
      if (!v.ok()) return v;
      auto saved = env_.find(l->name) != env_.end() ? std::optional<TermRef>(env_[l->name]) : std::nullopt;
      env_[l->name] = *v;
      auto r = eval(l->body);
      if (saved) env_[l->name] = *saved;
      else env_.erase(l->name);
      return r;
    }
    if (auto* c = e.as<HI::Call>()) return call(c);
    std::ostringstream s;
    s << e;
    return Status::Unsupported("the expression `" + s.str().substr(0, 80) + "` of the lowered algorithm is not modelled");
  }

 private:
  struct Self {
    bool defined = false;
    std::string name;
    std::vector<int64_t> idx;
    TermRef value;
  };
  const lower::Pipeline& p_;
  const std::map<std::string, std::vector<int64_t>>& shapes_;  // "in_P" -> .tl shape
  const DimEnv& dims_;
  std::map<std::string, TermRef> env_;
  std::map<std::string, TermRef> memo_;
  struct PackedInput {
    HI::Function func;           // lower::Pack::func
    std::vector<int64_t> shape;  // .tl order: [t, k2, c, 2]
  };
  std::map<std::string, PackedInput> packs_;  // by the input's name, "packed0"
  Self self_;
};

}  // namespace

Expected<EvaluatedAlgorithm> evaluate_algorithm(const ir::Module& m, const std::string& fn, const DimEnv& dims,
                                               const std::string& halide_target) {
  const ir::Function* f = m.find(fn);
  if (!f) return Status::NotFound("no fn `" + fn + "` in the program");
  auto p = lower::lower_function(m, fn, lower::options_for(halide_target));
  if (!p.ok()) return p.status();
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& prm : f->params) {
    std::vector<int64_t> s;
    for (const Dim& d : prm.type.shape) {
      auto v = d.eval(dims);
      if (!v) return Status::InvalidArgument("the extent `" + d.str() + "` of `" + prm.name + "` has no value at these dims");
      s.push_back(*v);
    }
    shapes["in_" + prm.name] = s;
  }
  if (!f->more_results.empty())
    return Status::Unsupported("`" + fn + "` has " + std::to_string(f->results().size()) +
                               " results; the algorithm is evaluated for fns with one result");
  EvaluatedAlgorithm out;
  int64_t n = 1;
  for (const Dim& d : f->result_type.shape) {
    auto v = d.eval(dims);
    if (!v) return Status::InvalidArgument("the result extent `" + d.str() + "` has no value at these dims");
    out.shape.push_back(*v);
    n *= *v;
  }
  try {
    Evaluator ev(*p, shapes, dims);
    HI::Function outf = p->outputs[0].func.function();
    const int rank = static_cast<int>(out.shape.size());
    for (int64_t flat = 0; flat < n; ++flat) {
      std::vector<int64_t> h(rank);
      int64_t r = flat;
      for (int a = rank - 1; a >= 0; --a) h[rank - 1 - a] = r % out.shape[a], r /= out.shape[a];
      auto t = ev.func_at(outf, h);
      if (!t.ok()) return t.status();
      out.elements.push_back(*t);
    }
  } catch (const Halide::Error& e) {
    return Status::Internal(std::string("Halide: ") + e.what());
  }
  return out;
}

}  // namespace mlk::sym
