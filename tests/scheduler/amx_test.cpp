// Products of BF16 operands in AMX tiles (scheduler/lower.cpp,
// Lowerer::matmul_amx; rule: amx_tiles) on Sapphire Rapids-class targets:
// the stage table a schedule sees, the code of the untuned schedule
// (tdpbf16ps, checked in the assembly for the cpu_avx512_spr profile, which
// needs no such CPU), the directive's validation, and the values against the
// interpreter where this machine has AMX-BF16, at shapes whose edges are not
// whole tiles.
#include <dlfcn.h>
#include <algorithm>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <tuple>

#include "artifact/build.h"
#include "lang/compare.h"
#include "lang/frontend.h"
#include "lang/interpreter.h"
#include "lang/precision.h"
#include "scheduler/compile.h"
#include "scheduler/kernel.h"
#include "scheduler/lower.h"
#include "scheduler/rules.h"
#include "targets/detect.h"
#include "targets/profile.h"
#include "tests/scheduler/assembly.h"
#include "tests/test_support.h"

namespace mlk {
namespace {

using testing_asm::assembly;
using testing_asm::count;

const char* kProduct =
    "public fn f [M, K, N](a: Tensor[BF16, [M, K]], b: Tensor[BF16, [K, N]]) -> Tensor[BF16, [M, N]] = matmul(a, b)\n";
const char* kBatchedWeight =
    "public fn f [B, M, K, N](a: Tensor[F32, [B, M, K]], b: Tensor[F32, [K, N]]) -> Tensor[F32, [B, M, N]] =\n"
    "  matmul(a, b)\n";

// A Zen 4 (AVX512_BF16, no AMX): BF16 products in pair form.
const std::string zen4 = "x86-64-linux-sse41-avx-avx2-fma-f16c-avx512-avx512_skylake-avx512_cannonlake-avx512_zen4";

// `src` checked, under the bf16 policy.
ir::Module bf16_policy(const char* src) {
  auto fe = compile_source("p.tl", src);
  EXPECT_TRUE(fe.ok()) << fe.rendered();
  return with_precision(fe.module, Precision::kBF16);
}

const StageInfo* stage(const std::vector<StageInfo>& t, const std::string& name) {
  for (const StageInfo& s : t)
    if (s.name == name) return &s;
  return nullptr;
}

Profile spr() {
  auto p = find_profile("cpu_avx512_spr");
  EXPECT_TRUE(p.ok());
  return p.ok() ? *p : Profile{};
}

const Directive* find(const Schedule& s, const std::string& stage, const std::string& op) {
  auto it = s.stages.find(stage);
  if (it == s.stages.end()) return nullptr;
  for (const Directive& d : it->second)
    if (d.op == op) return &d;
  return nullptr;
}

TEST(Amx, Bf16ProductsByAWeightLowerForTilesOnSapphireRapidsOnly) {
  const DimEnv d = {{"M", 64}, {"K", 96}, {"N", 48}};
  auto fe = compile_source("p.tl", kProduct);
  ASSERT_TRUE(fe.ok()) << fe.rendered();
  auto t = stage_infos_for(fe.module, "f", d, spr().halide_target);
  ASSERT_TRUE(t.ok()) << t.status().message();
  const StageInfo* mm = stage(*t, "matmul0");
  ASSERT_NE(mm, nullptr);
  EXPECT_TRUE(mm->amx);
  EXPECT_FALSE(mm->pairs);
  EXPECT_EQ(mm->rvars, 2);
  EXPECT_EQ(mm->rextents, (std::vector<int64_t>{32, 3}));  // 3 tiles of 32 values of k
  ASSERT_EQ(mm->operands.size(), 2u);
  for (const std::string& o : mm->operands) {
    ASSERT_NE(stage(*t, o), nullptr) << o;
    EXPECT_TRUE(stage(*t, o)->pair_copy) << o;
  }
  EXPECT_EQ(stage(*t, mm->operands[1])->extents, (std::vector<int64_t>{48, 48, 2}));  // [K / 2, N, 2]
  // The tile is the hardware's: no CPU matmul knob applies but whether to use it.
  const KnobSpace space = knob_space(*t, spr());
  ASSERT_EQ(space.count("matmul0"), 1u);
  EXPECT_EQ(space.at("matmul0"), (std::map<std::string, std::vector<int64_t>>{{"amx", {0, 1}}}));
  // AVX-512 without AMX, a Zen 4 (the pair form there), F32 operands, and a
  // batched b (not a weight): not in tiles.
  auto f32 = compile_source("p.tl", "public fn f [M, K, N](a: Tensor[F32, [M, K]], b: Tensor[F32, [K, N]]) -> "
                                    "Tensor[F32, [M, N]] = matmul(a, b)\n");
  auto batched = compile_source("p.tl", "public fn f [B, M, K, N](a: Tensor[BF16, [B, M, K]], b: Tensor[BF16, [B, "
                                        "K, N]]) -> Tensor[BF16, [B, M, N]] = matmul(a, b)\n");
  ASSERT_TRUE(f32.ok() && batched.ok());
  for (const auto& [m, target] :
       {std::pair{&fe.module, std::string("x86-64-linux-avx2-avx512-avx512_skylake-avx512_cannonlake-fma-f16c")},
        std::pair{&fe.module, zen4}, std::pair{&f32.module, spr().halide_target},
        std::pair{&batched.module, spr().halide_target}}) {
    DimEnv e = d;
    e["B"] = 2;
    auto plain = stage_infos_for(*m, "f", e, target);
    ASSERT_TRUE(plain.ok()) << plain.status().message();
    EXPECT_FALSE(stage(*plain, "matmul0")->amx) << target;
  }
}

TEST(Amx, TheUntunedScheduleRunsInTiles) {
  const Profile p = spr();
  const DimEnv d = {{"B", 8}, {"M", 128}, {"K", 384}, {"N", 1536}};
  const std::string code = assembly(kBatchedWeight, p, d, Precision::kBF16);
  EXPECT_GE(count(code, "tdpbf16ps"), 1);
  EXPECT_GE(count(code, "tileloadd"), 2);
  EXPECT_GE(count(code, "tilestored"), 1);
  EXPECT_GE(count(code, "ldtilecfg"), 1);
  // Written in F32 it stays in F32, and AVX-512 without AMX has no tiles.
  EXPECT_EQ(count(assembly(kBatchedWeight, p, d), "tdpbf16ps"), 0);
  auto avx512 = find_profile("cpu_avx512");
  ASSERT_TRUE(avx512.ok());
  EXPECT_EQ(count(assembly(kBatchedWeight, *avx512, d, Precision::kBF16), "tdpbf16ps"), 0);
}

// The naive schedule (amx 0) keeps the lowering but not the tiles: what a
// build falls back to where Halide refuses them; its code has no tile
// instruction, and on this machine (where it has AMX) its values match.
TEST(Amx, TheNaiveScheduleRunsWithoutTiles) {
  const Profile p = spr();
  const DimEnv d = {{"B", 2}, {"M", 40}, {"K", 70}, {"N", 50}};
  auto fe = compile_source("p.tl", kBatchedWeight);
  ASSERT_TRUE(fe.ok());
  const ir::Module m = with_precision(fe.module, Precision::kBF16);
  auto t = stage_infos_for(m, "f", d, p.halide_target);
  ASSERT_TRUE(t.ok());
  const Schedule naive = schedule_from_knobs(*t, default_knobs(*t, p), p);
  EXPECT_EQ(find(naive, "matmul0", "amx_tiles"), nullptr) << naive.to_json();
  EXPECT_NE(find(schedule_from_knobs(*t, untuned_knobs(*t, p), p), "matmul0", "amx_tiles"), nullptr);
  if (!lower::options_for("host").amx_bf16) return;
  auto nt = naive_schedule_for(m, "f", host_profile(), d);
  ASSERT_TRUE(nt.ok()) << nt.status().message();
  auto k = Kernel::CompileJit(m, "f", host_profile(), &*nt, d);
  ASSERT_TRUE(k.ok()) << k.status().message();
  std::mt19937 rng(9);
  std::uniform_real_distribution<double> u(-2, 2);
  std::vector<HostTensor> in = {HostTensor(DType::F32, {2, 40, 70}), HostTensor(DType::F32, {70, 50})};
  for (HostTensor& x : in)
    for (int64_t i = 0; i < x.numel(); ++i) x.set(i, u(rng));
  auto want = interpret(m, "f", in, d);
  auto got = (*k)->Run(in, d);
  ASSERT_TRUE(want.ok() && got.ok());
  Status cmp = compare(*want, *got, tolerance_for(DType::F32, 70));
  EXPECT_TRUE(cmp.ok()) << cmp.message();
}

// The panel: the widest that divides the columns (rounded up to 16) into at
// least as many panels as cores.
TEST(Amx, ThePanelDividesTheColumnsAmongTheCores) {
  auto fe = compile_source("p.tl", kProduct);
  ASSERT_TRUE(fe.ok());
  Profile p = spr();
  p.cores = 2;
  for (const auto& [n, panel] : std::vector<std::pair<int64_t, int64_t>>{
           {1536, 256}, {384, 192}, {1000, 48}, {64, 32}, {32, 16}, {7, 16}}) {
    auto t = stage_infos_for(fe.module, "f", {{"M", 64}, {"K", 64}, {"N", n}}, p.halide_target);
    ASSERT_TRUE(t.ok());
    const Schedule s = schedule_from_knobs(*t, untuned_knobs(*t, p), p);
    const Directive* d = find(s, "matmul0", "amx_tiles");
    ASSERT_NE(d, nullptr) << s.to_json();
    EXPECT_EQ(d->factors, (std::vector<int64_t>{panel})) << "N = " << n;
    EXPECT_EQ(d->vars, std::vector<std::string>{stage(*t, "matmul0")->operands[1]});
    EXPECT_TRUE(validate_schedule(s, *t, false).ok());
  }
  // A profile of any machine's cores (0) is taken as 4.
  p.cores = 0;
  auto t = stage_infos_for(fe.module, "f", {{"M", 64}, {"K", 64}, {"N", 384}}, p.halide_target);
  ASSERT_TRUE(t.ok());
  const Directive* d = find(schedule_from_knobs(*t, untuned_knobs(*t, p), p), "matmul0", "amx_tiles");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->factors, (std::vector<int64_t>{96}));
}

TEST(Amx, TheDirectiveIsCheckedBeforeHalideSeesIt) {
  auto fe = compile_source("p.tl", kProduct);
  ASSERT_TRUE(fe.ok());
  auto t = stage_infos_for(fe.module, "f", {{"M", 64}, {"K", 64}, {"N", 64}}, spr().halide_target);
  auto plain = stage_infos_for(fe.module, "f", {{"M", 64}, {"K", 64}, {"N", 64}}, "");
  ASSERT_TRUE(t.ok() && plain.ok());
  const std::string b = stage(*t, "matmul0")->operands[1];
  auto check = [](const std::vector<StageInfo>& stages, const Directive& d) {
    Schedule s;
    s.stages["matmul0"] = {d};
    return validate_schedule(s, stages, false).message();
  };
  Directive d;
  d.op = "amx_tiles";
  d.vars = {b};
  d.factors = {40};
  EXPECT_EQ(check(*t, d), "schedule: stage `matmul0` directive 0 `amx_tiles(" + b +
                              ", 40)`: the panel of 40 columns is not a multiple of 16 no wider than 1024");
  d.factors = {64};
  d.vars = {"load_a"};
  EXPECT_EQ(check(*t, d), "schedule: stage `matmul0` directive 0 `amx_tiles(load_a, 64)`: `load_a` is not an "
                          "operand of stage `matmul0` (operands: " +
                              stage(*t, "matmul0")->operands[0] + ", " + b + ")");
  d.vars = {stage(*t, "matmul0")->operands[0]};
  EXPECT_EQ(check(*t, d), "schedule: stage `matmul0` directive 0 `amx_tiles(" + d.vars[0] + ", 64)`: it names `" +
                              d.vars[0] + "`, a's copy; the panels pack b's, `" + b + "`");
  d.vars = {"load_b"};
  EXPECT_EQ(check(*plain, d), "schedule: stage `matmul0` directive 0 `amx_tiles(load_b, 64)`: only a product of "
                              "BF16 operands lowered for AMX tiles has AMX tiles");
}

HostTensor random_tensor(DType t, std::vector<int64_t> shape, std::mt19937& rng) {
  HostTensor x(t, std::move(shape));
  std::uniform_real_distribution<double> u(-2, 2);
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, u(rng));
  return x;
}

// As this machine's JIT runs them under the untuned schedule, against the
// interpreter: BF16 products and F32 ones under the bf16 policy, with rows,
// columns and k that are not whole tiles (the rounded-up tiles compute past
// the edges from clamped and zero-padded copies), and a weight shared by a
// batch.
TEST(Amx, TileProductsMatchTheInterpreterOnThisMachine) {
  if (!lower::options_for("host").amx_bf16) GTEST_SKIP() << "this CPU has no AMX-BF16";
  std::mt19937 rng(5);
  const std::vector<DimEnv> dims = {{{"B", 2}, {"M", 7}, {"K", 5}, {"N", 37}},
                                    {{"B", 1}, {"M", 1}, {"K", 1}, {"N", 1}},
                                    {{"B", 3}, {"M", 33}, {"K", 64}, {"N", 97}},
                                    {{"B", 1}, {"M", 128}, {"K", 131}, {"N", 384}}};
  auto product = compile_source("p.tl", kProduct);
  auto batched = compile_source("p.tl", kBatchedWeight);
  ASSERT_TRUE(product.ok() && batched.ok());
  const ir::Module policy = with_precision(batched.module, Precision::kBF16);
  for (const DimEnv& d : dims) {
    SCOPED_TRACE("B=" + std::to_string(d.at("B")) + " M=" + std::to_string(d.at("M")) +
                 " K=" + std::to_string(d.at("K")) + " N=" + std::to_string(d.at("N")));
    for (const ir::Module* m : std::vector<const ir::Module*>{&product.module, &policy}) {
      const bool bf16 = m == &product.module;
      DimEnv e = d;
      if (bf16) e.erase("B");
      auto k = Kernel::CompileJit(*m, "f", host_profile(), nullptr, e);
      ASSERT_TRUE(k.ok()) << k.status().message();
      EXPECT_NE((*k)->schedule().to_json().find("amx_tiles"), std::string::npos) << "not in AMX tiles";
      const DType t = bf16 ? DType::BF16 : DType::F32;
      std::vector<HostTensor> in;
      if (bf16) in.push_back(random_tensor(t, {e.at("M"), e.at("K")}, rng));
      else in.push_back(random_tensor(t, {e.at("B"), e.at("M"), e.at("K")}, rng));
      in.push_back(random_tensor(t, {e.at("K"), e.at("N")}, rng));
      auto want = interpret(*m, "f", in, e);
      ASSERT_TRUE(want.ok()) << want.status().message();
      auto got = (*k)->Run(in, e);
      ASSERT_TRUE(got.ok()) << got.status().message();
      Status cmp = compare(*want, *got, tolerance_for(t, e.at("K")));
      EXPECT_TRUE(cmp.ok()) << cmp.message();
    }
  }
}

// x read by products in three calls of `lin` (Q, K and V of one layer):
// under the bf16 policy the rounding of x and its copy for the tiles are
// made once and read by the products of x; the product of another operand
// (x + x) has its own. Scheduled once (by the first product's rule), the
// shared copy compiles and the products match the interpreter here.
TEST(Amx, ProductsOfOneOperandShareItsCopy) {
  const char* src =
      "fn lin [N, D](x: Tensor[F32, [N, D]], w: Tensor[F32, [D, D]]) -> Tensor[F32, [N, D]] = matmul(x, w)\n"
      "public fn f [N, D](x: Tensor[F32, [N, D]], a: Tensor[F32, [D, D]], b: Tensor[F32, [D, D]],\n"
      "                   c: Tensor[F32, [D, D]]) -> Tensor[F32, [N, D]] =\n"
      "  lin(x, a) + lin(x, b) + lin(x + x, c)\n";
  const ir::Module policy = bf16_policy(src);
  const DimEnv d = {{"N", 37}, {"D", 64}};
  for (const std::string& target : {spr().halide_target, zen4}) {  // AMX tiles, and the pair form
    auto t = stage_infos_for(policy, "f", d, target);
    ASSERT_TRUE(t.ok()) << t.status().message();
    std::vector<std::string> a_of;
    int copies = 0;
    for (const StageInfo& s : *t) {
      if (s.kind == StageInfo::Kind::kMatmul) a_of.push_back(s.operands.at(0));
      copies += s.pair_copy;
    }
    ASSERT_EQ(a_of.size(), 3u) << target;
    EXPECT_EQ(a_of[0], a_of[1]) << target;
    EXPECT_NE(a_of[0], a_of[2]) << target;
    EXPECT_EQ(copies, 2 + 3) << target;  // two of a, one of each weight
  }
  if (!lower::options_for("host").amx_bf16) GTEST_SKIP() << "this CPU has no AMX-BF16 (values not run)";
  auto k = Kernel::CompileJit(policy, "f", host_profile(), nullptr, d);
  ASSERT_TRUE(k.ok()) << k.status().message();
  std::mt19937 rng(7);
  std::vector<HostTensor> in = {random_tensor(DType::F32, {37, 64}, rng)};
  for (int i = 0; i < 3; ++i) in.push_back(random_tensor(DType::F32, {64, 64}, rng));
  auto want = interpret(policy, "f", in, d);
  ASSERT_TRUE(want.ok()) << want.status().message();
  auto got = (*k)->Run(in, d);
  ASSERT_TRUE(got.ok()) << got.status().message();
  Status cmp = compare(*want, *got, tolerance_for(DType::F32, 64));
  EXPECT_TRUE(cmp.ok()) << cmp.message();
}

// A product's b that is a function of one parameter alone (a weight, here
// transposed as nn.Linear stores it) is read packed: the pipeline takes its
// pairs as an input (lower::Pack) that a pipeline of its own fills from the
// weight, within each call or once per weight (runtime/model.h). A b made
// of two parameters is copied within the product as before. The values
// match the interpreter here (AMX tiles).
TEST(Amx, AWeightIsReadPackedAndAMixOfParametersIsNot) {
  const char* src =
      "public fn f [N, D](x: Tensor[F32, [N, D]], w: Tensor[F32, [D, D]], v: Tensor[F32, [D, D]]) -> "
      "Tensor[F32, [N, D]] =\n"
      "  matmul(x, transpose(w, [1, 0])) + matmul(x, w + v)\n";
  auto fe = compile_source("p.tl", src);
  ASSERT_TRUE(fe.ok()) << fe.rendered();
  const ir::Module policy = bf16_policy(src);
  for (const auto& [target, kq, nq] : {std::tuple{spr().halide_target, 32, 16}, std::tuple{zen4, 2, 1}}) {
    lower::LowerOptions o = lower::options_for(target);
    // Asked for (a model's kernels), not by default: a build for a caller
    // that passes weights per call makes the pairs within the call.
    auto unpacked = lower::lower_function(policy, "f", o);
    ASSERT_TRUE(unpacked.ok()) << unpacked.status().message();
    EXPECT_TRUE(unpacked->packs.empty()) << target;
    o.pack_weights = true;
    auto p = lower::lower_function(policy, "f", o);
    ASSERT_TRUE(p.ok()) << p.status().message();
    ASSERT_EQ(p->packs.size(), 1u) << target;
    EXPECT_EQ(p->packs[0].param, 1) << target;
    EXPECT_EQ(p->packs[0].k.str(), "D");
    EXPECT_EQ(p->packs[0].n.str(), "D");
    EXPECT_EQ(p->packs[0].k_quantum, kq);
    EXPECT_EQ(p->packs[0].n_quantum, nq);
    // In F32 nothing is read in pairs.
    auto plain = lower::lower_function(fe.module, "f", o);
    ASSERT_TRUE(plain.ok());
    EXPECT_TRUE(plain->packs.empty());
  }
  // Nothing in memory fills the packs: the JIT refuses to build them.
  CompileRequest req;
  req.module = &policy;
  req.fn = "f";
  req.profile = spr();
  req.dims = {{"N", 37}, {"D", 40}};
  req.pack_weights = true;
  auto jit = compile_jit(req);
  ASSERT_FALSE(jit.ok());
  EXPECT_EQ(jit.status().message(), "`f`: the JIT compiles in memory without packed weights (build an artifact)");
  if (!lower::options_for("host").amx_bf16) GTEST_SKIP() << "this CPU has no AMX-BF16 (values not run)";
  for (const DimEnv& d : {DimEnv{{"N", 37}, {"D", 40}}, DimEnv{{"N", 128}, {"D", 384}}}) {
    auto k = Kernel::CompileJit(policy, "f", host_profile(), nullptr, d);
    ASSERT_TRUE(k.ok()) << k.status().message();
    std::mt19937 rng(11);
    const int64_t n = d.at("N"), dd = d.at("D");
    std::vector<HostTensor> in = {random_tensor(DType::F32, {n, dd}, rng), random_tensor(DType::F32, {dd, dd}, rng),
                                  random_tensor(DType::F32, {dd, dd}, rng)};
    auto want = interpret(policy, "f", in, d);
    ASSERT_TRUE(want.ok()) << want.status().message();
    auto got = (*k)->Run(in, d);
    ASSERT_TRUE(got.ok()) << got.status().message();
    Status cmp = compare(*want, *got, tolerance_for(DType::F32, 2 * dd));
    EXPECT_TRUE(cmp.ok()) << "D = " << dd << ": " << cmp.message();
  }
}

// An artifact library of fn `f` that reads weights packed, opened: its C
// ABI entries (docs/artifacts.md, "Packed weights"), closed at the end.
struct PackedEntries {
  using Entry = int (*)(const mlk_tensor_t*, int32_t, mlk_tensor_t*, const int64_t*, int32_t);
  using Pack = int (*)(int32_t, const mlk_tensor_t*, int32_t, const int64_t*, int32_t, mlk_tensor_t*, int64_t*);
  using Packed = int (*)(const mlk_tensor_t*, int32_t, mlk_tensor_t*, int32_t, const int64_t*, int32_t,
                         const mlk_tensor_t*, int32_t);
  std::tuple<void*, Entry, Pack, Packed, const char* (*)()> fns{};
  explicit PackedEntries(const std::string& library) {
    void* h = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    fns = {h, reinterpret_cast<Entry>(dlsym(h, "mlk_f")), reinterpret_cast<Pack>(dlsym(h, "mlk_f_pack")),
           reinterpret_cast<Packed>(dlsym(h, "mlk_f_packed")),
           reinterpret_cast<const char* (*)()>(dlsym(h, "mlk_last_error"))};
  }
  ~PackedEntries() {
    if (std::get<0>(fns)) dlclose(std::get<0>(fns));
  }
  PackedEntries(const PackedEntries&) = delete;
  PackedEntries& operator=(const PackedEntries&) = delete;
  bool ok() const {
    return std::get<0>(fns) && std::get<1>(fns) && std::get<2>(fns) && std::get<3>(fns) && std::get<4>(fns);
  }
};

const char* kWeightProduct =
    "public fn f [M, K, N](x: Tensor[F32, [M, K]], w: Tensor[F32, [N, K]]) -> Tensor[F32, [M, N]] =\n"
    "  matmul(x, transpose(w, [1, 0]))\n";

// kWeightProduct under the bf16 policy built with packed weights for
// `profile` at M x K x N (BuildRequest::pack_weights), its library opened,
// the weight packed by mlk_f_pack (its shape asked first) and the product
// run by mlk_f (y1) and by mlk_f_packed on those pairs (y2).
struct PackedRun {
  ir::Module m;
  std::string dir, manifest;
  std::unique_ptr<PackedEntries> lib;
  HostTensor x, w, y1, y2;
  mlk_tensor_t args[2]{};
  int64_t shape[4] = {0, 0, 0, 0};
  std::vector<uint16_t> pairs;
  ~PackedRun() { std::filesystem::remove_all(dir); }
};

void run_packed(PackedRun& r, const Profile& profile, int64_t M, int64_t K, int64_t N, bool run) {
  r.m = bf16_policy(kWeightProduct);
  r.dir = testing_support::scratch_dir("mlk_amx_packed", profile.halide_target.substr(profile.halide_target.size() - 4));
  std::filesystem::remove_all(r.dir);
  BuildRequest req;
  req.module = &r.m;
  req.fn = "f";
  req.profile = profile;
  req.dims = {{"M", M}, {"K", K}, {"N", N}};
  req.out_dir = r.dir;
  req.pack_weights = true;
  auto built = build_artifact(req);
  ASSERT_TRUE(built.ok()) << built.status().message();
  r.manifest = built->manifest_json;
  if (!run) return;
  r.lib = std::make_unique<PackedEntries>(built->library);
  ASSERT_TRUE(r.lib->ok()) << dlerror();
  auto [h, entry, pack, packed, last_error] = r.lib->fns;
  std::mt19937 rng(static_cast<unsigned>(K));
  r.x = random_tensor(DType::F32, {M, K}, rng);
  r.w = random_tensor(DType::F32, {N, K}, rng);
  r.y1 = HostTensor(DType::F32, {M, N});
  r.y2 = HostTensor(DType::F32, {M, N});
  r.args[0] = {r.x.bytes.data(), MLK_F32, 2, r.x.shape.data(), nullptr};
  r.args[1] = {r.w.bytes.data(), MLK_F32, 2, r.w.shape.data(), nullptr};
  mlk_tensor_t o1{r.y1.bytes.data(), MLK_F32, 2, r.y1.shape.data(), nullptr};
  mlk_tensor_t o2{r.y2.bytes.data(), MLK_F32, 2, r.y2.shape.data(), nullptr};
  ASSERT_EQ(pack(0, r.args, 2, nullptr, 0, nullptr, r.shape), MLK_OK) << last_error();
  r.pairs.resize(static_cast<size_t>(r.shape[0] * r.shape[1] * r.shape[2] * r.shape[3]));
  mlk_tensor_t p{r.pairs.data(), MLK_BF16, 4, r.shape, nullptr};
  ASSERT_EQ(pack(0, r.args, 2, nullptr, 0, &p, nullptr), MLK_OK) << last_error();
  ASSERT_EQ(entry(r.args, 2, &o1, nullptr, 0), MLK_OK) << last_error();
  ASSERT_EQ(packed(r.args, 2, &o2, 1, nullptr, 0, &p, 1), MLK_OK) << last_error();
  (void)h;
}

// The C ABI of an artifact that reads a weight packed (docs/artifacts.md,
// "Packed weights"): its manifest lists it, the library exports the pack
// entries, the shape query gives [1, K / 2 rounded to tiles, N rounded to
// 16, 2], mlk_f and mlk_f_packed on the weight packed by mlk_f_pack give
// the same bits, and every bad call is a return code with a message. Built
// for the cpu_avx512_spr profile; run where this machine has AMX-BF16.
TEST(Amx, AnArtifactExportsItsPackedWeightEntries) {
  PackedRun r;
  const bool amx = lower::options_for("host").amx_bf16;
  ASSERT_NO_FATAL_FAILURE(run_packed(r, spr(), 20, 40, 24, amx));
  EXPECT_NE(r.manifest.find("\"packed_weights\""), std::string::npos);
  EXPECT_NE(r.manifest.find("\"param\": \"w\""), std::string::npos) << r.manifest;
  if (!amx) GTEST_SKIP() << "this CPU has no AMX-BF16 (built, not run)";
  auto [h, entry, pack, packed, last_error] = r.lib->fns;
  (void)h;
  (void)entry;
  EXPECT_EQ(std::vector<int64_t>(r.shape, r.shape + 4), (std::vector<int64_t>{1, 32, 32, 2}));  // K 40 -> 64, N 24 -> 32
  EXPECT_EQ(r.y1.bytes, r.y2.bytes);
  mlk_tensor_t o2{r.y2.bytes.data(), MLK_F32, 2, r.y2.shape.data(), nullptr};
  mlk_tensor_t p{r.pairs.data(), MLK_BF16, 4, r.shape, nullptr};
  EXPECT_EQ(pack(-1, r.args, 2, nullptr, 0, &p, nullptr), MLK_ERR_NARGS);
  EXPECT_EQ(pack(1, r.args, 2, nullptr, 0, &p, nullptr), MLK_ERR_NARGS);
  EXPECT_STREQ(last_error(), "weight pack 1 of 1");
  EXPECT_EQ(pack(0, r.args, 2, nullptr, 0, nullptr, nullptr), MLK_ERR_NULL);
  EXPECT_EQ(packed(r.args, 2, &o2, 1, nullptr, 0, nullptr, 1), MLK_ERR_NULL);
  EXPECT_EQ(packed(r.args, 2, &o2, 1, nullptr, 0, &p, 2), MLK_ERR_NARGS);
  EXPECT_STREQ(last_error(), "1 packed weights, got 2");
  int64_t wrong[4] = {1, 32, 16, 2};
  mlk_tensor_t q{r.pairs.data(), MLK_BF16, 4, wrong, nullptr};
  EXPECT_EQ(packed(r.args, 2, &o2, 1, nullptr, 0, &q, 1), MLK_ERR_SHAPE);
  EXPECT_STREQ(last_error(), "a packed weight: shape [1, 32, 16, 2], expected dense [1, 32, 32, 2]");
  q = {r.pairs.data(), MLK_F32, 4, r.shape, nullptr};
  EXPECT_EQ(packed(r.args, 2, &o2, 1, nullptr, 0, &q, 1), MLK_ERR_DTYPE);
}

// The pair form's packed weights (a Zen 4 target: AVX512_BF16's dot product
// on pairs, [1, K / 2, N, 2]), run where this CPU has AVX512_BF16: the
// entry on packed pairs gives the bits of the entry that makes them, and
// both are the interpreter's within the policy's tolerance.
TEST(Amx, ThePairFormReadsPackedWeightsToo) {
  const Profile host = host_profile();
  if (std::find(host.features.begin(), host.features.end(), "avx512bf16") == host.features.end())
    GTEST_SKIP() << "this CPU has no AVX512_BF16";
  Profile p = host;
  p.halide_target = zen4;
  PackedRun r;
  ASSERT_NO_FATAL_FAILURE(run_packed(r, p, 20, 41, 24, true));  // an odd K: the last pair padded with zero
  EXPECT_EQ(std::vector<int64_t>(r.shape, r.shape + 4), (std::vector<int64_t>{1, 21, 24, 2}));
  EXPECT_EQ(r.y1.bytes, r.y2.bytes);
  auto want = interpret(r.m, "f", {r.x, r.w}, {{"M", 20}, {"K", 41}, {"N", 24}});
  ASSERT_TRUE(want.ok()) << want.status().message();
  Status cmp = compare(*want, r.y2, tolerance_for(DType::F32, 41));
  EXPECT_TRUE(cmp.ok()) << cmp.message();
}

}  // namespace
}  // namespace mlk
