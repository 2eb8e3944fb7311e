// The runtime: kernels pulled from a store by program, fn, policy and shape,
// run on DLPack tensors; every boundary rule refused by name with nothing
// written; artifacts loaded once and shared across threads; damaged
// artifacts never loaded.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "autotune/cached_tune.h"
#include "base/sha256.h"
#include "base/signing.h"
#include "cache/entry_meta.h"
#include "cache/signatures.h"
#include "artifact/build.h"
#include "cache/store.h"
#include "lang/compare.h"
#include "lang/frontend.h"
#include "lang/interpreter.h"
#include "lang/ir_printer.h"
#include "runtime/boundary.h"
#include "tests/runtime/dl_tensor.h"
#include "runtime/mlk_runtime.h"
#include "runtime/runtime.h"
#include "targets/detect.h"
#include "artifact/loaded.h"

namespace mlk {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kNorms = std::string(MLK_SOURCE_DIR) + "/examples/norms.tl";
const std::string kAttention = std::string(MLK_SOURCE_DIR) + "/examples/attention.tl";

// A store holding artifacts tuned (tiny budget) for rmsnorm at B=2,S=4,D=64
// and attention at B=1,S=8,D=32,H=4, for the host profile. Built once.
class RuntimeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = (fs::temp_directory_path() / ("mlk_runtime_test_" + std::to_string(getpid()))).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    store_path_ = dir_ + "/cache.db";
    auto store = cache::Store::Open(store_path_);
    ASSERT_TRUE(store.ok()) << store.status().message();
    auto host = resolve_profile("host");
    ASSERT_TRUE(host.ok());
    struct Job {
      std::string file, fn;
      DimEnv dims;
    };
    for (const Job& j : {Job{kNorms, "rmsnorm", {{"B", 2}, {"S", 4}, {"D", 64}}},
                         Job{kAttention, "attention", {{"B", 1}, {"S", 8}, {"D", 32}, {"H", 4}}}}) {
      auto fe = compile_file(j.file);
      ASSERT_TRUE(fe.ok() && fe->ok());
      tune::TuneOptions o;
      o.trials = 1;
      o.time_s = 20;
      o.autoschedulers = false;
      o.progress = false;
      o.log_path = dir_ + "/" + j.fn + ".log";
      auto r = tune::tune_cached({.module = &fe->module,
                                  .fn = j.fn,
                                  .source = j.file,
                                  .profile = *host,
                                  .dims = j.dims,
                                  .opts = o,
                                  .store = store->get(),
                                  .work_dir = dir_ + "/work"});
      ASSERT_TRUE(r.ok()) << r.status().message();
    }
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static std::unique_ptr<rt::Runtime> open() {
    auto r = rt::Runtime::Open({store_path_, "default", ""});
    EXPECT_TRUE(r.ok()) << r.status().message();
    return std::move(r).value();
  }

  static std::string dir_, store_path_;
};
std::string RuntimeTest::dir_, RuntimeTest::store_path_;


TEST_F(RuntimeTest, RunsThePulledKernelOnDlpackTensorsLikeTheInterpreter) {
  auto r = open();
  auto k = r->GetKernel(kNorms, "rmsnorm", *rt::TargetPolicy::Parse("host"), {{"B", 2}, {"S", 4}, {"D", 64}});
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_TRUE((*k)->selection().exact);
  EXPECT_THAT((*k)->selection().reason, HasSubstr("tuned at exactly B=2,D=64,S=4"));
  Dl x(DType::F32, {2, 4, 64}, 1), w(DType::F32, {64}, 2), eps(DType::F32, {}, 3), out(DType::F32, {2, 4, 64});
  eps.t.set(0, 1e-5);
  ASSERT_TRUE((*k)->Run({&x.d, &w.d, &eps.d}, &out.d).ok());
  auto fe = compile_file(kNorms);
  auto want = interpret(fe->module, "rmsnorm", {x.t, w.t, eps.t}, {});
  ASSERT_TRUE(want.ok());
  Status cmp = compare(*want, out.t, tolerance_for(DType::F32, 64));
  EXPECT_TRUE(cmp.ok()) << cmp.message();
}

TEST_F(RuntimeTest, AnotherShapeUsesTheArtifactTunedForTheFnAndSaysSo) {
  auto r = open();
  auto k = r->GetKernel(kNorms, "rmsnorm", *rt::TargetPolicy::Parse("host"), {{"B", 3}, {"S", 5}, {"D", 48}});
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_FALSE((*k)->selection().exact);
  EXPECT_EQ((*k)->selection().source, rt::Selection::Source::kOtherShape);
  EXPECT_THAT((*k)->selection().reason, HasSubstr("tuned at B=2,D=64,S=4 (the nearest tuned shape), run at B=3,D=48,S=5"));
  Dl x(DType::F32, {3, 5, 48}), w(DType::F32, {48}), eps(DType::F32, {}), out(DType::F32, {3, 5, 48});
  EXPECT_TRUE((*k)->Run({&x.d, &w.d, &eps.d}, &out.d).ok());
}

TEST_F(RuntimeTest, PolicySkipsWhatThisMachineCannotRunAndExplainsWhy) {
  auto r = open();
  auto k = r->GetKernel(kNorms, "rmsnorm", *rt::TargetPolicy::Parse("cuda_sm90,cpu_avx2,host"),
                        {{"B", 2}, {"S", 4}, {"D", 64}});
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_EQ((*k)->selection().profile, "host");
  const std::string why = (*k)->selection().explain();
  if (!detect_cuda().devices.empty()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_THAT(why, HasSubstr("not cuda_sm90: cannot run here"));
  if (detect_cpu().has("avx2")) EXPECT_THAT(why, HasSubstr("cpu_avx2: no artifact of `rmsnorm` tuned for cpu_avx2"));
  // Nothing tuned for layernorm: the default schedule (JIT), or under
  // require=tuned a refusal naming every profile.
  auto jit = r->GetKernel(kNorms, "layernorm", *rt::TargetPolicy::Parse("host"), {{"N", 4}, {"D", 8}});
  ASSERT_TRUE(jit.ok()) << jit.status().message();
  EXPECT_EQ((*jit)->selection().source, rt::Selection::Source::kDefaultJit);
  auto none = r->GetKernel(kNorms, "layernorm", *rt::TargetPolicy::Parse("host;require=tuned"), {{"N", 4}, {"D", 8}});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Status::Code::kNotFound);
  EXPECT_THAT(none.status().message(), HasSubstr("host: no artifact of `layernorm`"));
  EXPECT_FALSE(rt::TargetPolicy::Parse("cuda_sm99").ok());
}

TEST_F(RuntimeTest, EveryBoundaryViolationIsRefusedByNameAndNothingIsWritten) {
  auto r = open();
  auto k = r->GetKernel(kNorms, "rmsnorm", *rt::TargetPolicy::Parse("host"), {{"B", 2}, {"S", 4}, {"D", 64}});
  ASSERT_TRUE(k.ok());
  Dl x(DType::F32, {2, 4, 64}), w(DType::F32, {64}), eps(DType::F32, {}), out(DType::F32, {2, 4, 64});
  for (auto& b : out.t.bytes) b = 0xAB;
  const auto untouched = out.t.bytes;
  auto refuse = [&](std::vector<const DLTensor*> args, DLTensor* o, const std::string& text) {
    Status s = (*k)->Run(args, o);
    EXPECT_FALSE(s.ok()) << text;
    EXPECT_THAT(s.message(), HasSubstr(text));
    EXPECT_EQ(out.t.bytes, untouched) << text;
  };
  Dl x16(DType::F16, {2, 4, 64});
  refuse({&x16.d, &w.d, &eps.d}, &out.d,
         "argument 0 `x` of `rmsnorm`: dtype float16 but the signature declares F32 (float32)");
  Dl x2(DType::F32, {8, 64});
  refuse({&x2.d, &w.d, &eps.d}, &out.d, "argument 0 `x` of `rmsnorm`: rank 2 but the signature declares rank 3");
  Dl w2(DType::F32, {63});
  refuse({&x.d, &w2.d, &eps.d}, &out.d, "w.shape[0] = 63 but D = 64, bound by x.shape[2]");
  int64_t strides[3] = {1, 2, 8};  // column-major
  x.d.strides = strides;
  refuse({&x.d, &w.d, &eps.d}, &out.d, "argument 0 `x` of `rmsnorm`: not contiguous: strides [1, 2, 8]");
  x.d.strides = nullptr;
  x.d.byte_offset = 2;
  refuse({&x.d, &w.d, &eps.d}, &out.d, "argument 0 `x` of `rmsnorm`: data is not aligned to its 4-byte elements");
  x.d.byte_offset = 0;
  x.d.device = {kDLCUDA, 0};
  refuse({&x.d, &w.d, &eps.d}, &out.d, "argument 0 `x` of `rmsnorm`: on cuda:0, but the kernel runs on the CPU (host)");
  x.d.device = {kDLCPU, 0};
  x.d.data = nullptr;
  refuse({&x.d, &w.d, &eps.d}, &out.d, "argument 0 `x` of `rmsnorm`: data is NULL");
  x.d.data = x.t.bytes.data();
  refuse({&x.d, &w.d}, &out.d, "`rmsnorm` takes 3 arguments, got 2");
  Dl small(DType::F32, {2, 4, 32});
  refuse({&x.d, &w.d, &eps.d}, &small.d, "the output of `rmsnorm`: shape [2, 4, 32] but the result is [2, 4, 64]");
  refuse({&x.d, &w.d, &eps.d}, &x.d, "the output of `rmsnorm`: shares memory with argument 0 `x`");
  refuse({&x.d, &w.d, &eps.d}, nullptr, "the output of `rmsnorm` is NULL");
  // And a well-formed call still works afterwards.
  EXPECT_TRUE((*k)->Run({&x.d, &w.d, &eps.d}, &out.d).ok());
  EXPECT_NE(out.t.bytes, untouched);
}

TEST_F(RuntimeTest, RefinementsAndUnboundDimsAreCheckedAtTheBoundary) {
  auto r = open();
  auto k = r->GetKernel(kAttention, "attention", *rt::TargetPolicy::Parse("host"), {{"B", 1}, {"S", 8}, {"D", 32}, {"H", 4}});
  ASSERT_TRUE(k.ok()) << k.status().message();
  Dl q(DType::F32, {1, 8, 30}), kk(DType::F32, {1, 8, 30}), v(DType::F32, {1, 8, 30}), s(DType::F32, {}),
      out(DType::F32, {1, 8, 30});
  Status st = (*k)->Run({&q.d, &kk.d, &v.d, &s.d}, &out.d);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("D mod H = 0"));
  auto fe = compile_file(kAttention);
  auto bad = rt::dims_of(*fe->module.find("attention"), {&q.d, &kk.d, &v.d, &s.d}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("H"));
}

TEST_F(RuntimeTest, KernelsAreLoadedOnceAndSharedAcrossThreads) {
  auto r = open();
  const DimEnv dims{{"B", 2}, {"S", 4}, {"D", 64}};
  std::vector<const rt::Kernel*> seen(8);
  std::vector<int> ok(8, 0);
  std::vector<std::thread> ts;
  for (int i = 0; i < 8; ++i)
    ts.emplace_back([&, i] {
      auto k = r->GetKernel(kNorms, "rmsnorm", *rt::TargetPolicy::Parse("host"), dims);
      if (!k.ok()) return;
      seen[i] = k->get();
      Dl x(DType::F32, {2, 4, 64}, i), w(DType::F32, {64}, i), eps(DType::F32, {}), out(DType::F32, {2, 4, 64});
      for (int rep = 0; rep < 20; ++rep) ok[i] += (*k)->Run({&x.d, &w.d, &eps.d}, &out.d).ok();
    });
  for (auto& t : ts) t.join();
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(seen[i], seen[0]);
    EXPECT_EQ(ok[i], 20);
  }
}

TEST_F(RuntimeTest, FindsAKernelByProgramHashAlone) {
  auto r = open();
  auto fe = compile_file(kNorms);
  std::string h = ir::function_hash(fe->module, *fe->module.find("rmsnorm"));
  auto k = r->GetKernelByHash(h, "rmsnorm", *rt::TargetPolicy::Parse("host"), {{"B", 2}, {"S", 4}, {"D", 64}});
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_TRUE((*k)->selection().exact);
  auto miss = r->GetKernelByHash(std::string(64, '0'), "rmsnorm", *rt::TargetPolicy::Parse("host"), {});
  EXPECT_EQ(miss.status().code(), Status::Code::kNotFound);
}

// Review 4 of issue 49: a stored entry's program.tl was compiled with file
// imports, so whoever wrote the entry chose files of this machine for the
// runtime to read (before any signature policy). Now it reads only `std.`.
TEST_F(RuntimeTest, AStoredProgramReadsNoFilesOfThisMachine) {
  const std::string path = dir_ + "/planted.db";
  {
    auto store = cache::Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status().message();
    const std::string hash(64, 'a');
    ASSERT_TRUE((*store)
                    ->put_entry("default", std::string(64, 'b'),
                                "{\"fn\":\"rmsnorm\",\"program_hash\":\"" + hash + "\"}", {},
                                {{"program.tl", "import \"" + dir_ + "/planted.tl\" as p\n"}})
                    .ok());
  }
  auto r = rt::Runtime::Open({path, "default", ""});
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto k = (*r)->GetKernelByHash(std::string(64, 'a'), "rmsnorm", *rt::TargetPolicy::Parse("host"), {});
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), Status::Code::kNotFound);  // passed over, saying why (review 6: it stopped the search)
  EXPECT_THAT(k.status().message(), HasSubstr("only the standard library's `std.` modules are read"));
  // Under signed:KEYS the unsigned entry's program is not compiled at all:
  // it is passed over as unsigned, before the front end reads it.
  auto s = (*r)->GetKernelByHash(std::string(64, 'a'), "rmsnorm",
                                 *rt::TargetPolicy::Parse("host;require=signed:" + std::string(64, 'c')), {});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("is unsigned"));
  EXPECT_THAT(s.status().message(), Not(HasSubstr("`std.` modules")));
}

TEST_F(RuntimeTest, ADamagedArtifactIsNeverLoaded) {
  // A copy of the store with one byte of the kernel library flipped.
  const std::string copy = dir_ + "/damaged.db";
  fs::copy_file(store_path_, copy, fs::copy_options::overwrite_existing);
  {
    auto s = cache::Store::Open(copy);
    ASSERT_TRUE(s.ok());
    auto entries = (*s)->list("default");
    ASSERT_TRUE(entries.ok());
    for (const auto& e : *entries)
      for (const auto& [name, blob] : e.manifest.files)
        if (name == "librmsnorm.so") {
          ASSERT_TRUE((*s)->corrupt_blob_for_testing(blob.digest, 4096).ok());
        }
  }
  auto r = rt::Runtime::Open({copy, "default", ""});
  ASSERT_TRUE(r.ok());
  auto k = (*r)->GetKernel(kNorms, "rmsnorm", *rt::TargetPolicy::Parse("host"), {{"B", 2}, {"S", 4}, {"D", 64}});
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), Status::Code::kCorruption) << k.status().message();
}

TEST(LoadedArtifactFiles, NamesThatAreNotPlainFileNamesAreRefused) {
  for (const std::string name : {"../escape.so", "sub/lib.so", "..", ""}) {
    auto a = LoadedArtifact::LoadFiles({{name, "bytes"}, {"manifest.json", "{}"}});
    ASSERT_FALSE(a.ok()) << name;
    EXPECT_EQ(a.status().code(), Status::Code::kCorruption) << name;
    EXPECT_THAT(a.status().message(), HasSubstr("artifact file name `" + name + "` is not a plain file name"));
  }
  EXPECT_FALSE(fs::exists(fs::temp_directory_path() / "escape.so"));
}

TEST_F(RuntimeTest, TheCAbiReportsErrorsThroughCodesAndLastError) {
  mlk_runtime_t* rt = nullptr;
  ASSERT_EQ(mlk_runtime_open(store_path_.c_str(), nullptr, nullptr, &rt), MLK_RT_OK) << mlk_runtime_last_error();
  mlk_kernel_t* k = nullptr;
  EXPECT_EQ(mlk_runtime_get_kernel(rt, kNorms.c_str(), nullptr, "rmsnorm", "host", "B=2,S=4", &k), MLK_RT_ERR_INVALID);
  EXPECT_THAT(mlk_runtime_last_error(), HasSubstr("needs a value for dimension `D`"));
  EXPECT_EQ(mlk_runtime_get_kernel(rt, kNorms.c_str(), nullptr, "rmsnorm", "host", "B=2,S=4,D=x", &k), MLK_RT_ERR_INVALID);
  EXPECT_THAT(mlk_runtime_last_error(), HasSubstr("`D=x` needs a positive integer value"));
  ASSERT_EQ(mlk_runtime_get_kernel(rt, kNorms.c_str(), nullptr, "rmsnorm", "host", "B=2,S=4,D=64", &k), MLK_RT_OK);
  mlk_kernel_t* again = nullptr;
  ASSERT_EQ(mlk_runtime_get_kernel(rt, kNorms.c_str(), nullptr, "rmsnorm", "host", "B=2,S=4,D=64", &again), MLK_RT_OK);
  EXPECT_EQ(k, again);
  EXPECT_STREQ(mlk_kernel_profile(k), "host");
  Dl x(DType::F32, {2, 4, 64}), w(DType::F32, {64}), eps(DType::F32, {}), out(DType::F32, {2, 4, 64});
  const DLTensor* args[3] = {&x.d, &w.d, &eps.d};
  int64_t shape[4];
  int32_t rank = 0;
  ASSERT_EQ(mlk_kernel_output_shape(k, args, 3, shape, 4, &rank), MLK_RT_OK);
  EXPECT_EQ(rank, 3);
  EXPECT_EQ(shape[2], 64);
  EXPECT_EQ(mlk_kernel_run(k, args, 3, &out.d), MLK_RT_OK) << mlk_runtime_last_error();
  EXPECT_EQ(mlk_kernel_run(k, args, 2, &out.d), MLK_RT_ERR_INVALID);
  EXPECT_THAT(mlk_runtime_last_error(), HasSubstr("takes 3 arguments, got 2"));
  mlk_runtime_close(rt);
}


// tests/targets/c_names.tl names its dims and params after C keywords, libc
// macros and the generated wrapper's own names: tuned into a store (the
// winner built by mlk build's code), pulled and run like any other kernel.
TEST(RuntimeCNames, AKernelWhoseNamesAreCKeywordsIsTunedPulledAndRun) {
  const std::string file = std::string(MLK_SOURCE_DIR) + "/tests/targets/c_names.tl";
  const std::string dir = (fs::temp_directory_path() / ("mlk_runtime_c_names_" + std::to_string(getpid()))).string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto store = cache::Store::Open(dir + "/cache.db");
  ASSERT_TRUE(store.ok()) << store.status().message();
  auto host = resolve_profile("host");
  ASSERT_TRUE(host.ok());
  auto fe = compile_file(file);
  ASSERT_TRUE(fe.ok() && fe->ok());
  const DimEnv dims{{"b", 2}, {"d", 4}, {"rc", 3}, {"int", 2}, {"errno", 2}, {"out", 2},
                    {"dims", 3}, {"mlk_err", 3}, {"i", 2}};
  tune::TuneOptions o;
  o.trials = 1;
  o.time_s = 20;
  o.autoschedulers = false;
  o.progress = false;
  o.log_path = dir + "/c_names.log";
  auto tuned = tune::tune_cached({.module = &fe->module,
                                   .fn = "c_names",
                                   .source = file,
                                   .profile = *host,
                                   .dims = dims,
                                   .opts = o,
                                   .store = store->get(),
                                   .work_dir = dir + "/work"});
  ASSERT_TRUE(tuned.ok()) << tuned.status().message();

  auto r = rt::Runtime::Open({dir + "/cache.db", "default", ""});
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto k = (*r)->GetKernel(file, "c_names", *rt::TargetPolicy::Parse("host"), dims);
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_EQ((*k)->selection().source, rt::Selection::Source::kExact) << (*k)->selection().explain();
  Dl args(DType::F32, {2, 4, 3}, 1), nargs(DType::F32, {3}, 2), ndims(DType::F32, {2, 3, 2}, 3),
      halide(DType::F32, {}, 4), out(DType::F32, {2, 6, 2, 6});
  Status st = (*k)->Run({&args.d, &nargs.d, &ndims.d, &halide.d}, &out.d);
  ASSERT_TRUE(st.ok()) << st.message();
  auto want = interpret(fe->module, "c_names", {args.t, nargs.t, ndims.t, halide.t}, {{"int", 2}, {"errno", 2}, {"dims", 3}});
  ASSERT_TRUE(want.ok()) << want.status().message();
  Status cmp = compare(*want, out.t, tolerance_for(DType::F32, 12));
  EXPECT_TRUE(cmp.ok()) << cmp.message();
  fs::remove_all(dir);
}

// A copy of the fixture's store at `copy` whose rmsnorm entry (B=2,S=4,D=64)
// `edit` rewrites (its files, its metadata) under the same key, with
// provenance origin `origin` when not empty; the key.
std::string rewrite_rmsnorm(const std::string& from, const std::string& copy,
                            const std::function<void(std::map<std::string, std::string>&, std::string&, const std::string&)>& edit,
                            const std::string& origin = "") {
  fs::copy_file(from, copy, fs::copy_options::overwrite_existing);
  auto s = cache::Store::Open(copy);
  EXPECT_TRUE(s.ok());
  auto listed = (*s)->list("default");
  EXPECT_TRUE(listed.ok());
  for (const auto& e : *listed) {
    auto meta = cache::parse_entry_meta(e.manifest.meta_json);
    if (!meta.ok() || meta->fn != "rmsnorm") continue;
    auto a = (*s)->get_entry("default", e.key);
    EXPECT_TRUE(a.ok());
    std::map<std::string, std::string> files = a->files;
    std::string m = e.manifest.meta_json;
    edit(files, m, e.key);
    cache::Provenance prov = e.manifest.provenance;
    if (!origin.empty()) prov.origin = origin;
    EXPECT_TRUE((*s)->put_entry("default", e.key, m, prov, files).ok());
    return e.key;
  }
  ADD_FAILURE() << "no rmsnorm entry";
  return "";
}

// Finding 6 (issue 28): any write-entries token of a namespace a runtime
// reads chose the `.so` it dlopens. A runtime requiring a signer refuses an
// unsigned artifact before it opens it: the forged entry's library is not a
// library at all (opening it can only fail in dlopen, as it does without the
// policy), and under `require=signed:KEY` the error is the refusal, naming
// the entry, through the C ABI's policy string.
TEST_F(RuntimeTest, Finding6_ARuntimeRequiringASignerRefusesAnUnsignedArtifactBeforeOpeningIt) {
  auto signer = create_signing_key();
  ASSERT_TRUE(signer.ok());
  const std::string forged_db = dir_ + "/forged.db";
  const std::string key = rewrite_rmsnorm(store_path_, forged_db, [](auto& files, std::string&, const std::string&) {
    auto man = nlohmann::json::parse(files.at("manifest.json"));
    const std::string lib = man["library"];
    files[lib] = "not a shared library";
    man["files"][lib] = sha256_hex(files[lib]);
    files["manifest.json"] = man.dump(2);
  });
  mlk_runtime_t* rt = nullptr;
  ASSERT_EQ(mlk_runtime_open(forged_db.c_str(), nullptr, nullptr, &rt), MLK_RT_OK) << mlk_runtime_last_error();
  mlk_kernel_t* k = nullptr;
  // No policy: the forged library is opened, and dlopen fails on it.
  EXPECT_NE(mlk_runtime_get_kernel(rt, kNorms.c_str(), nullptr, "rmsnorm", "host", "B=2,S=4,D=64", &k), MLK_RT_OK);
  EXPECT_THAT(mlk_runtime_last_error(), HasSubstr("cannot load"));
  const std::string policy = "host;require=signed:" + signer->public_key;
  EXPECT_EQ(mlk_runtime_get_kernel(rt, kNorms.c_str(), nullptr, "rmsnorm", policy.c_str(), "B=2,S=4,D=64", &k),
            MLK_RT_ERR_NOT_FOUND);
  const std::string err = mlk_runtime_last_error();
  EXPECT_THAT(err, HasSubstr("entry " + key.substr(0, 16) + " is unsigned"));
  EXPECT_THAT(err, ::testing::Not(HasSubstr("cannot load")));
  // Nor does the nearest-shape fallback take it for another shape.
  EXPECT_EQ(mlk_runtime_get_kernel(rt, kNorms.c_str(), nullptr, "rmsnorm", policy.c_str(), "B=2,S=8,D=64", &k),
            MLK_RT_ERR_NOT_FOUND);
  EXPECT_THAT(mlk_runtime_last_error(), HasSubstr("entry " + key.substr(0, 16) + " is unsigned"));
  mlk_runtime_close(rt);
}

// A signed artifact loads and runs under a policy trusting its signer; a
// foreign-signed one is refused, naming its signer; one whose metadata was
// relabelled after signing (another shape) no longer verifies.
TEST_F(RuntimeTest, SignedArtifactsLoadAndForeignSignedOrRelabelledOnesAreRefused) {
  auto signer = create_signing_key(), stranger = create_signing_key();
  ASSERT_TRUE(signer.ok() && stranger.ok());
  const std::string signed_db = dir_ + "/signed.db";
  const std::string key = rewrite_rmsnorm(store_path_, signed_db, [&](auto& files, std::string& meta, const std::string& k) {
    meta = *cache::sign_entry(k, files, meta, *signer, {"default"});
  });
  auto r = rt::Runtime::Open({signed_db, "default", ""});
  ASSERT_TRUE(r.ok());
  const DimEnv dims{{"B", 2}, {"S", 4}, {"D", 64}};
  auto ok = (*r)->GetKernel(kNorms, "rmsnorm", *rt::TargetPolicy::Parse("host;require=signed:" + signer->public_key), dims);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_TRUE((*ok)->selection().exact);
  Dl x(DType::F32, {2, 4, 64}, 1), w(DType::F32, {64}, 2), eps(DType::F32, {}, 3), out(DType::F32, {2, 4, 64});
  EXPECT_TRUE((*ok)->Run({&x.d, &w.d, &eps.d}, &out.d).ok());
  auto r2 = rt::Runtime::Open({signed_db, "default", ""});
  auto foreign = (*r2)->GetKernel(kNorms, "rmsnorm", *rt::TargetPolicy::Parse("host;require=signed:" + stranger->public_key), dims);
  ASSERT_FALSE(foreign.ok());
  EXPECT_EQ(foreign.status().code(), Status::Code::kNotFound);
  EXPECT_THAT(foreign.status().message(),
              HasSubstr("entry " + key.substr(0, 16) + " is signed by key " + signer->key_id + ", which is not trusted"));
  // Relabelled: the signed metadata says another shape now.
  const std::string relabelled_db = dir_ + "/relabelled.db";
  rewrite_rmsnorm(signed_db, relabelled_db, [](auto&, std::string& meta, const std::string&) {
    auto j = nlohmann::json::parse(meta);
    j["dims"]["S"] = 8;
    meta = j.dump();
  });
  auto r3 = rt::Runtime::Open({relabelled_db, "default", ""});
  auto relabelled = (*r3)->GetKernel(kNorms, "rmsnorm", *rt::TargetPolicy::Parse("host;require=signed:" + signer->public_key),
                                     {{"B", 2}, {"S", 8}, {"D", 64}});
  ASSERT_FALSE(relabelled.ok());
  EXPECT_THAT(relabelled.status().message(), HasSubstr("does not verify"));
  // Issue 49, finding 11: signed by the trusted key, but for another
  // namespace (a dev build): not a signature for the namespace read here.
  const std::string dev_db = dir_ + "/dev.db";
  rewrite_rmsnorm(store_path_, dev_db, [&](auto& files, std::string& meta, const std::string& k) {
    meta = *cache::sign_entry(k, files, meta, *signer, {"dev"});
  });
  auto r4 = rt::Runtime::Open({dev_db, "default", ""});
  auto dev = (*r4)->GetKernel(kNorms, "rmsnorm", *rt::TargetPolicy::Parse("host;require=signed:" + signer->public_key), dims);
  ASSERT_FALSE(dev.ok());
  EXPECT_THAT(dev.status().message(),
              HasSubstr("is signed by key " + signer->key_id + " for namespace `dev`, not for `default`"));
  // A store read directly (no server) counts only its own namespace, whatever
  // an entry's origin says (the second review: a store file, an archive
  // among them, is written and copied elsewhere): a release build marked as
  // pulled from `release` is not one for this store's `default`.
  for (const auto& [signed_for, loads] : {std::pair<std::string, bool>{"release", false}, {"default", true}}) {
    const std::string pulled_db = dir_ + "/pulled-" + signed_for + ".db";
    rewrite_rmsnorm(store_path_, pulled_db, [&](auto& files, std::string& meta, const std::string& k) {
      meta = *cache::sign_entry(k, files, meta, *signer, {signed_for});
    }, "http://127.0.0.1:9#release");
    auto rp = rt::Runtime::Open({pulled_db, "default", ""});
    auto got = (*rp)->GetKernel(kNorms, "rmsnorm", *rt::TargetPolicy::Parse("host;require=signed:" + signer->public_key), dims);
    EXPECT_EQ(got.ok(), loads) << signed_for << ": " << (got.ok() ? "" : got.status().message());
    if (!loads) EXPECT_THAT(got.status().message(), HasSubstr("for namespace `release`, not for `default`"));
  }
  auto bad = rt::TargetPolicy::Parse("host;require=signed:nonsense");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("trusted key `nonsense` is neither"));
  EXPECT_EQ(rt::TargetPolicy::Parse("host;require=signed:" + signer->public_key)->str(),
            "host;require=signed:" + signer->public_key);
}

// The artifact of a directory is loaded from a private copy: what is
// hashed is what is opened, and a later change to the directory changes
// nothing of the loaded kernel.
TEST(LoadedArtifactFiles, ADirectoryIsLoadedFromAPrivateCopy) {
  auto fe = compile_file(kNorms);
  ASSERT_TRUE(fe.ok() && fe->ok());
  auto host = resolve_profile("host");
  const std::string dir = (fs::temp_directory_path() / ("mlk_private_copy_" + std::to_string(getpid()))).string();
  fs::remove_all(dir);
  BuildRequest req;
  req.module = &fe->module;
  req.fn = "rmsnorm";
  req.source_path = kNorms;
  req.profile = *host;
  req.dims = {{"B", 2}, {"S", 4}, {"D", 64}};
  req.out_dir = dir;
  auto built = build_artifact(req);
  ASSERT_TRUE(built.ok()) << built.status().message();
  auto a = LoadedArtifact::Load(dir);
  ASSERT_TRUE(a.ok()) << a.status().message();
  // The library mapped into this process is not the directory's file.
  Dl_info info{};
  std::string mapped;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".so") mapped = e.path().string();
  ASSERT_FALSE(mapped.empty());
  void* h = dlopen(mapped.c_str(), RTLD_NOW | RTLD_NOLOAD);
  EXPECT_EQ(h, nullptr) << mapped << " was opened in place";
  if (h) dlclose(h);
  (void)info;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mlk
