// Every builtin and operator, for every dtype it accepts: the Halide-compiled
// kernel (default schedule, JIT) against the reference interpreter on fresh
// random inputs, within the tolerances of docs/numerics.md.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "lang/compare.h"
#include "lang/frontend.h"
#include "lang/interpreter.h"
#include "scheduler/kernel.h"
#include "targets/detect.h"
#include "tests/scheduler/assembly.h"

namespace mlk {
namespace {

using ::testing::HasSubstr;

const std::vector<DType> kFloats = {DType::F16, DType::BF16, DType::F32, DType::F64};
const std::vector<DType> kInts = {DType::I8, DType::I16, DType::I32, DType::I64, DType::U8};
const std::vector<DType> kSignedInts = {DType::I8, DType::I16, DType::I32, DType::I64};

std::vector<DType> numeric() {
  std::vector<DType> v = kFloats;
  v.insert(v.end(), kInts.begin(), kInts.end());
  return v;
}

// Replaces whole-word occurrences of `from` (so `T` does not touch `Tensor`).
std::string subst(std::string s, const std::string& from, const std::string& to) {
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p)) {
    bool left = p == 0 || !word(s[p - 1]);
    bool right = p + from.size() >= s.size() || !word(s[p + from.size()]);
    if (left && right) {
      s.replace(p, from.size(), to);
      p += to.size();
    } else {
      p += from.size();
    }
  }
  return s;
}

// Random values suited to the dtype; `positive` keeps floats in [0.1, 3].
HostTensor random_tensor(DType t, std::vector<int64_t> shape, std::mt19937& rng, bool positive = false,
                         double lo = -3, double hi = 3) {
  HostTensor x(t, std::move(shape));
  std::uniform_real_distribution<double> u(positive ? 0.1 : lo, positive ? 3.0 : hi);
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v;
    if (t == DType::Bool) v = rng() % 2;
    else if (t == DType::U8) v = rng() % 12;
    else if (is_integer(t)) v = static_cast<int>(rng() % 13) - 6;
    else v = u(rng);
    x.set(i, v);
  }
  return x;
}

struct Case {
  std::string src;                        // one public fn `f`
  std::vector<HostTensor> inputs;
  DimEnv dims;
  int64_t reduction = 1;                  // reduction length, for the tolerance
  std::optional<Tolerance> tol;           // overrides tolerance_for()
};

void check_case(const Case& c, const std::string& label) {
  SCOPED_TRACE(label + "\n" + c.src);
  auto fe = compile_source("case.tl", c.src);
  ASSERT_TRUE(fe.ok()) << fe.rendered();
  auto want = interpret(fe.module, "f", c.inputs, c.dims);
  ASSERT_TRUE(want.ok()) << want.status().message();
  auto k = Kernel::CompileJit(fe.module, "f");
  ASSERT_TRUE(k.ok()) << k.status().message();
  auto got = (*k)->Run(c.inputs, c.dims);
  ASSERT_TRUE(got.ok()) << got.status().message();
  ASSERT_EQ(got->shape, want->shape);
  ASSERT_EQ(got->dtype, want->dtype);
  Status cmp = compare(*want, *got, c.tol ? *c.tol : tolerance_for(want->dtype, c.reduction));
  EXPECT_TRUE(cmp.ok()) << cmp.message();
}

class LoweringTest : public ::testing::Test {
 protected:
  std::mt19937 rng{20261129};
  // Shapes with odd extents exercise vector tails.
  std::vector<int64_t> shape{5, 19};
};

TEST_F(LoweringTest, UnaryFloatMath) {
  for (const char* op : {"exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf"})
    for (DType t : kFloats) {
      bool pos = std::string(op) == "log" || std::string(op) == "sqrt" || std::string(op) == "rsqrt";
      Case c{subst(subst("public fn f [N, C](x: Tensor[T, [N, C]]) -> Tensor[T, [N, C]] = OP(x)", "OP", op), "T",
                   dtype_name(t)),
             {random_tensor(t, shape, rng, pos)}};
      // The compiled erf is a polynomial approximation (docs/numerics.md).
      if (std::string(op) == "erf" && t == DType::F64) c.tol = Tolerance{0, 2e-7};
      check_case(c, std::string(op) + " " + dtype_name(t));
    }
}

// tanh of F32 is an expression of the kernel's own (lower.cpp tanh_approx),
// not a call of libm's tanhf per lane (which made the tanh GELU of an MLP
// cost as much as a product): no tanhf in the code, and within a few ulp of
// tanh on both sides of its two branches, at zero, past its clamp and for NaN.
TEST_F(LoweringTest, TanhIsAVectorExpressionWithinAFewUlp) {
  auto host = find_profile("host");
  ASSERT_TRUE(host.ok());
  const std::string src = "public fn f [N](x: Tensor[F32, [N]]) -> Tensor[F32, [N]] = tanh(x)\n";
  EXPECT_EQ(testing_asm::count(testing_asm::assembly(src, *host, {{"N", 1024}}), "tanhf"), 0);
  std::vector<double> xs = {0, 1e-30, 1e-7, 1e-3, 0.05, 0.3, 0.5, 0.5499, 0.55, 0.5501, 1, 2, 5, 9.5, 19.9, 20, 25, 88, 1e30};
  const size_t named = xs.size();
  for (size_t i = 0; i < named; ++i) xs.push_back(-xs[i]);
  std::uniform_real_distribution<double> u(-6, 6);
  for (int i = 0; i < 2000; ++i) xs.push_back(u(rng));
  xs.push_back(std::nan(""));
  HostTensor x(DType::F32, {static_cast<int64_t>(xs.size())});
  for (size_t i = 0; i < xs.size(); ++i) x.set(static_cast<int64_t>(i), xs[i]);
  auto fe = compile_source("t.tl", src);
  ASSERT_TRUE(fe.ok()) << fe.rendered();
  auto k = Kernel::CompileJit(fe.module, "f");
  ASSERT_TRUE(k.ok()) << k.status().message();
  auto got = (*k)->Run({x}, {});
  ASSERT_TRUE(got.ok()) << got.status().message();
  for (size_t i = 0; i + 1 < xs.size(); ++i) {
    const double in = x.get(static_cast<int64_t>(i)), want = std::tanh(in), y = got->get(static_cast<int64_t>(i));
    EXPECT_LE(std::fabs(y - want), 3e-7 * std::fabs(want) + 1e-45) << "tanh(" << in << ") = " << y << ", not " << want;
  }
  EXPECT_TRUE(std::isnan(got->get(static_cast<int64_t>(xs.size() - 1))));
}

TEST_F(LoweringTest, SignedUnary) {
  std::vector<DType> ts = kFloats;
  ts.insert(ts.end(), kSignedInts.begin(), kSignedInts.end());
  for (const char* op : {"abs(x)", "relu(x)", "-x"})
    for (DType t : ts)
      check_case({subst(subst("public fn f [N, C](x: Tensor[T, [N, C]]) -> Tensor[T, [N, C]] = OP", "OP", op), "T",
                        dtype_name(t)),
                  {random_tensor(t, shape, rng)}},
                 std::string(op) + " " + dtype_name(t));
  check_case({"public fn f [N, C](x: Tensor[U8, [N, C]]) -> Tensor[U8, [N, C]] = relu(x)",
              {random_tensor(DType::U8, shape, rng)}},
             "relu U8");
}

TEST_F(LoweringTest, BinaryArithmeticAndMinMax) {
  for (const char* op : {"a + b", "a - b", "a * b", "a / b", "max(a, b)", "min(a, b)", "a * 3 - b", "2 - a"})
    for (DType t : numeric())
      check_case({subst(subst("public fn f [N, C](a: Tensor[T, [N, C]], b: Tensor[T, [N, C]]) -> Tensor[T, [N, C]] = OP",
                              "OP", op),
                        "T", dtype_name(t)),
                  {random_tensor(t, shape, rng), random_tensor(t, shape, rng)}},
                 std::string(op) + " " + dtype_name(t));
  for (DType t : kFloats)
    check_case({subst("public fn f [N, C](a: Tensor[T, [N, C]], b: Tensor[T, [N, C]]) -> Tensor[T, [N, C]] = pow(a, b)",
                      "T", dtype_name(t)),
                {random_tensor(t, shape, rng, true), random_tensor(t, shape, rng, false, -2, 2)}},
               std::string("pow ") + dtype_name(t));
}

TEST_F(LoweringTest, ComparisonsLogicAndWhere) {
  std::vector<DType> all = numeric();
  all.push_back(DType::Bool);
  for (const char* op : {"a == b", "a != b", "a < b", "a <= b", "a > b", "a >= b"})
    for (DType t : all) {
      std::string o = op;
      if (t == DType::Bool && o != "a == b" && o != "a != b") continue;
      check_case({subst(subst("public fn f [N, C](a: Tensor[T, [N, C]], b: Tensor[T, [N, C]]) -> Tensor[Bool, [N, C]] = OP",
                              "OP", op),
                        "T", dtype_name(t)),
                  {random_tensor(t, shape, rng), random_tensor(t, shape, rng)}},
                 o + " " + dtype_name(t));
    }
  check_case({"public fn f [N](a: Tensor[Bool, [N]], b: Tensor[Bool, [N]]) -> Tensor[Bool, [N]] = (a && !b) || (b && !a)",
              {random_tensor(DType::Bool, {37}, rng), random_tensor(DType::Bool, {37}, rng)}},
             "xor via && || !");
  for (DType t : all)
    check_case({subst("public fn f [N](c: Tensor[Bool, [N]], a: Tensor[T, [N]], b: Tensor[T, [N]]) -> Tensor[T, [N]] = where(c, a, b)",
                      "T", dtype_name(t)),
                {random_tensor(DType::Bool, {37}, rng), random_tensor(t, {37}, rng), random_tensor(t, {37}, rng)}},
               std::string("where ") + dtype_name(t));
}

TEST_F(LoweringTest, Casts) {
  std::vector<DType> all = numeric();
  all.push_back(DType::Bool);
  for (DType from : all)
    for (DType to : all) {
      // Float to narrow integer is unspecified out of range; inputs stay in [-3, 3].
      if (is_float(from) && to == DType::U8) continue;
      check_case({subst(subst("public fn f [N](x: Tensor[A, [N]]) -> Tensor[B, [N]] = cast(x, B)", "A", dtype_name(from)),
                        "B", dtype_name(to)),
                  {random_tensor(from, {23}, rng)}},
                 std::string("cast ") + dtype_name(from) + " -> " + dtype_name(to));
    }
}

TEST_F(LoweringTest, Reductions) {
  for (const char* op : {"sum", "reduce_max", "reduce_min", "mean"})
    for (DType t : numeric()) {
      if (std::string(op) == "mean" && !is_float(t)) continue;
      for (const char* axes : {"[1]", "[0]"}) {
        std::string out = std::string(axes) == "[1]" ? "[N]" : "[C]";
        check_case({subst(subst(subst(subst("public fn f [N, C](x: Tensor[T, [N, C]]) -> Tensor[T, OUT] = OP(x, axes=AX)",
                                            "OP", op), "T", dtype_name(t)), "OUT", out), "AX", axes),
                    {random_tensor(t, {11, 37}, rng)}, {}, 37},
                   std::string(op) + axes + " " + dtype_name(t));
      }
      check_case({subst(subst("public fn f [B, N, C](x: Tensor[T, [B, N, C]]) -> Tensor[T, [N]] = OP(x, axes=[0, 2])", "OP", op),
                        "T", dtype_name(t)),
                  {random_tensor(t, {3, 5, 17}, rng)}, {}, 51},
                 std::string(op) + "[0,2] " + dtype_name(t));
    }
}

TEST_F(LoweringTest, Matmul) {
  for (DType t : numeric()) {
    check_case({subst("public fn f [M, K, N](a: Tensor[T, [M, K]], b: Tensor[T, [K, N]]) -> Tensor[T, [M, N]] = matmul(a, b)",
                      "T", dtype_name(t)),
                {random_tensor(t, {9, 33}, rng), random_tensor(t, {33, 21}, rng)}, {}, 33},
               std::string("matmul ") + dtype_name(t));
    check_case({subst("public fn f [B, M, K, N](a: Tensor[T, [B, M, K]], b: Tensor[T, [B, K, N]]) -> Tensor[T, [B, M, N]] = matmul(a, b)",
                      "T", dtype_name(t)),
                {random_tensor(t, {3, 7, 16}, rng), random_tensor(t, {3, 16, 5}, rng)}, {}, 16},
               std::string("batched matmul ") + dtype_name(t));
  }
  check_case({"public fn f [B, M, K, N](a: Tensor[F32, [B, M, K]], b: Tensor[F32, [K, N]]) -> Tensor[F32, [B, M, N]] = matmul(a, b)",
              {random_tensor(DType::F32, {2, 7, 16}, rng), random_tensor(DType::F32, {16, 5}, rng)}, {}, 16},
             "matmul shared rhs");
}

TEST_F(LoweringTest, Softmax) {
  for (DType t : kFloats)
    for (const char* axis : {"-1", "0"})
      check_case({subst(subst("public fn f [N, C](x: Tensor[T, [N, C]]) -> Tensor[T, [N, C]] = softmax(x, axis=A)", "T",
                              dtype_name(t)), "A", axis),
                  {random_tensor(t, shape, rng, false, -20, 20)}, {}, 19},
                 std::string("softmax ") + axis + " " + dtype_name(t));
  // Stability: huge logits must not overflow.
  HostTensor big = random_tensor(DType::F32, {4, 9}, rng, false, 900, 1000);
  check_case({"public fn f [N, C](x: Tensor[F32, [N, C]]) -> Tensor[F32, [N, C]] = softmax(x, axis=1)", {big}, {}, 9},
             "softmax large logits");
}

TEST_F(LoweringTest, Structural) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::U8, DType::Bool, DType::F64, DType::I64}) {
    std::string T = dtype_name(t);
    auto one = [&](const std::string& src, std::vector<HostTensor> in, DimEnv dims = {}) {
      check_case({subst(src, "T", T), std::move(in), std::move(dims)}, src.substr(0, 60) + " " + T);
    };
    one("public fn f [N, C](x: Tensor[T, [N]]) -> Tensor[T, [N, C]] = broadcast(x, [N, C], axes=[0])",
        {random_tensor(t, {6}, rng)}, {{"C", 11}});
    one("public fn f [N, C](x: Tensor[T, []]) -> Tensor[T, [N, C]] = broadcast(x, [N, C])", {random_tensor(t, {}, rng)},
        {{"N", 3}, {"C", 5}});
    one("public fn f [A, B, C](x: Tensor[T, [A, B, C]]) -> Tensor[T, [C, A, B]] = transpose(x, [2, 0, 1])",
        {random_tensor(t, {3, 4, 5}, rng)});
    one("public fn f [A, B, C](x: Tensor[T, [A, B, C]]) -> Tensor[T, [B, A * C]] = reshape(transpose(x, [1, 0, 2]), [B, A * C])",
        {random_tensor(t, {3, 4, 5}, rng)});
    // A group of two axes on both sides (64-bit flat index), and a split.
    one("public fn f [A, B](x: Tensor[T, [A, B], [B mod 2 = 0]]) -> Tensor[T, [A * 2, B / 2]] = reshape(x, [A * 2, B / 2])",
        {random_tensor(t, {3, 4}, rng)});
    one("public fn f [A, D, H](x: Tensor[T, [A, D], [D mod H = 0]]) -> Tensor[T, [H, A, D / H]] = transpose(reshape(x, [A, H, D / H]), [1, 0, 2])",
        {random_tensor(t, {3, 20}, rng)}, {{"H", 4}});
    one("public fn f [S, D](x: Tensor[T, [S, D], [S >= 3]]) -> Tensor[T, [S - 2, D]] = slice(x, axis=0, start=1, len=S - 2)",
        {random_tensor(t, {7, 5}, rng)});
    one("public fn f [N, C, E](a: Tensor[T, [N, C]], b: Tensor[T, [N, E]]) -> Tensor[T, [N, C + E + C]] = concat([a, b, a], axis=1)",
        {random_tensor(t, {4, 3}, rng), random_tensor(t, {4, 5}, rng)});
    one("public fn f [N, C, R](x: Tensor[T, [N, C]]) -> Tensor[T, [N * R, C]] = repeat_interleave(x, R, axis=0)",
        {random_tensor(t, {4, 3}, rng)}, {{"R", 3}});
    if (t != DType::Bool) {
      one("public fn f [N, C](x: Tensor[T, [N, C]]) -> Tensor[T, [N, C]] = x + iota(T, [N, C], axis=1)",
          {random_tensor(t, {4, 9}, rng)});
    }
    one(t == DType::Bool ? "public fn f [N](x: Tensor[T, [N]]) -> Tensor[T, [N]] = x && full(T, [N], true)"
                         : "public fn f [N](x: Tensor[T, [N]]) -> Tensor[T, [N]] = x + full(T, [N], 2)",
        {random_tensor(t, {9}, rng)});
  }
}

TEST_F(LoweringTest, Gather) {
  for (DType t : {DType::F32, DType::F16, DType::I32})
    for (DType it : {DType::I32, DType::I64, DType::U8, DType::I8}) {
      HostTensor idx(it, {3, 4});
      for (int64_t i = 0; i < idx.numel(); ++i) idx.set(i, rng() % 6);
      check_case({subst(subst("public fn f [V, D, B, S](t: Tensor[T, [V, D]], i: Tensor[I, [B, S]]) -> Tensor[T, [B, S, D]] = gather(t, i, axis=0)",
                              "T", dtype_name(t)), "I", dtype_name(it)),
                  {random_tensor(t, {6, 5}, rng), idx}},
                 std::string("gather ") + dtype_name(t) + " by " + dtype_name(it));
    }
  HostTensor idx(DType::I32, {3});
  idx.set(0, 1);
  idx.set(1, 2);
  idx.set(2, 0);
  check_case({"public fn f [D, V, N](t: Tensor[F32, [D, V]], i: Tensor[I32, [N]]) -> Tensor[F32, [D, N]] = gather(t, i, axis=1)",
              {random_tensor(DType::F32, {4, 3}, rng), idx}},
             "gather axis 1");
}

TEST_F(LoweringTest, GatherOutOfRangeIsARunTimeError) {
  auto fe = compile_source("g.tl", "public fn f [V, D, N](t: Tensor[F32, [V, D]], i: Tensor[I32, [N]]) -> Tensor[F32, [N, D]] = gather(t, i, axis=0)");
  ASSERT_TRUE(fe.ok());
  auto k = Kernel::CompileJit(fe.module, "f");
  ASSERT_TRUE(k.ok()) << k.status().message();
  HostTensor idx(DType::I32, {3});
  idx.set(0, 1);
  idx.set(1, 7);
  idx.set(2, 0);
  auto r = (*k)->Run({random_tensor(DType::F32, {5, 2}, rng), idx}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("gather index 7 is outside [0, 5)"));
  idx.set(1, -1);
  r = (*k)->Run({random_tensor(DType::F32, {5, 2}, rng), idx}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("gather index -1 is outside [0, 5)"));
}

TEST_F(LoweringTest, BadInputsAreRefusedBeforeRunning) {
  auto fe = compile_source("b.tl", "public fn f [N, D](x: Tensor[F32, [N, D]], w: Tensor[F32, [D]]) -> Tensor[F32, [N, D]] =\n"
                                   "  x * broadcast(w, [N, D], axes=[1])");
  ASSERT_TRUE(fe.ok());
  auto k = Kernel::CompileJit(fe.module, "f");
  ASSERT_TRUE(k.ok());
  auto r = (*k)->Run({random_tensor(DType::F32, {2, 3}, rng), random_tensor(DType::F32, {4}, rng)}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "w.shape[0] = 4 but D = 3, bound by x.shape[1]");
  r = (*k)->Run({random_tensor(DType::F32, {2, 3}, rng), random_tensor(DType::F16, {3}, rng)}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "`w` must be F32, got F16");
}

TEST_F(LoweringTest, ExamplesAgreeWithTheInterpreter) {
  auto fe = compile_file(std::string(MLK_SOURCE_DIR) + "/examples/attention.tl");
  ASSERT_TRUE(fe.ok() && fe->ok());
  Case c;
  c.src.clear();
  std::vector<HostTensor> in = {random_tensor(DType::F32, {2, 6, 16}, rng), random_tensor(DType::F32, {2, 6, 16}, rng),
                                random_tensor(DType::F32, {2, 6, 16}, rng), random_tensor(DType::F32, {}, rng)};
  auto want = interpret(fe->module, "attention", in, {{"H", 4}});
  ASSERT_TRUE(want.ok()) << want.status().message();
  auto k = Kernel::CompileJit(fe->module, "attention");
  ASSERT_TRUE(k.ok()) << k.status().message();
  auto got = (*k)->Run(in, {{"H", 4}});
  ASSERT_TRUE(got.ok()) << got.status().message();
  Status cmp = compare(*want, *got, tolerance_for(DType::F32, 16));
  EXPECT_TRUE(cmp.ok()) << cmp.message();
}

}  // namespace
}  // namespace mlk
