#include "scheduler/rules.h"

#include <algorithm>

namespace mlk {

namespace {

using Kind = StageInfo::Kind;

std::string a(int i) { return "a" + std::to_string(i); }

Directive D(std::string op, std::vector<std::string> vars = {}, std::vector<int64_t> factors = {}, int update = -1) {
  Directive d;
  d.op = std::move(op);
  d.vars = std::move(vars);
  d.factors = std::move(factors);
  d.update = update;
  return d;
}

Directive At(std::string op, std::string stage, std::string var) {
  Directive d;
  d.op = std::move(op);
  d.at_stage = std::move(stage);
  d.at_var = std::move(var);
  return d;
}

// A factor no larger than the extent, when the extent is known.
int64_t clip(int64_t factor, int64_t extent) { return extent > 0 ? std::max<int64_t>(1, std::min(factor, extent)) : factor; }

const StageInfo* output_of(const std::vector<StageInfo>& stages) {
  for (const auto& s : stages)
    if (s.kind == Kind::kOutput) return &s;
  return nullptr;
}

// Can the matmul be computed per register tile of the output (the classic
// Halide GEMM schedule)? Only when it is the output's shape, so that a tile
// of the output is a tile of the product.
bool matmul_at_output(const StageInfo& s, const StageInfo* out) {
  return out && s.kind == Kind::kMatmul && out->rank == s.rank && out->extents == s.extents && s.rank >= 2;
}

bool is_reduction_like(Kind k) { return k == Kind::kReduction || k == Kind::kSoftmaxMax || k == Kind::kSoftmaxSum; }

// Can stage `s` be computed per row of the output (row-wise fusion)?
bool row_fusable(const StageInfo& s, const StageInfo* out) {
  if (!out || out->rank < 2) return false;
  if (is_reduction_like(s.kind)) return s.reduces_innermost && s.rank == out->rank - 1;
  if (s.kind == Kind::kSoftmaxExp) return s.rank == out->rank;
  return false;
}

void cpu_stage(const StageInfo& s, const std::map<std::string, int64_t>& k, const StageInfo* out, int lanes,
               std::vector<Directive>& ds) {
  const int r = s.rank;
  auto knob = [&](const char* n, int64_t def) {
    auto it = k.find(n);
    return it == k.end() ? def : it->second;
  };
  auto ext = [&](int i) { return i < static_cast<int>(s.extents.size()) ? s.extents[i] : 0; };
  // Parallel over the outermost axis; for rank >= 4 (and rank 3 where the
  // second axis is not tiled) over the two outermost fused, so that a batch
  // of one (B = 1, H heads) still uses every core.
  auto par_outer = [&](int update, bool rank3) {
    if (r >= 4 || (r == 3 && rank3)) {
      const std::string fused = update < 0 ? "pb" : "pbu";
      ds.push_back(D("fuse", {a(1), a(0), fused}, {}, update));
      ds.push_back(D("parallel", {fused}, {}, update));
    } else {
      ds.push_back(D("parallel", {a(0)}, {}, update));
    }
  };
  if (s.kind == Kind::kOperand) {
    // mat = 1: materialised at root in the matmul's reading order (its own
    // innermost axis contiguous), vectorised and parallel; else inline.
    if (!knob("mat", 0)) return;
    ds.push_back(D("compute_root"));
    ds.push_back(D("vectorize", {a(r - 1)}, {clip(lanes, ext(r - 1))}));
    par_outer(-1, true);
    return;
  }
  if (s.kind == Kind::kOutput) {
    if (r == 0) return;
    int64_t vec = lanes * knob("vec", 1);
    if (r == 1) {
      if (knob("par", 1)) {
        ds.push_back(D("split", {a(0), "po", "pi"}, {clip(16384, ext(0))}));
        ds.push_back(D("parallel", {"po"}));
        ds.push_back(D("vectorize", {"pi"}, {clip(vec, ext(0))}));
      } else {
        ds.push_back(D("vectorize", {a(0)}, {clip(vec, ext(0))}));
      }
      return;
    }
    ds.push_back(D("vectorize", {a(r - 1)}, {clip(vec, ext(r - 1))}));
    if (knob("par", 1)) {
      // fuse_outer defaults to on when the outermost extent is known and too
      // small to feed the cores (a batch of one).
      if (r >= 3 && knob("fuse_outer", ext(0) > 0 && ext(0) < 8 ? 1 : 0)) {
        ds.push_back(D("fuse", {a(1), a(0), "pf"}));
        ds.push_back(D("parallel", {"pf"}));
      } else {
        ds.push_back(D("parallel", {a(0)}));
      }
    }
    return;
  }
  if (s.kind == Kind::kMatmul) {
    int64_t tn = clip(lanes * knob("tn", 2), ext(r - 1)), tm = clip(knob("tm", 4), ext(r - 2));
    ds.push_back(D("compute_root"));
    ds.push_back(D("vectorize", {a(r - 1)}, {clip(lanes, ext(r - 1))}));
    par_outer(-1, false);
    ds.push_back(D("tile", {a(r - 1), a(r - 2), "no", "mo", "ni", "mi"}, {tn, tm}, 0));
    // Cache blocking (kc > 0): the k loop split into blocks of kc, and the
    // rows into blocks of mc register tiles; per row block and k block, the
    // kc x (lanes * tn) slice of b stays in cache across the row block's
    // tiles, and the accumulators live in the result between k blocks.
    const int64_t kc = knob("kc", 0), mc = knob("mc", 0);
    std::vector<std::string> order;
    std::string par = r >= 4 ? "" : r > 2 ? a(0) : "mo";  // "": batch axes fused below
    if (kc > 0 && mc > 0) {
      ds.push_back(D("split", {"r0", "rko", "rki"}, {kc}, 0));
      ds.push_back(D("split", {"mo", "mco", "mt"}, {mc}, 0));
      order = {"ni", "mi", "rki", "mt", "no", "rko", "mco"};
      if (r == 2) par = "mco";
    } else {
      order = {"ni", "mi", "r0", "no", "mo"};
    }
    for (int i = r - 3; i >= 0; --i) order.push_back(a(i));
    ds.push_back(D("reorder", order, {}, 0));
    ds.push_back(D("vectorize", {"ni"}, {clip(lanes, tn)}, 0));
    if (knob("unroll", 1)) ds.push_back(D("unroll", {"mi"}, {}, 0));
    if (par.empty()) {
      ds.push_back(D("fuse", {a(1), a(0), "pbu"}, {}, 0));
      ds.push_back(D("parallel", {"pbu"}, {}, 0));
    } else {
      ds.push_back(D("parallel", {par}, {}, 0));
    }
    return;
  }
  if (s.kind == Kind::kSoftmaxExp) {
    int64_t mode = row_fusable(s, out) ? knob("fuse", 1) : 0;
    if (mode == 2) {
      ds.push_back(D("compute_inline"));
      return;
    }
    if (mode == 1) ds.push_back(At("compute_at", "output", a(out->rank - 2)));
    else ds.push_back(D("compute_root"));
    if (r >= 1) ds.push_back(D("vectorize", {a(r - 1)}, {clip(lanes, ext(r - 1))}));
    if (mode == 0 && r >= 2) par_outer(-1, true);
    return;
  }
  if (is_reduction_like(s.kind)) {
    // A reduction along the innermost axis, vectorised by reducing `lanes`
    // partial results side by side.
    bool vred = s.reduces_innermost && s.rvars == 1 && knob("vred", 0);
    if (row_fusable(s, out) && knob("fuse", 1)) {
      ds.push_back(At("compute_at", "output", a(out->rank - 2)));
      if (vred) ds.push_back(D("rfactor_vector", {"r0", "u"}, {lanes}));
      return;
    }
    if (vred) {
      ds.push_back(D("compute_root"));
      if (r >= 2) par_outer(-1, true);
      ds.push_back(D("rfactor_vector", {"r0", "u"}, {lanes}));
      return;
    }
    ds.push_back(D("compute_root"));
    if (r == 0) {
      int64_t rf = knob("rfactor", 0);
      if (rf > 0 && s.rvars == 1) ds.push_back(D("rfactor", {"r0", "u"}, {rf}));
      return;
    }
    ds.push_back(D("vectorize", {a(r - 1)}, {clip(lanes, ext(r - 1))}));
    if (r >= 2) par_outer(-1, true);
    if (!s.reduces_innermost) {
      std::vector<std::string> order = {a(r - 1)};
      for (int i = 0; i < s.rvars; ++i) order.push_back("r" + std::to_string(i));
      for (int i = r - 2; i >= 0; --i) order.push_back(a(i));
      ds.push_back(D("reorder", order, {}, 0));
      ds.push_back(D("vectorize", {a(r - 1)}, {clip(lanes, ext(r - 1))}, 0));
    }
    if (r >= 2) par_outer(0, true);
  }
}

void gpu_stage(const StageInfo& s, const std::map<std::string, int64_t>& k, std::vector<Directive>& ds) {
  const int r = s.rank;
  if (s.kind == Kind::kOperand) return;  // inline: GPU matmuls stage their inputs in shared memory instead
  auto knob = [&](const char* n, int64_t def) {
    auto it = k.find(n);
    return it == k.end() ? def : it->second;
  };
  if (s.kind != Kind::kOutput) ds.push_back(D("compute_root"));
  if (s.kind == Kind::kMatmul && r >= 2 && knob("smem", 0) && !s.direct_inputs.empty()) {
    // Block tiles of the output, the k loop split into tiles whose slices of
    // the inputs are staged in shared memory per block.
    int64_t t = knob("tile", 16);
    ds.push_back(D("gpu_tile", {a(r - 1), a(r - 2), "bx", "by", "tx", "ty"}, {t, t}));
    ds.push_back(D("gpu_tile", {a(r - 1), a(r - 2), "bx", "by", "tx", "ty"}, {t, t}, 0));
    ds.push_back(D("split", {"r0", "ko", "ki"}, {t}, 0));
    std::vector<std::string> order = {"ki", "tx", "ty", "ko", "bx", "by"};
    for (int i = r - 3; i >= 0; --i) order.push_back(a(i));
    ds.push_back(D("reorder", order, {}, 0));
    for (const auto& in : s.direct_inputs) {
      Directive d = At("stage_shared", in, "ko");
      ds.push_back(d);
    }
    return;
  }
  int defs = s.rvars > 0 ? 2 : 1;  // the pure definition and the update
  for (int u = -1; u < defs - 1; ++u) {
    if (r == 0) {
      ds.push_back(D("gpu_single_thread", {}, {}, u));
    } else if (r == 1) {
      ds.push_back(D("gpu_tile", {a(0), "bx", "tx"}, {knob("tx", 64) * knob("ty", 4)}, u));
    } else {
      ds.push_back(D("gpu_tile", {a(r - 1), a(r - 2), "bx", "by", "tx", "ty"}, {knob("tx", 32), knob("ty", 8)}, u));
    }
  }
}

}  // namespace

int vector_lanes(const Profile& p) { return std::max(4, p.vector_bits / 32); }

KnobSpace knob_space(const std::vector<StageInfo>& stages, const Profile& p) {
  KnobSpace ks;
  const StageInfo* out = output_of(stages);
  for (const auto& s : stages) {
    if (s.kind == Kind::kInput || (p.is_gpu() && s.kind == Kind::kOperand)) continue;
    auto& m = ks[s.name];
    if (p.is_gpu()) {
      if (s.rank >= 1) {
        m["tx"] = {8, 16, 32, 64};
        m["ty"] = {1, 2, 4, 8, 16};
      }
      if (s.kind == Kind::kMatmul && s.rank >= 2 && !s.direct_inputs.empty()) {
        m["smem"] = {0, 1};
        m["tile"] = {8, 16, 32};
      }
      continue;
    }
    switch (s.kind) {
      case Kind::kOperand:
        m["mat"] = {0, 1};
        break;
      case Kind::kOutput:
        if (s.rank >= 1) m["vec"] = {1, 2};
        if (s.rank >= 1) m["par"] = {0, 1};
        if (s.rank >= 3) m["fuse_outer"] = {0, 1};
        break;
      case Kind::kMatmul:
        m["tn"] = {1, 2, 3, 4};
        m["tm"] = {1, 2, 4, 6, 8, 12, 16};
        m["unroll"] = {0, 1};
        if (matmul_at_output(s, out)) m["at_output"] = {0, 1};
        if (s.rvars == 1) {
          m["kc"] = {0, 128, 256, 512};
          m["mc"] = {0, 4, 8, 16};
        }
        break;
      case Kind::kSoftmaxExp:
        if (row_fusable(s, out)) m["fuse"] = {0, 1, 2};
        break;
      default:
        if (row_fusable(s, out)) m["fuse"] = {0, 1};
        if (s.reduces_innermost && s.rvars == 1) m["vred"] = {0, 1};
        if (s.rank == 0 && s.rvars == 1) m["rfactor"] = {0, 256, 4096};
        break;
    }
    if (m.empty()) ks.erase(s.name);
  }
  return ks;
}

std::vector<Knobs> seed_knobs(const std::vector<StageInfo>& stages, const Profile& p) {
  if (p.is_gpu()) return {};
  const KnobSpace space = knob_space(stages, p);
  const Knobs def = default_knobs(stages, p);
  // Register tiles: lanes * tn columns by tm rows of accumulators, within
  // the 32 (AVX-512) or 16 (AVX2) vector registers, per output tile. (Cache
  // blocking, kc and mc, is left to the search: measured on the two-core
  // EPYC it did not beat these at 512x4096x4096; docs/benchmarks.md.)
  struct Seed {
    int64_t tm, tn, at_output, kc, mc, mat;
  };
  const bool wide = vector_lanes(p) >= 16;
  const std::vector<Seed> plans = wide ? std::vector<Seed>{{8, 3, 1, 0, 0, 1}, {6, 4, 1, 0, 0, 0}}
                                       : std::vector<Seed>{{6, 2, 1, 0, 0, 1}, {4, 3, 1, 0, 0, 0}};
  std::vector<Knobs> seeds;
  for (const Seed& plan : plans) {
    Knobs k = def;
    auto set = [&](const std::string& stage, const std::string& knob, int64_t v) {
      auto st = space.find(stage);
      if (st == space.end()) return;
      auto kn = st->second.find(knob);
      if (kn == st->second.end()) return;
      if (std::find(kn->second.begin(), kn->second.end(), v) != kn->second.end()) k[stage][knob] = v;
    };
    for (const auto& s : stages) {
      set(s.name, "at_output", plan.at_output);
      set(s.name, "tm", plan.tm);
      set(s.name, "tn", plan.tn);
      set(s.name, "kc", plan.kc);
      set(s.name, "mc", plan.mc);
      set(s.name, "mat", plan.mat);
      set(s.name, "fuse", s.kind == Kind::kSoftmaxExp ? 2 : 1);
      set(s.name, "vred", 1);
      set(s.name, "vec", 2);
    }
    if (k != def && std::find(seeds.begin(), seeds.end(), k) == seeds.end()) seeds.push_back(k);
  }
  return seeds;
}

Knobs default_knobs(const std::vector<StageInfo>& stages, const Profile& p) {
  Knobs k;
  for (const auto& s : stages) {
    if (s.kind == Kind::kInput || (p.is_gpu() && s.kind == Kind::kOperand)) continue;
    if (p.is_gpu()) {
      if (s.rank >= 1) k[s.name] = {{"tx", 32}, {"ty", 8}};
      continue;
    }
    // The default schedule keeps everything at root (no row fusion); the
    // tuner explores fusion.
    if (s.kind == Kind::kMatmul) k[s.name] = {{"tn", 2}, {"tm", 4}, {"unroll", 1}, {"at_output", 0}};
    else if (s.kind == Kind::kOperand) k[s.name] = {{"mat", 0}};
    else if (s.kind == Kind::kOutput) k[s.name] = {{"vec", 1}, {"par", 1}};
    else k[s.name] = {{"fuse", 0}};
  }
  return k;
}


// Register-tiled GEMM: the output tiled into (tm rows) x (tn vectors); the
// product computed per tile with the k loop outside the unrolled tile, so
// the accumulators stay in registers.
static void gemm_at_output(const StageInfo& mm, const StageInfo& out, const std::map<std::string, int64_t>& k, int lanes,
                    std::vector<Directive>& mm_ds, std::vector<Directive>& out_ds) {
  auto knob = [&](const char* n, int64_t def) {
    auto it = k.find(n);
    return it == k.end() ? def : it->second;
  };
  const int r = mm.rank;
  auto ext = [&](int i) { return i < static_cast<int>(mm.extents.size()) ? mm.extents[i] : 0; };
  int64_t tn = clip(lanes * knob("tn", 2), ext(r - 1)), tm = clip(knob("tm", 4), ext(r - 2));
  out_ds.push_back(D("tile", {a(r - 1), a(r - 2), "no", "mo", "ni", "mi"}, {tn, tm}));
  out_ds.push_back(D("vectorize", {"ni"}, {clip(lanes, tn)}));
  out_ds.push_back(D("unroll", {"mi"}));
  if (r > 2) {
    out_ds.push_back(D("fuse", {"mo", a(r - 3), "mf"}));
    out_ds.push_back(D("parallel", {"mf"}));
  } else {
    out_ds.push_back(D("parallel", {"mo"}));
  }
  mm_ds.push_back(At("compute_at", "output", "no"));
  mm_ds.push_back(D("vectorize", {a(r - 1)}, {clip(lanes, tn)}));
  mm_ds.push_back(D("unroll", {a(r - 2)}));
  mm_ds.push_back(D("reorder", {a(r - 1), a(r - 2), "r0"}, {}, 0));
  mm_ds.push_back(D("vectorize", {a(r - 1)}, {clip(lanes, tn)}, 0));
  mm_ds.push_back(D("unroll", {a(r - 1)}, {}, 0));
  mm_ds.push_back(D("unroll", {a(r - 2)}, {}, 0));
}

Schedule schedule_from_knobs(const std::vector<StageInfo>& stages, const Knobs& k, const Profile& p) {
  Schedule sched;
  const StageInfo* out = output_of(stages);
  const int lanes = vector_lanes(p);
  static const std::map<std::string, int64_t> kNone;
  // A GEMM computed per output tile schedules the output too.
  const StageInfo* gemm = nullptr;
  if (!p.is_gpu())
    for (const auto& s : stages) {
      auto it = k.find(s.name);
      if (matmul_at_output(s, out) && it != k.end() && it->second.count("at_output") && it->second.at("at_output"))
        gemm = &s;
    }
  if (gemm) gemm_at_output(*gemm, *out, k.at(gemm->name), lanes, sched.stages[gemm->name], sched.stages["output"]);
  for (const auto& s : stages) {
    if (s.kind == Kind::kInput || (gemm && (&s == gemm || s.kind == Kind::kOutput))) continue;
    auto it = k.find(s.name);
    const auto& knobs = it == k.end() ? kNone : it->second;
    std::vector<Directive> ds;
    if (p.is_gpu()) gpu_stage(s, knobs, ds);
    else cpu_stage(s, knobs, out, lanes, ds);
    if (!ds.empty()) sched.stages[s.name] = ds;
  }
  return sched;
}

}  // namespace mlk
