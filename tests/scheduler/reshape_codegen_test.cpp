// What the lowering of `reshape` leaves for code generation (scheduler/
// lower.cpp, Lowerer::reshape): with the output vectorised along its
// innermost axis, the split of one axis ([S, D] -> [S, H, D / H], attention's
// split_heads) loads whole vectors, and the merge of two ([B, H, S, E] ->
// [B, S, H * E], merge_heads) has no integer division left in a vector (x86
// has none: each lane would be a scalar division of some 15-40 cycles).
// Checked on Halide's lowered statement of an AVX2 target, which needs no
// such CPU; that the values are right is lowering_test's.
#include <gtest/gtest.h>

#include <string>

#include "lang/frontend.h"
#include "scheduler/lower.h"

namespace mlk {
namespace {

// Counts, in a lowered statement, the vector integer divisions and moduli,
// and the vector loads of one buffer by whether their index is a dense ramp.
class Census : public Halide::Internal::IRVisitor {
 public:
  explicit Census(std::string buffer) : buffer_(std::move(buffer)) {}
  int vector_int_divisions = 0, dense_loads = 0, other_vector_loads = 0;

 private:
  using Halide::Internal::IRVisitor::visit;
  static bool vector_int(const Halide::Type& t) { return t.lanes() > 1 && (t.is_int() || t.is_uint()); }
  void visit(const Halide::Internal::Div* op) override {
    if (vector_int(op->type)) ++vector_int_divisions;
    IRVisitor::visit(op);
  }
  void visit(const Halide::Internal::Mod* op) override {
    if (vector_int(op->type)) ++vector_int_divisions;
    IRVisitor::visit(op);
  }
  void visit(const Halide::Internal::Load* op) override {
    if (op->type.lanes() > 1 && op->name == buffer_) {
      const auto* ramp = op->index.as<Halide::Internal::Ramp>();
      if (ramp && Halide::Internal::is_const_one(ramp->stride)) ++dense_loads;
      else ++other_vector_loads;
    }
    IRVisitor::visit(op);
  }
  std::string buffer_;
};

// Lowers the one public fn `f` of `src`, everything inlined into the output,
// which is vectorised by 8 along its innermost axis, for AVX2.
Census census(const std::string& src, const std::string& input) {
  auto fe = compile_source("reshape.tl", src);
  EXPECT_TRUE(fe.ok()) << src;
  auto p = lower::lower_function(fe.module, "f");
  EXPECT_TRUE(p.ok()) << p.status().message();
  Halide::Func out = p->outputs[0].func;
  out.vectorize(out.args()[0], 8);
  std::vector<Halide::Argument> args;
  for (const Halide::ImageParam& in : p->inputs) args.push_back(in);
  for (const auto& [name, param] : p->dim_params) args.push_back(param);
  Halide::Module m = Halide::Pipeline(out).compile_to_module(args, "f", Halide::Target("x86-64-linux-avx2-fma-f16c"));
  Census c(input);
  for (const Halide::Internal::LoweredFunc& fn : m.functions()) fn.body.accept(&c);
  return c;
}

TEST(ReshapeCodegen, SplittingAnAxisLoadsWholeVectors) {
  Census c = census(
      "public fn f [S, D, H](x: Tensor[F32, [S, D], [D mod H = 0]]) -> Tensor[F32, [H, S, D / H]] =\n"
      "  transpose(reshape(x, [S, H, D / H]), [1, 0, 2])",
      "in_x");
  EXPECT_GT(c.dense_loads, 0);
  EXPECT_EQ(c.other_vector_loads, 0) << "a gather where the split index is a ramp";
  EXPECT_EQ(c.vector_int_divisions, 0);
}

TEST(ReshapeCodegen, MergingAxesDividesNoIntegerVector) {
  Census c = census(
      "public fn f [B, H, S, E](x: Tensor[F32, [B, H, S, E]]) -> Tensor[F32, [B, S, H * E]] =\n"
      "  reshape(transpose(x, [0, 2, 1, 3]), [B, S, H * E])",
      "in_x");
  EXPECT_EQ(c.vector_int_divisions, 0) << "each lane a scalar division";
  EXPECT_GT(c.dense_loads + c.other_vector_loads, 0) << "the output was not vectorised";
}

}  // namespace
}  // namespace mlk
