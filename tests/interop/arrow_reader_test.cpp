// Tests for interop/arrow_reader.h that need no writer: the declaration's
// checks, the texts of types and rules, and streams too short or too wrong to
// be one (built as bytes here). Streams pyarrow writes are tested by
// tests/interop/arrow_stream_test.py (the test interop.arrow_stream).
#include "interop/arrow_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace mlk::arrow_ipc {
namespace {

using ::testing::HasSubstr;
using Bytes = std::vector<uint8_t>;

ColumnDecl col(std::string name, DType t, std::optional<int64_t> list = std::nullopt) {
  ColumnDecl c;
  c.name = std::move(name);
  c.dtype = t;
  c.list_size = list;
  return c;
}

Refinement rule(Refinement::Op op, double bound, std::string name = "") {
  Refinement r;
  r.op = op;
  r.bound = bound;
  r.bound_name = std::move(name);
  return r;
}

SchemaDecl one_column() {
  SchemaDecl d;
  d.columns.push_back(col("session_len", DType::I32));
  return d;
}

std::string refusal(const Bytes& b, const SchemaDecl& d = one_column()) {
  auto t = read_stream(b, d, "t.arrows");
  EXPECT_FALSE(t.ok());
  return t.ok() ? "" : t.status().message();
}

TEST(ArrowReader, TypeAndRuleTexts) {
  ColumnDecl c = col("embedding", DType::F16, 384);
  EXPECT_EQ(type_text(c), "FixedSizeList[F16, 384]");
  c.list_size.reset();
  EXPECT_EQ(type_text(c), "F16");
  EXPECT_EQ(rule_text(c, rule(Refinement::Op::kGe, 1)), "embedding >= 1");
  EXPECT_EQ(rule_text(c, rule(Refinement::Op::kNe, 0.5)), "embedding != 0.5");
  EXPECT_EQ(rule_text(c, rule(Refinement::Op::kLt, 8, "D")), "embedding < D");
  EXPECT_STREQ(op_text(Refinement::Op::kEq), "=");
  EXPECT_STREQ(op_text(Refinement::Op::kLe), "<=");
  EXPECT_STREQ(op_text(Refinement::Op::kGt), ">");
}

TEST(ArrowReader, DeclarationChecks) {
  EXPECT_EQ(validate_decl({}).message(), "schema declaration: no columns");
  SchemaDecl d = one_column();
  EXPECT_TRUE(validate_decl(d).ok());
  d.columns.push_back(d.columns[0]);
  EXPECT_EQ(validate_decl(d).message(), "schema declaration: column `session_len` is declared twice");
  d.columns[1] = col("", DType::I32);
  EXPECT_EQ(validate_decl(d).message(), "schema declaration: a column without a name");
  d.columns[1] = col("b", DType::U8);
  EXPECT_THAT(validate_decl(d).message(), HasSubstr("column `b` has type U8; columns are I32, I64, F16, BF16, F32, F64 or Bool"));
  d.columns[1] = col("b", DType::F16, -2);
  EXPECT_EQ(validate_decl(d).message(), "schema declaration: column `b` has list size -2; it must be at least 1");
  // The reader checks the declaration before it reads a byte.
  EXPECT_EQ(refusal({}, d), "schema declaration: column `b` has list size -2; it must be at least 1");
}

TEST(ArrowReader, NotAStream) {
  EXPECT_EQ(refusal({}), "t.arrows: empty stream: no Schema message");
  EXPECT_EQ(refusal({0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0}), "t.arrows: empty stream: no Schema message");
  EXPECT_EQ(refusal({'P', 'A', 'R', '1', 0, 0, 0, 0}),
            "t.arrows: message 0 at byte 0: bad continuation marker: expected FFFFFFFF, found 31524150");
  EXPECT_EQ(refusal({0xFF, 0xFF}), "t.arrows: message 0 at byte 0: truncated: 2 bytes where a continuation marker belongs");
  EXPECT_EQ(refusal({0xFF, 0xFF, 0xFF, 0xFF, 16, 0, 0, 0, 1, 2}),
            "t.arrows: message 0 at byte 0: truncated: metadata of 16 bytes, 2 bytes remain");
  EXPECT_EQ(refusal({0xFF, 0xFF, 0xFF, 0xFF, 12, 0, 0, 0}),
            "t.arrows: message 0 at byte 0: metadata size 12 is not a positive multiple of 8");
  Bytes garbage{0xFF, 0xFF, 0xFF, 0xFF, 8, 0, 0, 0, 0x40, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_THAT(refusal(garbage), HasSubstr("t.arrows: message 0 at byte 0: invalid message metadata: "));
  EXPECT_EQ(refusal({0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0, 0}),
            "t.arrows: 1 bytes follow the end-of-stream marker at byte 0");
}

TEST(ArrowReader, UnreadableFile) {
  auto t = read_stream_file("/nonexistent/t.arrows", one_column());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), Status::Code::kIOError);
  EXPECT_THAT(t.status().message(), HasSubstr("/nonexistent/t.arrows"));
}

TEST(ArrowReader, LinkedVersion) { EXPECT_EQ(arrow_version(), "26.0.1"); }

}  // namespace
}  // namespace mlk::arrow_ipc
