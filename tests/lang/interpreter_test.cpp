// The reference interpreter against hand-computed values (every op, the
// numerics policy, run-time errors, calls, the examples), and compare().
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "lang/compare.h"
#include "lang/frontend.h"
#include "lang/interpreter.h"

#ifndef MLK_SOURCE_DIR
#define MLK_SOURCE_DIR "."
#endif

namespace mlk {
namespace {

using ::testing::DoubleEq;
using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsNan;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

HostTensor T(DType t, std::vector<int64_t> shape, const std::vector<double>& v) {
  HostTensor h(t, std::move(shape));
  EXPECT_EQ(static_cast<int64_t>(v.size()), h.numel());
  for (size_t k = 0; k < v.size() && static_cast<int64_t>(k) < h.numel(); ++k) h.set(static_cast<int64_t>(k), v[k]);
  return h;
}

// I64 through raw bytes: values beyond 2^53 do not survive a double.
HostTensor I64(std::vector<int64_t> shape, const std::vector<int64_t>& v) {
  HostTensor h(DType::I64, std::move(shape));
  EXPECT_EQ(h.bytes.size(), v.size() * 8);
  std::memcpy(h.bytes.data(), v.data(), std::min(h.bytes.size(), v.size() * 8));
  return h;
}

std::vector<int64_t> ints64(const HostTensor& h) {
  std::vector<int64_t> v(h.bytes.size() / 8);
  std::memcpy(v.data(), h.bytes.data(), v.size() * 8);
  return v;
}

std::vector<double> V(const HostTensor& h) {
  std::vector<double> v;
  for (int64_t k = 0; k < h.numel(); ++k) v.push_back(h.get(k));
  return v;
}

// F32 rounding of a mathematical constant, for exact expectations.
double f32(double x) { return static_cast<float>(x); }

ir::Module compile(const std::string& src) {
  auto r = compile_source("t.tl", src);
  EXPECT_TRUE(r.ok()) << r.rendered();
  return std::move(r.module);
}

Expected<HostTensor> run(const std::string& src, const std::string& fn, const std::vector<HostTensor>& in,
                         const DimEnv& dims = {}) {
  return interpret(compile(src), fn, in, dims);
}

// The value of a run that must succeed (an empty tensor after a failure).
HostTensor ok(const Expected<HostTensor>& r) {
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : HostTensor(DType::F32, {0});
}

std::string error(const Expected<HostTensor>& r) {
  EXPECT_FALSE(r.ok());
  return r.ok() ? std::string("(no error)") : r.status().message();
}

ir::Module example(const std::string& name) {
  auto r = compile_file(std::string(MLK_SOURCE_DIR) + "/examples/" + name);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return {};
  EXPECT_TRUE(r->ok()) << r->rendered();
  return std::move(r->module);
}

// ---- elementwise ----------------------------------------------------------

TEST(InterpElementwise, ArithmeticF32) {
  auto out = run("public fn f [N](a: Tensor[F32, [N]], b: Tensor[F32, [N]]) -> Tensor[F32, [N]] =\n"
                 "  (a + b) * (a - b) / b + -a",
                 "f", {T(DType::F32, {3}, {3, 1, -2}), T(DType::F32, {3}, {1, 2, 4})});
  EXPECT_THAT(V(ok(out)), ElementsAre(5, -2.5, -1));
}

TEST(InterpElementwise, FloatDivisionIsIeee) {
  auto out = run("public fn f [N](a: Tensor[F32, [N]], b: Tensor[F32, [N]]) -> Tensor[F32, [N]] = a / b", "f",
                 {T(DType::F32, {3}, {1, -1, 0}), T(DType::F32, {3}, {0, 0, 0})});
  EXPECT_THAT(V(ok(out)), ElementsAre(kInf, -kInf, IsNan()));
}

TEST(InterpElementwise, ComparisonsGiveBool) {
  const char* src =
      "public fn f [N](a: Tensor[F32, [N]], b: Tensor[F32, [N]]) -> Tensor[Bool, [6 * N]] =\n"
      "  concat([a == b, a != b, a < b, a <= b, a > b, a >= b], axis=0)";
  auto out = ok(run(src, "f", {T(DType::F32, {3}, {1, 2, 3}), T(DType::F32, {3}, {2, 2, 2})}));
  EXPECT_EQ(out.dtype, DType::Bool);
  EXPECT_THAT(V(out), ElementsAreArray({0, 1, 0, /*ne*/ 1, 0, 1, /*lt*/ 1, 0, 0, /*le*/ 1, 1, 0, /*gt*/ 0, 0, 1,
                                        /*ge*/ 0, 1, 1}));
  // NaN compares unequal to everything, itself included.
  auto nan = ok(run(src, "f", {T(DType::F32, {1}, {kNaN}), T(DType::F32, {1}, {kNaN})}));
  EXPECT_THAT(V(nan), ElementsAre(0, 1, 0, 0, 0, 0));
}

TEST(InterpElementwise, LogicOnBool) {
  auto out = run("public fn f [N](p: Tensor[Bool, [N]], q: Tensor[Bool, [N]]) -> Tensor[Bool, [4 * N]] =\n"
                 "  concat([p && q, p || q, !p, p == true], axis=0)",
                 "f", {T(DType::Bool, {4}, {1, 1, 0, 0}), T(DType::Bool, {4}, {1, 0, 1, 0})});
  EXPECT_THAT(V(ok(out)), ElementsAreArray({1, 0, 0, 0, /*or*/ 1, 1, 1, 0, /*not*/ 0, 0, 1, 1, /*== true*/ 1, 1, 0, 0}));
}

TEST(InterpElementwise, IntegerDivisionFloorsAndByZeroIsZero) {
  const char* src = "public fn f [N](a: Tensor[I32, [N]], b: Tensor[I32, [N]]) -> Tensor[I32, [N]] = a / b";
  auto out = run(src, "f",
                 {T(DType::I32, {9}, {7, -7, 7, -7, 6, -6, 5, 0, -2147483648.0}),
                  T(DType::I32, {9}, {2, 2, -2, -2, 3, -3, 0, 0, -1})});
  // floor(7/-2) = -4 (Halide's native Euclidean `/` gives -3 here), MIN / -1 wraps to MIN.
  EXPECT_THAT(V(ok(out)), ElementsAre(3, -4, -4, 3, 2, 2, 0, 0, -2147483648.0));
  auto i64 = run("public fn f [N](a: Tensor[I64, [N]], b: Tensor[I64, [N]]) -> Tensor[I64, [N]] = a / b", "f",
                 {I64({3}, {INT64_MIN, 9007199254740993, -9007199254740993}), I64({3}, {-1, 2, 2})});
  EXPECT_THAT(ints64(ok(i64)), ElementsAre(INT64_MIN, 4503599627370496, -4503599627370497));
  auto u8 = run("public fn f [N](a: Tensor[U8, [N]], b: Tensor[U8, [N]]) -> Tensor[U8, [N]] = a / b", "f",
                {T(DType::U8, {2}, {200, 7}), T(DType::U8, {2}, {3, 0})});
  EXPECT_THAT(V(ok(u8)), ElementsAre(66, 0));
}

TEST(InterpElementwise, IntegersWrap) {
  auto i8 = run("public fn f [N](a: Tensor[I8, [N]], b: Tensor[I8, [N]]) -> Tensor[I8, [N]] = a + b", "f",
                {T(DType::I8, {3}, {100, -100, 127}), T(DType::I8, {3}, {100, -100, 1})});
  EXPECT_THAT(V(ok(i8)), ElementsAre(-56, 56, -128));
  auto u8 = run("public fn f [N](a: Tensor[U8, [N]], b: Tensor[U8, [N]]) -> Tensor[U8, [2 * N]] =\n"
                "  concat([a - b, a * b], axis=0)",
                "f", {T(DType::U8, {2}, {0, 16}), T(DType::U8, {2}, {1, 16})});
  EXPECT_THAT(V(ok(u8)), ElementsAre(255, 0, 0, 0));
  // 123456789 * 987654321 = 121932631112635269 = 0x1B13114FBFFEB85, low 32 bits 0xFBFFEB85.
  auto i32 = run("public fn f [N](a: Tensor[I32, [N]], b: Tensor[I32, [N]]) -> Tensor[I32, [N]] = a * b", "f",
                 {T(DType::I32, {1}, {123456789}), T(DType::I32, {1}, {987654321})});
  EXPECT_THAT(V(ok(i32)), ElementsAre(-67153019));
  auto i64 = run("public fn f [N](a: Tensor[I64, [N]]) -> Tensor[I64, [N]] = a + 1", "f",
                 {I64({2}, {INT64_MAX, 9007199254740992})});
  EXPECT_THAT(ints64(ok(i64)), ElementsAre(INT64_MIN, 9007199254740993));
  auto neg = run("public fn f [N](a: Tensor[I8, [N]]) -> Tensor[I8, [4 * N]] =\n"
                 "  concat([-a, abs(a), relu(a), a * 2], axis=0)",
                 "f", {T(DType::I8, {2}, {-128, -5})});
  EXPECT_THAT(V(ok(neg)), ElementsAre(-128, 5, -128, 5, 0, 0, 0, -10));
}

TEST(InterpElementwise, F16RoundsEveryResult) {
  // F16 has spacing 2 on [2048, 4096): 2049 rounds to 2048 and 2051 to 2052
  // (ties to even), so (a + b) - b is not a.
  const char* src = "public fn f [N](a: Tensor[F16, [N]], b: Tensor[F16, [N]]) -> Tensor[F16, [N]] = (a + b) - b";
  auto out = ok(run(src, "f", {T(DType::F16, {3}, {1, 1, 3}), T(DType::F16, {3}, {2048, 1, 2048})}));
  EXPECT_EQ(out.dtype, DType::F16);
  EXPECT_THAT(V(out), ElementsAre(0, 1, 4));
  // 300 * 300 overflows F16 (max 65504); the literal 0.1 is stored as F16.
  auto lit = run("public fn f [N](a: Tensor[F16, [N]]) -> Tensor[F16, [2 * N]] = concat([a * a, a + 0.1], axis=0)",
                 "f", {T(DType::F16, {1}, {300})});
  EXPECT_THAT(V(ok(lit)), ElementsAre(kInf, 300));  // F16 spacing is 0.25 on [256, 512)
  auto tenth = run("public fn f [N](a: Tensor[F16, [N]]) -> Tensor[F16, [N]] = a + 0.1", "f",
                   {T(DType::F16, {1}, {0})});
  EXPECT_THAT(V(ok(tenth)), ElementsAre(0.0999755859375));
}

TEST(InterpElementwise, Bf16AndF32RoundEveryResultButF64Keeps) {
  // BF16 has 8 significant bits: 1 + 2^-8 is a tie and rounds to 1.
  auto bf = run("public fn f [N](a: Tensor[BF16, [N]], b: Tensor[BF16, [N]]) -> Tensor[BF16, [N]] = (a + b) - b",
                "f", {T(DType::BF16, {2}, {0.00390625, 1}), T(DType::BF16, {2}, {1, 256})});
  EXPECT_THAT(V(ok(bf)), ElementsAre(0, 0));
  auto f = run("public fn f [N](a: Tensor[F32, [N]], b: Tensor[F32, [N]]) -> Tensor[F32, [N]] = (a + b) - b", "f",
               {T(DType::F32, {1}, {1e-8}), T(DType::F32, {1}, {1})});
  EXPECT_THAT(V(ok(f)), ElementsAre(0));
  auto d = run("public fn f [N](a: Tensor[F64, [N]], b: Tensor[F64, [N]]) -> Tensor[F64, [N]] = (a + b) - b", "f",
               {T(DType::F64, {1}, {1e-8}), T(DType::F64, {1}, {1})});
  EXPECT_THAT(V(ok(d)), ElementsAre(DoubleNear(1e-8, 1e-15)));
}

TEST(InterpElementwise, UnaryMath) {
  auto out = run("public fn f [N](x: Tensor[F32, [N]]) -> Tensor[F32, [9 * N]] =\n"
                 "  concat([exp(x), log(x), sqrt(x), rsqrt(x), tanh(x), sigmoid(x), abs(x), relu(x), erf(x)], axis=0)",
                 "f", {T(DType::F32, {2}, {1, 4})});
  EXPECT_THAT(V(ok(out)),
              ElementsAre(DoubleEq(f32(2.718281828459045)), DoubleEq(f32(54.598150033144236)),  // exp
                          0, DoubleEq(f32(1.3862943611198906)),                                  // log
                          1, 2, 1, 0.5,                                                          // sqrt, rsqrt
                          DoubleEq(f32(0.7615941559557649)), DoubleEq(f32(0.999329299739067)),    // tanh
                          DoubleEq(f32(0.7310585786300049)), DoubleEq(f32(0.9820137900379085)),   // sigmoid
                          1, 4, 1, 4,                                                            // abs, relu
                          DoubleEq(f32(0.8427007929497149)), DoubleEq(f32(0.9999999845827421))));  // erf
  auto neg = run("public fn f [N](x: Tensor[F32, [N]]) -> Tensor[F32, [5 * N]] =\n"
                 "  concat([log(x), sqrt(x), rsqrt(x), abs(x), relu(x)], axis=0)",
                 "f", {T(DType::F32, {2}, {0, -2})});
  EXPECT_THAT(V(ok(neg)), ElementsAre(-kInf, IsNan(), 0, IsNan(), kInf, IsNan(), 0, 2, 0, 0));
  auto i = run("public fn f [N](x: Tensor[I32, [N]]) -> Tensor[I32, [N]] = relu(x)", "f",
               {T(DType::I32, {2}, {-3, 4})});
  EXPECT_THAT(V(ok(i)), ElementsAre(0, 4));
}

TEST(InterpElementwise, MaxMinPowWhere) {
  auto out = run("public fn f [N](a: Tensor[F32, [N]], b: Tensor[F32, [N]]) -> Tensor[F32, [4 * N]] =\n"
                 "  concat([max(a, b), min(a, b), pow(a, b), max(a, 0.0)], axis=0)",
                 "f", {T(DType::F32, {3}, {2, -1, 9}), T(DType::F32, {3}, {3, -2, 0.5})});
  EXPECT_THAT(V(ok(out)), ElementsAre(3, -1, 9, 2, -2, 0.5, 8, 1, 3, 2, 0, 9));
  auto nan = run("public fn f [N](a: Tensor[F32, [N]], b: Tensor[F32, [N]]) -> Tensor[F32, [2 * N]] =\n"
                 "  concat([max(a, b), min(b, a)], axis=0)",
                 "f", {T(DType::F32, {1}, {kNaN}), T(DType::F32, {1}, {1})});
  EXPECT_THAT(V(ok(nan)), ElementsAre(IsNan(), IsNan()));  // the interpreter propagates NaN
  auto w = run("public fn f [N](c: Tensor[Bool, [N]], a: Tensor[I32, [N]], b: Tensor[I32, [N]]) -> Tensor[I32, [2 * N]] =\n"
               "  concat([where(c, a, b), where(c, 0, b)], axis=0)",
               "f", {T(DType::Bool, {3}, {1, 0, 1}), T(DType::I32, {3}, {1, 2, 3}), T(DType::I32, {3}, {-1, -2, -3})});
  EXPECT_THAT(V(ok(w)), ElementsAre(1, -2, 3, 0, -2, 0));
  auto wb = run("public fn f [N](c: Tensor[Bool, [N]], p: Tensor[Bool, [N]]) -> Tensor[Bool, [N]] = where(c, p, !p)",
                "f", {T(DType::Bool, {2}, {1, 0}), T(DType::Bool, {2}, {0, 0})});
  EXPECT_THAT(V(ok(wb)), ElementsAre(0, 1));
}

TEST(InterpElementwise, Cast) {
  auto to_i32 = run("public fn f [N](x: Tensor[F32, [N]]) -> Tensor[I32, [N]] = cast(x, I32)", "f",
                    {T(DType::F32, {5}, {2.7, -2.7, 0.5, -0.5, 1e10})});
  // Truncation toward zero; out of range is unspecified, and the interpreter
  // wraps: 1e10 mod 2^32 = 1410065408.
  EXPECT_THAT(V(ok(to_i32)), ElementsAre(2, -2, 0, 0, 1410065408));
  auto to_u8 = run("public fn f [N](x: Tensor[F32, [N]]) -> Tensor[U8, [N]] = cast(x, U8)", "f",
                   {T(DType::F32, {3}, {300.5, -1, 255.9})});
  EXPECT_THAT(V(ok(to_u8)), ElementsAre(44, 255, 255));
  auto to_bool = run("public fn f [N](x: Tensor[F32, [N]]) -> Tensor[Bool, [N]] = cast(x, Bool)", "f",
                     {T(DType::F32, {4}, {0, 0.5, -0.0, kNaN})});
  EXPECT_THAT(V(ok(to_bool)), ElementsAre(0, 1, 0, 1));
  auto to_f16 = run("public fn f [N](x: Tensor[I32, [N]]) -> Tensor[F16, [N]] = cast(x, F16)", "f",
                    {T(DType::I32, {3}, {2049, 2051, 70000})});
  EXPECT_THAT(V(ok(to_f16)), ElementsAre(2048, 2052, kInf));
  auto from_bool = run("public fn f [N](p: Tensor[Bool, [N]]) -> Tensor[F32, [N]] = cast(p, F32)", "f",
                       {T(DType::Bool, {2}, {1, 0})});
  EXPECT_THAT(V(ok(from_bool)), ElementsAre(1, 0));
  auto narrow = run("public fn f [N](x: Tensor[I32, [N]]) -> Tensor[I8, [N]] = cast(x, I8)", "f",
                    {T(DType::I32, {2}, {200, -129})});
  EXPECT_THAT(V(ok(narrow)), ElementsAre(-56, 127));
  auto to_f32 = run("public fn f [N](x: Tensor[F64, [N]]) -> Tensor[F32, [N]] = cast(x, F32)", "f",
                    {T(DType::F64, {1}, {0.1})});
  EXPECT_THAT(V(ok(to_f32)), ElementsAre(DoubleEq(f32(0.1))));
  auto big = run("public fn f [N](x: Tensor[I64, [N]]) -> Tensor[F64, [N]] = cast(x, F64)", "f",
                 {I64({1}, {9007199254740993})});
  EXPECT_THAT(V(ok(big)), ElementsAre(9007199254740992.0));  // 2^53 + 1 ties to even
}

// ---- constants ------------------------------------------------------------

TEST(InterpConstants, IotaFullLiteral) {
  auto io = run("public fn f [N](x: Tensor[F32, [N]]) -> Tensor[I32, [3, N]] = iota(I32, [3, N], axis=0)", "f",
                {T(DType::F32, {2}, {0, 0})});
  EXPECT_THAT(V(ok(io)), ElementsAre(0, 0, 1, 1, 2, 2));
  auto io1 = run("public fn f [N](x: Tensor[F32, [N]]) -> Tensor[F16, [2, N]] = iota(F16, [2, N], axis=1)", "f",
                 {T(DType::F32, {3}, {0, 0, 0})});
  EXPECT_THAT(V(ok(io1)), ElementsAre(0, 1, 2, 0, 1, 2));
  auto full = run("public fn f [N](x: Tensor[F32, [N]]) -> Tensor[F32, [N]] = x * 0.5 + full(F32, [N], -1e30)", "f",
                  {T(DType::F32, {2}, {2, 4})});
  EXPECT_THAT(V(ok(full)), ElementsAre(DoubleEq(f32(-1e30)), DoubleEq(f32(-1e30))));
  auto b = run("public fn f [N](x: Tensor[F32, [N]]) -> Tensor[Bool, [N]] = full(Bool, [N], true)", "f",
               {T(DType::F32, {2}, {0, 0})});
  EXPECT_THAT(V(ok(b)), ElementsAre(1, 1));
  // 2^53 + 1 is exact in I64, though not in a double.
  auto i = run("public fn f [N](x: Tensor[I64, [N]]) -> Tensor[I64, [N]] = x + full(I64, [N], 9007199254740993)",
               "f", {I64({1}, {-1})});
  EXPECT_THAT(ints64(ok(i)), ElementsAre(9007199254740992));
  auto h = run("public fn f [N](x: Tensor[F32, [N]]) -> Tensor[F16, [N]] = full(F16, [N], 0.1)", "f",
               {T(DType::F32, {1}, {0})});
  EXPECT_THAT(V(ok(h)), ElementsAre(0.0999755859375));
}

TEST(InterpConstants, IotaExtentMustFitTheDtype) {
  const char* src = "public fn f [N]() -> Tensor[U8, [N]] = iota(U8, [N], axis=0)";
  EXPECT_EQ(V(ok(run(src, "f", {}, {{"N", 256}}))).back(), 255);
  EXPECT_EQ(error(run(src, "f", {}, {{"N", 300}})),
            "`iota` along axis 0 has extent 300, but its index 299 does not fit in U8, which holds whole numbers "
            "only up to 255 exactly");
  const char* h = "public fn f [N]() -> Tensor[F16, [N]] = iota(F16, [N], axis=0)";
  EXPECT_EQ(V(ok(run(h, "f", {}, {{"N", 2049}}))).back(), 2048);
  EXPECT_THAT(error(run(h, "f", {}, {{"N", 2050}})), HasSubstr("index 2049 does not fit in F16"));
}

// ---- reductions -----------------------------------------------------------

// x[a, b, c] = 6a + 2b + c on [2, 3, 2].
HostTensor abc(DType t) {
  std::vector<double> v;
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 2; ++c) v.push_back(6 * a + 2 * b + c);
  return T(t, {2, 3, 2}, v);
}

TEST(InterpReduce, SumMeanMaxMinOverAxes) {
  const char* src =
      "public fn s [A, B, C](x: Tensor[F32, [A, B, C]]) -> Tensor[F32, [A, C]] = sum(x, axes=[1])\n"
      "public fn m [A, B, C](x: Tensor[F32, [A, B, C]]) -> Tensor[F32, [B]] = mean(x, axes=[0, -1])\n"
      "public fn mx [A, B, C](x: Tensor[F32, [A, B, C]]) -> Tensor[F32, [A, B]] = reduce_max(x, axes=[2])\n"
      "public fn mn [A, B, C](x: Tensor[F32, [A, B, C]]) -> Scalar[F32] = reduce_min(x, axes=[2, 0, 1])\n";
  EXPECT_THAT(V(ok(run(src, "s", {abc(DType::F32)}))), ElementsAre(6, 9, 24, 27));  // 18a + 3c + 6
  EXPECT_THAT(V(ok(run(src, "m", {abc(DType::F32)}))), ElementsAre(3.5, 5.5, 7.5));  // 3.5 + 2b
  EXPECT_THAT(V(ok(run(src, "mx", {abc(DType::F32)}))), ElementsAre(1, 3, 5, 7, 9, 11));
  auto mn = ok(run(src, "mn", {abc(DType::F32)}));
  EXPECT_TRUE(mn.shape.empty());
  EXPECT_THAT(V(mn), ElementsAre(0));
}

TEST(InterpReduce, IntegersWrapAndF16AccumulatesWider) {
  auto i8 = run("public fn f [N](x: Tensor[I8, [N]]) -> Scalar[I8] = sum(x, axes=[0])", "f",
                {T(DType::I8, {3}, {100, 100, 100})});
  EXPECT_THAT(V(ok(i8)), ElementsAre(44));  // 300 - 256
  auto mx = run("public fn f [N](x: Tensor[I32, [N]]) -> Scalar[I32] = reduce_max(x, axes=[0])", "f",
                {T(DType::I32, {3}, {-5, -2, -9})});
  EXPECT_THAT(V(ok(mx)), ElementsAre(-2));
  // Accumulating in F16 would stick at 2048; the sum 2050 is representable.
  const char* h = "public fn s [N](x: Tensor[F16, [N]]) -> Scalar[F16] = sum(x, axes=[0])\n"
                  "public fn m [N](x: Tensor[F16, [N]]) -> Scalar[F16] = mean(x, axes=[0])";
  EXPECT_THAT(V(ok(run(h, "s", {T(DType::F16, {4}, {2048, 1, 1, 0})}))), ElementsAre(2050));
  EXPECT_THAT(V(ok(run(h, "m", {T(DType::F16, {4}, {2048, 1, 1, 0})}))), ElementsAre(512.5));
  auto nan = run("public fn f [N](x: Tensor[F32, [N]]) -> Scalar[F32] = reduce_max(x, axes=[0])", "f",
                 {T(DType::F32, {3}, {1, kNaN, 3})});
  EXPECT_THAT(V(ok(nan)), ElementsAre(IsNan()));
}

// ---- structural ops -------------------------------------------------------

TEST(InterpStructural, Broadcast) {
  auto out = run("public fn f [N, M](s: Scalar[F32], r: Tensor[F32, [M]], c: Tensor[F32, [N]]) -> Tensor[F32, [N, M]] =\n"
                 "  broadcast(s, [N, M]) + broadcast(r, [N, M], axes=[1]) * broadcast(c, [N, M], axes=[0])",
                 "f", {T(DType::F32, {}, {10}), T(DType::F32, {3}, {1, 2, 3}), T(DType::F32, {2}, {1, 10})});
  EXPECT_THAT(V(ok(out)), ElementsAre(11, 12, 13, 20, 30, 40));
  auto r3 = run("public fn f [N, M](x: Tensor[I32, [N, M]]) -> Tensor[I32, [N, 3, M]] = broadcast(x, [N, 3, M], axes=[0, 2])",
                "f", {T(DType::I32, {2, 2}, {1, 2, 3, 4})});
  EXPECT_THAT(V(ok(r3)), ElementsAre(1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4));
}

TEST(InterpStructural, Matmul) {
  const char* src = "public fn f [M, K, N](a: Tensor[F32, [M, K]], b: Tensor[F32, [K, N]]) -> Tensor[F32, [M, N]] = matmul(a, b)";
  auto out = run(src, "f", {T(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6}), T(DType::F32, {3, 2}, {7, 8, 9, 10, 11, 12})});
  EXPECT_THAT(V(ok(out)), ElementsAre(58, 64, 139, 154));
  auto shared = run("public fn f [P, M, K, N](a: Tensor[F32, [P, M, K]], b: Tensor[F32, [K, N]]) -> Tensor[F32, [P, M, N]] =\n"
                    "  matmul(a, b)",
                    "f", {T(DType::F32, {2, 2, 2}, {1, 0, 0, 1, 1, 1, 1, 1}), T(DType::F32, {2, 2}, {1, 2, 3, 4})});
  EXPECT_THAT(V(ok(shared)), ElementsAre(1, 2, 3, 4, 4, 6, 4, 6));
  auto batched = run("public fn f [P, M, K, N](a: Tensor[F32, [P, M, K]], b: Tensor[F32, [P, K, N]]) -> Tensor[F32, [P, M, N]] =\n"
                     "  matmul(a, b)",
                     "f", {T(DType::F32, {2, 1, 2}, {1, 2, 5, 6}), T(DType::F32, {2, 2, 1}, {3, 4, 7, 8})});
  EXPECT_THAT(V(ok(batched)), ElementsAre(11, 83));
  auto i8 = run("public fn f [M, K, N](a: Tensor[I8, [M, K]], b: Tensor[I8, [K, N]]) -> Tensor[I8, [M, N]] = matmul(a, b)",
                "f", {T(DType::I8, {1, 2}, {100, 100}), T(DType::I8, {2, 1}, {1, 1})});
  EXPECT_THAT(V(ok(i8)), ElementsAre(-56));
  auto h = run("public fn f [M, K, N](a: Tensor[F16, [M, K]], b: Tensor[F16, [K, N]]) -> Tensor[F16, [M, N]] = matmul(a, b)",
               "f", {T(DType::F16, {1, 3}, {2048, 1, 1}), T(DType::F16, {3, 1}, {1, 1, 1})});
  EXPECT_THAT(V(ok(h)), ElementsAre(2050));
}

TEST(InterpStructural, TransposeAndReshape) {
  auto t2 = run("public fn f [N, M](x: Tensor[F32, [N, M]]) -> Tensor[F32, [M, N]] = transpose(x, [1, 0])", "f",
                {T(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6})});
  EXPECT_THAT(V(ok(t2)), ElementsAre(1, 4, 2, 5, 3, 6));
  std::vector<double> x, want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) x.push_back(100 * i + 10 * j + k);
  for (int k = 0; k < 4; ++k)  // out[k, i, j] = x[i, j, k]
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) want.push_back(100 * i + 10 * j + k);
  auto t3 = ok(run("public fn f [A, B, C](x: Tensor[I32, [A, B, C]]) -> Tensor[I32, [C, A, B]] = transpose(x, [2, 0, 1])",
                   "f", {T(DType::I32, {2, 3, 4}, x)}));
  EXPECT_EQ(t3.shape, (std::vector<int64_t>{4, 2, 3}));
  EXPECT_THAT(V(t3), ElementsAreArray(want));
  auto r = ok(run("public fn f [N, M](x: Tensor[F32, [N, M]]) -> Tensor[F32, [M, N]] = reshape(x, [M, N])", "f",
                  {T(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6})}));
  EXPECT_EQ(r.shape, (std::vector<int64_t>{3, 2}));
  EXPECT_THAT(V(r), ElementsAre(1, 2, 3, 4, 5, 6));
}

TEST(InterpStructural, SoftmaxIsStable) {
  const char* src = "public fn f [N, C](x: Tensor[F32, [N, C]]) -> Tensor[F32, [N, C]] = softmax(x, axis=-1)";
  EXPECT_THAT(V(ok(run(src, "f", {T(DType::F32, {1, 2}, {1000, 1000})}))), ElementsAre(0.5, 0.5));
  EXPECT_THAT(V(ok(run(src, "f", {T(DType::F32, {1, 3}, {1000, 1001, 1002})}))),
              ElementsAre(DoubleEq(f32(0.09003057317038046)), DoubleEq(f32(0.24472847105479764)),
                          DoubleEq(f32(0.6652409557748218))));
  EXPECT_THAT(V(ok(run(src, "f", {T(DType::F32, {1, 2}, {-1000, -1000})}))), ElementsAre(0.5, 0.5));
  // Along axis 0: columns [0, ln 3] -> [1/4, 3/4] and [0, 1000] -> [0, 1].
  auto col = run("public fn f [N, C](x: Tensor[F32, [N, C]]) -> Tensor[F32, [N, C]] = softmax(x, axis=0)", "f",
                 {T(DType::F32, {2, 2}, {0, 0, std::log(3.0), 1000})});
  EXPECT_THAT(V(ok(col)), ElementsAre(DoubleNear(0.25, 1e-7), 0, DoubleNear(0.75, 1e-7), 1));
  auto h = run("public fn f [N](x: Tensor[F16, [N]]) -> Tensor[F16, [N]] = softmax(x, axis=0)", "f",
               {T(DType::F16, {2}, {60000, 60000})});
  EXPECT_THAT(V(ok(h)), ElementsAre(0.5, 0.5));
}

TEST(InterpStructural, Gather) {
  ir::Module m = example("embedding.tl");
  std::vector<double> table;
  for (int v = 0; v < 5; ++v)
    for (int d = 0; d < 2; ++d) table.push_back(10 * v + d);
  auto out = ok(interpret(m, "embed", {T(DType::F16, {5, 2}, table), T(DType::I32, {2, 3}, {4, 0, 1, 2, 3, 4})}, {}));
  EXPECT_EQ(out.shape, (std::vector<int64_t>{2, 3, 2}));
  EXPECT_THAT(V(out), ElementsAre(40, 41, 0, 1, 10, 11, 20, 21, 30, 31, 40, 41));
  EXPECT_EQ(error(interpret(m, "embed", {T(DType::F16, {5, 2}, table), T(DType::I32, {2, 3}, {0, 1, 2, 3, 4, 7})}, {})),
            "gather index 7 at idx[1, 2] is outside [0, 5)");
  EXPECT_EQ(error(interpret(m, "embed", {T(DType::F16, {5, 2}, table), T(DType::I32, {2, 3}, {0, -1, 2, 3, 4, 9})}, {})),
            "gather index -1 at idx[0, 1] is outside [0, 5)");
  auto ax1 = run("public fn f [R, C, I](t: Tensor[F32, [R, C]], i: Tensor[I64, [I]]) -> Tensor[F32, [R, I]] =\n"
                 "  gather(t, i, axis=1)",
                 "f", {T(DType::F32, {2, 3}, {0, 1, 2, 10, 11, 12}), I64({2}, {2, 0})});
  EXPECT_THAT(V(ok(ax1)), ElementsAre(2, 0, 12, 10));
  auto scalar = run("public fn f [V, D](t: Tensor[F32, [V, D]], i: Scalar[U8]) -> Tensor[F32, [D]] = gather(t, i)", "f",
                    {T(DType::F32, {2, 2}, {1, 2, 3, 4}), T(DType::U8, {}, {1})});
  EXPECT_THAT(V(ok(scalar)), ElementsAre(3, 4));
}

TEST(InterpStructural, RepeatInterleaveConcatSlice) {
  ir::Module att = example("attention.tl");
  auto kv = ok(interpret(att, "expand_kv", {T(DType::F32, {1, 2, 1, 2}, {1, 2, 3, 4})}, {{"G", 2}}));
  EXPECT_EQ(kv.shape, (std::vector<int64_t>{1, 4, 1, 2}));
  EXPECT_THAT(V(kv), ElementsAre(1, 2, 1, 2, 3, 4, 3, 4));
  auto last = run("public fn f [N, M](x: Tensor[F32, [N, M]]) -> Tensor[F32, [N, 3 * M]] = repeat_interleave(x, 3, axis=1)",
                  "f", {T(DType::F32, {2, 2}, {1, 2, 3, 4})});
  EXPECT_THAT(V(ok(last)), ElementsAre(1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4));

  ir::Module emb = example("embedding.tl");
  auto pair = ok(interpret(emb, "pair", {T(DType::F32, {2, 1}, {1, 2}), T(DType::F32, {2, 1}, {3, 4})}, {}));
  EXPECT_THAT(V(pair), ElementsAre(1, 3, 2, 4));
  auto three = run("public fn f [N, A, B](a: Tensor[I32, [A, N]], b: Tensor[I32, [B, N]]) -> Tensor[I32, [2 * A + B, N]] =\n"
                   "  concat([a, b, a], axis=0)",
                   "f", {T(DType::I32, {1, 2}, {1, 2}), T(DType::I32, {2, 2}, {3, 4, 5, 6})});
  EXPECT_THAT(V(ok(three)), ElementsAre(1, 2, 3, 4, 5, 6, 1, 2));

  auto first = ok(interpret(emb, "first_tokens", {T(DType::F32, {3, 2}, {1, 2, 3, 4, 5, 6})}, {{"P", 2}}));
  EXPECT_THAT(V(first), ElementsAre(1, 2, 3, 4));
  auto mid = run("public fn f [N](x: Tensor[F32, [2, N], [N >= 3]]) -> Tensor[F32, [2, 2]] = slice(x, axis=1, start=1, len=2)",
                 "f", {T(DType::F32, {2, 4}, {1, 2, 3, 4, 5, 6, 7, 8})});
  EXPECT_THAT(V(ok(mid)), ElementsAre(2, 3, 6, 7));
}

// ---- binding, refinements, limits ----------------------------------------

TEST(InterpErrors, DimBindingAndInputChecks) {
  const char* src = "public fn f [N, M](a: Tensor[F32, [N]], x: Tensor[F32, [M, N]]) -> Tensor[F32, [M, N]] =\n"
                    "  x * broadcast(a, [M, N], axes=[1])";
  EXPECT_EQ(error(run(src, "f", {T(DType::F32, {2}, {1, 2}), HostTensor(DType::F32, {4, 3})})),
            "x.shape[1] = 3 but N = 2, bound by a.shape[0]");
  EXPECT_EQ(error(run(src, "f", {T(DType::F32, {2}, {1, 2}), HostTensor(DType::F32, {4, 3})}, {{"N", 3}})),
            "a.shape[0] = 2 but N = 3, bound by --dims");
  ir::Module norms = example("norms.tl");
  HostTensor x(DType::F32, {1, 2, 3}), w(DType::F32, {3}), eps = T(DType::F32, {}, {1e-6});
  EXPECT_EQ(error(interpret(norms, "rmsnorm", {x, HostTensor(DType::F16, {3}), eps}, {})), "`w` must be F32, got F16");
  EXPECT_EQ(error(interpret(norms, "rmsnorm", {x, HostTensor(DType::F32, {3, 1}), eps}, {})),
            "`w` must have rank 1 Tensor[F32, [D]], got rank 2");
  EXPECT_EQ(error(interpret(norms, "rmsnorm", {x, w}, {})), "`rmsnorm` takes 3 inputs, got 2");
  HostTensor torn = w;
  torn.bytes.pop_back();
  EXPECT_EQ(error(interpret(norms, "rmsnorm", {x, torn, eps}, {})), "input `w` holds 11 bytes, but F32 [3] needs 12");
  auto missing = interpret(norms, "nosuch", {}, {});
  EXPECT_EQ(missing.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(error(missing), "no function `nosuch` in the module");
  ir::Module att = example("attention.tl");
  EXPECT_EQ(error(interpret(att, "expand_kv", {HostTensor(DType::F32, {1, 2, 1, 2})}, {})),
            "dimension `G` of `expand_kv` is bound by no input; give it with --dims G=VALUE");
}

TEST(InterpErrors, RefinementViolatedAtRunTime) {
  ir::Module att = example("attention.tl");
  HostTensor q(DType::F32, {1, 2, 6}), s = T(DType::F32, {}, {1});
  EXPECT_EQ(error(interpret(att, "attention", {q, q, q, s}, {{"H", 4}})),
            "refinement `D mod H = 0` of `attention` does not hold: D = 6, H = 4");
  ir::Module emb = example("embedding.tl");
  EXPECT_EQ(error(interpret(emb, "first_tokens", {HostTensor(DType::F32, {3, 2})}, {{"P", 5}})),
            "refinement `P <= S` of `first_tokens` does not hold: P = 5, S = 3");
}

TEST(InterpErrors, HugeValuesAreRefusedBeforeAllocating) {
  const char* src = "public fn f [N](s: Scalar[F32]) -> Tensor[F32, [N, N]] = broadcast(s, [N, N])";
  EXPECT_EQ(error(run(src, "f", {T(DType::F32, {}, {1})}, {{"N", 65536}})),
            "in `f`, the result of `broadcast` would have shape [65536, 65536], more than the interpreter's limit "
            "of 2^31 elements; use smaller dimensions");
  const char* cube = "public fn f [N](s: Scalar[F32]) -> Tensor[F32, [N, N, N]] = broadcast(s, [N, N, N])";
  EXPECT_THAT(error(run(cube, "f", {T(DType::F32, {}, {1})}, {{"N", 2147483647}})), HasSubstr("limit of 2^31"));
  // An extent out of [1, 2^31 - 1] anywhere is an error too.
  const char* twice = "public fn f [N](s: Scalar[F32]) -> Scalar[F32] = sum(broadcast(s, [2 * N]), axes=[0])";
  EXPECT_THAT(error(run(twice, "f", {T(DType::F32, {}, {1})}, {{"N", 2147483647}})),
              HasSubstr("extent `2*N` = 4294967294 is not in [1, 2147483647]"));
}

// ---- calls ----------------------------------------------------------------

TEST(InterpCalls, InferredAndExplicitDims) {
  const char* src =
      "fn rep [N, R](x: Tensor[F32, [N]]) -> Tensor[F32, [N * R]] = repeat_interleave(x, R, axis=0)\n"
      "fn double [N](x: Tensor[F32, [N]]) -> Tensor[F32, [N]] = x + x\n"
      "public fn f [N](x: Tensor[F32, [N]]) -> Tensor[F32, [5 * N]] =\n"
      "  concat([rep[R=2](double(x)), rep[R=3](x)], axis=0)";
  auto out = run(src, "f", {T(DType::F32, {2}, {1, 2})});
  EXPECT_THAT(V(ok(out)), ElementsAre(2, 2, 4, 4, 1, 1, 1, 2, 2, 2));
  // A private function can be interpreted directly; its R must be given.
  EXPECT_THAT(V(ok(run(src, "rep", {T(DType::F32, {1}, {7})}, {{"R", 3}}))), ElementsAre(7, 7, 7));
}

TEST(InterpCalls, CalleeDimensionsAreCheckedAtRunTime) {
  const char* src =
      "fn tail [N](x: Tensor[F32, [N + 1]]) -> Tensor[F32, [N]] = slice(x, axis=0, start=1, len=N)\n"
      "public fn f [S](x: Tensor[F32, [S], [S >= 2]]) -> Scalar[F32] = sum(tail(x), axes=[0])";
  EXPECT_THAT(V(ok(run(src, "f", {T(DType::F32, {3}, {1, 2, 4})}))), ElementsAre(6));
  EXPECT_EQ(error(run(src, "f", {T(DType::F32, {1}, {1})})), "refinement `S >= 2` of `f` does not hold: S = 1");
  // A call whose callee dimension evaluates below 1 (the checker never builds
  // one; built by hand): g [N, M](x: [N]) -> [N] = x, called with M = N - 1.
  ir::Type t{DType::F32, {Dim::var("N")}};
  ir::Node param{ir::Op::kParam, t, {}, {}, {}, "", "", 0};
  ir::NodeRef p = ir::make(param);
  ir::Node call{ir::Op::kCall, t, {p}, {}, {Dim::var("N"), Dim::var("N") - Dim::constant(1)}, "", "g", 0};
  ir::Module m;
  m.functions.push_back({"g", false, {"N", "M"}, {{"x", t}}, {}, t, p});
  m.functions.push_back({"f", true, {"N"}, {{"x", t}}, {}, t, ir::make(call)});
  EXPECT_THAT(V(ok(interpret(m, "f", {T(DType::F32, {2}, {1, 2})}, {}))), ElementsAre(1, 2));
  EXPECT_EQ(error(interpret(m, "f", {T(DType::F32, {1}, {1})}, {})),
            "at the call of `g` in `f`: dimension M = 0 must be in [1, 2147483647]");
}

TEST(InterpCalls, DagNodesAreEvaluatedOnce) {
  // 64 doublings: without memoisation this would take 2^64 evaluations.
  std::string src = "public fn f [N](x: Tensor[F64, [N]]) -> Tensor[F64, [N]] =\n  let a0 = x\n";
  for (int k = 1; k <= 64; ++k) src += "  let a" + std::to_string(k) + " = a" + std::to_string(k - 1) + " + a" + std::to_string(k - 1) + "\n";
  src += "  a64";
  EXPECT_THAT(V(ok(run(src, "f", {T(DType::F64, {1}, {1})}))), ElementsAre(18446744073709551616.0));
}

TEST(InterpCalls, RecursionInAMalformedModuleIsAnErrorNotACrash) {
  // The checker rejects recursion, so build `f(x) = f(x)` by hand.
  ir::Type t{DType::F32, {Dim::var("N")}};
  ir::Node param{ir::Op::kParam, t, {}, {}, {}, "", "", 0};
  ir::Node call{ir::Op::kCall, t, {ir::make(param)}, {}, {Dim::var("N")}, "", "f", 0};
  ir::Module m;
  m.functions.push_back({"f", true, {"N"}, {{"x", t}}, {}, t, ir::make(call)});
  EXPECT_EQ(error(interpret(m, "f", {T(DType::F32, {1}, {1})}, {})),
            "calls nested deeper than 64 at `f` (a recursive call?)");
}

// ---- the examples against straightforward loops --------------------------

TEST(InterpExamples, Rmsnorm) {
  ir::Module m = example("norms.tl");
  const int S = 2, D = 3;
  std::vector<double> x = {1, 2, 3, -4, 0.5, 2}, w = {0.5, 1, 2}, want;
  double eps = 1e-6;
  for (int s = 0; s < S; ++s) {
    double ms = 0;
    for (int d = 0; d < D; ++d) ms += x[s * D + d] * x[s * D + d];
    ms /= D;
    for (int d = 0; d < D; ++d) want.push_back(x[s * D + d] / std::sqrt(ms + eps) * w[d]);
  }
  auto out = ok(interpret(m, "rmsnorm", {T(DType::F32, {1, S, D}, x), T(DType::F32, {D}, w), T(DType::F32, {}, {eps})}, {}));
  HostTensor ref = T(DType::F32, {1, S, D}, want);
  Status st = compare(ref, out, tolerance_for(DType::F32, D));
  EXPECT_TRUE(st.ok()) << st.message();
  // Row 0: mean(1, 4, 9) = 14/3, so out[0, 0, 0] = 0.5 / sqrt(14/3 + 1e-6).
  EXPECT_NEAR(out.get(0), 0.5 / std::sqrt(14.0 / 3 + 1e-6), 1e-6);
}

TEST(InterpExamples, Layernorm) {
  ir::Module m = example("norms.tl");
  std::vector<double> x = {1, 2, 3, 10, 0, -10}, g = {1, 2, 3}, b = {0, 1, -1}, want;
  for (int n = 0; n < 2; ++n) {
    double mu = (x[3 * n] + x[3 * n + 1] + x[3 * n + 2]) / 3, var = 0;
    for (int d = 0; d < 3; ++d) var += (x[3 * n + d] - mu) * (x[3 * n + d] - mu) / 3;
    for (int d = 0; d < 3; ++d) want.push_back((x[3 * n + d] - mu) / std::sqrt(var + 1e-5) * g[d] + b[d]);
  }
  auto out = ok(interpret(m, "layernorm", {T(DType::F32, {2, 3}, x), T(DType::F32, {3}, g), T(DType::F32, {3}, b)}, {}));
  Status st = compare(T(DType::F32, {2, 3}, want), out, tolerance_for(DType::F32, 3));
  EXPECT_TRUE(st.ok()) << st.message();
}

TEST(InterpExamples, SoftmaxByHandAgreesWithBuiltin) {
  ir::Module m = example("softmax.tl");
  HostTensor x = T(DType::F32, {2, 3}, {1, 2, 3, 1000, -5, 999});
  auto a = ok(interpret(m, "softmax_by_hand", {x}, {}));
  auto b = ok(interpret(m, "softmax_builtin", {x}, {}));
  Status st = compare(b, a, tolerance_for(DType::F32, 3));
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_NEAR(b.get(3), 1 / (1 + std::exp(-1.0)), 1e-6);  // 1000 vs 999 (exp(-1005) vanishes)
}

TEST(InterpExamples, MlpWithGeluTanh) {
  ir::Module m = example("mlp.tl");
  const int N = 2, D = 3, F = 4;
  std::vector<double> x = {1, -1, 0.5, 0, 2, -3}, w1(D * F), b1 = {0.1, -0.2, 0.3, 0}, w2(F * D), b2 = {1, 0, -1};
  for (int k = 0; k < D * F; ++k) w1[k] = 0.1 * (k % 5) - 0.2;
  for (int k = 0; k < F * D; ++k) w2[k] = 0.05 * (k % 7) - 0.1;
  auto gelu = [](double v) { return 0.5 * v * (1 + std::tanh(0.7978845608 * (v + 0.044715 * v * v * v))); };
  std::vector<double> want;
  for (int n = 0; n < N; ++n) {
    std::vector<double> h(F);
    for (int f = 0; f < F; ++f) {
      double acc = b1[f];
      for (int d = 0; d < D; ++d) acc += x[n * D + d] * w1[d * F + f];
      h[f] = gelu(acc);
    }
    for (int d = 0; d < D; ++d) {
      double acc = b2[d];
      for (int f = 0; f < F; ++f) acc += h[f] * w2[f * D + d];
      want.push_back(acc);
    }
  }
  auto out = ok(interpret(m, "mlp", {T(DType::F32, {N, D}, x), T(DType::F32, {D, F}, w1), T(DType::F32, {F}, b1),
                                     T(DType::F32, {F, D}, w2), T(DType::F32, {D}, b2)}, {}));
  Status st = compare(T(DType::F32, {N, D}, want), out, tolerance_for(DType::F32, F));
  EXPECT_TRUE(st.ok()) << st.message();
  // The private gelu_tanh on its own.
  auto g = ok(interpret(m, "gelu_tanh", {T(DType::F32, {1, 2}, {0, 1})}, {}));
  EXPECT_THAT(V(g), ElementsAre(0, DoubleNear(gelu(1.0), 1e-6)));
}

TEST(InterpExamples, CausalAttention) {
  ir::Module m = example("attention.tl");
  const int S = 3, D = 4, H = 2, E = D / H;
  std::vector<double> q(S * D), k(S * D), v(S * D), want(S * D);
  for (int i = 0; i < S * D; ++i) {
    q[i] = 0.3 * ((i * 7) % 5) - 0.5;
    k[i] = 0.2 * ((i * 3) % 7) - 0.6;
    v[i] = 0.1 * i - 0.4;
  }
  double scale = 1 / std::sqrt(static_cast<double>(E));
  for (int h = 0; h < H; ++h)
    for (int i = 0; i < S; ++i) {
      std::vector<double> p(S);
      double mx = -1e300, sum = 0;
      for (int j = 0; j < S; ++j) {
        double s = 0;
        for (int e = 0; e < E; ++e) s += q[i * D + h * E + e] * k[j * D + h * E + e];
        p[j] = j <= i ? s * scale : -1e30;
        mx = std::max(mx, p[j]);
      }
      for (int j = 0; j < S; ++j) sum += p[j] = std::exp(p[j] - mx);
      for (int e = 0; e < E; ++e) {
        double acc = 0;
        for (int j = 0; j < S; ++j) acc += p[j] / sum * v[j * D + h * E + e];
        want[i * D + h * E + e] = acc;
      }
    }
  auto out = ok(interpret(m, "attention", {T(DType::F32, {1, S, D}, q), T(DType::F32, {1, S, D}, k),
                                           T(DType::F32, {1, S, D}, v), T(DType::F32, {}, {scale})}, {{"H", H}}));
  Status st = compare(T(DType::F32, {1, S, D}, want), out, tolerance_for(DType::F32, S));
  EXPECT_TRUE(st.ok()) << st.message();
  // Row 0 sees only itself: out[0, 0, :] = v[0, 0, :].
  EXPECT_NEAR(out.get(0), v[0], 1e-6);
}

TEST(InterpExamples, ProjectF16ComputesInF32AndRoundsOnce) {
  ir::Module m = example("embedding.tl");
  // 2048 + 1 + 1 in F32 is 2050 (F16 holds it); relu clears the negative row.
  auto out = ok(interpret(m, "project_f16", {T(DType::F16, {2, 3}, {2048, 1, 1, -1, -2, -3}),
                                             T(DType::F16, {3, 1}, {1, 1, 1})}, {}));
  EXPECT_EQ(out.dtype, DType::F16);
  EXPECT_THAT(V(out), ElementsAre(2050, 0));
}

// ---- compare() ------------------------------------------------------------

TEST(Compare, ToleranceTable) {
  auto t = tolerance_for(DType::F32);
  EXPECT_EQ(t.rtol, 1e-5);
  EXPECT_EQ(t.atol, 1e-6);
  t = tolerance_for(DType::F32, 400);
  EXPECT_EQ(t.rtol, 1e-4);
  EXPECT_DOUBLE_EQ(t.atol, 1e-5 * 20);
  EXPECT_EQ(tolerance_for(DType::F64).atol, 1e-12);
  EXPECT_EQ(tolerance_for(DType::BF16).rtol, 1e-2);
  EXPECT_EQ(tolerance_for(DType::F16).atol, 2e-3);
  EXPECT_EQ(tolerance_for(DType::I32).atol, 0);
  EXPECT_EQ(tolerance_for(DType::Bool, 10).rtol, 0);
}

TEST(Compare, ReportsFirstMismatchCountAndIndex) {
  HostTensor e = T(DType::F32, {2, 1, 4}, {0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_TRUE(compare(e, e, tolerance_for(DType::F32)).ok());
  HostTensor a = e;
  a.set(5, 5.5);
  a.set(7, 7.25);
  a.set(0, 1e-7);  // within atol
  Status st = compare(e, a, tolerance_for(DType::F32));
  EXPECT_EQ(st.code(), Status::Code::kCorruption);
  EXPECT_EQ(st.message(), "2 of 8 elements differ (rtol 1e-05, atol 1e-06); first at [1, 0, 1]: expected 5, got 5.5");
  EXPECT_TRUE(compare(e, a, {0.1, 1e-6}).ok());  // 0.5 <= 0.1 * 5
}

// Results of a fn under a precision policy: one element in 10,000 (at
// least one) may miss the envelope, within 8 times it; more, or farther, is
// wrong. NaN against a number is always wrong.
TEST(Compare, APolicysOutliersAreFewAndNear) {
  HostTensor e(DType::F32, {20000});
  for (int64_t i = 0; i < e.numel(); ++i) e.set(i, 1.0);
  Tolerance policy = tolerance_for(DType::BF16);  // |d| <= 0.01 + 0.01 |e| = 0.02
  policy.policy_outliers = true;
  HostTensor a = e;
  a.set(3, 1.1);      // 5x the bound
  a.set(19999, 1.15);  // 7.5x
  EXPECT_TRUE(compare(e, a, policy).ok()) << compare(e, a, policy).message();
  EXPECT_FALSE(compare(e, a, tolerance_for(DType::BF16)).ok()) << "without the policy every element counts";
  HostTensor three = a;
  three.set(7, 1.05);
  EXPECT_EQ(compare(e, three, policy).message(),
            "3 of 20000 elements differ (rtol 0.01, atol 0.01; the policy allows 2 within 8x); first at [3]: expected 1, "
            "got 1.1");
  HostTensor far = e;
  far.set(3, 1.17);  // 8.5x
  EXPECT_FALSE(compare(e, far, policy).ok());
  HostTensor nan = e;
  nan.set(3, kNaN);
  EXPECT_FALSE(compare(e, nan, policy).ok());
  HostTensor small(DType::F32, {4}), one = small;
  one.set(2, 0.05);  // 5x: a tensor of 4 elements may hold one outlier still
  EXPECT_TRUE(compare(small, one, policy).ok());
}

TEST(Compare, NanInfDtypeShapeAndIntegers) {
  HostTensor e = T(DType::F64, {3}, {kNaN, kInf, 1});
  EXPECT_TRUE(compare(e, e, tolerance_for(DType::F64)).ok());
  EXPECT_EQ(compare(e, T(DType::F64, {3}, {0, kInf, 1}), {1, 1}).message(),
            "1 of 3 elements differ (rtol 1, atol 1); first at [0]: expected nan, got 0");
  EXPECT_EQ(compare(e, T(DType::F32, {3}, {0, 0, 0}), {1, 1}).message(), "dtype differs: expected F64, got F32");
  EXPECT_EQ(compare(e, T(DType::F64, {1, 3}, {0, 0, 0}), {1, 1}).message(), "shape differs: expected [3], got [1, 3]");
  EXPECT_EQ(compare(I64({1}, {9007199254740993}), I64({1}, {9007199254740992}), tolerance_for(DType::I64)).message(),
            "1 of 1 elements differ (rtol 0, atol 0); first at [0]: expected 9007199254740993, got 9007199254740992");
  HostTensor torn = e;
  torn.bytes.resize(5);
  EXPECT_EQ(compare(e, torn, {0, 0}).message(), "malformed actual tensor: F64 [3] does not match its 5 bytes");
}

}  // namespace
}  // namespace mlk
