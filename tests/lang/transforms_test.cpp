// The transforms against oracles through the reference interpreter (F64):
// every `grad` of tests/transforms/ops_f64.tl against central finite
// differences of its loss, `value_and_grad`'s value against the loss, and
// every `vmap` against a loop over the batch. Also: the derived types, and
// that a transformed fn is an ordinary fn of the module (callable, hashed).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "lang/frontend.h"
#include "lang/interpreter.h"
#include "lang/ir_printer.h"

#ifndef MLK_SOURCE_DIR
#define MLK_SOURCE_DIR "."
#endif

namespace mlk {
namespace {

const ir::Module& module() {
  static const ir::Module m = [] {
    auto fe = compile_file(std::string(MLK_SOURCE_DIR) + "/tests/transforms/ops_f64.tl");
    EXPECT_TRUE(fe.ok());
    if (!fe.ok()) return ir::Module{};
    EXPECT_TRUE(fe->ok()) << fe->rendered();
    return fe->module;
  }();
  return m;
}

// Random inputs for `fn` under `dims`: floats in [-1, 1], integer indices in
// [0, V) for the dimension `index_extent` names.
std::vector<HostTensor> inputs_for(const ir::Function& fn, const DimEnv& dims, uint32_t seed,
                                   const std::string& index_extent = "V") {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<HostTensor> out;
  for (const auto& p : fn.params) {
    auto shape = concrete_shape(p.type.shape, dims);
    EXPECT_TRUE(shape.ok());
    HostTensor t(p.type.dtype, *shape);
    for (int64_t i = 0; i < t.numel(); ++i)
      t.set(i, is_float(p.type.dtype) ? u(rng) : static_cast<double>(rng() % dims.at(index_extent)));
    out.push_back(std::move(t));
  }
  return out;
}

// `dims` restricted to the dimension variables of `fn` (the interpreter
// refuses values for dimensions a fn does not have).
DimEnv dims_of(const ir::Module& m, const std::string& fn, const DimEnv& dims) {
  DimEnv out;
  const ir::Function* f = m.find(fn);
  for (const auto& v : f ? f->dim_vars : std::vector<std::string>{})
    if (dims.count(v)) out[v] = dims.at(v);
  return out;
}

Expected<HostTensor> run(const ir::Module& m, const std::string& fn, const std::vector<HostTensor>& in,
                         const DimEnv& dims) {
  return interpret(m, fn, in, dims_of(m, fn, dims));
}

double scalar(const ir::Module& m, const std::string& fn, const std::vector<HostTensor>& in, const DimEnv& dims) {
  auto r = run(m, fn, in, dims);
  EXPECT_TRUE(r.ok()) << fn << ": " << r.status().message();
  return r.ok() ? r->get(0) : NAN;
}

// (f(x + h e_i) - f(x - h e_i)) / 2h, with element i of x moved and put back.
double central_difference(HostTensor& x, int64_t i, double h, const std::function<double()>& f) {
  double v = x.get(i);
  x.set(i, v + h);
  double up = f();
  x.set(i, v - h);
  double down = f();
  x.set(i, v);
  return (up - down) / (2 * h);
}

// grad fns `grads[k]` of `loss` with respect to its parameters `wrt[k]`.
void expect_matches_finite_differences(const std::string& loss, const std::vector<std::string>& grads,
                                       const std::vector<int>& wrt, const DimEnv& dims, double tol = 1e-6,
                                       double h = 1e-6) {
  const ir::Module& m = module();
  const ir::Function* f = m.find(loss);
  ASSERT_NE(f, nullptr) << loss;
  auto in = inputs_for(*f, dims, 7);
  for (size_t k = 0; k < grads.size(); ++k) {
    auto g = run(m, grads[k], in, dims);
    ASSERT_TRUE(g.ok()) << grads[k] << ": " << g.status().message();
    HostTensor& x = in[wrt[k]];
    ASSERT_EQ(g->shape, x.shape) << grads[k];
    for (int64_t i = 0; i < x.numel(); ++i) {
      double fd = central_difference(x, i, h, [&] { return scalar(m, loss, in, dims); });
      EXPECT_NEAR(g->get(i), fd, tol * (1 + std::abs(fd))) << grads[k] << " element " << i;
    }
  }
}

TEST(Grad, ArithmeticMatchesFiniteDifferences) {
  expect_matches_finite_differences("arith", {"d_arith_a", "d_arith_b"}, {0, 1}, {{"N", 5}});
}
TEST(Grad, UnaryBuiltinsMatchFiniteDifferences) {
  expect_matches_finite_differences("unary", {"d_unary"}, {0}, {{"N", 6}});
}
TEST(Grad, MaxMinPowMatchFiniteDifferences) {
  expect_matches_finite_differences("binfns", {"d_binfns_a", "d_binfns_b"}, {0, 1}, {{"N", 5}});
}
TEST(Grad, WhereMatchesFiniteDifferences) {
  expect_matches_finite_differences("select", {"d_select_a", "d_select_b"}, {0, 1}, {{"N", 6}});
}
TEST(Grad, ReductionsMatchFiniteDifferences) {
  expect_matches_finite_differences("reductions", {"d_reductions"}, {0}, {{"N", 3}, {"C", 4}});
}
TEST(Grad, BroadcastMatchesFiniteDifferences) {
  expect_matches_finite_differences("bcast", {"d_bcast_x", "d_bcast_w", "d_bcast_s"}, {0, 1, 2}, {{"N", 2}, {"C", 3}});
}
TEST(Grad, MatmulsMatchFiniteDifferences) {
  expect_matches_finite_differences("products", {"d_products_a", "d_products_b", "d_products_c"}, {0, 1, 2},
                                    {{"B", 2}, {"M", 3}, {"K", 2}, {"N", 3}});
}
TEST(Grad, TransposeReshapeMatchFiniteDifferences) {
  expect_matches_finite_differences("layout", {"d_layout"}, {0}, {{"N", 2}, {"C", 3}});
}
TEST(Grad, SoftmaxMatchesFiniteDifferences) {
  expect_matches_finite_differences("soft", {"d_soft"}, {0}, {{"N", 3}, {"C", 4}});
}
TEST(Grad, GatherMatchesFiniteDifferences) {
  expect_matches_finite_differences("lookup", {"d_lookup"}, {0}, {{"V", 4}, {"I", 5}});
}
TEST(Grad, ConcatSliceRepeatMatchFiniteDifferences) {
  expect_matches_finite_differences("pieces", {"d_pieces_x", "d_pieces_y"}, {0, 1}, {{"N", 2}, {"C", 3}});
}
TEST(Grad, CastBetweenFloatsMatchesFiniteDifferences) {
  // Through F32: a wider step, so that F32 rounding does not swamp the
  // difference (exact for this quadratic but for that rounding).
  expect_matches_finite_differences("cast_twice", {"d_cast"}, {0}, {{"N", 4}}, 1e-3, 1e-2);
}
TEST(Grad, MlpThroughACallMatchesFiniteDifferences) {
  expect_matches_finite_differences("mlp_loss", {"d_mlp_w1", "d_mlp_b1", "d_mlp_w2"}, {1, 2, 3},
                                    {{"N", 3}, {"D", 2}, {"F", 4}});
}

TEST(Grad, ThroughACallOfAVmappedFnMatchesFiniteDifferences) {
  expect_matches_finite_differences("total_loss", {"d_total_w1", "d_total_w2"}, {1, 3},
                                    {{"N", 2}, {"D", 2}, {"F", 3}, {"B", 2}});
}

TEST(Grad, UnusedParameterGetsZeros) {
  const ir::Module& m = module();
  DimEnv dims = {{"N", 4}};
  auto in = inputs_for(*m.find("ignores"), dims, 5);
  auto g = run(m, "d_ignores", in, dims);
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_EQ(g->shape, std::vector<int64_t>{4});
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(g->get(i), 0.0);
}

TEST(Grad, ValueAndGradValueIsTheLoss) {
  const ir::Module& m = module();
  DimEnv dims = {{"N", 3}, {"D", 2}, {"F", 4}};
  auto in = inputs_for(*m.find("mlp_loss"), dims, 3);
  EXPECT_EQ(scalar(m, "mlp_value", in, dims), scalar(m, "mlp_loss", in, dims));
}

TEST(Grad, TypesAreTheWrtParameterTypes) {
  const ir::Module& m = module();
  const ir::Function* g = m.find("d_products_c");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->result_type.str(), "Tensor[F64, [B, N, M]]");
  EXPECT_EQ(g->params.size(), 3u);
  EXPECT_EQ(g->dim_vars, m.find("products")->dim_vars);
  // An ordinary fn: printed and hashed like any other.
  EXPECT_NE(ir::print_function(*g).find("d_products_c"), std::string::npos);
}

// Without `wrt`, grad and value_and_grad differentiate the first parameter
// (jax.grad's argnums=0) and vjp every float parameter; with records, the
// first parameter's float leaves, not the batch's.
TEST(Grad, WithoutWrtTheFirstParameter) {
  FrontendResult fe = compile_source("t.tl", R"(
record P [D] { w: Tensor[F32, [D]], b: Tensor[F32, [D]] }
record Batch [D] { x: Tensor[F32, [D]], y: Tensor[F32, [D]] }
fn loss [D](w: Tensor[F32, [D]], x: Tensor[F32, [D]]) -> Scalar[F32] = sum(w * x, axes=[0])
fn scaled [D](w: Tensor[F32, [D]], x: Tensor[F32, [D]]) -> Tensor[F32, [D]] = w * x
fn rloss [D](p: P[D], batch: Batch[D]) -> Scalar[F32] = sum(p.w * batch.x + p.b - batch.y, axes=[0])
fn g = grad(loss)
fn vg = value_and_grad(loss)
fn vj = vjp(scaled)
fn rg = grad(rloss)
)");
  ASSERT_TRUE(fe.ok()) << fe.rendered();
  const ir::Module& m = fe.module;
  EXPECT_TRUE(m.find("g")->more_results.empty());
  EXPECT_EQ(m.find("vg")->more_results.size(), 1u);  // the value, then d/dw
  EXPECT_EQ(m.find("vj")->more_results.size(), 1u);  // d/dw and d/dx
  EXPECT_EQ(m.find("rg")->more_results.size(), 1u);  // p.w and p.b; not batch.x, batch.y
  DimEnv dims = {{"D", 3}};
  auto in = inputs_for(*m.find("loss"), dims, 7);
  auto d = run(m, "g", in, dims);
  ASSERT_TRUE(d.ok()) << d.status().message();
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(d->get(i), in[1].get(i));  // d/dw sum(w * x) = x
}

// vjp fns `vjps[k]` of `fn` for its parameters `wrt[k]`: each takes fn's
// parameters and a cotangent g of its result; checked against central
// finite differences of sum(g * fn(x)).
void expect_vjp_matches_finite_differences(const std::string& fn, const std::vector<std::string>& vjps,
                                           const std::vector<int>& wrt, const DimEnv& dims) {
  const ir::Module& m = module();
  const ir::Function* f = m.find(fn);
  ASSERT_NE(f, nullptr) << fn;
  auto in = inputs_for(*f, dims, 13);
  auto y = run(m, fn, in, dims);
  ASSERT_TRUE(y.ok()) << fn << ": " << y.status().message();
  HostTensor g(y->dtype, y->shape);
  std::mt19937 rng(17);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int64_t i = 0; i < g.numel(); ++i) g.set(i, u(rng));
  auto inner = [&] {
    auto r = run(m, fn, in, dims);
    EXPECT_TRUE(r.ok());
    double s = 0;
    for (int64_t i = 0; r.ok() && i < g.numel(); ++i) s += g.get(i) * r->get(i);
    return s;
  };
  for (size_t k = 0; k < vjps.size(); ++k) {
    const ir::Function* v = m.find(vjps[k]);
    ASSERT_NE(v, nullptr) << vjps[k];
    ASSERT_EQ(v->params.size(), f->params.size() + 1) << vjps[k];
    EXPECT_EQ(v->params.back().type, f->result_type) << vjps[k];
    EXPECT_EQ(v->result_type, f->params[wrt[k]].type) << vjps[k];
    auto args = in;
    args.push_back(g);
    auto d = run(m, vjps[k], args, dims);
    ASSERT_TRUE(d.ok()) << vjps[k] << ": " << d.status().message();
    HostTensor& x = in[wrt[k]];
    ASSERT_EQ(d->shape, x.shape) << vjps[k];
    for (int64_t i = 0; i < x.numel(); ++i) {
      double fd = central_difference(x, i, 1e-6, inner);
      EXPECT_NEAR(d->get(i), fd, 1e-6 * (1 + std::abs(fd))) << vjps[k] << " element " << i;
    }
  }
}

// Odd extents throughout, so that no axis is confused with another.
TEST(Vjp, ElementwiseBuiltinsMatchFiniteDifferences) {
  expect_vjp_matches_finite_differences("elementwise", {"vjp_elementwise_a", "vjp_elementwise_b"}, {0, 1}, {{"N", 7}});
}
TEST(Vjp, SoftmaxMatmulReductionsMatchFiniteDifferences) {
  expect_vjp_matches_finite_differences("row_stats", {"vjp_row_stats_x", "vjp_row_stats_w"}, {0, 1},
                                        {{"N", 3}, {"C", 5}});
}
TEST(Vjp, GatherMatchesFiniteDifferences) {
  expect_vjp_matches_finite_differences("pick", {"vjp_pick"}, {0}, {{"V", 5}, {"E", 3}, {"I", 7}});
}
TEST(Vjp, ComposedFnMatchesFiniteDifferences) {
  expect_vjp_matches_finite_differences("gelu", {"vjp_gelu"}, {0}, {{"N", 3}, {"F", 5}});
}
TEST(Vjp, BroadcastMeanMinMatchFiniteDifferences) {
  expect_vjp_matches_finite_differences("stats", {"vjp_stats_x", "vjp_stats_w", "vjp_stats_s"}, {0, 1, 2},
                                        {{"N", 3}, {"C", 5}});
}
TEST(Vjp, ConcatSliceRepeatTransposeReshapeMatchFiniteDifferences) {
  expect_vjp_matches_finite_differences("joined", {"vjp_joined_x", "vjp_joined_y"}, {0, 1}, {{"N", 3}, {"C", 5}});
}
TEST(Vjp, BatchedMatmulMatchesFiniteDifferences) {
  expect_vjp_matches_finite_differences("batched", {"vjp_batched_a", "vjp_batched_b"}, {0, 1},
                                        {{"B", 3}, {"M", 5}, {"K", 7}, {"N", 3}});
}

TEST(Vjp, OfAScalarFnAtOneIsItsGrad) {
  const ir::Module& m = module();
  DimEnv dims = {{"N", 5}};
  auto in = inputs_for(*m.find("arith"), dims, 3);
  auto g = run(m, "d_arith_a", in, dims);
  in.push_back(HostTensor(DType::F64, {}));
  in.back().set(0, 1.0);
  auto v = run(m, "vjp_arith_a", in, dims);
  ASSERT_TRUE(g.ok() && v.ok());
  ASSERT_EQ(g->shape, v->shape);
  for (int64_t i = 0; i < g->numel(); ++i) EXPECT_EQ(g->get(i), v->get(i)) << i;
  EXPECT_EQ(m.find("vjp_arith_a")->params.back().name, "g");
}

// Slice `b` of axis `axis` of `t`.
HostTensor take(const HostTensor& t, int axis, int64_t b) {
  std::vector<int64_t> shape = t.shape;
  shape.erase(shape.begin() + axis);
  HostTensor out(t.dtype, shape);
  int64_t outer = 1, inner = 1;
  for (int k = 0; k < axis; ++k) outer *= t.shape[k];
  for (size_t k = axis + 1; k < t.shape.size(); ++k) inner *= t.shape[k];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) out.set(o * inner + i, t.get((o * t.shape[axis] + b) * inner + i));
  return out;
}

// `batched` (vmap of `fn` with `axes`, result batch at `out_axis`) against
// `fn` on each batch element.
void expect_matches_loop(const std::string& fn, const std::string& batched, const std::vector<int>& axes,
                         int out_axis, const DimEnv& dims, const std::string& batch) {
  const ir::Module& m = module();
  const ir::Function* vf = m.find(batched);
  ASSERT_NE(vf, nullptr) << batched;
  auto in = inputs_for(*vf, dims, 11);
  auto all = run(m, batched, in, dims);
  ASSERT_TRUE(all.ok()) << batched << ": " << all.status().message();
  for (int64_t b = 0; b < dims.at(batch); ++b) {
    std::vector<HostTensor> one;
    for (size_t j = 0; j < in.size(); ++j) one.push_back(axes[j] < 0 ? in[j] : take(in[j], axes[j], b));
    auto want = run(m, fn, one, dims);
    ASSERT_TRUE(want.ok()) << fn << ": " << want.status().message();
    HostTensor got = take(*all, out_axis, b);
    ASSERT_EQ(got.shape, want->shape);
    for (int64_t i = 0; i < got.numel(); ++i)
      EXPECT_NEAR(got.get(i), want->get(i), 1e-12 * (1 + std::abs(want->get(i)))) << batched << " b=" << b << " i=" << i;
  }
}

TEST(Vmap, MatchesALoopOverTheBatch) {
  DimEnv d = {{"N", 3}, {"C", 4}, {"B", 2}, {"S", 3}};
  expect_matches_loop("row_stats", "row_stats_x", {0, -1}, 0, d, "B");
  expect_matches_loop("row_stats", "row_stats_xw", {2, 1}, 1, d, "S");
  expect_matches_loop("row_stats", "row_stats_w", {-1, 0}, 0, d, "B");
}

TEST(Vmap, GatherMatchesALoopOverTheBatch) {
  DimEnv d = {{"V", 4}, {"E", 3}, {"I", 5}, {"B", 2}};
  expect_matches_loop("pick", "pick_t", {0, -1}, 0, d, "B");
  expect_matches_loop("pick", "pick_i", {-1, 0}, 0, d, "B");
  expect_matches_loop("pick", "pick_ti", {1, 0}, 0, d, "B");
}

TEST(Vmap, ComposesWithGrad) {
  DimEnv d = {{"N", 3}, {"D", 2}, {"F", 4}, {"B", 2}};
  expect_matches_loop("mlp_loss", "batch_loss", {0, -1, -1, -1}, 0, d, "B");
  expect_matches_loop("d_mlp_w1", "per_example_dw1", {0, -1, -1, -1}, 0, d, "B");
}

TEST(Vmap, TypeHasTheBatchDimension) {
  const ir::Function* f = module().find("row_stats_xw");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->params[0].type.str(), "Tensor[F64, [N, C, S]]");
  EXPECT_EQ(f->params[1].type.str(), "Tensor[F64, [C, S, N]]");
  EXPECT_EQ(f->result_type.str(), "Tensor[F64, [N, S]]");
}

}  // namespace
}  // namespace mlk
