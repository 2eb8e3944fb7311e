// Plain text in aligned columns, for tables people read in a terminal or a
// header comment: each cell left-aligned, columns two spaces apart, no
// trailing blanks.
#pragma once

#include <string>
#include <vector>

namespace mlk {

// One line per row, each starting with `indent` and ending in "\n". Rows may
// have different lengths; a column is as wide as its widest cell.
std::string aligned_columns(const std::vector<std::vector<std::string>>& rows, const std::string& indent = "");

}  // namespace mlk
