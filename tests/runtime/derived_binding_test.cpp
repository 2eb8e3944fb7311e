// A model's binding derived from its program (runtime/derived_binding.h):
// a fold over an Array of layers is one step per layer with that layer's
// weights, bound by field path after a rename; a fixed dimension becomes the
// step's dims, a constant its constant; leaves no step reads must exist. The
// entry's mistakes and the weights' are refused naming the call or the key.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "base/files.h"
#include "interop/safetensors.h"
#include "runtime/derived_binding.h"
#include "runtime/model.h"
#include "tests/runtime/dl_tensor.h"
#include "tests/test_support.h"

namespace mlk {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr const char* kProgram = R"(
record Lin [I, O] { weight: Tensor[F32, [O, I]], bias: Tensor[F32, [O]] }
record Net [D, L] { layer: Array[Lin[D, D], L], head: Lin[D, 2], note: Tensor[F32, [1]] }
public fn affine [N, D](x: Tensor[F32, [N, D]], p: Lin[D, D], s: Scalar[F32]) -> Tensor[F32, [N, D]] =
  (matmul(x, transpose(p.weight, [1, 0])) + broadcast(p.bias, [N, D], axes=[1])) * broadcast(s, [N, D])
public fn proj [N, D, H](x: Tensor[F32, [N, D], [D mod H = 0]], p: Lin[D, 2]) -> Tensor[F32, [N, 2]] =
  matmul(x, transpose(p.weight, [1, 0])) + broadcast(p.bias, [N, 2], axes=[1])
public fn model [N, D](x: Tensor[F32, [N, D], [D mod 2 = 0]], net: Net[D, 3]) -> Tensor[F32, [N, 2]] =
  proj[H=2](fold(net.layer, x, affine, 0.5), net.head)
fn hidden [N, D](x: Tensor[F32, [N, D]]) -> Tensor[F32, [N, D]] = x
public fn computes [N, D](x: Tensor[F32, [N, D]], net: Net[D, 3]) -> Tensor[F32, [N, D]] =
  affine(x + x, net.layer[0], 0.5)
public fn private_step [N, D](x: Tensor[F32, [N, D]], net: Net[D, 3]) -> Tensor[F32, [N, D]] =
  hidden(affine(x, net.layer[0], 0.5))
public fn scalar_input [N, D](x: Tensor[F32, [N, D]], s: Scalar[F32], net: Net[D, 3]) -> Tensor[F32, [N, D]] =
  affine(x, net.layer[0], s)
fn pair [N, D](x: Tensor[F32, [N, D]], a: Lin[D, D], b: Lin[D, D]) -> Tensor[F32, [N, D]] =
  affine(affine(x, a, 0.5), b, 0.5)
)";

constexpr int64_t kD = 4;

// The checkpoint's keys: the layers under "enc.layers", as the rename maps them.
std::map<std::string, HostTensor> weights() {
  std::map<std::string, HostTensor> t;
  uint64_t seed = 20;
  for (int i = 0; i < 3; ++i) {
    t["enc.layers." + std::to_string(i) + ".weight"] = Dl(DType::F32, {kD, kD}, seed++).t;
    t["enc.layers." + std::to_string(i) + ".bias"] = Dl(DType::F32, {kD}, seed++).t;
  }
  t["head.weight"] = Dl(DType::F32, {2, kD}, seed++).t;
  t["head.bias"] = Dl(DType::F32, {2}, seed++).t;
  t["note"] = Dl(DType::F32, {1}, seed++).t;
  return t;
}

const std::map<std::string, std::string> kRename = {{"layer", "enc.layers"}};

class DerivedBindingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing_support::scratch_dir("mlk_derived_binding_test",
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    program_ = dir_ + "/m.tl";
    ASSERT_TRUE(write_file(program_, kProgram).ok());
    auto r = rt::Runtime::Open({dir_ + "/cache.db", "default", ""});
    ASSERT_TRUE(r.ok()) << r.status().message();
    rt_ = std::shared_ptr<rt::Runtime>(std::move(r).value());
    auto p = rt_->LoadProgram(program_, Precision::kF32);
    ASSERT_TRUE(p.ok()) << p.status().message();
    prog_ = *p;
  }
  void TearDown() override { fs::remove_all(fs::path(dir_).parent_path()); }

  std::string write_weights(const std::map<std::string, HostTensor>& ts) {
    std::vector<safetensors::TensorToWrite> out;
    for (const auto& [k, t] : ts) out.push_back({k, *safetensors::parse_dtype(dtype_name(t.dtype)), t.shape,
                                                 {t.bytes.data(), t.bytes.size()}});
    const std::string path = dir_ + "/w.safetensors";
    EXPECT_TRUE(safetensors::Write(path, out).ok());
    return path;
  }
  Expected<std::shared_ptr<const rt::Model>> load(const std::map<std::string, HostTensor>& ts,
                                                  const std::map<std::string, std::string>& rename = kRename) {
    return rt::Model::Load(rt_, {program_, "", write_weights(ts), "model", rename}, *rt::TargetPolicy::Parse("host"));
  }
  std::string derive_error(const std::string& entry) {
    auto b = rt::derive_binding(prog_->module, program_, entry, {});
    return b.ok() ? "" : b.status().message();
  }

  std::string dir_, program_;
  std::shared_ptr<rt::Runtime> rt_;
  std::shared_ptr<const rt::Program> prog_;
};

TEST(RenamedKey, AnEmptyKeyPrefixDropsThePrefixAndItsDot) {
  std::string matched;
  EXPECT_EQ(rt::renamed_key("model.layer.0.weight", {{"model", ""}}, &matched), "layer.0.weight");
  EXPECT_EQ(matched, "model");
}

TEST(RenamedKey, TheLongestWholeComponentPrefixIsReplaced) {
  const std::map<std::string, std::string> r = {{"layer", "a"}, {"layer.0", "b"}, {"lay", "no"}};
  EXPECT_EQ(rt::renamed_key("layer.0.weight", r), "b.weight");
  EXPECT_EQ(rt::renamed_key("layer.1.weight", r), "a.1.weight");
  EXPECT_EQ(rt::renamed_key("layers.1.weight", r), "layers.1.weight");  // `lay` is not a component
  EXPECT_EQ(rt::renamed_key("layer", r), "a");
  EXPECT_EQ(rt::renamed_key("head.bias", {}), "head.bias");
}

TEST_F(DerivedBindingTest, TheFoldIsOneStepPerLayerBoundByFieldPath) {
  auto b = rt::derive_binding(prog_->module, program_, "model", kRename);
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_EQ(b->inputs.size(), 1u);
  EXPECT_EQ(b->inputs[0].name, "x");
  ASSERT_EQ(b->steps.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    const rt::BindingStep& s = b->steps[i];
    EXPECT_EQ(s.fn, "affine");
    EXPECT_EQ(s.weights.at("p_weight"), "enc.layers." + std::to_string(i) + ".weight");
    EXPECT_EQ(s.weights.at("p_bias"), "enc.layers." + std::to_string(i) + ".bias");
    EXPECT_EQ(s.constants.at("s"), 0.5);
    EXPECT_EQ(s.args.at("x"), i == 0 ? "x" : b->steps[i - 1].out);
  }
  EXPECT_EQ(b->steps[3].fn, "proj");
  EXPECT_EQ(b->steps[3].dims, (DimEnv{{"H", 2}}));
  EXPECT_EQ(b->steps[3].weights.at("p_weight"), "head.weight");
  EXPECT_EQ(b->steps[0].out, b->steps[2].out);  // each layer's result takes the buffer of the one it read
  EXPECT_EQ(b->unused, (std::vector<std::string>{"note"}));
  EXPECT_TRUE(b->derived);
}

TEST_F(DerivedBindingTest, TheModelRunsTheLayersInOrderWithTheirOwnWeights) {
  auto w = weights();
  auto m = load(w);
  ASSERT_TRUE(m.ok()) << m.status().message();
  Dl x(DType::F32, {3, kD}, 5);
  auto call = (*m)->Prepare({&x.d});
  ASSERT_TRUE(call.ok()) << call.status().message();
  EXPECT_EQ(rt::Model::OutputShape(**call), (std::vector<int64_t>{3, 2}));
  Dl out(DType::F32, {3, 2}, 6);
  ASSERT_TRUE((*m)->Run(**call, &out.d).ok());
  // By hand: h = 0.5 (h W_i^T + b_i) for i = 0, 1, 2; y = h Wh^T + bh.
  for (int n = 0; n < 3; ++n) {
    std::vector<double> h(kD);
    for (int d = 0; d < kD; ++d) h[d] = x.t.get(n * kD + d);
    for (int i = 0; i < 3; ++i) {
      const HostTensor& wi = w["enc.layers." + std::to_string(i) + ".weight"];
      const HostTensor& bi = w["enc.layers." + std::to_string(i) + ".bias"];
      std::vector<double> next(kD);
      for (int o = 0; o < kD; ++o) {
        double s = bi.get(o);
        for (int d = 0; d < kD; ++d) s += h[d] * wi.get(o * kD + d);
        next[o] = 0.5 * s;
      }
      h = next;
    }
    for (int o = 0; o < 2; ++o) {
      double s = w["head.bias"].get(o);
      for (int d = 0; d < kD; ++d) s += h[d] * w["head.weight"].get(o * kD + d);
      EXPECT_NEAR(out.t.get(n * 2 + o), s, 1e-4 * (1 + std::fabs(s))) << "y[" << n << ", " << o << "]";
    }
  }
}

TEST_F(DerivedBindingTest, WeightMistakesNameTheKeyTheStepAndTheField) {
  auto w = weights();
  w.erase("enc.layers.1.bias");
  auto m = load(w);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("has no tensor `enc.layers.1.bias`, which `model` of " + program_ +
                                              " binds to field `p.bias` of `affine` (step 1)"));

  auto unrenamed = load(weights(), {});  // without the rename the layers' keys are `layer.{i}..`
  ASSERT_FALSE(unrenamed.ok());
  EXPECT_THAT(unrenamed.status().message(), HasSubstr("has no tensor `layer.0.weight`"));

  w = weights();
  w["extra.weight"] = Dl(DType::F32, {2}, 1).t;
  m = load(w);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("tensor `extra.weight` of "));
  EXPECT_THAT(m.status().message(), HasSubstr("is bound by no step of `model` of " + program_ +
                                              "; give the record a field at that path"));

  w = weights();
  w.erase("note");
  m = load(w);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("has no tensor `note`, a field of the records of `model` of " + program_ +
                                              " (one no step reads)"));

  w = weights();
  w["enc.layers.2.weight"] = Dl(DType::F32, {kD, kD + 1}, 1).t;
  m = load(w);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("tensor `enc.layers.2.weight` of "));
  EXPECT_THAT(m.status().message(), HasSubstr("field `p.weight` of `affine` (step 2)"));
}

TEST_F(DerivedBindingTest, AnEntryThatIsNotStepsIsRefusedNamingTheCall) {
  EXPECT_EQ(derive_error("computes"),
            "`computes` of " + program_ + ": argument `x` of the call of `affine` is computed (`add`); a model's entry "
            "passes only its inputs, its records' fields, constants and other calls' results: compute inside a public fn");
  EXPECT_EQ(derive_error("private_step"), "`private_step` of " + program_ +
                                              ": it calls `hidden`, which is not public; a model's steps are public fns "
                                              "(their kernels)");
  EXPECT_EQ(derive_error("scalar_input"), "`scalar_input` of " + program_ +
                                              ": parameter `s` is a Scalar; a model's inputs are tensors (write a "
                                              "constant in the body)");
  EXPECT_EQ(derive_error("hidden"), "`hidden` of " + program_ +
                                        ": the entry of a model takes its weights as a record parameter; `hidden` has none");
  EXPECT_EQ(derive_error("nope"), program_ + " has no fn `nope` (the model's entry)");
  // The steps `affine` and `proj` take records too, but `model` calls them: only fns no fn calls are candidates.
  EXPECT_EQ(derive_error(""), program_ + ": several fns could be the model's entry (`model`, `computes`, "
                                         "`private_step`, `scalar_input`, `pair`); name it (entry=)");
}

// Two record parameters bind below their names, so the same field of each
// is its own tensor; a rename that would put two fields on one key, a rename
// that matches no path and a malformed one are refused.
TEST_F(DerivedBindingTest, SeveralRecordsBindBelowTheirNamesAndNoTwoFieldsShareAKey) {
  auto b = rt::derive_binding(prog_->module, program_, "pair", {});
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_EQ(b->steps.size(), 2u);
  EXPECT_EQ(b->steps[0].weights.at("p_weight"), "a.weight");
  EXPECT_EQ(b->steps[1].weights.at("p_weight"), "b.weight");
  auto collide = rt::derive_binding(prog_->module, program_, "pair", {{"a", "b"}});
  ASSERT_FALSE(collide.ok());
  EXPECT_EQ(collide.status().message(), "`pair` of " + program_ +
                                            ": fields `a.weight` and `b.weight` both bind the key `b.weight` (after the "
                                            "rename); a weight is one field's");
  auto nothing = rt::derive_binding(prog_->module, program_, "model", {{"layers", "enc.layers"}});
  ASSERT_FALSE(nothing.ok());
  EXPECT_EQ(nothing.status().message(), "`model` of " + program_ +
                                            ": rename `layers` matches no field path of its records (a rename maps a "
                                            "prefix of whole `.`-separated names)");
  auto bad = rt::derive_binding(prog_->module, program_, "model", {{"layer.", "x"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("rename `layer.` -> `x`: each side is a path of `.`-separated names"));
  auto dropped = rt::derive_binding(prog_->module, program_, "model", {{"layer", ""}});
  ASSERT_TRUE(dropped.ok()) << dropped.status().message();
  EXPECT_EQ(dropped->steps[0].weights.at("p_weight"), "0.weight");
}

// A chain of calls deeper than the limit is refused, not a stack overflow.
TEST_F(DerivedBindingTest, AChainDeeperThanTheLimitIsRefused) {
  std::string text = kProgram;
  text += "fn deep [N, D](x: Tensor[F32, [N, D]], net: Net[D, 3]) -> Tensor[F32, [N, D]] =\n";
  const int n = 2100;
  text += "  let h0 = affine(x, net.layer[0], 0.5)\n";
  for (int i = 1; i < n; ++i)
    text += "  let h" + std::to_string(i) + " = affine(h" + std::to_string(i - 1) + ", net.layer[0], 0.5)\n";
  text += "  h" + std::to_string(n - 1) + "\n";
  const std::string path = dir_ + "/deep.tl";
  ASSERT_TRUE(write_file(path, text).ok());
  auto p = rt_->LoadProgram(path, Precision::kF32);
  ASSERT_TRUE(p.ok()) << p.status().message();
  auto b = rt::derive_binding((*p)->module, path, "deep", {});
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(b.status().message(), HasSubstr("its calls nest more than 2048 deep"));
}

}  // namespace
}  // namespace mlk
