// The knob registry's one table (see rules_knobs.h; docs/schedules.md, "The
// rules and their knobs", says what each knob does).
#include "scheduler/rules_knobs.h"

#include "scheduler/rules_attention.h"
#include "scheduler/rules_common.h"

namespace mlk {

namespace {

using rules::Kind;
using L = KnobDecl::Listed;

template <int64_t V>
int64_t constant(const StageInfo&, const Profile&) {
  return V;
}

const std::vector<Kind> kRowReductions = {Kind::kReduction, Kind::kSoftmaxMax, Kind::kSoftmaxSum};
const std::vector<Kind> kGpuStages = {Kind::kReduction, Kind::kMatmul,     Kind::kSoftmaxMax,
                                      Kind::kSoftmaxExp, Kind::kSoftmaxSum, Kind::kOutput};

bool rank1(const StageInfo& s, const StageInfo*) { return s.rank >= 1; }
bool one_rvar(const StageInfo& s, const StageInfo*) { return s.rvars == 1; }
bool gpu_smem(const StageInfo& s, const StageInfo*) { return s.rank >= 2 && !s.direct_inputs.empty(); }
// A product in AMX tiles has none of the CPU matmul knobs: its tile is the hardware's.
bool not_amx(const StageInfo& s, const StageInfo*) { return !s.amx; }

}  // namespace

const std::vector<KnobDecl>& knob_decls() {
  static const std::vector<KnobDecl> decls = {
      // CPU: operands, output.
      {Knob::kMat, "mat", false, {{{Kind::kOperand}, {0, 1}}},
       [](const StageInfo& s, const StageInfo*) { return !s.pair_copy; }, constant<0>, L::kEveryStage},
      {Knob::kVec, "vec", false, {{{Kind::kOutput}, {1, 2}}}, rank1, constant<1>, L::kEveryStage},
      {Knob::kPar, "par", false, {{{Kind::kOutput}, {0, 1}}}, rank1, constant<1>, L::kEveryStage},
      {Knob::kFuseOuter, "fuse_outer", false, {{{Kind::kOutput}, {0, 1}}},
       [](const StageInfo& s, const StageInfo*) { return s.rank >= 3; },
       // On when the outermost extent is known and too small to feed the cores (a batch of one).
       [](const StageInfo& s, const Profile&) -> int64_t { return rules::ext(s, 0) > 0 && rules::ext(s, 0) < 8 ? 1 : 0; },
       L::kNone},
      // CPU: matmuls.
      {Knob::kTn, "tn", false, {{{Kind::kMatmul}, {1, 2, 3, 4}}}, not_amx, constant<2>, L::kEveryStage},
      {Knob::kTm, "tm", false, {{{Kind::kMatmul}, {1, 2, 4, 6, 8, 12, 16}}}, not_amx, constant<4>, L::kEveryStage},
      {Knob::kUnroll, "unroll", false, {{{Kind::kMatmul}, {0, 1}}}, not_amx, constant<1>, L::kEveryStage},
      {Knob::kAtOutput, "at_output", false, {{{Kind::kMatmul}, {0, 1}}},
       [](const StageInfo& s, const StageInfo* out) { return !s.amx && rules::matmul_at_output(s, out); }, constant<0>,
       L::kEveryStage},
      // A matmul that is not the output's shape, materialised in register tiles.
      {Knob::kResult, "result", false, {{{Kind::kMatmul}, {0, 1}}},
       [](const StageInfo& s, const StageInfo* out) { return !s.amx && rules::matmul_result_tiles(s, out); },
       constant<0>, L::kNone},
      // Packing b per column panel (rules_cpu_matmul.cpp), with at_output or result.
      {Knob::kPack, "pack", false, {{{Kind::kMatmul}, {0, 1}}},
       [](const StageInfo& s, const StageInfo* out) {
         return s.operands.size() == 2 && !s.pairs && !s.amx &&
                (rules::matmul_at_output(s, out) || rules::matmul_result_tiles(s, out));
       },
       constant<0>, L::kNone},
      {Knob::kKc, "kc", false, {{{Kind::kMatmul}, {0, 128, 256, 512}}}, one_rvar, constant<0>, L::kNone},
      {Knob::kMc, "mc", false, {{{Kind::kMatmul}, {0, 4, 8, 16}}}, one_rvar, constant<0>, L::kNone},
      // The product with V of an attention chain, fused per block of query
      // rows with the scores and the softmax (rules_attention.h).
      {Knob::kFlash, "flash", false, {{{Kind::kMatmul}, {0, 1}}}, nullptr, constant<0>, L::kNone,
       rules::ends_attention},
      // A product lowered for AMX tiles (StageInfo::amx): in tiles (1), or
      // the copies and the product at root, untiled (0: the naive schedule,
      // and what a build falls back to where Halide refuses the tiles).
      {Knob::kAmx, "amx", false, {{{Kind::kMatmul}, {0, 1}}},
       [](const StageInfo& s, const StageInfo*) { return s.amx; }, constant<0>, L::kSearched},
      // CPU: reductions and softmax parts.
      {Knob::kFuse, "fuse", false, {{kRowReductions, {0, 1}}, {{Kind::kSoftmaxExp}, {0, 1, 2}}},
       [](const StageInfo& s, const StageInfo* out) { return rules::row_shaped(s, out); }, constant<0>,
       L::kEveryStage, rules::row_fusable_in},
      {Knob::kVred, "vred", false, {{kRowReductions, {0, 1}}},
       [](const StageInfo& s, const StageInfo*) { return s.reduces_innermost && s.rvars == 1; }, constant<0>, L::kNone},
      // A reduction whose result is too small to split across the cores (a
      // sum to a scalar, a bias gradient over the rows) in parallel chunks of
      // its input (1, rules::spread_reduction), or serial (0).
      {Knob::kRfactor, "rfactor", false, {{{Kind::kReduction}, {0, 1}}},
       [](const StageInfo& s, const StageInfo*) { return rules::spread_reduction(s); }, constant<0>, L::kNone},
      // GPU.
      {Knob::kTx, "tx", true, {{kGpuStages, {8, 16, 32, 64}}}, rank1, constant<32>, L::kSearched},
      {Knob::kTy, "ty", true, {{kGpuStages, {1, 2, 4, 8, 16}}}, rank1, constant<8>, L::kSearched},
      {Knob::kSmem, "smem", true, {{{Kind::kMatmul}, {0, 1}}}, gpu_smem, constant<0>, L::kNone},
      {Knob::kTile, "tile", true, {{{Kind::kMatmul}, {8, 16, 32}}}, gpu_smem, constant<16>, L::kNone},
  };
  return decls;
}

const std::vector<int64_t>& KnobDecl::choices(StageInfo::Kind k) const {
  static const std::vector<int64_t> kNone;
  for (const auto& sc : scopes)
    for (Kind x : sc.kinds)
      if (x == k) return sc.choices;
  return kNone;
}

const KnobDecl& knob_decl(Knob k) {
  for (const auto& d : knob_decls())
    if (d.id == k) return d;
  return knob_decls().front();  // unreachable: every Knob is declared (rules_test checks)
}

Expected<const KnobDecl*> find_knob(std::string_view name, bool gpu) {
  for (const auto& d : knob_decls())
    if (d.name == name && d.gpu == gpu) return &d;
  std::string known;
  for (const auto& d : knob_decls())
    if (d.gpu == gpu) known += (known.empty() ? "" : ", ") + std::string(d.name);
  return Status::InvalidArgument("unknown knob `" + std::string(name) + "` for " + (gpu ? "GPU" : "CPU") +
                                 " profiles (knobs: " + known + ")");
}

int64_t KnobValues::operator[](Knob k) const {
  const KnobDecl& d = knob_decl(k);
  if (set_) {
    auto it = set_->find(std::string(d.name));
    if (it != set_->end()) return it->second;
  }
  return d.default_value(stage_, profile_);
}

}  // namespace mlk
