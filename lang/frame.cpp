// Dataframe parameters as plain data (lang/frame.h).
#include "lang/frame.h"

#include <algorithm>
#include <cmath>
#include <limits>

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

// The bound of `r`: its literal, or the value of its dimension in `dims`.
std::optional<double> bound_of(const ColumnRule& r, const std::map<std::string, int64_t>& dims) {
  if (r.dim.empty()) return r.literal;
  auto it = dims.find(r.dim);
  if (it == dims.end()) return std::nullopt;
  return static_cast<double>(it->second);
}

}  // namespace

bool passes_rules(const FrameColumn& c, double v, const std::map<std::string, int64_t>& dims) {
  for (const ColumnRule& r : c.rules) {
    auto b = bound_of(r, dims);
    if (!b) continue;
    bool ok = true;
    switch (r.op) {
      case ColumnRule::Op::kEq: ok = v == *b; break;
      case ColumnRule::Op::kNe: ok = v != *b; break;
      case ColumnRule::Op::kLt: ok = v < *b; break;
      case ColumnRule::Op::kLe: ok = v <= *b; break;
      case ColumnRule::Op::kGt: ok = v > *b; break;
      case ColumnRule::Op::kGe: ok = v >= *b; break;
    }
    if (!ok) return false;
  }
  return true;
}

void narrow_to_rules(const FrameColumn& c, const std::map<std::string, int64_t>& dims, double& lo, double& hi) {
  double rlo = -std::numeric_limits<double>::infinity(), rhi = std::numeric_limits<double>::infinity();
  for (const ColumnRule& r : c.rules) {
    auto b = bound_of(r, dims);
    if (!b) continue;
    switch (r.op) {
      case ColumnRule::Op::kEq: rlo = std::max(rlo, std::ceil(*b)), rhi = std::min(rhi, std::floor(*b)); break;
      case ColumnRule::Op::kNe: break;
      case ColumnRule::Op::kLt: rhi = std::min(rhi, std::ceil(*b) - 1); break;
      case ColumnRule::Op::kLe: rhi = std::min(rhi, std::floor(*b)); break;
      case ColumnRule::Op::kGt: rlo = std::max(rlo, std::floor(*b) + 1); break;
      case ColumnRule::Op::kGe: rlo = std::max(rlo, std::ceil(*b)); break;
    }
  }
  const double width = hi - lo;
  if (rlo > hi) {
    lo = rlo, hi = std::min(rhi, rlo + width);
  } else if (rhi < lo) {
    hi = rhi, lo = std::max(rlo, rhi - width);
  } else {
    lo = std::max(lo, rlo), hi = std::min(hi, rhi);
  }
}

std::string Frame::str() const {
  std::string s = "Dataframe[" + rows.str() + ", Schema{";
  for (size_t i = 0; i < columns.size(); ++i) {
    const FrameColumn& c = columns[i];
    std::string t = dtype_name(c.dtype);
    if (c.list_size) t = "FixedSizeList[" + t + ", " + c.list_size->str() + "]";
    if (c.categories) t = "Category[" + t + ", " + c.categories->str() + "]";
    if (c.nullable) t = "Nullable[" + t + "]";
    s += (i ? ", " : "") + c.name + ": " + t;
    for (size_t k = 0; k < c.rules.size(); ++k) s += std::string(k ? " && " : " where ") + rule_str(c, c.rules[k]);
  }
  return s + "}]";
}

std::string column_param_name(const std::string& frame, const std::string& column) { return frame + "_" + column; }

const FrameColumn* column_of_param(const std::vector<Frame>& frames, int param) {
  for (const Frame& f : frames)
    for (const FrameColumn& c : f.columns)
      if (param >= 0 && c.param == param) return &c;
  return nullptr;
}

std::string rule_str(const FrameColumn& c, const ColumnRule& r) {
  return c.name + " " + op_text(r.op) + " " + (r.dim.empty() ? r.text : r.dim);
}

}  // namespace mlk::ir
