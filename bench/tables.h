// The text tables `mlk bench` prints on stdout: median times, mlk's speedup
// over each peer, and the comparison with a baseline. Plain aligned columns
// (readable in a terminal and in a CI log), built from a BenchReport.
#pragma once

#include <string>
#include <vector>

#include "bench/report.h"

namespace mlk::bench {

// Median ms of mlk (with "tuned" / "default") and of each peer in `peers`.
// Cells: "-" not applicable, "n/a" failed, "=" the same kernel as mlk's.
std::string times_table(const BenchReport& r, const std::vector<std::string>& peers);

// peer median / mlk median per peer ("1.23x"; above 1: mlk is faster).
std::string ratios_table(const BenchReport& r, const std::vector<std::string>& peers);

// One row per compared kernel: baseline and current medians, the change, the
// bootstrap interval of the ratio, the Mann-Whitney p and the verdict.
std::string gate_table(const BenchReport& r);

// Why peers were not measured, one line each ("sgemm ...: Li2018: ...").
std::vector<std::string> peer_notes(const BenchReport& r);

// "0.1234", "12.35", "1235": four significant digits.
std::string fmt_ms(double ms);

}  // namespace mlk::bench
