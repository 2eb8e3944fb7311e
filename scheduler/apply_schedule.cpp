// The one applier: Schedule (plain data) -> Halide scheduling calls. Each
// directive kind's Halide calls are its `apply` in the registry
// (scheduler/directives.h); apply_schedule validates and dispatches.
#include <map>
#include <optional>
#include <set>

#include "scheduler/test_faults.h"
#include "scheduler/directives.h"
#include "scheduler/lower.h"

namespace mlk::lower {

namespace {

// The stages `s` reads: the calls of its definitions, followed through the
// Funcs that are not stages (they are inlined into it).
std::set<std::string> stages_read(const Stage& s, const std::map<std::string, std::string>& stage_of_func) {
  std::set<std::string> found, seen;
  std::vector<Halide::Internal::Function> todo = {s.func.function()};
  while (!todo.empty()) {
    Halide::Internal::Function f = todo.back();
    todo.pop_back();
    for (const auto& [name, callee] : Halide::Internal::find_direct_calls(f)) {
      if (!seen.insert(name).second) continue;
      auto st = stage_of_func.find(name);
      if (st != stage_of_func.end()) found.insert(st->second);
      else todo.push_back(callee);
    }
  }
  return found;
}

}  // namespace

std::vector<StageInfo> stage_infos(const Pipeline& p, const DimEnv& env) {
  std::map<std::string, std::string> stage_of_func;
  for (const Stage& s : p.stages) stage_of_func[s.func.name()] = s.name;
  std::map<std::string, std::set<std::string>> readers;
  for (const Stage& s : p.stages)
    for (const std::string& r : stages_read(s, stage_of_func))
      if (r != s.name) readers[r].insert(s.name);  // an update reading its own stage is no reader of it
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
    // By stage name (`load_a`), not the Func's name: Halide uniquifies that
    // (`load_a$3`) when a process lowers the same fn again.
    for (const std::string& fn : s.direct_inputs)
      for (const Stage& in : p.stages)
        if (in.kind == Stage::Kind::kInput && in.func.name() == fn) i.direct_inputs.push_back(in.name);
    i.operands = s.operands;
    i.pairs = s.pairs;
    i.pair_copy = s.pair_copy;
    i.transposed = s.transposed;
    i.amx = s.amx;
    i.readers.assign(readers[s.name].begin(), readers[s.name].end());
    out.push_back(i);
  }
  return out;
}

}  // namespace mlk::lower

namespace mlk {

using Halide::TailStrategy;
using Halide::VarOrRVar;
using lower::Pipeline;
using lower::Stage;

// The state of one schedule being applied: the pipeline's stages and the
// Halide variable behind every name a stage has (a0.., r0.., introduced ones).
class DirectiveApplier {
 public:
  explicit DirectiveApplier(Pipeline& p) {
    for (Stage& s : p.stages) {
      by_name_[s.name] = &s;
      auto& t = vars_[s.name];
      int r = static_cast<int>(s.vars.size());
      for (int i = 0; i < r; ++i) t.emplace("a" + std::to_string(i), VarOrRVar(s.vars[r - 1 - i]));
      for (size_t i = 0; i < s.rvars.size(); ++i) t.emplace("r" + std::to_string(i), VarOrRVar(s.rvars[i]));
    }
  }

  Stage& stage(const std::string& name) { return *by_name_.at(name); }
  // The definition `d` applies to (within the specialisation being
  // scheduled, see set_branch).
  Halide::Stage definition(const std::string& name, const Directive& d) {
    Halide::Func& f = stage(name).func;
    if (d.update < 0 && branch_ && branch_stage_ == name) return *branch_;
    return d.update >= 0 ? f.update(d.update) : static_cast<Halide::Stage>(f);
  }
  // While set, `name`'s pure directives schedule `branch` (a specialisation
  // of its Func) and its full tiles shift inwards; cleared, they schedule the
  // general case with guarded tails.
  void set_branch(const std::string& name, Halide::Stage branch) {
    branch_stage_ = name;
    branch_ = branch;
  }
  void clear_branch() { branch_.reset(); }
  bool full_tiles() const { return branch_.has_value(); }
  // The variable in slot `i` of `d` (validation checked that it exists).
  VarOrRVar var(const std::string& name, const Directive& d, size_t i) { return lookup(name, d.vars[i]); }
  // Introduces the name in slot `i` of `d`, a Var or RVar as `like` is.
  VarOrRVar fresh(const std::string& name, const Directive& d, size_t i, const VarOrRVar& like) {
    VarOrRVar n(d.vars[i], like.is_rvar);
    vars_[name].insert_or_assign(d.vars[i], n);
    return n;
  }
  VarOrRVar lookup(const std::string& stage, const std::string& name) {
    auto& t = vars_[stage];
    auto it = t.find(name);
    MLK_CHECK(it != t.end(), "apply_schedule: variable passed validation but is unknown");
    return it->second;
  }

 private:
  std::map<std::string, Stage*> by_name_;
  std::map<std::string, std::map<std::string, VarOrRVar>> vars_;
  std::string branch_stage_;
  std::optional<Halide::Stage> branch_;
};

namespace apply {

namespace {

// Every split uses GuardWithIf (docs/schedules.md): factors need not divide extents.
constexpr TailStrategy kTail = TailStrategy::GuardWithIf;

int factor(const Directive& d, size_t i) { return static_cast<int>(d.factors[i]); }

// tile and the six-variable gpu_tile: [x, y, xo, yo, xi, yi].
void tile2(DirectiveApplier& a, const std::string& name, const Directive& d, bool gpu) {
  Halide::Stage st = a.definition(name, d);
  VarOrRVar x = a.var(name, d, 0), y = a.var(name, d, 1);
  VarOrRVar xo = a.fresh(name, d, 2, x), yo = a.fresh(name, d, 3, y), xi = a.fresh(name, d, 4, x),
            yi = a.fresh(name, d, 5, y);
  const TailStrategy tail = d.factors.size() == 3 && a.full_tiles() ? TailStrategy::ShiftInwards : kTail;
  if (gpu) st.gpu_tile(x, y, xo, yo, xi, yi, factor(d, 0), factor(d, 1), kTail);
  else st.tile(x, y, xo, yo, xi, yi, factor(d, 0), factor(d, 1), tail);
}

std::vector<VarOrRVar> all_vars(DirectiveApplier& a, const std::string& name, const Directive& d) {
  std::vector<VarOrRVar> vs;
  for (size_t i = 0; i < d.vars.size(); ++i) vs.push_back(a.var(name, d, i));
  return vs;
}

// gpu_blocks / gpu_threads over the first one to three variables.
void gpu_map(DirectiveApplier& a, const std::string& name, const Directive& d, bool blocks) {
  Halide::Stage st = a.definition(name, d);
  std::vector<VarOrRVar> vs = all_vars(a, name, d);
  if (vs.size() == 1) blocks ? st.gpu_blocks(vs[0]) : st.gpu_threads(vs[0]);
  else if (vs.size() == 2) blocks ? st.gpu_blocks(vs[0], vs[1]) : st.gpu_threads(vs[0], vs[1]);
  else blocks ? st.gpu_blocks(vs[0], vs[1], vs[2]) : st.gpu_threads(vs[0], vs[1], vs[2]);
}

// compute_at / store_at: inside at_stage's loop over at_var.
void place(DirectiveApplier& a, const std::string& name, const Directive& d, bool compute) {
  Halide::Func& f = a.stage(name).func;
  Stage& at = a.stage(d.at_stage);
  VarOrRVar where = a.lookup(d.at_stage, d.at_var);
  if (compute) where.is_rvar ? f.compute_at(at.func, where.rvar) : f.compute_at(at.func, where.var);
  else where.is_rvar ? f.store_at(at.func, where.rvar) : f.store_at(at.func, where.var);
}

}  // namespace

void split(DirectiveApplier& a, const std::string& name, const Directive& d) {
  VarOrRVar old = a.var(name, d, 0);
  // Test seam (scheduler/test_faults.h): an unguarded tail.
  const TailStrategy tail = test_fault("unguarded_tail") ? TailStrategy::RoundUp : kTail;
  a.definition(name, d).split(old, a.fresh(name, d, 1, old), a.fresh(name, d, 2, old), factor(d, 0), tail);
}

void tile(DirectiveApplier& a, const std::string& name, const Directive& d) { tile2(a, name, d, false); }

void fuse(DirectiveApplier& a, const std::string& name, const Directive& d) {
  VarOrRVar x = a.var(name, d, 0), y = a.var(name, d, 1);
  a.definition(name, d).fuse(x, y, a.fresh(name, d, 2, x));
}

void reorder(DirectiveApplier& a, const std::string& name, const Directive& d) {
  a.definition(name, d).reorder(all_vars(a, name, d));
}

void vectorize(DirectiveApplier& a, const std::string& name, const Directive& d) {
  Halide::Stage st = a.definition(name, d);
  if (d.factors.empty()) st.vectorize(a.var(name, d, 0));
  else st.vectorize(a.var(name, d, 0), factor(d, 0), kTail);
}

void unroll(DirectiveApplier& a, const std::string& name, const Directive& d) {
  Halide::Stage st = a.definition(name, d);
  if (d.factors.empty()) st.unroll(a.var(name, d, 0));
  else st.unroll(a.var(name, d, 0), factor(d, 0), kTail);
}

void parallel(DirectiveApplier& a, const std::string& name, const Directive& d) {
  a.definition(name, d).parallel(a.var(name, d, 0));
}

// Lets Halide vectorise a reduction variable of an associative update (as
// a VectorReduce, which it matches to dot-product instructions).
void atomic(DirectiveApplier& a, const std::string& name, const Directive& d) { a.definition(name, d).atomic(); }

void compute_root(DirectiveApplier& a, const std::string& name, const Directive&) { a.stage(name).func.compute_root(); }
void compute_inline(DirectiveApplier& a, const std::string& name, const Directive&) { a.stage(name).func.compute_inline(); }
void store_root(DirectiveApplier& a, const std::string& name, const Directive&) { a.stage(name).func.store_root(); }
void compute_at(DirectiveApplier& a, const std::string& name, const Directive& d) { place(a, name, d, true); }
void store_at(DirectiveApplier& a, const std::string& name, const Directive& d) { place(a, name, d, false); }

void rfactor(DirectiveApplier& a, const std::string& name, const Directive& d) {
  Halide::Func& f = a.stage(name).func;
  VarOrRVar r = a.var(name, d, 0);
  Halide::RVar ro(d.vars[0] + "_o"), ri(d.vars[0] + "_i");
  Halide::Var u(d.vars[1]);
  Halide::Stage up = f.update(0);
  up.split(r.rvar, ro, ri, factor(d, 0), kTail);
  Halide::Func intm = up.rfactor(ro, u);
  intm.compute_root();
  intm.update(0).parallel(u);
}

void rfactor_vector(DirectiveApplier& a, const std::string& name, const Directive& d) {
  Stage& s = a.stage(name);
  Halide::Func& f = s.func;
  VarOrRVar r = a.var(name, d, 0);
  Halide::RVar ro(d.vars[0] + "_o"), ri(d.vars[0] + "_i");
  Halide::Var u(d.vars[1]);
  Halide::Stage up = f.update(0);
  up.split(r.rvar, ro, ri, factor(d, 0), kTail);
  Halide::Func intm = up.rfactor(ri, u);
  if (s.vars.empty()) intm.compute_root();
  else intm.compute_at(f, s.vars.front());
  intm.vectorize(u);
  intm.update(0).vectorize(u);
}

// A reduction split across the cores: the reduction variable `r` in
// chunks of `chunk`, one parallel task per chunk (the intermediate's var
// `u`), each visiting its elements in memory order (the last reduction
// variable innermost) and vectorised by `lanes`: along the innermost pure
// var where the result has one; else along the innermost reduction
// variable, in `lanes` partial sums that each task keeps to itself (a
// second intermediate per task: partials of several tasks side by side in
// one buffer would share cache lines, which cost 30x). The final update
// sums the tasks' few partials.
void rfactor_par(DirectiveApplier& a, const std::string& name, const Directive& d) {
  Stage& s = a.stage(name);
  Halide::Func& f = s.func;
  const int chunk = factor(d, 0), lanes = factor(d, 1);
  Halide::RVar r = a.var(name, d, 0).rvar;
  Halide::RVar ro(d.vars[0] + "_o"), ri(d.vars[0] + "_i");
  Halide::Var u(d.vars[1]);
  Halide::Stage up = f.update(0);
  up.split(r, ro, ri, chunk, kTail);
  // Innermost first: the result's innermost var, the reduction variables
  // from the last (the input's innermost reduced axis) out with `r`'s
  // chunk in `r`'s place, the result's other vars, the chunks.
  const bool scalar = s.vars.empty();
  std::vector<VarOrRVar> nest;
  if (!scalar) nest.push_back(s.vars.front());
  for (auto it = s.rvars.rbegin(); it != s.rvars.rend(); ++it) nest.push_back(it->name() == r.name() ? ri : *it);
  for (size_t i = 1; i < s.vars.size(); ++i) nest.push_back(s.vars[i]);
  nest.push_back(ro);
  up.reorder(nest);
  Halide::Func intm = up.rfactor(ro, u);
  intm.compute_root();
  Halide::Stage iu = intm.update(0);
  iu.parallel(u);
  if (!scalar) {
    intm.vectorize(s.vars.front(), lanes, kTail);
    iu.vectorize(s.vars.front(), lanes, kTail);
    return;
  }
  const Halide::RVar q = nest.front().rvar;
  Halide::RVar qo(q.name() + "_vo"), qi(q.name() + "_vi");
  Halide::Var v(d.vars[1] + "_v");
  iu.split(q, qo, qi, lanes, kTail);
  Halide::Func lanes_f = iu.rfactor(qi, v);
  lanes_f.compute_at(intm, u);
  lanes_f.vectorize(v);
  lanes_f.update(0).vectorize(v);
}

void gpu_blocks(DirectiveApplier& a, const std::string& name, const Directive& d) { gpu_map(a, name, d, true); }
void gpu_threads(DirectiveApplier& a, const std::string& name, const Directive& d) { gpu_map(a, name, d, false); }

void gpu_single_thread(DirectiveApplier& a, const std::string& name, const Directive& d) {
  a.definition(name, d).gpu_single_thread();
}

void gpu_tile(DirectiveApplier& a, const std::string& name, const Directive& d) {
  if (d.vars.size() == 6) return tile2(a, name, d, true);
  VarOrRVar x = a.var(name, d, 0);
  a.definition(name, d).gpu_tile(x, a.fresh(name, d, 1, x), a.fresh(name, d, 2, x), factor(d, 0), kTail);
}

void stage_shared(DirectiveApplier& a, const std::string& name, const Directive& d) {
  Halide::Func& f = a.stage(name).func;
  Stage& in = a.stage(d.at_stage);
  VarOrRVar where = a.lookup(name, d.at_var);
  Halide::Func w = in.func.in(f);
  where.is_rvar ? w.compute_at(f, where.rvar) : w.compute_at(f, where.var);
  w.store_in(Halide::MemoryType::GPUShared);
  int r = static_cast<int>(in.vars.size());
  if (r >= 2) w.gpu_threads(in.vars[0], in.vars[1]);
  else if (r == 1) w.gpu_threads(in.vars[0]);
}

namespace {

// The copy of `producer` that `consumer` reads, computed inside `at`'s loop
// over `where` and vectorised by `lanes` (0: not) along its innermost axis.
void pack_operand(Stage& producer, const Halide::Func& consumer, const Halide::Func& at, const VarOrRVar& where,
                  int lanes) {
  Halide::Func w = producer.func.in(consumer);
  where.is_rvar ? w.compute_at(at, where.rvar) : w.compute_at(at, where.var);
  if (lanes > 0 && !producer.vars.empty()) w.vectorize(producer.vars[0], lanes, kTail);
}

}  // namespace

void pack(DirectiveApplier& a, const std::string& name, const Directive& d) {
  pack_operand(a.stage(d.vars[0]), a.stage(name).func, a.stage(d.at_stage).func, a.lookup(d.at_stage, d.at_var),
               d.factors.empty() ? 0 : factor(d, 0));
}

// The result of matmul stage `name` materialised at root through a wrapper
// (`f.in()`, which every consumer then reads) tiled like the output of the
// classic GEMM: [fx, fy] full tiles (shifted inwards; guarded tails below
// those extents), the tile vectorised by `lanes` and unrolled, the product
// computed per tile. With an operand in `vars`, the column panels are the
// outer loop and that operand is packed per panel (as `pack`). Parallel over
// the outer tile loop, fused with the first batch axis if any.
void result_tiles(DirectiveApplier& a, const std::string& name, const Directive& d) {
  Stage& s = a.stage(name);
  const int r = static_cast<int>(s.vars.size());
  const int fx = factor(d, 0), fy = factor(d, 1), lanes = factor(d, 2);
  const bool pack = !d.vars.empty();
  // A packed operand shared by the batch (rank 2) is packed once per column
  // panel: the batch axes run inside the panel loop.
  const bool shared = pack && r > 2 && a.stage(d.vars[0]).vars.size() == 2;
  Halide::Func w = s.func.in();
  w.compute_root();
  Halide::Var x = s.vars[0], y = s.vars[1], xo(name + "_no"), yo(name + "_mo"), xi(name + "_ni"), yi(name + "_mi"),
              par(name + "_par");
  auto tile = [&](Halide::Stage st, TailStrategy tail) {
    st.tile(x, y, xo, yo, xi, yi, fx, fy, tail).vectorize(xi, lanes, kTail).unroll(yi);
    std::vector<VarOrRVar> order = {xi, yi};
    order.push_back(pack ? yo : xo);
    if (!shared) order.push_back(pack ? xo : yo);
    for (int i = 2; i < r; ++i) order.push_back(s.vars[i]);
    if (shared) order.push_back(xo);
    st.reorder(order);
    Halide::Var outer = pack ? xo : yo;
    if (r > 2 && !shared) st.fuse(outer, s.vars[2], par).parallel(par);
    else st.parallel(outer);
  };
  Halide::Expr fit = s.extents.at(0) >= fx && s.extents.at(1) >= fy;
  tile(w.specialize(fit), TailStrategy::ShiftInwards);
  tile(w, kTail);
  s.func.compute_at(w, pack ? yo : xo);
  if (pack) pack_operand(a.stage(d.vars[0]), s.func, w, VarOrRVar(r > 2 && !shared ? par : xo), lanes);
}

// The product of BF16 operands in AMX tiles (Lowerer::matmul_amx; a stage
// with StageInfo::amx), b's pair copy `vars[0]` packed per column panel of
// `panel` columns: its result materialised at root through a wrapper tiled
// 16 x 16, the column tiles grouped into panels, both rounded up past the
// edges (the algorithm's copies are clamped and padded: what lies beyond
// is computed and never read). Panels outermost and parallel, the batch
// axes and the row tiles inside; per panel, b's pairs for its columns,
// stored `panel` wide, so that the tile loads see a constant row stride
// (Halide 21 recognises a tile load of b only then). Per tile the product
// lives in an AMX tile register: its k loop runs over tiles of 32 with the
// 32 x 16 x 16 block vectorised and atomic, which Halide turns into
// tileloadd and tdpbf16ps; the wrapper's tile is its tilestored.
void amx_tiles(DirectiveApplier& a, const std::string& name, const Directive& d) {
  constexpr int kTile = 16;
  Stage& s = a.stage(name);
  Stage& bp = a.stage(d.vars.at(0));
  const int r = static_cast<int>(s.vars.size()), panel = factor(d, 0);
  Halide::Func w = s.func.in();
  w.compute_root();
  Halide::Var x = s.vars[0], y = s.vars[1], xo(name + "_no"), yo(name + "_mo"), xi(name + "_ni"), yi(name + "_mi"),
              xp(name + "_panel"), ix(name + "_ix"), iy(name + "_iy");
  w.tile(x, y, xo, yo, xi, yi, kTile, kTile, TailStrategy::RoundUp)
      .split(xo, xp, xo, panel / kTile, TailStrategy::RoundUp)
      .vectorize(xi)
      .vectorize(yi);
  std::vector<VarOrRVar> order = {xi, yi, xo, yo};
  for (int i = 2; i < r; ++i) order.push_back(s.vars[i]);
  order.push_back(xp);
  w.reorder(order).parallel(xp);
  // b's pairs [k2, n, i] (Halide order i, n, k2) for the panel's columns
  // (of a packed weight, lower::Pack, a copy of BF16 pairs).
  bp.func.compute_at(w, xp).bound_storage(bp.vars[1], panel).vectorize(bp.vars[0]).vectorize(bp.vars[1], kTile);
  s.func.compute_at(w, xo).store_in(Halide::MemoryType::AMXTile);
  s.func.tile(x, y, ix, iy, kTile, kTile).vectorize(ix).vectorize(iy);
  Halide::RVar ki = s.rvars.at(0), kt = s.rvars.at(1);
  s.func.update(0)
      .tile(x, y, ix, iy, kTile, kTile, TailStrategy::GuardWithIf)
      .reorder({ki, ix, iy, kt, x, y})
      .atomic()
      .vectorize(ki)
      .vectorize(ix)
      .vectorize(iy);
}

// The fused attention block (rules_attention.h): the result of matmul
// stage `name` (the product with V) materialised at root through a wrapper
// tiled [fx, fy] as result_tiles does (no packing, `name` computed per
// tile), its row tiles grouped `nb` to a block, blocks fused with the first
// batch axis and parallel. Per block, the chain `vars` is computed there:
// vars[0], the scores, through a wrapper of its own tiled [sx, sy] with the
// column tiles outermost, the scores computed per tile and their second
// operand (the keys) packed per column tile; the other stages of the chain
// (softmax parts, probabilities) at the block itself. Full tiles shift
// inwards where the extents allow; guarded below.
void attention_tiles(DirectiveApplier& a, const std::string& name, const Directive& d) {
  Stage& s = a.stage(name);
  const int fx = factor(d, 0), fy = factor(d, 1), lanes = factor(d, 2), sx = factor(d, 3), sy = factor(d, 4),
            nb = factor(d, 5);
  Halide::Func w = s.func.in();
  w.compute_root();
  Halide::Var x = s.vars[0], y = s.vars[1], xo(name + "_no"), yo(name + "_mo"), xi(name + "_ni"), yi(name + "_mi"),
              yob(name + "_mb"), yoi(name + "_mt"), block(name + "_block");
  auto tile = [&](Halide::Stage st, TailStrategy tail) {
    st.tile(x, y, xo, yo, xi, yi, fx, fy, tail).vectorize(xi, lanes, kTail).unroll(yi);
    st.split(yo, yob, yoi, nb, kTail).fuse(yob, s.vars[2], block).parallel(block);
  };
  tile(w.specialize(s.extents.at(0) >= fx && s.extents.at(1) >= fy), TailStrategy::ShiftInwards);
  tile(w, kTail);
  s.func.compute_at(w, xo);
  Stage& sc = a.stage(d.vars[0]);
  Halide::Func w1 = sc.func.in();
  w1.compute_at(w, block);
  Halide::Var x1 = sc.vars[0], y1 = sc.vars[1], x1o(sc.name + "_no"), y1o(sc.name + "_mo"), x1i(sc.name + "_ni"),
              y1i(sc.name + "_mi");
  auto tile1 = [&](Halide::Stage st, TailStrategy tail) {
    st.tile(x1, y1, x1o, y1o, x1i, y1i, sx, sy, tail).vectorize(x1i, lanes, kTail).unroll(y1i).reorder(x1i, y1i, y1o, x1o);
  };
  tile1(w1.specialize(sc.extents.at(0) >= sx && sc.extents.at(1) >= sy), TailStrategy::ShiftInwards);
  tile1(w1, kTail);
  sc.func.compute_at(w1, y1o);
  if (sc.operands.size() == 2) pack_operand(a.stage(sc.operands[1]), sc.func, w1, VarOrRVar(x1o), lanes);
  for (size_t i = 1; i < d.vars.size(); ++i) a.stage(d.vars[i]).func.compute_at(w, block);
}

}  // namespace apply

}  // namespace mlk

namespace mlk::lower {

namespace {

// The condition under which every full tile (a `tile` with a third factor)
// of `ds` fits the stage's extents; null when it has none.
Halide::Expr full_tiles_fit(const Stage& s, const std::vector<Directive>& ds) {
  Halide::Expr cond;
  const int r = static_cast<int>(s.vars.size());
  for (const Directive& d : ds) {
    if (d.op != "tile" || d.factors.size() != 3 || d.update >= 0) continue;
    for (int k = 0; k < 2; ++k) {
      const int dim = r - 1 - std::stoi(d.vars[k].substr(1));  // a{i} is Halide dimension r - 1 - i
      Halide::Expr fits = s.extents.at(dim) >= static_cast<int>(d.factors[k]);
      cond = cond.defined() ? (cond && fits) : fits;
    }
  }
  return cond;
}

}  // namespace

Status apply_schedule(Pipeline& p, const Schedule& s, bool gpu) {
  MLK_RETURN_IF_ERROR(validate_schedule(s, stage_infos(p, {}), gpu));
  if (!s.autoscheduler.empty()) return Status::Ok();  // see apply_autoscheduler
  DirectiveApplier a(p);
  auto run = [&](const std::string& name, const std::vector<Directive>& ds, bool placement) -> Status {
    for (size_t i = 0; i < ds.size(); ++i) {
      const DirectiveKind& kind = *find_directive(ds[i].op);  // validated above
      if (kind.placement != placement) continue;
      try {
        kind.apply(a, name, ds[i]);
      } catch (const Halide::Error& e) {
        return Status::InvalidArgument("schedule: stage `" + name + "` directive " + std::to_string(i) + " `" +
                                       ds[i].op + "`: Halide refuses it: " + e.what());
      }
    }
    return Status::Ok();
  };
  // A stage with full tiles is specialised: where they fit its extents, its
  // pure directives apply with tiles shifted inwards (every tile whole, so a
  // producer computed per tile has a constant size); elsewhere (small
  // shapes) with guarded tails. Placement directives last: they may name
  // variables that another stage's directives introduce (compute_at(output,
  // "no") after output's tile).
  for (const auto& [name, ds] : s.stages) {
    Halide::Expr fit = full_tiles_fit(a.stage(name), ds);
    if (fit.defined()) {
      a.set_branch(name, a.stage(name).func.specialize(fit));
      MLK_RETURN_IF_ERROR(run(name, ds, false));
      a.clear_branch();
    }
    MLK_RETURN_IF_ERROR(run(name, ds, false));
  }
  for (const auto& [name, ds] : s.stages) MLK_RETURN_IF_ERROR(run(name, ds, true));
  return Status::Ok();
}

}  // namespace mlk::lower

namespace mlk::lower {

void schedule_packs(Pipeline& p) {
  for (Pack& pk : p.packs) {
    const std::vector<Halide::Var> v = pk.func.args();  // i, c, k2, t
    Halide::Var ko(pk.func.name() + "_ko"), ki(pk.func.name() + "_ki"), kt(pk.func.name() + "_kt");
    pk.func.bound(v[0], 0, 2)
        .vectorize(v[0])
        .vectorize(v[1], 16, Halide::TailStrategy::GuardWithIf)
        .split(v[2], ko, ki, 16, Halide::TailStrategy::GuardWithIf)
        .fuse(ko, v[3], kt)
        .parallel(kt);
  }
}

}  // namespace mlk::lower
