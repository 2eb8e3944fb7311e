// Tests of the op registry (lang/ops.def, lang/ops.h) and the per-op IR
// verifier (lang/ir_verify.h): malformed nodes are caught, and everything the
// checker builds from the examples and golden files verifies.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "lang/frontend.h"
#include "lang/ir_verify.h"
#include "lang/ops.h"

namespace mlk {
namespace {

namespace fs = std::filesystem;

ir::Type f32(Shape s) { return {DType::F32, std::move(s)}; }

ir::NodeRef param(ir::Type t, int index = 0) {
  ir::Node n;
  n.op = ir::Op::kParam;
  n.type = std::move(t);
  n.index = index;
  return ir::make(std::move(n));
}

ir::Node node(ir::Op op, ir::Type t, std::vector<ir::NodeRef> operands, std::vector<int64_t> ints = {}) {
  ir::Node n;
  n.op = op;
  n.type = std::move(t);
  n.operands = std::move(operands);
  n.ints = std::move(ints);
  return n;
}

TEST(OpRegistry, RowsAreInEnumOrderAndBuiltinsRoundTrip) {
  int builtins = 0;
  for (size_t i = 0; i < ir::kOpCount; ++i) {
    ir::Op op = static_cast<ir::Op>(i);
    EXPECT_EQ(ir::op_info(op).op, op);
    if (ir::op_info(op).call != ir::OpCall::kBuiltin) {
      EXPECT_FALSE(ir::builtin_op(ir::op_name(op))) << ir::op_name(op);
      continue;
    }
    ++builtins;
    EXPECT_EQ(ir::builtin_op(ir::op_name(op)), op) << ir::op_name(op);
  }
  EXPECT_EQ(builtins, 29);  // phase-0/builtins.md, section 2
  EXPECT_EQ(ir::op_info(ir::Op::kConcat).arity, ir::kVariadic);
  EXPECT_EQ(ir::op_info(ir::Op::kWhere).arity, 3u);
  EXPECT_FALSE(ir::builtin_op("add"));  // an operator, not callable by name
}

TEST(IrVerify, AcceptsAWellFormedNode) {
  Shape s = {Dim::var("N"), Dim::constant(4)};
  auto x = param(f32(s));
  EXPECT_TRUE(ir::verify_node(node(ir::Op::kAdd, f32(s), {x, x})).ok());
  EXPECT_TRUE(ir::verify_node(node(ir::Op::kTranspose, f32({s[1], s[0]}), {x}, {1, 0})).ok());
  EXPECT_TRUE(ir::verify_node(node(ir::Op::kSum, f32({s[0]}), {x}, {1})).ok());
}

TEST(IrVerify, CatchesAWrongOperandCount) {
  auto x = param(f32({Dim::constant(3)}));
  Status st = ir::verify_node(node(ir::Op::kAdd, f32({Dim::constant(3)}), {x}));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Status::Code::kInternal);
  EXPECT_NE(st.message().find("`add` node"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("has 1 operand(s), but the op takes 2"), std::string::npos) << st.message();
}

TEST(IrVerify, CatchesMismatchedDtypes) {
  auto a = param(f32({Dim::constant(3)}));
  auto b = param({DType::I32, {Dim::constant(3)}}, 1);
  Status st = ir::verify_node(node(ir::Op::kMul, f32({Dim::constant(3)}), {a, b}));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("different dtype or rank"), std::string::npos) << st.message();
}

TEST(IrVerify, CatchesAShapeThatBreaksTheOpsRule) {
  Shape s = {Dim::var("N"), Dim::constant(4)};
  auto x = param(f32(s));
  // A transpose that forgot to permute its extents.
  Status st = ir::verify_node(node(ir::Op::kTranspose, f32(s), {x}, {1, 0}));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("extents permuted"), std::string::npos) << st.message();
  // A reduction whose result keeps the reduced axis.
  st = ir::verify_node(node(ir::Op::kSum, f32(s), {x}, {1}));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("unreduced extents"), std::string::npos) << st.message();
  // A comparison that is not Bool.
  st = ir::verify_node(node(ir::Op::kLt, f32(s), {x, x}));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("must be Bool"), std::string::npos) << st.message();
  // A softmax axis out of range.
  st = ir::verify_node(node(ir::Op::kSoftmax, f32(s), {x}, {2}));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("one axis in [0, 2)"), std::string::npos) << st.message();
}

TEST(IrVerify, ModuleCatchesAParameterOfTheWrongType) {
  ir::Function f;
  f.name = "f";
  f.params = {{"x", f32({Dim::constant(3)})}};
  f.result_type = f32({Dim::constant(3)});
  f.body = param(f32({Dim::constant(5)}));  // not the type of parameter 0
  ir::Module m;
  m.functions.push_back(f);
  Status st = ir::verify_module(m);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("in `f`: ir verifier: `param` node"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("is not parameter 0 of `f`"), std::string::npos) << st.message();
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(IrVerify, EverythingTheCheckerBuildsVerifies) {
  int functions = 0;
  for (const char* dir : {"examples", "tests/golden"})
    for (const auto& e : fs::directory_iterator(std::string(MLK_SOURCE_DIR) + "/" + dir)) {
      if (e.path().extension() != ".tl") continue;
      auto r = compile_source(e.path().filename().string(), read(e.path()));
      Status st = ir::verify_module(r.module);
      EXPECT_TRUE(st.ok()) << e.path() << ": " << st.message();
      functions += static_cast<int>(r.module.functions.size());
    }
  EXPECT_GT(functions, 20);
}

}  // namespace
}  // namespace mlk
