// Dataframe parameters after the front end (lang/dataframe.h): the column
// tensor parameters, the ir::Frame kept per fn, and the reader's declaration
// made from it (interop/arrow_schema.h).
#include <gtest/gtest.h>

#include "interop/arrow_schema.h"
#include "lang/frontend.h"
#include "lang/interpreter.h"

namespace mlk {
namespace {

constexpr const char* kProgram = R"(
public fn f [N, D, K](w: Tensor[F32, [K]],
    df: Dataframe[N, Schema{ id: I64, m: Nullable[F32] where m > -0.5, x: I32 where x >= 0 && x < K,
                             e: FixedSizeList[F16, D], c: FixedSizeList[F32, 3] }],
    b: Tensor[F32, [D]]) -> Tensor[F32, [N]] =
  gather(w, to_tensor(df.x), axis=0) + sum(cast(to_tensor(df.e), F32), axes=[1]) + sum(to_tensor(df.c), axes=[1])
)";

TEST(Dataframe, ColumnsBecomeTensorParametersInPlace) {
  FrontendResult r = compile_source("f.tl", kProgram);
  ASSERT_TRUE(r.ok()) << r.rendered();
  const ir::Function& f = *r.module.find("f");
  std::vector<std::string> got;
  for (const auto& p : f.params) got.push_back(p.name + ": " + p.type.str());
  EXPECT_EQ(got, (std::vector<std::string>{"w: Tensor[F32, [K]]", "df_id: Tensor[I64, [N]]", "df_x: Tensor[I32, [N]]",
                                           "df_e: Tensor[F16, [N, D]]", "df_c: Tensor[F32, [N, 3]]",
                                           "b: Tensor[F32, [D]]"}));
  ASSERT_EQ(f.frames.size(), 1u);
  const ir::Frame& fr = f.frames[0];
  EXPECT_EQ(fr.str(),
            "Dataframe[N, Schema{id: I64, m: Nullable[F32] where m > -0.5, x: I32 where x >= 0 && x < K, "
            "e: FixedSizeList[F16, D], c: FixedSizeList[F32, 3]}]");
  std::vector<int> params;
  for (const auto& c : fr.columns) params.push_back(c.param);
  EXPECT_EQ(params, (std::vector<int>{1, -1, 2, 3, 4}));
}

TEST(Dataframe, TheDeclarationIsTheType) {
  FrontendResult r = compile_source("f.tl", kProgram);
  ASSERT_TRUE(r.ok()) << r.rendered();
  arrow_ipc::SchemaDecl d = arrow_ipc::schema_of(r.module.find("f")->frames[0], {{"K", 10}});
  EXPECT_TRUE(arrow_ipc::validate_decl(d).ok());
  EXPECT_EQ(d.rows_dim, "N");
  EXPECT_EQ(d.dims.at("K"), 10);
  ASSERT_EQ(d.columns.size(), 5u);
  EXPECT_EQ(arrow_ipc::type_text(d.columns[0]), "I64");
  EXPECT_TRUE(d.columns[1].nullable);
  EXPECT_EQ(arrow_ipc::rule_text(d.columns[1], d.columns[1].refinements[0]), "m > -0.5");
  EXPECT_DOUBLE_EQ(d.columns[1].refinements[0].bound, -0.5);
  ASSERT_EQ(d.columns[2].refinements.size(), 2u);
  EXPECT_EQ(d.columns[2].refinements[1].bound_dim, "K");
  EXPECT_EQ(arrow_ipc::rule_text(d.columns[2], d.columns[2].refinements[1]), "x < K");
  EXPECT_TRUE(d.columns[3].any_list_size);
  EXPECT_EQ(d.columns[3].list_dim, "D");
  EXPECT_EQ(d.columns[4].list_size, 3);
}

TEST(Dataframe, RunsLikeItsColumns) {
  // The interpreter sees only tensors: the same result as the fn written on them.
  FrontendResult r = compile_source("f.tl", R"(
public fn g [N](df: Dataframe[N, Schema{ a: F32, b: F32 }]) -> Tensor[F32, [N]] = to_tensor(df.a) - to_tensor(df.b)
)");
  ASSERT_TRUE(r.ok()) << r.rendered();
  HostTensor a(DType::F32, {3}), b(DType::F32, {3});
  for (int i = 0; i < 3; ++i) {
    a.set(i, 10.0 * i);
    b.set(i, i + 0.5);
  }
  auto out = interpret(r.module, "g", {a, b}, {});
  ASSERT_TRUE(out.ok()) << out.status().message();
  for (int i = 0; i < 3; ++i) EXPECT_DOUBLE_EQ(out->get(i), 10.0 * i - (i + 0.5));
}

}  // namespace
}  // namespace mlk
