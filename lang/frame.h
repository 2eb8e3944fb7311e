// The Dataframe parameters of a checked fn as plain data: what each column
// is, which tensor parameter carries it, and the value rules the reader of
// the table must check (docs/interop/arrow.md). Made by lang/dataframe.h;
// after the front end a Dataframe parameter is only its columns' tensor
// parameters (column_param_name), so nothing
// below the front end but the readers of tables looks at this.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lang/dim.h"
#include "lang/dtype.h"

namespace mlk::ir {

// `value OP bound`, for every value (every element of a FixedSizeList) of a
// column. The bound is a literal (`literal`, as written in `text`) or the
// dimension named `dim`.
struct ColumnRule {
  enum class Op { kEq, kNe, kLt, kLe, kGt, kGe };
  Op op = Op::kGe;
  double literal = 0;
  std::string text;  // the literal as written ("1", "-0.5"); empty for a dim
  std::string dim;   // the dimension, or empty for a literal
};

struct FrameColumn {
  std::string name;
  DType dtype = DType::F32;             // I32, I64, F16, BF16, F32, F64 or Bool (no rules on Bool)
  std::optional<Dim> list_size;         // FixedSizeList[dtype, list_size]: a dim or a constant
  // Category[I32, K]: a dictionary-encoded column; its tensor is the codes
  // (I32, [rows]), each in [0, K), and K (a dim or a constant) is bound to the
  // dictionary's size by the reader. Takes no rules. Never with list_size.
  std::optional<Dim> categories;
  bool nullable = false;
  std::vector<ColumnRule> rules;
  int param = -1;  // the index of its parameter (column_param_name) in the fn; -1 for a nullable column (no tensor)
};

struct Frame {
  std::string name;  // the parameter's name
  Dim rows;          // the row dimension: a dim or a constant
  std::vector<FrameColumn> columns;  // in declaration (and stream) order
  std::string str() const;           // "Dataframe[N, Schema{a: I32 where a >= 1, ...}]"
};

// The name of the tensor parameter of a column: "df_embedding" (Halide and
// C names take no `.`; a clash with another parameter is a Duplicate).
std::string column_param_name(const std::string& frame, const std::string& column);

// The column whose tensor is parameter `param` of a fn with `frames`, or
// nullptr (a parameter that is no column) — e.g. for the tuner, whose random
// inputs must obey the column's rules.
const FrameColumn* column_of_param(const std::vector<Frame>& frames, int param);

// A rule as written: "a >= 1", "a < D".
std::string rule_str(const FrameColumn& c, const ColumnRule& r);

// Whether `v` passes every rule of `c` whose bound is a literal or a
// dimension `dims` gives (a rule on a dimension it lacks is not checked).
bool passes_rules(const FrameColumn& c, double v, const std::map<std::string, int64_t>& dims);

// The integers of [lo, hi] the rules of `c` allow as an interval (`!=` is
// left to passes_rules). When the rules allow none of [lo, hi] (`a >= 5000`
// against [-1024, 1024]) the interval moves to the nearest allowed integers,
// keeping its width, so that the values still obey the rules.
void narrow_to_rules(const FrameColumn& c, const std::map<std::string, int64_t>& dims, double& lo, double& hi);

}  // namespace mlk::ir
