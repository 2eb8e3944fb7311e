// A grouped horizontal bar chart as SVG text, written by hand (no plotting
// library): one group of bars per kernel, one bar per peer, each bar the
// speedup of mlk over that peer on a log2 axis centred on 1x.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mlk::bench {

struct PlotRow {
  std::string label;                         // the kernel
  std::vector<std::optional<double>> values;  // per series; nullopt: not measured
  std::vector<std::string> missing;            // per series: drawn instead of a nullopt value ("n/a" if empty)
};

// `series` names the bars of each group (its size is each row's values' size).
// Values must be positive. Labels are XML-escaped. Returns a complete,
// standalone SVG document.
std::string speedup_svg(const std::string& title, const std::string& subtitle, const std::vector<std::string>& series,
                        const std::vector<PlotRow>& rows);

// `s` with &, <, >, " and ' escaped for XML text and attributes.
std::string xml_escape(const std::string& s);

}  // namespace mlk::bench
