// The one applier: Schedule (plain data) -> Halide scheduling calls.
#include <map>

#include "scheduler/lower.h"

namespace mlk::lower {

std::vector<StageInfo> stage_infos(const Pipeline& p, const DimEnv& env) {
  std::vector<StageInfo> out;
  for (const Stage& s : p.stages) {
    StageInfo i;
    i.name = s.name;
    i.kind = s.kind;
    i.rank = static_cast<int>(s.vars.size());
    i.rvars = static_cast<int>(s.rvars.size());
    i.reduces_innermost = s.reduces_innermost;
    for (const Dim& d : s.shape) i.extents.push_back(d.eval(env).value_or(0));
    for (const Dim& d : s.rshape) i.rextents.push_back(d.eval(env).value_or(0));
    i.direct_inputs = s.direct_inputs;
    out.push_back(i);
  }
  return out;
}

namespace {

using Halide::TailStrategy;
using Halide::VarOrRVar;

class Applier {
 public:
  explicit Applier(Pipeline& p) : p_(p) {
    for (Stage& s : p.stages) {
      by_name_[s.name] = &s;
      auto& t = vars_[s.name];
      int r = static_cast<int>(s.vars.size());
      for (int i = 0; i < r; ++i) t.emplace("a" + std::to_string(i), VarOrRVar(s.vars[r - 1 - i]));
      for (size_t i = 0; i < s.rvars.size(); ++i) t.emplace("r" + std::to_string(i), VarOrRVar(s.rvars[i]));
    }
  }

  void apply(const std::string& name, const Directive& d) {
    Stage& s = *by_name_.at(name);
    Halide::Func& f = s.func;
    Halide::Stage st = d.update >= 0 ? f.update(d.update) : static_cast<Halide::Stage>(f);
    auto v = [&](size_t i) { return lookup(name, d.vars[i]); };
    auto fresh = [&](size_t i, const VarOrRVar& like) {
      VarOrRVar n(d.vars[i], like.is_rvar);
      vars_[name].insert_or_assign(d.vars[i], n);
      return n;
    };
    const TailStrategy tail = TailStrategy::GuardWithIf;
    const std::string& op = d.op;
    if (op == "split") {
      VarOrRVar old = v(0);
      st.split(old, fresh(1, old), fresh(2, old), static_cast<int>(d.factors[0]), tail);
    } else if (op == "tile" || (op == "gpu_tile" && d.vars.size() == 6)) {
      VarOrRVar x = v(0), y = v(1);
      VarOrRVar xo = fresh(2, x), yo = fresh(3, y), xi = fresh(4, x), yi = fresh(5, y);
      if (op == "tile")
        st.tile(x, y, xo, yo, xi, yi, static_cast<int>(d.factors[0]), static_cast<int>(d.factors[1]), tail);
      else
        st.gpu_tile(x, y, xo, yo, xi, yi, static_cast<int>(d.factors[0]), static_cast<int>(d.factors[1]), tail);
    } else if (op == "gpu_tile") {
      VarOrRVar x = v(0);
      st.gpu_tile(x, fresh(1, x), fresh(2, x), static_cast<int>(d.factors[0]), tail);
    } else if (op == "fuse") {
      VarOrRVar a = v(0), b = v(1);
      st.fuse(a, b, fresh(2, a));
    } else if (op == "reorder") {
      std::vector<VarOrRVar> order;
      for (size_t i = 0; i < d.vars.size(); ++i) order.push_back(v(i));
      st.reorder(order);
    } else if (op == "vectorize") {
      if (d.factors.empty()) st.vectorize(v(0));
      else st.vectorize(v(0), static_cast<int>(d.factors[0]), tail);
    } else if (op == "unroll") {
      if (d.factors.empty()) st.unroll(v(0));
      else st.unroll(v(0), static_cast<int>(d.factors[0]), tail);
    } else if (op == "parallel") {
      st.parallel(v(0));
    } else if (op == "compute_root") {
      f.compute_root();
    } else if (op == "compute_inline") {
      f.compute_inline();
    } else if (op == "store_root") {
      f.store_root();
    } else if (op == "compute_at" || op == "store_at") {
      Stage& at = *by_name_.at(d.at_stage);
      VarOrRVar where = lookup(d.at_stage, d.at_var);
      if (op == "compute_at") where.is_rvar ? f.compute_at(at.func, where.rvar) : f.compute_at(at.func, where.var);
      else where.is_rvar ? f.store_at(at.func, where.rvar) : f.store_at(at.func, where.var);
    } else if (op == "rfactor") {
      VarOrRVar r = v(0);
      Halide::RVar ro(d.vars[0] + "_o"), ri(d.vars[0] + "_i");
      Halide::Var u(d.vars[1]);
      Halide::Stage up = f.update(0);
      up.split(r.rvar, ro, ri, static_cast<int>(d.factors[0]), tail);
      Halide::Func intm = up.rfactor(ro, u);
      intm.compute_root();
      intm.update(0).parallel(u);
    } else if (op == "rfactor_vector") {
      VarOrRVar r = v(0);
      Halide::RVar ro(d.vars[0] + "_o"), ri(d.vars[0] + "_i");
      Halide::Var u(d.vars[1]);
      const int factor = static_cast<int>(d.factors[0]);
      Halide::Stage up = f.update(0);
      up.split(r.rvar, ro, ri, factor, tail);
      Halide::Func intm = up.rfactor(ri, u);
      if (s.vars.empty()) intm.compute_root();
      else intm.compute_at(f, s.vars.front());
      intm.vectorize(u);
      intm.update(0).vectorize(u);
    } else if (op == "gpu_blocks" || op == "gpu_threads") {
      std::vector<VarOrRVar> vs;
      for (size_t i = 0; i < d.vars.size(); ++i) vs.push_back(v(i));
      bool blocks = op == "gpu_blocks";
      if (vs.size() == 1) blocks ? st.gpu_blocks(vs[0]) : st.gpu_threads(vs[0]);
      else if (vs.size() == 2) blocks ? st.gpu_blocks(vs[0], vs[1]) : st.gpu_threads(vs[0], vs[1]);
      else blocks ? st.gpu_blocks(vs[0], vs[1], vs[2]) : st.gpu_threads(vs[0], vs[1], vs[2]);
    } else if (op == "gpu_single_thread") {
      st.gpu_single_thread();
    } else if (op == "stage_shared") {
      Stage& in = *by_name_.at(d.at_stage);
      VarOrRVar where = lookup(name, d.at_var);
      Halide::Func w = in.func.in(f);
      where.is_rvar ? w.compute_at(f, where.rvar) : w.compute_at(f, where.var);
      w.store_in(Halide::MemoryType::GPUShared);
      int r = static_cast<int>(in.vars.size());
      if (r >= 2) w.gpu_threads(in.vars[0], in.vars[1]);
      else if (r == 1) w.gpu_threads(in.vars[0]);
    } else {
      MLK_CHECK(false, "apply_schedule: directive passed validation but has no case");
    }
  }

 private:
  VarOrRVar lookup(const std::string& stage, const std::string& name) {
    auto& t = vars_[stage];
    auto it = t.find(name);
    MLK_CHECK(it != t.end(), "apply_schedule: variable passed validation but is unknown");
    return it->second;
  }

  Pipeline& p_;
  std::map<std::string, Stage*> by_name_;
  std::map<std::string, std::map<std::string, VarOrRVar>> vars_;
};

}  // namespace

Status apply_schedule(Pipeline& p, const Schedule& s, bool gpu) {
  MLK_RETURN_IF_ERROR(validate_schedule(s, stage_infos(p, {}), gpu));
  if (!s.autoscheduler.empty()) return Status::Ok();  // see apply_autoscheduler
  Applier a(p);
  // Placement directives last: they may name variables that another stage's
  // directives introduce (compute_at(output, "no") after output's tile).
  auto placement = [](const Directive& d) { return d.op == "compute_at" || d.op == "store_at" || d.op == "stage_shared"; };
  for (int pass = 0; pass < 2; ++pass)
  for (const auto& [name, ds] : s.stages)
    for (size_t i = 0; i < ds.size(); ++i) {
      if (placement(ds[i]) != (pass == 1)) continue;
      try {
        a.apply(name, ds[i]);
      } catch (const Halide::Error& e) {
        return Status::InvalidArgument("schedule: stage `" + name + "` directive " + std::to_string(i) + " `" +
                                       ds[i].op + "`: Halide refuses it: " + e.what());
      }
    }
  return Status::Ok();
}

}  // namespace mlk::lower
