// Diagnostics: user-facing errors with a source span, declared once in
// diagnostic_kinds.def, collected by a DiagnosticSink and rendered as
// `FILE:LINE:COL: error: MESSAGE`, the source line and a caret line.
#pragma once

#include <string>
#include <vector>

#include "lang/source.h"

namespace mlk {

enum class DiagKind {
#define DIAG(name, summary) name,
#include "lang/diagnostic_kinds.def"
#undef DIAG
  kCount
};

const char* diag_kind_name(DiagKind k);
std::vector<DiagKind> all_diag_kinds();

struct Diagnostic {
  DiagKind kind;
  Span span;
  std::string message;
};

// Collects diagnostics in emission order. Not thread-safe; one per check.
// A diagnostic identical to one already collected (kind, span and message:
// the same mistake reached again, as each call a `fold` expands to reaches
// its fn's) is dropped.
class DiagnosticSink {
 public:
  void error(DiagKind kind, Span span, std::string message) {
    for (const Diagnostic& d : diags_)
      if (d.kind == kind && d.span.begin == span.begin && d.span.end == span.end && d.message == message) return;
    diags_.push_back({kind, span, std::move(message)});
  }
  const std::vector<Diagnostic>& diagnostics() const { return diags_; }
  bool has_errors() const { return !diags_.empty(); }
  size_t count() const { return diags_.size(); }

 private:
  std::vector<Diagnostic> diags_;
};

// Renders one diagnostic: "name:line:col: error: message\n<source line>\n<caret>\n".
// The caret line underlines the span's part on its first line with ^~~~.
std::string render(const SourceFile& file, const Diagnostic& d);

// All diagnostics sorted by position (stable), rendered and concatenated.
std::string render_all(const SourceFile& file, std::vector<Diagnostic> diags);

}  // namespace mlk
