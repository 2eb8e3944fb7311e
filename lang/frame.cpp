// Dataframe parameters as plain data (lang/frame.h).
#include "lang/frame.h"

namespace mlk::ir {

namespace {

const char* op_text(ColumnRule::Op op) {
  switch (op) {
    case ColumnRule::Op::kEq: return "=";
    case ColumnRule::Op::kNe: return "!=";
    case ColumnRule::Op::kLt: return "<";
    case ColumnRule::Op::kLe: return "<=";
    case ColumnRule::Op::kGt: return ">";
    case ColumnRule::Op::kGe: return ">=";
  }
  return "?";
}

}  // namespace

std::string Frame::str() const {
  std::string s = "Dataframe[" + rows.str() + ", Schema{";
  for (size_t i = 0; i < columns.size(); ++i) {
    const FrameColumn& c = columns[i];
    std::string t = dtype_name(c.dtype);
    if (c.list_size) t = "FixedSizeList[" + t + ", " + c.list_size->str() + "]";
    if (c.nullable) t = "Nullable[" + t + "]";
    s += (i ? ", " : "") + c.name + ": " + t;
    for (size_t k = 0; k < c.rules.size(); ++k)
      s += std::string(k ? " && " : " where ") + c.name + " " + op_text(c.rules[k].op) + " " +
           (c.rules[k].dim.empty() ? c.rules[k].text : c.rules[k].dim);
  }
  return s + "}]";
}

std::string column_param_name(const std::string& frame, const std::string& column) { return frame + "_" + column; }

}  // namespace mlk::ir
