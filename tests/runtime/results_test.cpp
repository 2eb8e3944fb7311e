// Fns with several results (`-> (T, U, ..)`, one value_and_grad fn) through
// every layer: the interpreter, lowering (one pipeline whose shared stages are
// computed once), the default schedule, the JIT, a built artifact and its C
// entry, the runtime and its C ABI. Each result is checked against the
// reference interpreter; each misuse is refused by name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lang/compare.h"
#include "lang/frontend.h"
#include "lang/interpreter.h"
#include "lang/ir_printer.h"
#include "base/files.h"
#include "runtime/jit.h"
#include "runtime/mlk_runtime.h"
#include "runtime/runtime.h"
#include "runtime/testing.h"
#include "scheduler/kernel.h"
#include "scheduler/rules.h"
#include "artifact/build.h"
#include "targets/detect.h"
#include "artifact/loaded.h"
#include "tests/runtime/dl_tensor.h"
#include "tests/test_support.h"
#include "verify/verify.h"

namespace mlk {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// `step` and `loss_v, d_w, d_b` are the same value_and_grad, as one fn and as
// three; `mixed` has results of three dtypes and ranks; in `centered` a row
// reduction feeds both results (a stage two outputs read).
const char* kProgram = R"(fn loss [N, D, F](x: Tensor[F32, [N, D]], w: Tensor[F32, [D, F]], b: Tensor[F32, [F]]) -> Scalar[F32] =
  let h = tanh(matmul(x, w) + broadcast(b, [N, F], axes=[1]))
  mean(h * h, axes=[0, 1])
public fn step = value_and_grad(loss, wrt=[w, b])
public fn loss_v, d_w, d_b = value_and_grad(loss, wrt=[w, b])

public fn mixed [N](x: Tensor[F32, [N]], k: Tensor[I32, [N]]) -> (Tensor[F32, [N]], Tensor[I32, [N]], Scalar[F64]) =
  let y = x * x
  (y + 1.0, k * 2, sum(cast(y, F64), axes=[0]))

public fn centered [N, D](x: Tensor[F32, [N, D]]) -> (Tensor[F32, [N, D]], Tensor[F32, [N, D]]) =
  let m = broadcast(reduce_max(x, axes=[1]), [N, D], axes=[0])
  (x - m, exp(x - m))

fn block [N, D, F](x: Tensor[F32, [N, D]], w1: Tensor[F32, [D, F]], w2: Tensor[F32, [F, D]]) -> Tensor[F32, [N, D]] =
  matmul(tanh(matmul(x, w1)), w2)
public fn block__fwd, block__bwd = vjp_split(block, wrt=[x, w1, w2])
public fn block__vjp = vjp(block, wrt=[x, w1, w2])
)";

ir::Module program() {
  FrontendResult fe = compile_source("results.tl", kProgram);
  EXPECT_TRUE(fe.ok()) << fe.rendered();
  return fe.module;
}

HostTensor random(DType t, std::vector<int64_t> shape, uint64_t seed) { return Dl(t, std::move(shape), seed).t; }

std::vector<HostTensor> step_inputs() {
  return {random(DType::F32, {5, 7}, 1), random(DType::F32, {7, 3}, 2), random(DType::F32, {3}, 3)};
}

void expect_close(const std::vector<HostTensor>& want, const std::vector<HostTensor>& got, int64_t k) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    Status s = compare(want[i], got[i], tolerance_for(want[i].dtype, k));
    EXPECT_TRUE(s.ok()) << "result " << i << ": " << s.message();
  }
}

TEST(Results, OneValueAndGradFnIsItsSeparateFnsInOne) {
  ir::Module m = program();
  const ir::Function* step = m.find("step");
  ASSERT_NE(step, nullptr);
  ASSERT_EQ(step->results().size(), 3u);
  const std::string text = ir::print_function(*step);
  EXPECT_THAT(text, HasSubstr("-> (Tensor[F32, []], Tensor[F32, [D, F]], Tensor[F32, [F]]) public"));
  EXPECT_THAT(text, HasSubstr("  return (%"));
  auto all = interpret_all(m, "step", step_inputs(), {});
  ASSERT_TRUE(all.ok()) << all.status().message();
  const char* separate[] = {"loss_v", "d_w", "d_b"};
  for (int i = 0; i < 3; ++i) {
    auto one = interpret(m, separate[i], step_inputs(), {});
    ASSERT_TRUE(one.ok()) << one.status().message();
    EXPECT_EQ((*all)[i].shape, one->shape) << separate[i];
    EXPECT_EQ((*all)[i].bytes, one->bytes) << separate[i] << ": the same arithmetic, the same values";
  }
  auto refused = interpret(m, "step", step_inputs(), {});
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("`step` has 3 results; interpret_all() gives them all"));
}

// The most results a fn has (ir::kMaxResults), by each way of making one.
TEST(Results, AFnHasAtMost64Results) {
  auto diagnostics = [](const std::string& text) {
    FrontendResult fe = compile_source("many.tl", text);
    std::string all;
    for (const auto& d : fe.diagnostics) all += d.message + "\n";
    return all;
  };
  std::string written = "fn many [N](x: Tensor[F32, [N]]) -> (Tensor[F32, [N]]";
  for (int i = 1; i < 65; ++i) written += ", Tensor[F32, [N]]";
  written += ") =\n  (x";
  for (int i = 1; i < 65; ++i) written += ", x";
  written += ")\n";
  EXPECT_THAT(diagnostics(written), HasSubstr("`many` declares 65 results; a fn has at most 64"));
  std::string params, wrt, sum = "x0";
  for (int i = 0; i < 64; ++i) {
    params += (i ? ", x" : "x") + std::to_string(i) + ": Scalar[F32]";
    wrt += (i ? ", x" : "x") + std::to_string(i);
    if (i) sum += " + x" + std::to_string(i);
  }
  EXPECT_THAT(diagnostics("fn l(" + params + ") -> Scalar[F32] = " + sum + "\nfn all = value_and_grad(l, wrt=[" +
                          wrt + "])\n"),
              HasSubstr("`value_and_grad` of `l` as one fn would have 65 results; a fn has at most 64 (give one "
                        "name per result)"));
  std::string product = "exp(sum(x, axes=[0]))";
  for (int i = 1; i < 65; ++i) product += " * exp(sum(x * " + std::to_string(i) + ".0, axes=[0]))";
  EXPECT_THAT(diagnostics("fn p [N](x: Tensor[F32, [N]]) -> Scalar[F32] = " + product +
                          "\nfn p_fwd, p_bwd = vjp_split(p, wrt=[x])\n"),
              HasSubstr("`vjp_split` of `p` would return 66 values from its forward and 1 from its backward; a fn "
                        "has at most 64 results (split a smaller fn)"));
}

TEST(Results, TheSharedForwardIsLoweredOnce) {
  ir::Module m = program();
  const DimEnv dims = {{"N", 5}, {"D", 7}, {"F", 3}};
  auto matmuls = [&](const std::string& fn) {
    auto st = stage_infos_for(m, fn, dims);
    EXPECT_TRUE(st.ok()) << st.status().message();
    int n = 0, outputs = 0;
    for (const auto& s : *st) {
      n += s.kind == StageInfo::Kind::kMatmul;
      outputs += s.kind == StageInfo::Kind::kOutput;
    }
    return std::pair{n, outputs};
  };
  auto [together, outs] = matmuls("step");
  EXPECT_EQ(outs, 3);
  // x @ w once for the value and both gradients, x^T @ dh once for d_w.
  EXPECT_EQ(together, 2);
  EXPECT_EQ(matmuls("loss_v").first + matmuls("d_w").first + matmuls("d_b").first, 4);
}

// vjp_split: the forward returns the product the backward reads (the inner
// matmul) after its result; the backward takes it instead of computing it,
// and gives the vjp's cotangents.
TEST(Results, AVjpSplitsIntoAForwardThatKeepsWhatItsBackwardReads) {
  ir::Module m = program();
  const ir::Function* fwd = m.find("block__fwd");
  const ir::Function* bwd = m.find("block__bwd");
  ASSERT_TRUE(fwd && bwd);
  ASSERT_EQ(fwd->results().size(), 2u);
  EXPECT_EQ(fwd->more_results[0].type.str(), "Tensor[F32, [N, F]]");
  ASSERT_EQ(bwd->params.size(), 5u);
  EXPECT_EQ(bwd->params[3].name, "res0");
  EXPECT_EQ(bwd->params[4].name, "g");
  EXPECT_EQ(bwd->results().size(), 3u);
  std::vector<HostTensor> in = {random(DType::F32, {4, 6}, 1), random(DType::F32, {6, 5}, 2),
                                random(DType::F32, {5, 6}, 3)};
  HostTensor g = random(DType::F32, {4, 6}, 4);
  auto f = interpret_all(m, "block__fwd", in, {});
  ASSERT_TRUE(f.ok()) << f.status().message();
  auto whole = interpret_all(m, "block__vjp", {in[0], in[1], in[2], g}, {});
  ASSERT_TRUE(whole.ok());
  auto parts = interpret_all(m, "block__bwd", {in[0], in[1], in[2], (*f)[1], g}, {});
  ASSERT_TRUE(parts.ok()) << parts.status().message();
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ((*parts)[i].bytes, (*whole)[i].bytes) << "cotangent " << i;
  // The backward computes no forward product: 4 matmuls to the vjp's 5.
  const DimEnv dims = {{"N", 4}, {"D", 6}, {"F", 5}};
  auto count = [&](const std::string& fn) {
    auto st = stage_infos_for(m, fn, dims);
    EXPECT_TRUE(st.ok());
    int n = 0;
    for (const auto& s : *st) n += s.kind == StageInfo::Kind::kMatmul;
    return n;
  };
  EXPECT_EQ(count("block__bwd"), 4);
  EXPECT_EQ(count("block__vjp"), 5);
  auto k = Kernel::CompileJit(m, "block__bwd");
  ASSERT_TRUE(k.ok()) << k.status().message();
  auto jit = (*k)->RunAll({in[0], in[1], in[2], (*f)[1], g}, {});
  ASSERT_TRUE(jit.ok()) << jit.status().message();
  expect_close(*whole, *jit, 6);
}

TEST(Results, TheJitRunsEveryResultLikeTheInterpreter) {
  ir::Module m = program();
  for (const char* fn : {"step", "mixed", "centered"}) {
    std::vector<HostTensor> in = std::string(fn) == "step"    ? step_inputs()
                                 : std::string(fn) == "mixed" ? std::vector<HostTensor>{random(DType::F32, {9}, 4),
                                                                                        random(DType::I32, {9}, 5)}
                                                              : std::vector<HostTensor>{random(DType::F32, {6, 11}, 6)};
    auto k = Kernel::CompileJit(m, fn);
    ASSERT_TRUE(k.ok()) << fn << ": " << k.status().message();
    auto got = (*k)->RunAll(in, {});
    ASSERT_TRUE(got.ok()) << fn << ": " << got.status().message();
    auto want = interpret_all(m, fn, in, {});
    ASSERT_TRUE(want.ok());
    expect_close(*want, *got, 64);
    auto one = (*k)->Run(in, {});
    ASSERT_FALSE(one.ok()) << fn;
    EXPECT_THAT(one.status().message(), HasSubstr("results; run it with as many outputs (Kernel::RunAll)"));
    std::vector<mlk_tensor_t> none, two(2);
    EXPECT_THAT((*k)->CallAll(none, two, {}).message(), HasSubstr("` takes "));
  }
  auto k = Kernel::CompileJit(m, "step");
  ASSERT_TRUE(k.ok());
  std::vector<mlk_tensor_t> args(3), two(2);
  EXPECT_THAT((*k)->CallAll(args, two, {}).message(), HasSubstr("`step` has 3 results, got 2 output tensors"));
}

// What checks one result refuses a fn with several, rather than check a part.
TEST(Results, OneResultChecksRefuseAFnWithSeveral) {
  ir::Module m = program();
  const ir::Function& f = *m.find("step");
  const DimEnv dims = {{"N", 5}, {"D", 7}, {"F", 3}};
  auto env = rt::envelope_of(m, f, dims);
  ASSERT_FALSE(env.ok());
  EXPECT_THAT(env.status().message(), HasSubstr("`step` has 3 results; an envelope is of a fn with one result"));
  auto cuda = resolve_profile("cuda_sm90");
  ASSERT_TRUE(cuda.ok());
  auto gpu = build_artifact({&m, "step", "results.tl", *cuda, dims, {}, testing_support::scratch_dir("mlk_results", "gpu")});
  ASSERT_FALSE(gpu.ok());
  EXPECT_THAT(gpu.status().message(), HasSubstr("`step` has 3 results; CUDA artifacts take fns with one result"));
  const std::string dir = testing_support::scratch_dir("mlk_results", "verify");
  auto built = build_artifact({&m, "step", "results.tl", host_profile(), dims, {}, dir});
  ASSERT_TRUE(built.ok()) << built.status().message();
  verify::VerifyRequest req{&m, "step", host_profile(), dims, {}, {verify::Level::kTypes, verify::Level::kEnvelope}};
  for (const auto& e : fs::directory_iterator(dir)) req.files[e.path().filename()] = *read_file(e.path());
  auto rep = verify::verify_artifact(req);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_TRUE(rep->levels[0].pass) << rep->levels[0].counterexample;
  EXPECT_FALSE(rep->levels[1].pass);
  EXPECT_EQ(rep->levels[1].counterexample, "`step` has 3 results; the envelope level checks fns with one result");
  auto man = nlohmann::json::parse(req.files["manifest.json"]);
  man["signature"]["results"].erase(2);
  req.files["manifest.json"] = man.dump();
  req.levels = {verify::Level::kTypes};
  rep = verify::verify_artifact(req);
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(rep->levels[0].counterexample, "the artifact has 2 results, the fn 3");
  fs::remove_all(dir);
}

// A stage placed inside one output's loops but read by two goes to root,
// its own directives kept; a stage placed only where it is read stays.
TEST(Results, AStageTwoOutputsReadIsTakenOutOfEitherOutputsLoops) {
  ir::Module m = program();
  auto st = stage_infos_for(m, "centered", {{"N", 64}, {"D", 256}});
  ASSERT_TRUE(st.ok());
  std::string shared;
  for (const auto& info : *st)
    if (info.readers == std::vector<std::string>{"output", "output1"}) shared = info.name;
  ASSERT_FALSE(shared.empty()) << "the row maximum is read by both results";
  Directive at;
  at.op = "compute_at";
  at.at_stage = "output";
  at.at_var = "a0";
  Directive vec;
  vec.op = "vectorize";
  vec.vars = {"a0"};
  vec.factors = {8};
  Schedule s;
  s.stages[shared] = {at, vec};
  s.stages["output"] = {vec};
  confine_to_outputs(*st, s);
  ASSERT_EQ(s.stages[shared].size(), 2u);
  EXPECT_EQ(s.stages[shared][0].op, "compute_root");
  EXPECT_EQ(s.stages[shared][1], vec);
  EXPECT_EQ(s.stages["output"], std::vector<Directive>{vec});
  auto k = Kernel::CompileJit(m, "centered", host_profile(), &s);
  EXPECT_TRUE(k.ok()) << k.status().message();
  // In `step`, each product is read by one output: the default schedule's
  // directives for them are the rules' own (tiled, parallel), none moved.
  auto steps = stage_infos_for(m, "step", {{"N", 64}, {"D", 32}, {"F", 48}});
  ASSERT_TRUE(steps.ok());
  const Profile p = host_profile();
  Schedule rules = schedule_from_knobs(*steps, default_knobs(*steps, p), p);
  Schedule again = rules;
  confine_to_outputs(*steps, again);
  EXPECT_EQ(again, rules);
}

TEST(Results, AnArtifactComputesEveryResultThroughItsCEntry) {
  ir::Module m = program();
  const std::string dir = testing_support::scratch_dir("mlk_results", "step");
  BuildRequest req{&m, "step", "results.tl", host_profile(), {{"N", 5}, {"D", 7}, {"F", 3}}, {}, dir};
  auto res = build_artifact(req);
  ASSERT_TRUE(res.ok()) << res.status().message();
  auto man = nlohmann::json::parse(res->manifest_json);
  ASSERT_EQ(man["signature"]["results"].size(), 3u);
  EXPECT_EQ(man["signature"]["results"][1]["shape"], nlohmann::json::array({"D", "F"}));
  EXPECT_EQ(man["signature"]["result"], man["signature"]["results"][0]);
  auto a = LoadedArtifact::Load(dir);
  ASSERT_TRUE(a.ok()) << a.status().message();
  const ir::Function& f = *m.find("step");
  std::vector<HostTensor> in = step_inputs(), outs(3);
  ASSERT_TRUE((*a)->RunAllInto(f, in, {{"N", 5}, {"D", 7}, {"F", 3}}, outs).ok());
  auto want = interpret_all(m, "step", in, {});
  ASSERT_TRUE(want.ok());
  expect_close(*want, outs, 35);
  std::vector<HostTensor> short_outs(2);
  EXPECT_THAT((*a)->RunAllInto(f, in, {}, short_outs).message(), HasSubstr("`step` has 3 results, got 2 outputs"));
  HostTensor one;
  Status refused = (*a)->RunInto(f, in, {}, one);
  EXPECT_THAT(refused.message(), HasSubstr("`step` has 3 results; run it with as many outputs"));
  std::vector<mlk_tensor_t> args, two(2);
  Status counted = (*a)->CallAll(args, two, {}, "step");
  EXPECT_THAT(counted.message(), HasSubstr("`step`: its artifact has 3 results, got 2 output tensors"));
  // The entry of several results is its own symbol, which takes their count.
  EXPECT_EQ(man["entry_symbol"], "mlk_step_results");
  void* lib = dlopen(res->library.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  EXPECT_EQ(dlsym(lib, "mlk_step"), nullptr) << "a one-result caller finds no entry";
  using Entry = int (*)(const mlk_tensor_t*, int32_t, mlk_tensor_t*, int32_t, const int64_t*, int32_t);
  auto entry = reinterpret_cast<Entry>(dlsym(lib, "mlk_step_results"));
  ASSERT_NE(entry, nullptr);
  mlk_tensor_t none[2] = {};
  EXPECT_EQ(entry(nullptr, 0, none, 2, nullptr, 0), MLK_ERR_NARGS);
  EXPECT_STREQ(reinterpret_cast<const char* (*)()>(dlsym(lib, "mlk_last_error"))(), "step has 3 results, got 2 outputs");
  dlclose(lib);
  // A manifest whose results disagree with its entry is not loaded.
  man["signature"]["results"] = nlohmann::json::array({man["signature"]["result"]});
  std::ofstream(dir + "/manifest.json") << man.dump();
  auto lying = LoadedArtifact::Load(dir);
  ASSERT_FALSE(lying.ok());
  EXPECT_THAT(lying.status().message(), HasSubstr("lists 1 results but names the entry mlk_step_results"));
  man["signature"]["results"] = nlohmann::json::array();
  std::ofstream(dir + "/manifest.json") << man.dump();
  auto empty = LoadedArtifact::Load(dir);
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(empty.status().message(), HasSubstr("`signature.results` must be a list of 1 to 64 result types"));
  fs::remove_all(dir);
}

class RuntimeResults : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing_support::scratch_dir("mlk_results", "runtime");
    fs::create_directories(dir_);
    file_ = dir_ + "/results.tl";
    std::ofstream(file_) << kProgram;
    auto r = rt::Runtime::Open({dir_ + "/cache.db", "default", ""});
    ASSERT_TRUE(r.ok()) << r.status().message();
    rt_ = std::move(r).value();
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_, file_;
  std::unique_ptr<rt::Runtime> rt_;
};

TEST_F(RuntimeResults, EveryResultIsComputedAndEachOutputIsChecked) {
  auto k = rt_->GetKernel(file_, "step", *rt::TargetPolicy::Parse("host"), {{"N", 5}, {"D", 7}, {"F", 3}});
  ASSERT_TRUE(k.ok()) << k.status().message();
  Dl x(DType::F32, {5, 7}, 1), w(DType::F32, {7, 3}, 2), b(DType::F32, {3}, 3);
  Dl l(DType::F32, {}), dw(DType::F32, {7, 3}), db(DType::F32, {3});
  auto shapes = (*k)->OutputShapes({&x.d, &w.d, &b.d});
  ASSERT_TRUE(shapes.ok()) << shapes.status().message();
  EXPECT_EQ(*shapes, (std::vector<std::vector<int64_t>>{{}, {7, 3}, {3}}));
  Status ran = (*k)->RunAll({&x.d, &w.d, &b.d}, {&l.d, &dw.d, &db.d});
  ASSERT_TRUE(ran.ok()) << ran.message();
  auto want = interpret_all(program(), "step", {x.t, w.t, b.t}, {});
  ASSERT_TRUE(want.ok());
  expect_close(*want, {l.t, dw.t, db.t}, 35);

  auto refuse = [&](std::vector<DLTensor*> outs, const std::string& text) {
    Status s = (*k)->RunAll({&x.d, &w.d, &b.d}, outs);
    EXPECT_THAT(s.message(), HasSubstr(text));
  };
  refuse({&l.d, &dw.d}, "`step` has 3 results, got 2 outputs");
  Dl small(DType::F32, {7, 2});
  refuse({&l.d, &small.d, &db.d}, "output 1 of `step`: shape [7, 2] but the result is [7, 3]");
  refuse({&l.d, &dw.d, &dw.d}, "output 2 of `step`: rank 2 but the signature declares rank 1");
  DLTensor alias = db.d;  // output 2 over the first three floats of output 1
  alias.data = dw.t.bytes.data();
  refuse({&l.d, &dw.d, &alias}, "output 2 of `step`: shares memory with output 1; each result needs its own");
  refuse({&l.d, &dw.d, &b.d}, "output 2 of `step`: shares memory with argument 2 `b`");
  refuse({&l.d, nullptr, &db.d}, "output 1 of `step` is NULL");
  refuse({}, "`step` has 3 results, got 0 outputs");
  EXPECT_THAT((*k)->Run({&x.d, &w.d, &b.d}, &l.d).message(), HasSubstr("`step` has 3 results; give one output per result"));
  EXPECT_THAT((*k)->OutputShape({&x.d, &w.d, &b.d}).status().message(), HasSubstr("`step` has 3 results"));
}

TEST_F(RuntimeResults, TheCAbiCountsShapesAndRunsEveryResult) {
  mlk_runtime_t* rt = nullptr;
  ASSERT_EQ(mlk_runtime_open((dir_ + "/c.db").c_str(), nullptr, nullptr, &rt), MLK_RT_OK) << mlk_runtime_last_error();
  mlk_kernel_t* k = nullptr;
  ASSERT_EQ(mlk_runtime_get_kernel(rt, file_.c_str(), nullptr, "mixed", "host", "N=9", &k), MLK_RT_OK)
      << mlk_runtime_last_error();
  EXPECT_EQ(mlk_kernel_num_results(k), 3);
  EXPECT_EQ(mlk_kernel_num_results(nullptr), 0);
  Dl x(DType::F32, {9}, 4), kk(DType::I32, {9}, 5), y(DType::F32, {9}), k2(DType::I32, {9}), s(DType::F64, {});
  const DLTensor* args[2] = {&x.d, &kk.d};
  int64_t shape[2] = {-1, -1};
  int32_t rank = -1;
  ASSERT_EQ(mlk_kernel_result_shape(k, args, 2, 1, shape, 2, &rank), MLK_RT_OK) << mlk_runtime_last_error();
  EXPECT_EQ(rank, 1);
  EXPECT_EQ(shape[0], 9);
  ASSERT_EQ(mlk_kernel_result_shape(k, args, 2, 2, shape, 2, &rank), MLK_RT_OK);
  EXPECT_EQ(rank, 0);
  EXPECT_EQ(mlk_kernel_result_shape(k, args, 2, 3, shape, 2, &rank), MLK_RT_ERR_INVALID);
  EXPECT_THAT(mlk_runtime_last_error(), HasSubstr("result 3 of a fn with 3 results"));
  EXPECT_EQ(mlk_kernel_result_shape(k, args, 2, 0, shape, 0, &rank), MLK_RT_ERR_INVALID);
  EXPECT_THAT(mlk_runtime_last_error(), HasSubstr("mlk_kernel_result_shape: result 0 has rank 1, max_rank is 0"));
  EXPECT_EQ(mlk_kernel_result_shape(k, args, 2, 0, shape, 2, nullptr), MLK_RT_ERR_INVALID);
  EXPECT_THAT(mlk_runtime_last_error(), HasSubstr("mlk_kernel_result_shape: NULL argument"));
  DLTensor* outs[3] = {&y.d, &k2.d, &s.d};
  EXPECT_EQ(mlk_kernel_run_all(k, args, 2, outs, 2), MLK_RT_ERR_INVALID);
  EXPECT_THAT(mlk_runtime_last_error(), HasSubstr("`mixed` has 3 results, got 2 outputs"));
  EXPECT_EQ(mlk_kernel_run_all(k, args, 2, nullptr, 3), MLK_RT_ERR_INVALID);
  EXPECT_THAT(mlk_runtime_last_error(), HasSubstr("mlk_kernel_run_all: NULL kernel, arguments or outputs"));
  EXPECT_EQ(mlk_kernel_run(k, args, 2, &y.d), MLK_RT_ERR_INVALID);
  EXPECT_THAT(mlk_runtime_last_error(), HasSubstr("`mixed` has 3 results"));
  ASSERT_EQ(mlk_kernel_run_all(k, args, 2, outs, 3), MLK_RT_OK) << mlk_runtime_last_error();
  auto want = interpret_all(program(), "mixed", {x.t, kk.t}, {});
  ASSERT_TRUE(want.ok());
  expect_close(*want, {y.t, k2.t, s.t}, 9);
  mlk_runtime_close(rt);
}

// The JIT plugin's call takes the count of its outputs and refuses another.
TEST(Results, TheJitPluginChecksTheCountOfOutputs) {
  auto plugin = rt::load_jit_plugin();
  ASSERT_TRUE(plugin.ok()) << plugin.status().message();
  ir::Module m = program();
  auto k = rt::JitKernel::Compile(*plugin, "results.tl", kProgram, "f32", "mixed",
                                  ir::function_hash(m, *m.find("mixed")), "host", "", {{"N", 9}});
  ASSERT_TRUE(k.ok()) << k.status().message();
  Dl x(DType::F32, {9}, 4), kk(DType::I32, {9}, 5), y(DType::F32, {9});
  int64_t n9[1] = {9};
  std::vector<mlk_tensor_t> args = {{x.t.bytes.data(), MLK_F32, 1, n9, nullptr}, {kk.t.bytes.data(), MLK_I32, 1, n9, nullptr}};
  std::vector<mlk_tensor_t> one = {{y.t.bytes.data(), MLK_F32, 1, n9, nullptr}};
  Status s = (*k)->Call(args, one, {{"N", 9}});
  EXPECT_THAT(s.message(), HasSubstr("mlk_jit_call: `mixed` has 3 results, got 1 outputs"));
}

}  // namespace
}  // namespace mlk
