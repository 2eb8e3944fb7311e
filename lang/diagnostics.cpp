#include "lang/diagnostics.h"

#include <algorithm>

namespace mlk {

const char* diag_kind_name(DiagKind k) {
  switch (k) {
#define DIAG(name, summary) \
  case DiagKind::name:      \
    return #name;
#include "lang/diagnostic_kinds.def"
#undef DIAG
    case DiagKind::kCount:
      break;
  }
  return "?";
}

std::vector<DiagKind> all_diag_kinds() {
  std::vector<DiagKind> v;
  for (int i = 0; i < static_cast<int>(DiagKind::kCount); ++i) v.push_back(static_cast<DiagKind>(i));
  return v;
}

std::string render(const SourceFile& file, const Diagnostic& d) {
  LineCol lc = file.line_col(d.span.begin);
  std::string out = file.name() + ":" + std::to_string(lc.line) + ":" + std::to_string(lc.col) +
                    ": error: " + d.message + "\n";
  std::string_view line = file.line_text(lc.line);
  out.append(line);
  out += "\n";
  std::string caret;
  for (uint32_t i = 0; i + 1 < lc.col && i < line.size(); ++i) caret += line[i] == '\t' ? '\t' : ' ';
  caret += '^';
  uint32_t end_col = file.line_col(d.span.end).line == lc.line ? file.line_col(d.span.end).col
                                                                : static_cast<uint32_t>(line.size()) + 1;
  for (uint32_t c = lc.col + 1; c < end_col; ++c) caret += '~';
  out += caret + "\n";
  return out;
}

std::string render_all(const SourceFile& file, std::vector<Diagnostic> diags) {
  std::stable_sort(diags.begin(), diags.end(),
                   [](const Diagnostic& a, const Diagnostic& b) { return a.span.begin < b.span.begin; });
  std::string out;
  for (const auto& d : diags) out += render(file, d);
  return out;
}

}  // namespace mlk
