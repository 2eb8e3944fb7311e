// Reshape round trips (lang/cancel_reshapes.h): a block over [B * S, F] rows
// used on a [B, S, F] batch loses both reshapes, reductions move to the
// batch's axes, and the values stay the same element for element (the
// interpreter on the fn as written and as rewritten); what cannot cancel,
// or would be computed twice, is left as it was.
#include <gtest/gtest.h>

#include <random>

#include "lang/cancel_reshapes.h"
#include "lang/frontend.h"
#include "lang/inline.h"
#include "lang/interpreter.h"
#include "lang/ir_printer.h"
#include "lang/ir_verify.h"
#include "lang/tensor.h"

namespace mlk {
namespace {

const char* kProgram =
    "fn gelu [N, F](x: Tensor[F32, [N, F]]) -> Tensor[F32, [N, F]] =\n"
    "  0.5 * x * (1.0 + erf(x * 0.7071067811865476))\n"
    "fn norm [N, D](x: Tensor[F32, [N, D]], g: Tensor[F32, [D]], eps: Scalar[F32]) -> Tensor[F32, [N, D]] =\n"
    "  let xc = x - broadcast(mean(x, axes=[1]), [N, D], axes=[0])\n"
    "  let inv = rsqrt(mean(xc * xc, axes=[1]) + broadcast(eps, [N]))\n"
    "  xc * broadcast(inv, [N, D], axes=[0]) * broadcast(g, [N, D], axes=[1])\n"
    "public fn act [B, S, F](x: Tensor[F32, [B, S, F]]) -> Tensor[F32, [B, S, F]] =\n"
    "  reshape(gelu(reshape(x, [B * S, F])), [B, S, F])\n"
    "public fn ln [B, S, D](x: Tensor[F32, [B, S, D]], g: Tensor[F32, [D]], eps: Scalar[F32])\n"
    "    -> Tensor[F32, [B, S, D]] =\n"
    "  reshape(norm(reshape(x, [B * S, D]), g, eps), [B, S, D])\n"
    // A reshape that merges a reduced axis's neighbours cannot move inside.
    "public fn merged [B, S, D](x: Tensor[F32, [B, S, D]]) -> Tensor[F32, [B * D]] =\n"
    "  reshape(sum(x, axes=[1]), [B * D])\n"
    // The activation has a reader of its own shape (the product): moving the
    // reshape would compute gelu twice.
    "public fn shared [B, S, F](x: Tensor[F32, [B, S, F]], w: Tensor[F32, [F, F]]) -> Tensor[F32, [B, S, F]] =\n"
    "  let h = gelu(reshape(x, [B * S, F]))\n"
    "  reshape(h, [B, S, F]) + reshape(matmul(h, w), [B, S, F])\n";

ir::Module checked() {
  auto fe = compile_source("p.tl", kProgram);
  EXPECT_TRUE(fe.ok()) << fe.rendered();
  return fe.module;
}

// `fn` call-free, and with its round trips cancelled.
struct Rewritten {
  std::vector<ir::NodeRef> before, after;
  ir::Module module;  // `fn` replaced by its rewritten body
};

Rewritten rewrite(const ir::Module& m, const std::string& fn) {
  Provenance prov;
  std::string missing;
  auto bodies = inline_results(m, *m.find(fn), prov, missing);
  EXPECT_TRUE(bodies.has_value()) << missing;
  Rewritten r{*bodies, cancel_reshapes(*bodies), m};
  for (auto& f : r.module.functions)
    if (f.name == fn) f.body = r.after[0];
  return r;
}

std::string text_of(const ir::Module& m, const std::string& fn) { return ir::print_function(*m.find(fn)); }

HostTensor random(std::vector<int64_t> shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-3, 3);
  HostTensor t(DType::F32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, u(rng));
  return t;
}

void expect_same_values(const ir::Module& a, const ir::Module& b, const std::string& fn,
                        const std::vector<HostTensor>& in, const DimEnv& d) {
  auto x = interpret(a, fn, in, d), y = interpret(b, fn, in, d);
  ASSERT_TRUE(x.ok()) << x.status().message();
  ASSERT_TRUE(y.ok()) << y.status().message();
  ASSERT_EQ(x->numel(), y->numel());
  for (int64_t i = 0; i < x->numel(); ++i) ASSERT_EQ(x->get(i), y->get(i)) << "element " << i;
}

TEST(CancelReshapes, AnElementwiseBlockOverRowsLosesBothReshapes) {
  const ir::Module m = checked();
  Rewritten r = rewrite(m, "act");
  ASSERT_TRUE(ir::verify_module(r.module).ok()) << ir::verify_module(r.module).message();
  const std::string text = text_of(r.module, "act");
  EXPECT_EQ(text.find("reshape"), std::string::npos) << text;
  EXPECT_NE(text.find("erf"), std::string::npos) << text;
  expect_same_values(m, r.module, "act", {random({2, 3, 5}, 1)}, {{"B", 2}, {"S", 3}, {"F", 5}});
}

TEST(CancelReshapes, ALayerNormOverRowsReducesTheBatchsLastAxis) {
  const ir::Module m = checked();
  Rewritten r = rewrite(m, "ln");
  ASSERT_TRUE(ir::verify_module(r.module).ok()) << ir::verify_module(r.module).message();
  const std::string text = text_of(r.module, "ln");
  EXPECT_EQ(text.find("reshape"), std::string::npos) << text;
  EXPECT_NE(text.find("%1 = mean %0 ints=[2] : Tensor[F32, [B, S]]"), std::string::npos) << text;
  EXPECT_NE(text.find("%5 = mean %4 ints=[2] : Tensor[F32, [B, S]]"), std::string::npos) << text;
  HostTensor eps(DType::F32, {});
  eps.set(0, 1e-5);
  expect_same_values(m, r.module, "ln", {random({2, 3, 7}, 2), random({7}, 3), eps},
                     {{"B", 2}, {"S", 3}, {"D", 7}});
}

TEST(CancelReshapes, WhatCannotCancelOrWouldBeComputedTwiceIsLeftAsWritten) {
  const ir::Module m = checked();
  for (const char* fn : {"merged", "shared"}) {
    Rewritten r = rewrite(m, fn);
    ASSERT_EQ(r.after.size(), r.before.size());
    EXPECT_EQ(r.after[0], r.before[0]) << fn << ": " << text_of(r.module, fn);
  }
}

}  // namespace
}  // namespace mlk
