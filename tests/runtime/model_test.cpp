// Models from their weights (runtime/model.h, runtime/binding.h): a small
// program whose first step repeats three times with its own weights each
// time, run against a hand computation; every mistake of a binding file and
// of a weights file refused at load with a message naming the key, the step
// and the parameter; bad inputs refused before any kernel runs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "base/files.h"
#include "interop/safetensors.h"
#include "lang/frontend.h"
#include "runtime/binding.h"
#include "runtime/model.h"
#include "tests/runtime/dl_tensor.h"
#include "tests/test_support.h"

namespace mlk {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr const char* kProgram = R"(
public fn affine [N, D](x: Tensor[F32, [N, D]], w: Tensor[F32, [D, D]], b: Tensor[F32, [D]]) -> Tensor[F32, [N, D]] =
  matmul(x, transpose(w, [1, 0])) + broadcast(b, [N, D], axes=[1])
public fn scaled [N, D](x: Tensor[F32, [N, D]], s: Scalar[F32]) -> Tensor[F32, [N, D]] =
  x * broadcast(s, [N, D])
public fn proj [N, D, O, H](x: Tensor[F32, [N, D]], b: Tensor[F32, [O]], w: Tensor[F32, [O, D], [D mod H = 0]])
    -> Tensor[F32, [N, O]] =
  matmul(x, transpose(w, [1, 0])) + broadcast(b, [N, O], axes=[1])
fn helper [N](x: Tensor[F32, [N]]) -> Tensor[F32, [N]] = x
)";

// Three affine layers (weights l.{i}.w, l.{i}.b; each instance reads the
// previous one's `h`, the first the input), the first again, a constant
// scale, a projection.
constexpr const char* kBinding = R"({
  "inputs": [{"name": "h"}],
  "steps": [
    {"fn": "affine", "repeat": 3, "args": {"x": "h"}, "weights": {"w": "l.{i}.w", "b": "l.{i}.b"}, "out": "h"},
    {"fn": "affine", "repeat": 1, "args": {"x": "h"}, "weights": {"w": "l.{i}.w", "b": "l.{i}.b"}, "out": "h"},
    {"fn": "scaled", "args": {"x": "h"}, "constants": {"s": 0.5}, "out": "h"},
    {"fn": "proj", "dims": {"H": 2}, "args": {"x": "h"}, "weights": {"b": "head.b", "w": "head.w"}, "out": "y"}
  ],
  "unused": ["note"]
})";

constexpr int64_t kD = 4, kO = 3;

struct Weights {
  std::map<std::string, HostTensor> t;
  Weights() {
    uint64_t seed = 10;
    for (int i = 0; i < 3; ++i) {
      t["l." + std::to_string(i) + ".w"] = random(DType::F32, {kD, kD}, seed++);
      t["l." + std::to_string(i) + ".b"] = random(DType::F32, {kD}, seed++);
    }
    t["head.w"] = random(DType::F32, {kO, kD}, seed++);
    t["head.b"] = random(DType::F32, {kO}, seed++);
    t["note"] = random(DType::F32, {1}, seed++);
  }
  static HostTensor random(DType dt, std::vector<int64_t> shape, uint64_t seed) {
    Dl d(dt, std::move(shape), seed);
    return d.t;
  }
};

class ModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing_support::scratch_dir("mlk_model_test", ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    program_ = dir_ + "/m.tl";
    ASSERT_TRUE(write_file(program_, kProgram).ok());
    auto r = rt::Runtime::Open({dir_ + "/cache.db", "default", ""});
    ASSERT_TRUE(r.ok()) << r.status().message();
    rt_ = std::shared_ptr<rt::Runtime>(std::move(r).value());
  }
  void TearDown() override { fs::remove_all(fs::path(dir_).parent_path()); }

  std::string write_weights(const std::map<std::string, HostTensor>& ts) {
    std::vector<safetensors::TensorToWrite> out;
    for (const auto& [k, t] : ts) {
      auto dt = safetensors::parse_dtype(dtype_name(t.dtype));
      out.push_back({k, *dt, t.shape, {t.bytes.data(), t.bytes.size()}});
    }
    const std::string path = dir_ + "/w.safetensors";
    EXPECT_TRUE(safetensors::Write(path, out).ok());
    return path;
  }
  Expected<std::shared_ptr<const rt::Model>> load(const std::string& binding, const std::string& weights) {
    const std::string b = dir_ + "/m.binding.json";
    EXPECT_TRUE(write_file(b, binding).ok());
    auto policy = rt::TargetPolicy::Parse("host");
    return rt::Model::Load(rt_, {program_, "", weights}, *policy);
  }
  // The load's error message ("" when it loads).
  std::string load_error(const std::string& binding, const std::map<std::string, HostTensor>& ts) {
    auto m = load(binding, write_weights(ts));
    return m.ok() ? "" : m.status().message();
  }

  std::string dir_, program_;
  std::shared_ptr<rt::Runtime> rt_;
};

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  size_t p = s.find(from);
  EXPECT_NE(p, std::string::npos) << from;
  if (p != std::string::npos) s.replace(p, from.size(), to);
  return s;
}

TEST_F(ModelTest, RunsEachInstanceWithItsOwnWeights) {
  Weights w;
  auto m = load(kBinding, write_weights(w.t));
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ((*m)->copied_bytes(), 0u);  // Write aligns every tensor: all bound in place
  Dl x(DType::F32, {2, kD}, 3);
  auto call = (*m)->Prepare({&x.d});
  ASSERT_TRUE(call.ok()) << call.status().message();
  EXPECT_EQ(rt::Model::OutputShape(**call), (std::vector<int64_t>{2, kO}));
  auto sel = rt::Model::Selections(**call);
  ASSERT_EQ(sel.size(), 4u);
  EXPECT_THAT(sel[0], HasSubstr("`affine`: host: default schedule (JIT)"));
  Dl out(DType::F32, {2, kO}, 4);
  ASSERT_TRUE((*m)->Run(**call, &out.d).ok());

  // By hand: h = x; h = h W_i^T + b_i for i = 0, 1, 2, then i = 0 again; h *= 0.5; y = h Wh^T.
  std::vector<std::vector<double>> h(2, std::vector<double>(kD));
  for (int n = 0; n < 2; ++n)
    for (int d = 0; d < kD; ++d) h[n][d] = x.t.get(n * kD + d);
  for (int i : {0, 1, 2, 0}) {
    const HostTensor& wi = w.t["l." + std::to_string(i) + ".w"];
    const HostTensor& bi = w.t["l." + std::to_string(i) + ".b"];
    auto next = h;
    for (int n = 0; n < 2; ++n)
      for (int o = 0; o < kD; ++o) {
        double s = bi.get(o);
        for (int d = 0; d < kD; ++d) s += h[n][d] * wi.get(o * kD + d);
        next[n][o] = s;
      }
    h = next;
  }
  for (int n = 0; n < 2; ++n)
    for (int o = 0; o < kO; ++o) {
      double s = w.t["head.b"].get(o);
      for (int d = 0; d < kD; ++d) s += 0.5 * h[n][d] * w.t["head.w"].get(o * kD + d);
      EXPECT_NEAR(out.t.get(n * kO + o), s, 1e-4 * (1 + std::fabs(s))) << "y[" << n << ", " << o << "]";
    }
}

// Under the bf16 policy on a CPU whose products read BF16 pairs (AMX tiles,
// or a Zen 4's dot product), the weights each kernel reads packed are packed
// once per step instance, by the first call, and read so by every later one:
// the packed bytes do not grow, and the kernel gives the same bits on
// weights packed once as when it packs them within the call.
TEST_F(ModelTest, WeightsArePackedOnceWhereTheKernelReadsThemPacked) {
  Weights w;
  auto policy = rt::TargetPolicy::Parse("host;precision=bf16");
  ASSERT_TRUE(policy.ok()) << policy.status().message();
  ASSERT_TRUE(write_file(dir_ + "/m.binding.json", kBinding).ok());
  auto m = rt::Model::Load(rt_, {program_, "", write_weights(w.t)}, *policy);
  ASSERT_TRUE(m.ok()) << m.status().message();
  Dl x(DType::F32, {2, kD}, 3);
  auto call = (*m)->Prepare({&x.d});
  ASSERT_TRUE(call.ok()) << call.status().message();
  const size_t packed = (*m)->packed_bytes();
  Dl out(DType::F32, {2, kO}, 4), again(DType::F32, {2, kO}, 5);
  ASSERT_TRUE((*m)->Run(**call, &out.d).ok());
  auto second = (*m)->Prepare({&x.d});
  ASSERT_TRUE(second.ok());
  EXPECT_EQ((*m)->packed_bytes(), packed) << "packed again by a later call";
  ASSERT_TRUE((*m)->Run(**second, &again.d).ok());
  for (int64_t i = 0; i < out.t.numel(); ++i) EXPECT_EQ(out.t.get(i), again.t.get(i)) << i;
  if (packed == 0) GTEST_SKIP() << "this CPU's BF16 products read no packed weights";
  auto prog = rt_->LoadProgram(program_, Precision::kBF16);
  ASSERT_TRUE(prog.ok());
  // The model's kernel (packed weights asked for); a caller of the fn
  // itself gets the kernel that makes the pairs within each call.
  auto k = rt_->GetKernels(*prog, *policy, {{"affine", {{"N", 2}, {"D", kD}}, true}})[0];
  ASSERT_TRUE(k.ok()) << k.status().message();
  ASSERT_EQ((*k)->packed_params(), std::vector<int>{1});
  auto plain = rt_->GetKernel(*prog, "affine", *policy, {{"N", 2}, {"D", kD}});
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_TRUE((*plain)->packed_params().empty());
  // The first instance by hand through the kernel: packing within the call,
  // and on weights packed by PackWeights, give the same bits.
  Dl wd(DType::F32, {kD, kD}), bd(DType::F32, {kD}), y1(DType::F32, {2, kD}, 6), y2(DType::F32, {2, kD}, 7);
  std::copy(w.t["l.0.w"].bytes.begin(), w.t["l.0.w"].bytes.end(), wd.t.bytes.begin());
  std::copy(w.t["l.0.b"].bytes.begin(), w.t["l.0.b"].bytes.end(), bd.t.bytes.begin());
  const std::vector<const DLTensor*> args = {&x.d, &wd.d, &bd.d};
  ASSERT_TRUE((*k)->Run(args, &y1.d).ok());
  auto pw = (*k)->PackWeights(args);
  ASSERT_TRUE(pw.ok()) << pw.status().message();
  EXPECT_EQ((*pw)->weights.size(), 1u);
  rt::RunOptions o;
  o.packed = pw->get();
  ASSERT_TRUE((*k)->Run(args, &y2.d, o).ok());
  for (int64_t i = 0; i < y1.t.numel(); ++i) EXPECT_EQ(y1.t.get(i), y2.t.get(i)) << i;
  Dl y3(DType::F32, {2, kD}, 11);  // and the kernel without packs
  ASSERT_TRUE((*plain)->Run(args, &y3.d).ok());
  for (int64_t i = 0; i < y1.t.numel(); ++i) EXPECT_EQ(y1.t.get(i), y3.t.get(i)) << i;
  EXPECT_GE(packed, 4 * (*pw)->bytes());  // four affine instances and the projection
  // Another batch's kernel reads the same packs: nothing is packed again.
  Dl x3(DType::F32, {3, kD}, 8), out3(DType::F32, {3, kO}, 9);
  auto third = (*m)->Prepare({&x3.d});
  ASSERT_TRUE(third.ok()) << third.status().message();
  ASSERT_TRUE((*m)->Run(**third, &out3.d).ok());
  EXPECT_EQ((*m)->packed_bytes(), packed) << "packed again for another batch";
  // Packs of another tensor, of another count, or that do not hold their
  // shape are refused by the runtime; of another shape, by the entry.
  Dl other(DType::F32, {kD, kD}, 10);
  EXPECT_THAT((*k)->Run({&x.d, &other.d, &bd.d}, &y2.d, o).message(), HasSubstr("was packed from another tensor"));
  rt::PackedWeights two = **pw;
  two.weights.push_back(two.weights[0]);
  o.packed = &two;
  EXPECT_THAT((*k)->Run(args, &y2.d, o).message(), HasSubstr("reads 1 packed weights, got 2"));
  auto wide = std::make_shared<rt::PackedWeights::Weight>(*(*pw)->weights[0]);
  wide->shape[2] += 1;
  rt::PackedWeights bad;
  bad.weights = {wide};
  o.packed = &bad;
  EXPECT_THAT((*k)->Run(args, &y2.d, o).message(), HasSubstr("values for its shape"));
  wide->data.resize(wide->data.size() + 2 * static_cast<size_t>(wide->shape[1]));
  EXPECT_THAT((*k)->Run(args, &y2.d, o).message(), HasSubstr("a packed weight: shape ["));
}

TEST_F(ModelTest, BadInputsAreRefusedBeforeAnyKernelRuns) {
  Weights w;
  auto m = load(kBinding, write_weights(w.t));
  ASSERT_TRUE(m.ok()) << m.status().message();
  Dl wrong(DType::F32, {2, kD + 1});
  auto c = (*m)->Prepare({&wrong.d});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("step 0 (`affine`), instance 0: "));
  EXPECT_THAT(c.status().message(), HasSubstr("`affine`: w.shape[0] = 4 but D = 5, bound by x.shape[1]"));
  auto none = (*m)->Prepare({});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(), "the model takes 1 inputs (h), got 0");
  auto missing = (*m)->Prepare({nullptr});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "input `h` of the model is required");
}

TEST_F(ModelTest, WeightMistakesNameTheKeyAndTheParameter) {
  const std::string w_file = "/w.safetensors";
  {
    Weights w;
    w.t.erase("l.1.b");
    EXPECT_EQ(load_error(kBinding, w.t), dir_ + w_file + " has no tensor `l.1.b`, which " + dir_ +
                                             "/m.binding.json binds to parameter `b` of `affine` (step 0, instance 1 of 3)");
  }
  {
    Weights w;
    w.t["l.2.w"] = Weights::random(DType::F16, {kD, kD}, 1);
    EXPECT_EQ(load_error(kBinding, w.t), "tensor `l.2.w` of " + dir_ + w_file + " is F16, but parameter `w` of `affine` "
                                         "(step 0, instance 2 of 3) is Tensor[F32, [D, D]]; mlk never converts dtypes");
  }
  {
    Weights w;
    w.t["head.w"] = Weights::random(DType::F32, {kD, kO}, 1);  // stored [in, out]
    EXPECT_EQ(load_error(kBinding, w.t),
              "tensor `head.w` of " + dir_ + w_file + " has shape [4, 3], but parameter `w` of `proj` (step 3) is "
              "Tensor[F32, [O, D]]: axis 0 is 4, but O = 3, bound by `head.b` axis 0 (the tensor looks transposed: "
              "[3, 4] would fit; the program takes the weight as stored, e.g. nn.Linear's [out, in])");
  }
  {
    Weights w;
    w.t["l.0.b"] = Weights::random(DType::F32, {kD, 1}, 1);
    EXPECT_EQ(load_error(kBinding, w.t), "tensor `l.0.b` of " + dir_ + w_file + " has shape [4, 1], but parameter `b` of "
                                         "`affine` (step 0, instance 0 of 3) is Tensor[F32, [D]]: its rank is 2, the "
                                         "parameter's 1");
  }
  {
    Weights w;
    w.t["l.3.w"] = w.t["l.0.w"];
    EXPECT_EQ(load_error(kBinding, w.t), "tensor `l.3.w` of " + dir_ + w_file + " is bound by no step of " + dir_ +
                                         "/m.binding.json; bind it to a parameter, or list it under \"unused\"");
  }
  {
    Weights w;
    w.t.erase("note");
    EXPECT_EQ(load_error(kBinding, w.t), dir_ + "/m.binding.json lists `note` as \"unused\", but " + dir_ + w_file +
                                         " has no such tensor");
  }
  {
    Weights w;
    EXPECT_EQ(load_error(replaced(kBinding, "\"unused\": [\"note\"]", "\"unused\": [\"note\", \"head.w\"]"), w.t),
              dir_ + "/m.binding.json lists `head.w` as \"unused\", but it is bound to parameter `w` of `proj` (step 3)");
  }
  {
    Weights w;
    EXPECT_EQ(load_error(replaced(kBinding, "\"H\": 2", "\"H\": 3"), w.t),
              "the weights of step 3 (`proj`): the refinement `D mod H = 0` of `proj` does not hold: D = 4 (bound by "
              "`head.w` axis 1), H = 3 (bound by the step's \"dims\" in " + dir_ + "/m.binding.json)");
  }
}

TEST_F(ModelTest, BindingMistakesNameTheStepAndTheParameter) {
  Weights w;
  const std::string b = dir_ + "/m.binding.json: ";
  struct Case {
    std::string from, to, message;
  };
  const std::vector<Case> cases = {
      {"\"unused\"", "\"unusd\"", "the binding has an unknown field `unusd` (the fields are about, inputs, steps, unused)"},
      {"\"fn\": \"scaled\"", "\"fn\": \"helper\"", "step 2 (`helper`): `helper` is not public; a step runs a public fn"},
      {"\"fn\": \"scaled\"", "\"fn\": \"nope\"", "step 2 (`nope`): the program has no fn `nope`"},
      {"\"constants\": {\"s\": 0.5}", "\"constants\": {}",
       "step 2 (`scaled`): parameter `s` of `scaled` is bound by nothing; bind it under \"args\", \"weights\" or \"constants\""},
      {"\"constants\": {\"s\": 0.5}", "\"constants\": {\"s\": 0.5}, \"weights\": {\"s\": \"note\"}",
       "step 2 (`scaled`): parameter `s` is bound twice, under \"weights\" and \"constants\""},
      {"\"args\": {\"x\": \"h\"}, \"constants\"", "\"args\": {\"x\": \"z\"}, \"constants\"",
       "step 2 (`scaled`), parameter `x`: `z` is neither a model input nor the \"out\" of an earlier step"},
      {"\"w\": \"head.w\"", "\"w\": \"head.{i}.w\"",
       "step 3 (`proj`), parameter `w`: key `head.{i}.w` has `{i}`, but the step has no \"repeat\"; `{i}` is the "
       "instance of a repeated step"},
      {"\"w\": \"head.w\"", "\"w\": \"head.{j}.w\"",
       "step 3 (`proj`), parameter `w`: key `head.{j}.w` has braces other than `{i}` (the instance of a repeated step)"},
      {"\"weights\": {\"b\": \"head.b\", \"w\": \"head.w\"}", "\"weights\": {\"b\": \"head.b\"}, \"constants\": {\"w\": 1}",
       "step 3 (`proj`), parameter `w` is Tensor[F32, [O, D]]; a constant binds only a Scalar parameter"},
      {"\"s\": 0.5", "\"q\": 0.5", "step 2 (`scaled`): `scaled` has no parameter `q` (its parameters: x, s)"},
      {"\"H\": 2", "\"K\": 2", "step 3 (`proj`): `proj` has no dimension `K`"},
      {"\"repeat\": 3", "\"repeat\": 0", "step 0 (`affine`): \"repeat\" must be a whole number in [1, 100000]"},
      {"\"s\": 0.5", "\"s\": 1e300", "step 2 (`scaled`), parameter `s`: the constant 1e+300 is not a F32 value"},
  };
  for (const auto& c : cases) EXPECT_EQ(load_error(replaced(kBinding, c.from, c.to), w.t), b + c.message) << c.to;
  EXPECT_EQ(load_error("{", w.t), b + "not valid JSON");
}

}  // namespace
}  // namespace mlk
