#include "bench/tables.h"

#include <algorithm>
#include <cstdio>

#include "base/columns.h"

namespace mlk::bench {

namespace {

using Row = std::vector<std::string>;

// Left-aligned columns separated by two spaces; no trailing blanks.
std::string render(const std::vector<Row>& rows) { return aligned_columns(rows); }

const VariantResult* peer(const KernelResult& k, const std::string& name) {
  for (const auto& p : k.peers)
    if (p.name == name) return &p;
  return nullptr;
}

std::string cell(const KernelResult& k, const std::string& name, bool ratio) {
  const VariantResult* p = peer(k, name);
  if (!p) return "-";
  if (p->error.rfind("same as mlk", 0) == 0) return "=";
  if (p->error.rfind("not applicable", 0) == 0) return "-";
  if (!p->measured() || !k.mlk.measured()) return "n/a";
  if (!ratio) return fmt_ms(p->median_ms());
  char b[32];
  std::snprintf(b, sizeof b, "%.2fx", p->median_ms() / k.mlk.median_ms());
  return b;
}

std::string fmt_g(const char* f, double v) {
  char b[48];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

std::string p_text(double p) { return p < 1e-6 ? "<1e-6" : fmt_g("%.2g", p); }

}  // namespace

std::string fmt_ms(double ms) { return fmt_g("%.4g", ms); }

std::string times_table(const BenchReport& r, const std::vector<std::string>& peers) {
  std::vector<Row> rows;
  Row h = {"kernel", "mlk ms"};
  for (const auto& p : peers) h.push_back(p + " ms");
  rows.push_back(h);
  for (const auto& k : r.kernels) {
    Row row = {k.name, (k.mlk.measured() ? fmt_ms(k.mlk.median_ms()) : "n/a") + " (" + k.variant + ")"};
    for (const auto& p : peers) row.push_back(cell(k, p, false));
    rows.push_back(row);
  }
  return render(rows);
}

std::string ratios_table(const BenchReport& r, const std::vector<std::string>& peers) {
  std::vector<Row> rows;
  Row h = {"kernel"};
  for (const auto& p : peers) h.push_back("vs " + p);
  rows.push_back(h);
  for (const auto& k : r.kernels) {
    Row row = {k.name};
    for (const auto& p : peers) row.push_back(cell(k, p, true));
    rows.push_back(row);
  }
  return render(rows);
}

std::string gate_table(const BenchReport& r) {
  std::vector<Row> rows = {{"kernel", "mode", "baseline ms", "now ms", "change", "99% CI of ratio", "p(slower)", "verdict"}};
  for (const auto& k : r.kernels) {
    if (!k.comparison) continue;
    const KernelComparison& c = *k.comparison;
    const Comparison& shown = c.confirm ? *c.confirm : c.first;
    std::string verdict = c.verdict;
    if (c.verdict == "regression") verdict = "REGRESSION (confirmed by a re-measurement)";
    if (c.verdict == "unconfirmed")
      verdict = "ok (first measurement " + change_text(c.first.ratio) + ", not confirmed by a re-measurement)";
    if (c.verdict == "ok" && c.inconclusive && c.confirm)
      verdict = "ok (first measurement " + change_text(c.first.ratio) + ", inconclusive, not confirmed by a re-measurement)";
    rows.push_back({k.name, c.first_ab ? "A/B" : "recorded", fmt_ms(shown.baseline_median_ms), fmt_ms(shown.current_median_ms), change_text(shown.ratio),
                    "[" + fmt_g("%.3f", shown.ci_low) + ", " + fmt_g("%.3f", shown.ci_high) + "]",
                    p_text(shown.p_slower), verdict});
  }
  return render(rows);
}

std::vector<std::string> peer_notes(const BenchReport& r) {
  std::vector<std::string> out;
  for (const auto& k : r.kernels)
    for (const auto& p : k.peers)
      if (!p.error.empty() && p.error.rfind("same as mlk", 0) != 0 && p.error.rfind("not applicable", 0) != 0)
        out.push_back(k.name + ": " + p.name + ": " + p.error);
  return out;
}

}  // namespace mlk::bench
