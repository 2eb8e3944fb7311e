// mlk build artifacts: CPU libraries loaded with dlopen and run through the C
// ABI against the interpreter; CUDA artifacts built without a GPU and their
// PTX assembled by ptxas; illegal schedules refused with clear errors.
#include <dlfcn.h>
#include <malloc.h>
#include <sys/resource.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "lang/compare.h"
#include "lang/frontend.h"
#include "tests/test_support.h"
#include "lang/interpreter.h"
#include "base/sha256.h"
#include "scheduler/kernel.h"
#include "scheduler/rules.h"
#include "targets/abi.h"
#include "artifact/build.h"
#include "targets/detect.h"
#include "targets/toolchain.h"

namespace mlk {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

ir::Module load(const std::string& example) { return testing_support::load_example(example); }

std::string tmpdir(const std::string& name) { return testing_support::scratch_dir("mlk_artifact_test", name); }

HostTensor random_f32(std::vector<int64_t> shape, std::mt19937& rng) {
  HostTensor t(DType::F32, std::move(shape));
  std::uniform_real_distribution<double> u(-2, 2);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, u(rng));
  return t;
}

mlk_tensor_t view(HostTensor& t, int32_t dtype = MLK_F32) {
  return {t.bytes.data(), dtype, static_cast<int32_t>(t.shape.size()), t.shape.data(), nullptr};
}

using Entry = int (*)(const mlk_tensor_t*, int32_t, mlk_tensor_t*, const int64_t*, int32_t);

struct Lib {
  void* handle = nullptr;
  explicit Lib(const std::string& path) : handle(dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {}
  ~Lib() {
    if (handle) dlclose(handle);
  }
  template <typename T>
  T sym(const char* name) {
    return reinterpret_cast<T>(dlsym(handle, name));
  }
};

TEST(Artifact, CpuLibraryRunsThroughTheCAbiAndAgreesWithTheInterpreter) {
  ir::Module m = load("norms.tl");
  BuildRequest req{&m, "rmsnorm", "examples/norms.tl", host_profile(), {{"B", 2}, {"S", 3}, {"D", 40}}, {},
                   tmpdir("rmsnorm")};
  auto res = build_artifact(req);
  ASSERT_TRUE(res.ok()) << res.status().message();
  Lib lib(res->library);
  ASSERT_NE(lib.handle, nullptr) << dlerror();
  auto entry = lib.sym<Entry>("mlk_rmsnorm");
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(lib.sym<int (*)()>("mlk_abi_version")(), MLK_ABI_VERSION);
  EXPECT_EQ(lib.sym<void*>("mlk_halide_rmsnorm"), nullptr) << "only the mlk_* ABI is exported";

  std::mt19937 rng(3);
  // A different shape from the estimate: one library serves every valid size.
  std::vector<HostTensor> in = {random_f32({3, 5, 37}, rng), random_f32({37}, rng), HostTensor(DType::F32, {})};
  in[2].set(0, 1e-5);
  HostTensor out(DType::F32, {3, 5, 37});
  std::vector<mlk_tensor_t> args = {view(in[0]), view(in[1]), view(in[2])};
  mlk_tensor_t o = view(out);
  ASSERT_EQ(entry(args.data(), 3, &o, nullptr, 0), MLK_OK) << lib.sym<const char* (*)()>("mlk_last_error")();
  auto want = interpret(m, "rmsnorm", in, {});
  ASSERT_TRUE(want.ok());
  Status cmp = compare(*want, out, tolerance_for(DType::F32, 37));
  EXPECT_TRUE(cmp.ok()) << cmp.message();

  // Wrong dtype and wrong argument count are refused with a message.
  args[1].dtype = MLK_F16;
  EXPECT_EQ(entry(args.data(), 3, &o, nullptr, 0), MLK_ERR_DTYPE);
  EXPECT_THAT(lib.sym<const char* (*)()>("mlk_last_error")(), HasSubstr("w: dtype"));
  EXPECT_EQ(entry(args.data(), 2, &o, nullptr, 0), MLK_ERR_NARGS);
  args[1].dtype = MLK_F32;
  // An output smaller than the result is Halide's error, returned, not fatal.
  HostTensor small(DType::F32, {3, 5, 30});
  mlk_tensor_t os = view(small);
  EXPECT_NE(entry(args.data(), 3, &os, nullptr, 0), MLK_OK);
  EXPECT_THAT(lib.sym<const char* (*)()>("mlk_last_error")(), HasSubstr("output"));
  // A null data pointer is refused, rank 0 included.
  args[2].data = nullptr;
  EXPECT_EQ(entry(args.data(), 3, &o, nullptr, 0), MLK_ERR_NULL);
}

TEST(Artifact, UnboundDimsArePassedInManifestOrder) {
  ir::Module m = load("attention.tl");
  BuildRequest req{&m, "expand_kv", "examples/attention.tl", host_profile(), {}, {}, tmpdir("expand_kv")};
  auto res = build_artifact(req);
  ASSERT_TRUE(res.ok()) << res.status().message();
  auto man = nlohmann::json::parse(res->manifest_json);
  EXPECT_EQ(man["signature"]["unbound_dims"], nlohmann::json::array({"G"}));
  Lib lib(res->library);
  auto entry = lib.sym<Entry>("mlk_expand_kv");
  ASSERT_NE(entry, nullptr);
  std::mt19937 rng(4);
  HostTensor kv = random_f32({1, 2, 3, 4}, rng);
  HostTensor out(DType::F32, {1, 6, 3, 4});
  mlk_tensor_t a = view(kv), o = view(out);
  int64_t g = 3;
  ASSERT_EQ(entry(&a, 1, &o, &g, 1), MLK_OK);
  auto want = interpret(m, "expand_kv", {kv}, {{"G", 3}});
  ASSERT_TRUE(want.ok());
  EXPECT_TRUE(compare(*want, out, tolerance_for(DType::F32)).ok());
}

TEST(Artifact, ManifestRecordsSignatureProfileScheduleVersionsAndHashes) {
  ir::Module m = load("softmax.tl");
  BuildRequest req{&m, "softmax_builtin", "examples/softmax.tl", host_profile(), {{"N", 64}, {"C", 64}}, {},
                   tmpdir("softmax_manifest")};
  auto res = build_artifact(req);
  ASSERT_TRUE(res.ok()) << res.status().message();
  auto man = nlohmann::json::parse(res->manifest_json);
  EXPECT_EQ(man["function"], "softmax_builtin");
  EXPECT_EQ(man["signature"]["params"][0]["shape"], nlohmann::json::array({"N", "C"}));
  EXPECT_EQ(man["profile"]["name"], "host");
  EXPECT_EQ(man["versions"]["halide"], halide_version());
  EXPECT_EQ(man["schedule_hash"], res->schedule.hash());
  EXPECT_FALSE(man["requires"]["cpu_features"].empty());
  for (const auto& [name, digest] : man["files"].items()) {
    std::ifstream in(fs::path(res->dir) / name, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_EQ(sha256_hex(ss.str()), digest.get<std::string>()) << name;
  }
}

// Halide frees a call's intermediate buffers at its end and the next call
// asks for them again; the artifact's halide_malloc keeps them
// (targets/scratch_cache.h), so repeated calls do not fault their scratch
// pages in again. Counted in page faults, a property of the memory, not a
// time. glibc's own heuristics sometimes keep such blocks too, so the test
// makes glibc map every block of 64 KiB or more afresh (M_MMAP_THRESHOLD,
// which also turns off their adaptation): without the cache each call then
// faults in the 2 MiB hidden layer of this MLP (512 pages of 4 KiB) at least.
TEST(Artifact, RepeatedCallsReuseTheirScratchInsteadOfFaultingItInAgain) {
  ir::Module m = load("mlp.tl");
  const int64_t N = 128, D = 64, F = 4096;
  BuildRequest req{&m, "mlp", "examples/mlp.tl", host_profile(), {{"N", N}, {"D", D}, {"F", F}}, {},
                   tmpdir("mlp_scratch")};
  auto res = build_artifact(req);
  ASSERT_TRUE(res.ok()) << res.status().message();
  Lib lib(res->library);
  ASSERT_NE(lib.handle, nullptr) << dlerror();
  auto entry = lib.sym<Entry>("mlk_mlp");
  std::mt19937 rng(5);
  std::vector<HostTensor> in = {random_f32({N, D}, rng), random_f32({D, F}, rng), random_f32({F}, rng),
                                random_f32({F, D}, rng), random_f32({D}, rng)};
  HostTensor out(DType::F32, {N, D});
  std::vector<mlk_tensor_t> args;
  for (auto& t : in) args.push_back(view(t));
  mlk_tensor_t o = view(out);
  auto faults = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
  };
  ASSERT_EQ(mallopt(M_MMAP_THRESHOLD, 64 << 10), 1);
  for (int i = 0; i < 2; ++i) ASSERT_EQ(entry(args.data(), 5, &o, nullptr, 0), MLK_OK);
  const long before = faults();
  const int calls = 10;
  for (int i = 0; i < calls; ++i) ASSERT_EQ(entry(args.data(), 5, &o, nullptr, 0), MLK_OK);
  const long per_call = (faults() - before) / calls;
  mallopt(M_MMAP_THRESHOLD, 128 << 10);  // glibc's initial threshold, for the tests after this one
  EXPECT_LT(per_call, N * F * 4 / 4096 / 8) << "the hidden layer's pages are faulted in on every call";
  auto want = interpret(m, "mlp", in, {});
  ASSERT_TRUE(want.ok());
  Status cmp = compare(*want, out, tolerance_for(DType::F32, F));
  EXPECT_TRUE(cmp.ok()) << cmp.message();
}

// The JIT, which the tuner measures candidates with, allocates its scratch
// the same way (scheduler/compile.cpp), so a candidate is timed as it runs.
TEST(Artifact, JitRunsReuseTheirScratchAsArtifactsDo) {
  ir::Module m = load("mlp.tl");
  const int64_t N = 128, D = 64, F = 4096;
  const DimEnv dims = {{"N", N}, {"D", D}, {"F", F}};
  auto k = Kernel::CompileJit(m, "mlp", host_profile(), nullptr, dims);
  ASSERT_TRUE(k.ok()) << k.status().message();
  std::mt19937 rng(5);
  std::vector<HostTensor> in = {random_f32({N, D}, rng), random_f32({D, F}, rng), random_f32({F}, rng),
                                random_f32({F, D}, rng), random_f32({D}, rng)};
  HostTensor out;
  ASSERT_EQ(mallopt(M_MMAP_THRESHOLD, 64 << 10), 1);  // as above: no help from glibc
  for (int i = 0; i < 2; ++i) ASSERT_TRUE((*k)->RunInto(in, {}, out).ok());
  rusage u0{}, u1{};
  getrusage(RUSAGE_SELF, &u0);
  const int calls = 10;
  for (int i = 0; i < calls; ++i) ASSERT_TRUE((*k)->RunInto(in, {}, out).ok());
  getrusage(RUSAGE_SELF, &u1);
  mallopt(M_MMAP_THRESHOLD, 128 << 10);
  EXPECT_LT((u1.ru_minflt - u0.ru_minflt) / calls, N * F * 4 / 4096 / 8);
}

class CudaArtifact : public ::testing::TestWithParam<std::tuple<std::string, std::string, std::string>> {};

TEST_P(CudaArtifact, BuildsWithoutAGpuAndAssemblesForItsArch) {
  auto [example, fn, profile] = GetParam();
  ir::Module m = load(example);
  auto prof = find_profile(profile);
  ASSERT_TRUE(prof.ok());
  BuildRequest req{&m, fn, example, *prof, {}, {}, tmpdir(fn + "_" + profile)};
  auto res = build_artifact(req);
  ASSERT_TRUE(res.ok()) << res.status().message();
  EXPECT_TRUE(fs::exists(fs::path(res->dir) / (fn + ".ptx")));
  EXPECT_TRUE(fs::exists(res->library));
  auto tk = find_cuda_toolkit();
  if (!tk || tk->ptxas.empty()) GTEST_SKIP() << "ptxas not found: PTX built but not assembled";
  EXPECT_EQ(res->ptxas_status, "assembled for " + prof->ptx_arch);
  auto man = nlohmann::json::parse(res->manifest_json);
  ASSERT_FALSE(man["ptxas"]["kernels"].empty());
  for (const auto& k : man["ptxas"]["kernels"]) EXPECT_GT(k["registers"].get<int>(), 0);
}

INSTANTIATE_TEST_SUITE_P(Kernels, CudaArtifact,
                         ::testing::Values(std::make_tuple("norms.tl", "rmsnorm", "cuda_sm90"),
                                           std::make_tuple("softmax.tl", "softmax_builtin", "cuda_sm90"),
                                           std::make_tuple("mlp.tl", "sgemm", "cuda_sm90"),
                                           std::make_tuple("norms.tl", "rmsnorm", "cuda_sm80"),
                                           std::make_tuple("mlp.tl", "sgemm", "cuda_sm80")));

Status build_with(const std::string& schedule_json, const std::string& profile = "cpu_avx2") {
  ir::Module m = load("mlp.tl");
  auto s = Schedule::from_json(schedule_json);
  if (!s.ok()) return s.status();
  auto prof = resolve_profile(profile);
  BuildRequest req{&m, "sgemm", "examples/mlp.tl", *prof, {}, *s, tmpdir("illegal")};
  auto r = build_artifact(req);
  return r.ok() ? Status::Ok() : r.status();
}

TEST(Schedule, IllegalSchedulesAreRefusedWithClearErrors) {
  auto msg = [](const std::string& j, const std::string& profile = "cpu_avx2") {
    return build_with(j, profile).message();
  };
  EXPECT_THAT(msg(R"({"stages": {"matmul7": [{"op": "compute_root"}]}})"),
              HasSubstr("unknown stage `matmul7` (stages: load_a, load_b, matmul0, output)"));
  EXPECT_THAT(msg(R"({"stages": {"matmul0": [{"op": "split", "vars": ["a1", "o", "i"], "factors": [0]}]}})"),
              HasSubstr("stage `matmul0` directive 0 `split(a1, o, i, 0)`: factor 0 must be in [1, 65536]"));
  // A width Halide 21 aborts on (an LLVM assertion in a predicated load): refused before Halide sees it.
  EXPECT_THAT(msg(R"({"stages": {"output": [{"op": "vectorize", "vars": ["a1"], "factors": [9]}]}})"),
              HasSubstr("stage `output` directive 0 `vectorize(a1, 9)`: the vector width 9 is not a power of two "
                        "(Halide 21 aborts on predicated loads of some other widths)"));
  EXPECT_THAT(msg(R"({"stages": {"matmul0": [{"op": "result_tiles", "factors": [24, 4, 6]}]}})"),
              HasSubstr("the vector width 6 is not a power of two"));
  EXPECT_THAT(msg(R"({"stages": {"matmul0": [{"op": "rfactor_vector", "vars": ["r0", "u"], "factors": [12]}]}})"),
              HasSubstr("the vector width 12 is not a power of two"));
  EXPECT_THAT(msg(R"({"stages": {"matmul0": [{"op": "gpu_blocks", "vars": ["a0"]}]}})"),
              HasSubstr("stage `matmul0` directive 0 `gpu_blocks(a0)`: a GPU directive, but the target profile is a CPU profile"));
  EXPECT_THAT(msg(R"({"stages": {"output": [{"op": "vectorize", "vars": ["z9"], "factors": [8]}]}})"),
              HasSubstr("unknown variable `z9` of stage `output`"));
  EXPECT_THAT(msg(R"({"stages": {"matmul0": [{"op": "compute_at", "at_stage": "nowhere", "at_var": "a0"}]}})"),
              HasSubstr("unknown stage `nowhere`"));
  EXPECT_THAT(msg(R"({"stages": {"matmul0": [{"op": "twist"}]}})"), HasSubstr("unknown directive `twist`"));
  EXPECT_THAT(msg(R"({"stages": {"matmul0": [{"op": "compute_root", "speed": 11}]}})"), HasSubstr("unknown field \"speed\""));
  EXPECT_THAT(msg(R"({"stages": [1, 2]})"), HasSubstr("\"stages\" must be an object"));
  EXPECT_THAT(msg("{not json"), HasSubstr("schedule:"));
  // Legal in form but refused by Halide: a clear error, not a crash.
  EXPECT_THAT(msg(R"({"stages": {"matmul0": [{"op": "compute_at", "at_stage": "load_a", "at_var": "a0"}]}})"),
              HasSubstr("Halide could not compile `sgemm` for cpu_avx2 with this schedule"));
  EXPECT_THAT(msg(R"({"stages": {"matmul0": [{"op": "vectorize", "vars": ["r0"]}]}})"),
              HasSubstr("stage `matmul0` directive 0 `vectorize`: Halide refuses it"));
}

TEST(Schedule, JsonRoundTripAndStableHash) {
  ir::Module m = load("mlp.tl");
  auto prof = resolve_profile("cpu_avx512");
  BuildRequest req{&m, "sgemm", "examples/mlp.tl", *prof, {{"M", 64}, {"K", 64}, {"N", 64}}, {}, tmpdir("roundtrip")};
  auto res = build_artifact(req);
  ASSERT_TRUE(res.ok()) << res.status().message();
  auto back = Schedule::from_json(res->schedule.to_json());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, res->schedule);
  EXPECT_EQ(back->hash(), res->schedule.hash());
  // The same schedule given explicitly builds the same way.
  req.schedule = *back;
  req.out_dir = tmpdir("roundtrip2");
  auto again = build_artifact(req);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->schedule.hash(), res->schedule.hash());
}

}  // namespace
}  // namespace mlk

namespace mlk {
namespace {

TEST(Artifact, GpuMatmulRuleStagesInputTilesInSharedMemory) {
  ir::Module m = load("mlp.tl");
  auto prof = find_profile("cuda_sm90");
  ASSERT_TRUE(prof.ok());
  auto stages = stage_infos_for(m, "sgemm", {{"M", 256}, {"K", 256}, {"N", 256}});
  ASSERT_TRUE(stages.ok());
  Knobs k = default_knobs(*stages, *prof);
  k["matmul0"]["smem"] = 1;
  Schedule s = schedule_from_knobs(*stages, k, *prof);
  BuildRequest req{&m, "sgemm", "examples/mlp.tl", *prof, {{"M", 256}, {"K", 256}, {"N", 256}}, s, tmpdir("smem")};
  auto res = build_artifact(req);
  ASSERT_TRUE(res.ok()) << res.status().message();
  std::ifstream in(fs::path(res->dir) / "sgemm.ptx");
  std::stringstream ptx;
  ptx << in.rdbuf();
  EXPECT_THAT(ptx.str(), HasSubstr("st.shared"));
  EXPECT_THAT(ptx.str(), HasSubstr("bar.sync"));
}

}  // namespace
}  // namespace mlk

#include "artifact/loaded.h"

namespace mlk {
namespace {

// tests/targets/c_names.tl: dims b, d, rc, int, errno, out, dims, mlk_err, i
// and params args, nargs, ndims, halide, every one a C keyword, a libc macro
// or a name the generated wrapper uses for itself.
const std::string kCNames = std::string(MLK_SOURCE_DIR) + "/tests/targets/c_names.tl";

// Inputs of c_names for `env` (every dim), with their seeds.
std::vector<HostTensor> c_names_inputs(const DimEnv& env, std::mt19937& rng) {
  return {random_f32({env.at("b"), env.at("d"), env.at("rc")}, rng), random_f32({env.at("rc")}, rng),
          random_f32({env.at("out"), env.at("mlk_err"), env.at("i")}, rng), random_f32({}, rng)};
}

TEST(Artifact, DimAndParamNamesThatAreCKeywordsOrWrapperLocalsBuildAndRun) {
  auto fe = compile_file(kCNames);
  ASSERT_TRUE(fe.ok() && fe->ok()) << (fe.ok() ? fe->rendered() : fe.status().message());
  const ir::Module& m = fe->module;
  const DimEnv estimate{{"b", 2}, {"d", 4}, {"rc", 3}, {"int", 2}, {"errno", 2}, {"out", 2},
                        {"dims", 2}, {"mlk_err", 3}, {"i", 2}};
  BuildRequest req{&m, "c_names", kCNames, host_profile(), estimate, {}, tmpdir("c_names")};
  auto res = build_artifact(req);
  ASSERT_TRUE(res.ok()) << res.status().message();
  auto man = nlohmann::json::parse(res->manifest_json);
  EXPECT_EQ(man["signature"]["unbound_dims"], nlohmann::json::array({"dims", "errno", "int"}));
  auto art = LoadedArtifact::Load(res->dir);
  ASSERT_TRUE(art.ok()) << art.status().message();
  const ir::Function& f = *m.find("c_names");

  // Another shape than the estimate, every dim different.
  const DimEnv env{{"b", 3}, {"d", 6}, {"rc", 5}, {"int", 3}, {"errno", 2}, {"out", 2},
                   {"dims", 4}, {"mlk_err", 4}, {"i", 3}};
  std::mt19937 rng(11);
  std::vector<HostTensor> in = c_names_inputs(env, rng);
  auto got = (*art)->Run(f, in, env);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->shape, (std::vector<int64_t>{3, 12, 2, 10}));
  auto want = interpret(m, "c_names", in, {{"int", 3}, {"errno", 2}, {"dims", 4}});
  ASSERT_TRUE(want.ok()) << want.status().message();
  Status cmp = compare(*want, *got, tolerance_for(DType::F32, 24));
  EXPECT_TRUE(cmp.ok()) << cmp.message();

  // The checks name the user's dims and params as the program spells them.
  DimEnv bad = env;
  bad["int"] = 4;  // 6 mod 4 != 0
  std::vector<int64_t> bad_out = {3, 16, 1, 10};
  HostTensor o(DType::F32, bad_out);
  std::vector<mlk_tensor_t> args;
  for (auto& t : in) args.push_back(view(t));
  mlk_tensor_t ov = view(o);
  Status st = (*art)->Call(args, ov, bad, "c_names");
  EXPECT_THAT(st.message(), HasSubstr("refinement `d mod int = 0` does not hold"));
  std::mt19937 rng2(12);
  DimEnv wide = env;
  wide["mlk_err"] = 6;  // 6 > out + i = 5
  std::vector<HostTensor> in2 = c_names_inputs(wide, rng2);
  st = (*art)->Run(f, in2, wide).status();
  EXPECT_THAT(st.message(), HasSubstr("refinement `mlk_err <= i + out` does not hold"));
  HostTensor small(DType::F32, {3, 11, 2, 10});
  mlk_tensor_t sv = view(small);
  st = (*art)->Call(args, sv, env, "c_names");
  EXPECT_THAT(st.message(), HasSubstr("output.shape[1] = 11 but dims*int = 12"));
  args[1].dtype = MLK_F64;
  st = (*art)->Call(args, ov, env, "c_names");
  EXPECT_THAT(st.message(), HasSubstr("nargs: dtype"));
}

// Entries are mlk_FN: fns whose entry would spell one of the wrapper's own
// names build, and the two that would be the ABI's own symbols are refused.
TEST(Artifact, FnNamesThatSpellTheWrappersOwnNamesBuildOrAreRefusedClearly) {
  auto fe = compile_source("fns.tl",
                           "public fn err [n](x: Tensor[F32, [n]]) -> Tensor[F32, [n]] = x + x\n"
                           "public fn fill [n](x: Tensor[F32, [n]]) -> Tensor[F32, [n]] = x * x\n"
                           "public fn abi_version [n](x: Tensor[F32, [n]]) -> Tensor[F32, [n]] = x\n");
  ASSERT_TRUE(fe.ok()) << fe.rendered();
  for (const std::string fn : {"err", "fill"}) {
    BuildRequest req{&fe.module, fn, "", host_profile(), {{"n", 8}}, {}, tmpdir("fn_" + fn)};
    auto res = build_artifact(req);
    ASSERT_TRUE(res.ok()) << fn << ": " << res.status().message();
    auto art = LoadedArtifact::Load(res->dir);
    ASSERT_TRUE(art.ok()) << art.status().message();
    std::mt19937 rng(5);
    std::vector<HostTensor> in = {random_f32({5}, rng)};
    auto got = (*art)->Run(*fe.module.find(fn), in, {{"n", 5}});
    ASSERT_TRUE(got.ok()) << got.status().message();
    auto want = interpret(fe.module, fn, in, {});
    ASSERT_TRUE(want.ok());
    EXPECT_TRUE(compare(*want, *got, tolerance_for(DType::F32)).ok()) << fn;
  }
  BuildRequest req{&fe.module, "abi_version", "", host_profile(), {{"n", 8}}, {}, tmpdir("fn_abi_version")};
  auto res = build_artifact(req);
  ASSERT_FALSE(res.ok());
  EXPECT_THAT(res.status().message(),
              HasSubstr("fn `abi_version` cannot be built: its entry `mlk_abi_version` would be the C ABI's own symbol"));
}

}  // namespace
}  // namespace mlk
