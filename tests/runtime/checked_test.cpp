// mlk::rt::check_type (runtime/checked.h): a shape and dtype against a
// written type, its refinements, and the dims it binds.
#include "runtime/checked.h"

#include <gtest/gtest.h>

#include "runtime/boundary.h"

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
  EXPECT_NE(extent.status().message().find("x.shape[1] = 383 but D = 384"), std::string::npos)
      << extent.status().message();
  auto unbound = check_type(kType, to_dl(DType::F16), {384, 384}, {});
  ASSERT_FALSE(unbound.ok());
  EXPECT_NE(unbound.status().message().find("H"), std::string::npos) << unbound.status().message();
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

}  // namespace
}  // namespace mlk::rt
