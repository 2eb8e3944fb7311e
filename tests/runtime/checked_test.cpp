// mlk::rt::check_type (runtime/checked.h): a shape and dtype against a
// written type, its refinements, and the dims it binds; a handle (check)
// passed to a call skips the refinements it proved, and only those.
#include "runtime/checked.h"

#include <gtest/gtest.h>

#include "lang/frontend.h"
#include "runtime/boundary.h"
#include "tests/runtime/dl_tensor.h"

namespace mlk::rt {
namespace {

const char* kType = "Tensor[F16, [D, D], [D mod H = 0]]";

TEST(CheckedType, BindsEveryDimAndKeepsTheRefinements) {
  auto r = check_type(kType, to_dl(DType::F16), {384, 384}, {{"H", 12}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->type, "Tensor[F16, [D, D]]");
  EXPECT_EQ(r->refinements, std::vector<std::string>{"D mod H = 0"});
  EXPECT_EQ(r->dims, (DimEnv{{"D", 384}, {"H", 12}}));
}

TEST(CheckedType, RefusesWhatBreaksTheType) {
  auto refinement = check_type(kType, to_dl(DType::F16), {384, 384}, {{"H", 5}});
  ASSERT_FALSE(refinement.ok());
  EXPECT_NE(refinement.status().message().find("D mod H = 0"), std::string::npos) << refinement.status().message();
  auto dtype = check_type(kType, to_dl(DType::F32), {384, 384}, {{"H", 12}});
  ASSERT_FALSE(dtype.ok());
  EXPECT_EQ(dtype.status().message(), "a float32 tensor, but the type `" + std::string(kType) + "` is F16");
  auto rank = check_type(kType, to_dl(DType::F16), {384}, {{"H", 12}});
  ASSERT_FALSE(rank.ok());
  EXPECT_EQ(rank.status().message(), "a rank-1 tensor, but the type `" + std::string(kType) + "` has rank 2");
  auto extent = check_type(kType, to_dl(DType::F16), {384, 383}, {{"H", 1}});
  ASSERT_FALSE(extent.ok());
  // In the caller's terms: the tensor and the type, never a parameter `x` or a fn it did not write.
  EXPECT_EQ(extent.status().message(), "type `" + std::string(kType) +
                                           "`: the tensor's shape[1] = 383 but D = 384, bound by the tensor's shape[0]");
  auto given = check_type("Tensor[F32, [D]]", to_dl(DType::F32), {3}, {{"D", 4}});
  ASSERT_FALSE(given.ok());
  EXPECT_EQ(given.status().message(), "type `Tensor[F32, [D]]`: the tensor's shape[0] = 3 but D = 4, bound by dims");
  auto unbound = check_type(kType, to_dl(DType::F16), {384, 384}, {});
  ASSERT_FALSE(unbound.ok());
  EXPECT_EQ(unbound.status().message(), "type `" + std::string(kType) +
                                            "`: dimension `H` of the type is not an extent of the tensor; give its "
                                            "value in dims (dims={\"H\": VALUE})");
}

// A type that does not parse is said at its own column: a missing `]` at
// the end of the type, not at a column of a fn made up around it.
TEST(CheckedType, ASyntaxErrorIsSaidAtTheTypesColumn) {
  auto missing = check_type("Tensor[F16, [D, E]", to_dl(DType::F16), {4, 4}, {});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(),
            "type `Tensor[F16, [D, E]`, column 19: expected `]`, found the end of the type");
  auto inside = check_type("Tensor[F16, [D E]]", to_dl(DType::F16), {4, 4}, {});
  ASSERT_FALSE(inside.ok());
  EXPECT_EQ(inside.status().message().rfind("type `Tensor[F16, [D E]]`, column 16: ", 0), 0u) << inside.status().message();
}

TEST(CheckedType, DimensionExpressionsTakeParentheses) {
  auto r = check_type("Tensor[F32, [(S + 1) * 2]]", to_dl(DType::F32), {10}, {{"S", 4}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->dims, (DimEnv{{"S", 4}}));
  EXPECT_FALSE(check_type("Tensor[F32, [(S + 1) * 2]]", to_dl(DType::F32), {11}, {{"S", 4}}).ok());
}

// Anything but one Tensor or Scalar type: the type's own diagnostics, or
// text that would end the type and write another item.
TEST(CheckedType, ATypeThatDoesNotCheckIsAUsageError) {
  for (const char* bad : {"Tensor[F32, [D / H]]", "Tensor[F32", "fn f() -> Scalar[F32] = 0.0",
                          "Dataframe[N, Schema{a: I32}]", "Tensor[F32, [D]]) -> Scalar[F32] = 0.0\nfn g(y: Tensor[F32, [D]]",
                          "Tensor[F32, [D]]\nimport \"x.tl\" as m", "Linear[D, D]"}) {
    auto r = check_type(bad, to_dl(DType::F32), {4}, {{"D", 4}, {"H", 2}});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Status::Code::kUsage) << bad;
  }
}

// The fn the handles are passed to: its one refinement names D and H, not E.
const char* kWType = "Tensor[F32, [D, E], [D mod H = 0]]";
const ir::Function& project() {
  static const FrontendResult r = compile_source(
      "project.tl",
      "fn project [B, D, E, H](x: Tensor[F32, [B, D]], w: Tensor[F32, [D, E], [D mod H = 0]]) -> "
      "Tensor[F32, [B, E]] =\n  matmul(x, w)\n");
  EXPECT_TRUE(r.ok()) << r.rendered();
  return r.module.functions.front();
}
const std::string kSkipped = "refinement `D mod H = 0` of `w`: proven by its handle (mlk.check), not checked again";

TEST(CheckedHandle, ACallSkipsTheRefinementAHandleProvedAndSaysSo) {
  Dl x(DType::F32, {2, 384}), w(DType::F32, {384, 16});
  auto h = check(w.d, kWType, {{"H", 12}});
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->type.shape, (std::vector<int64_t>{384, 16}));
  CallArgs a;
  a.add(&x.d).add(*h);
  ASSERT_EQ(a.tensors.size(), 2u);
  EXPECT_EQ(a.tensors[1], &h->tensor);
  auto c = check_call(project(), a.tensors, nullptr, {{"H", 12}}, {}, a.proven);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->skipped, std::vector<std::string>{kSkipped});
  // The same tensors without the handle: every refinement checked, none listed.
  auto plain = check_call(project(), {&x.d, &w.d}, nullptr, {{"H", 12}});
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_TRUE(plain->skipped.empty());
  // What a handle proved is taken as proven (text compared with whitespace
  // aside): a refinement that does not hold passes unevaluated.
  Proven claimed{1, {"D  mod H=0"}, {{"D", 384}, {"H", 5}}, to_dl(DType::F32), {384, 16}};
  auto trusted = check_call(project(), {&x.d, &w.d}, nullptr, {{"H", 5}}, {}, {claimed});
  ASSERT_TRUE(trusted.ok()) << trusted.status().message();
  EXPECT_EQ(trusted->skipped, std::vector<std::string>{kSkipped});
  EXPECT_FALSE(check_call(project(), {&x.d, &w.d}, nullptr, {{"H", 5}}).ok());
}

TEST(CheckedHandle, AHandleWhoseDimsDifferFromTheCallsDoesNotSkip) {
  Dl x(DType::F32, {2, 384}), w(DType::F32, {384, 16});
  auto h = check(w.d, kWType, {{"H", 12}});
  ASSERT_TRUE(h.ok()) << h.status().message();
  CallArgs a;
  a.add(&x.d).add(*h);
  auto other = check_call(project(), a.tensors, nullptr, {{"H", 6}}, {}, a.proven);  // holds, checked again
  ASSERT_TRUE(other.ok()) << other.status().message();
  EXPECT_TRUE(other->skipped.empty());
  auto broken = check_call(project(), a.tensors, nullptr, {{"H", 5}}, {}, a.proven);
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().message(),
            "`project`: refinement `D mod H = 0` of `project` does not hold: D = 384, H = 5");
}

// A handle's tensor resized in place after the check (its DLTensor shares the
// shape array): the refinement is evaluated again, and refused when it fails.
TEST(CheckedHandle, ATensorChangedSinceTheCheckIsCheckedAsBefore) {
  Dl x(DType::F32, {2, 384}), w(DType::F32, {384, 16});
  auto h = check(w.d, kWType, {{"H", 12}});
  ASSERT_TRUE(h.ok()) << h.status().message();
  CallArgs a;
  a.add(&x.d).add(*h);
  w.t.shape[1] = 8;  // E only: D and H are as the handle bound them, but the shape is not
  auto narrowed = check_call(project(), a.tensors, nullptr, {{"H", 12}}, {}, a.proven);
  ASSERT_TRUE(narrowed.ok()) << narrowed.status().message();
  EXPECT_TRUE(narrowed->skipped.empty());
  x.t.shape[1] = w.t.shape[0] = 390;  // never read: only the records are checked
  auto resized = check_call(project(), a.tensors, nullptr, {{"H", 12}}, {}, a.proven);
  ASSERT_FALSE(resized.ok());
  EXPECT_EQ(resized.status().message(),
            "`project`: refinement `D mod H = 0` of `project` does not hold: D = 390, H = 12");
}

}  // namespace
}  // namespace mlk::rt
