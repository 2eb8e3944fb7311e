// Precision policies (lang/precision.h): which products the pass rewrites,
// what it leaves alone (signatures, other ops, other dtypes, whole fns), the
// IR hash, the policy read back off the IR, and the values the interpreter
// gives a widening product.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "lang/frontend.h"
#include "lang/interpreter.h"
#include "lang/ir_printer.h"
#include "lang/ir_verify.h"
#include "lang/precision.h"
#include "lang/tensor.h"

namespace mlk {
namespace {

const char* kProgram =
    "public fn mm [M, K, N](a: Tensor[F32, [M, K]], w: Tensor[F32, [K, N]]) -> Tensor[F32, [M, N]] =\n"
    "  let h = matmul(a, w)\n"
    "  h + h\n"
    "public fn norm [N, D](x: Tensor[F32, [N, D]]) -> Tensor[F32, [N, D]] = softmax(x, axis=1)\n"
    "public fn mm64 [M, K, N](a: Tensor[F64, [M, K]], w: Tensor[F64, [K, N]]) -> Tensor[F64, [M, N]] =\n"
    "  matmul(a, w)\n"
    "public fn caller [M, K, N](a: Tensor[F32, [M, K]], w: Tensor[F32, [K, N]]) -> Tensor[F32, [M, N]] =\n"
    "  relu(mm(a, w))\n";

ir::Module checked() {
  auto fe = compile_source("p.tl", kProgram);
  EXPECT_TRUE(fe.ok()) << fe.rendered();
  return fe.module;
}

std::string hash(const ir::Module& m, const std::string& fn) { return ir::function_hash(m, *m.find(fn)); }

TEST(Precision, ParsesThePolicyNamesAndNamesTheChoicesOtherwise) {
  EXPECT_EQ(*parse_precision("f32"), Precision::kF32);
  EXPECT_EQ(*parse_precision("bf16"), Precision::kBF16);
  EXPECT_EQ(*parse_precision("f16"), Precision::kF16);
  auto bad = parse_precision("BF16");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "precision `BF16`: expected f32, bf16 or f16");
  for (Precision p : {Precision::kF32, Precision::kBF16, Precision::kF16})
    EXPECT_EQ(*parse_precision(precision_name(p)), p);
}

TEST(Precision, F32IsTheProgramAsWritten) {
  const ir::Module m = checked();
  const ir::Module same = with_precision(m, Precision::kF32);
  for (const auto& f : m.functions) EXPECT_EQ(hash(same, f.name), hash(m, f.name)) << f.name;
  EXPECT_EQ(ir::print_module(same), ir::print_module(m));
}

TEST(Precision, Bf16WidensEveryF32ProductAndNothingElse) {
  const ir::Module m = checked();
  const ir::Module b = with_precision(m, Precision::kBF16);
  ASSERT_TRUE(ir::verify_module(b).ok()) << ir::verify_module(b).message();
  const std::string text = ir::print_module(b);
  // The product's operands are cast, the product stays F32.
  EXPECT_NE(text.find("cast %0 : Tensor[BF16, [M, K]]"), std::string::npos) << text;
  EXPECT_NE(text.find("cast %2 : Tensor[BF16, [K, N]]"), std::string::npos) << text;
  // Signatures are unchanged, and so are fns without an F32 product.
  for (const auto& f : m.functions) {
    const ir::Function* g = b.find(f.name);
    ASSERT_EQ(g->params.size(), f.params.size());
    for (size_t i = 0; i < f.params.size(); ++i) EXPECT_EQ(g->params[i].type, f.params[i].type);
    EXPECT_EQ(g->result_type, f.result_type);
  }
  EXPECT_EQ(hash(b, "norm"), hash(m, "norm"));
  EXPECT_EQ(hash(b, "mm64"), hash(m, "mm64"));  // an F64 product keeps its precision
  EXPECT_NE(hash(b, "mm"), hash(m, "mm"));
  EXPECT_NE(hash(b, "caller"), hash(m, "caller"));  // through its callee
  // The two policies are two programs.
  EXPECT_NE(hash(with_precision(m, Precision::kF16), "mm"), hash(b, "mm"));
  // A `let` used twice stays one node: the product is rewritten once.
  const ir::Node& add = *b.find("mm")->body;
  ASSERT_EQ(add.operands.size(), 2u);
  EXPECT_EQ(add.operands[0], add.operands[1]);
  EXPECT_EQ(add.operands[0]->op, ir::Op::kMatmul);
  EXPECT_EQ(add.operands[0]->type.dtype, DType::F32);
  EXPECT_EQ(add.operands[0]->operands[0]->type.dtype, DType::BF16);
  // Applying it again changes nothing: the product is no longer of F32 operands.
  EXPECT_EQ(ir::print_module(with_precision(b, Precision::kBF16)), text);
}

TEST(Precision, ThePolicyIsReadBackOffAFnsIr) {
  const ir::Module m = checked();
  const ir::Module b = with_precision(m, Precision::kBF16), h = with_precision(m, Precision::kF16);
  EXPECT_EQ(precision_of(m, *m.find("mm")), Precision::kF32);
  EXPECT_EQ(precision_of(b, *b.find("mm")), Precision::kBF16);
  EXPECT_EQ(precision_of(h, *h.find("mm")), Precision::kF16);
  EXPECT_EQ(precision_of(b, *b.find("caller")), Precision::kBF16);  // the product is in its callee
  EXPECT_EQ(precision_of(b, *b.find("norm")), Precision::kF32);    // unchanged, so f32's IR
}

// The interpreter's widening product: operands rounded to the narrow dtype,
// their products summed exactly (in double) and rounded once to F32.
// What judges a result against the interpreter (the tuner, mlk verify, mlk
// bench): under bf16 (f16) an F32 result of a fn with a widening product is
// judged by the BF16 (F16) tolerance, since a product's result rounded to
// the next product's operand may land on the neighbouring 16-bit value; a
// fn the policy left alone, and other dtypes, by their own.
TEST(Precision, AnF32ResultOfAWidenedFnIsJudgedByThePolicysTolerance) {
  const ir::Module m = checked();
  const ir::Module b = with_precision(m, Precision::kBF16), h = with_precision(m, Precision::kF16);
  EXPECT_EQ(judged_dtype(b, *b.find("mm"), DType::F32), DType::BF16);
  EXPECT_EQ(judged_dtype(b, *b.find("caller"), DType::F32), DType::BF16);  // through the call
  EXPECT_EQ(judged_dtype(h, *h.find("mm"), DType::F32), DType::F16);
  EXPECT_EQ(judged_dtype(m, *m.find("mm"), DType::F32), DType::F32);
  EXPECT_EQ(judged_dtype(b, *b.find("norm"), DType::F32), DType::F32);  // no product: as written
  EXPECT_EQ(judged_dtype(b, *b.find("mm64"), DType::F64), DType::F64);
}

TEST(Precision, AWideningProductSumsTheRoundedOperandsInF32) {
  const ir::Module m = checked();
  const DimEnv d = {{"M", 3}, {"K", 37}, {"N", 5}};
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-2, 2);
  HostTensor a(DType::F32, {3, 37}), w(DType::F32, {37, 5});
  for (int64_t i = 0; i < a.numel(); ++i) a.set(i, u(rng));
  for (int64_t i = 0; i < w.numel(); ++i) w.set(i, u(rng));
  auto f32 = interpret(m, "mm", {a, w}, d);
  ASSERT_TRUE(f32.ok()) << f32.status().message();
  for (DType narrow : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(narrow));
    auto got = interpret(with_precision(m, narrow == DType::BF16 ? Precision::kBF16 : Precision::kF16), "mm", {a, w}, d);
    ASSERT_TRUE(got.ok()) << got.status().message();
    ASSERT_EQ(got->dtype, DType::F32);
    int differ = 0;
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 5; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < 37; ++k) acc += round_to(narrow, a.get(i * 37 + k)) * round_to(narrow, w.get(k * 5 + j));
        const double want = 2 * static_cast<double>(static_cast<float>(acc));  // h + h, exact
        EXPECT_EQ(got->get(i * 5 + j), want) << i << "," << j;
        differ += got->get(i * 5 + j) != f32->get(i * 5 + j);
      }
    EXPECT_GT(differ, 10) << "the policy changed no product";
  }
}

}  // namespace
}  // namespace mlk
