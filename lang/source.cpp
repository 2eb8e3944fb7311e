#include "lang/source.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace mlk {

SourceFile::SourceFile(std::string name, std::string text) : name_(std::move(name)), text_(std::move(text)) {
  line_starts_.push_back(0);
  for (uint32_t i = 0; i < text_.size(); ++i)
    if (text_[i] == '\n') line_starts_.push_back(i + 1);
}

std::string_view SourceFile::slice(Span s) const {
  uint32_t b = std::min<uint32_t>(s.begin, text_.size());
  uint32_t e = std::min<uint32_t>(std::max(s.end, b), text_.size());
  return std::string_view(text_).substr(b, e - b);
}

LineCol SourceFile::line_col(uint32_t offset) const {
  offset = std::min<uint32_t>(offset, text_.size());
  auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
  uint32_t line = static_cast<uint32_t>(it - line_starts_.begin());
  return {line, offset - line_starts_[line - 1] + 1};
}

std::string_view SourceFile::line_text(uint32_t line) const {
  if (line == 0 || line > line_starts_.size()) return {};
  uint32_t b = line_starts_[line - 1];
  uint32_t e = line < line_starts_.size() ? line_starts_[line] : text_.size();
  while (e > b && (text_[e - 1] == '\n' || text_[e - 1] == '\r')) --e;
  return std::string_view(text_).substr(b, e - b);
}

}  // namespace mlk
