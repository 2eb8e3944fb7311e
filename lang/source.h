// Source text of one .tl file, and spans into it.
//
// A Span is a half-open byte range [begin, end) into SourceFile::text(). Line and
// column numbers are 1-based; a column counts bytes, which is what the caret
// renderer needs (the language is ASCII outside comments).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace mlk {

struct Span {
  uint32_t begin = 0;
  uint32_t end = 0;
  static Span merge(Span a, Span b) { return {a.begin < b.begin ? a.begin : b.begin, a.end > b.end ? a.end : b.end}; }
};

struct LineCol {
  uint32_t line = 1;
  uint32_t col = 1;
};

class SourceFile {
 public:
  SourceFile(std::string name, std::string text);

  const std::string& name() const { return name_; }
  const std::string& text() const { return text_; }
  std::string_view slice(Span s) const;
  LineCol line_col(uint32_t offset) const;
  // The text of 1-based line `line`, without its newline.
  std::string_view line_text(uint32_t line) const;

 private:
  std::string name_;
  std::string text_;
  std::vector<uint32_t> line_starts_;  // byte offset of each line's first byte
};

}  // namespace mlk
