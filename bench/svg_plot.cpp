#include "bench/svg_plot.h"

#include "base/escape.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "base/status.h"

namespace mlk::bench {

namespace {

// Colour-blind-safe palette (Okabe-Ito), one colour per series, cycling.
const char* kColors[] = {"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"};

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

std::string ratio_label(double v) { return v >= 10 ? fmt("%.0fx", v) : v >= 1 ? fmt("%.2fx", v) : fmt("%.3gx", v); }

}  // namespace

std::string xml_escape(const std::string& s) { return markup_escape(s); }

std::string speedup_svg(const std::string& title, const std::string& subtitle, const std::vector<std::string>& series,
                        const std::vector<PlotRow>& rows) {
  // The axis: whole powers of two around every value and around [1/2, 2].
  double lo = 0.5, hi = 2;
  for (const auto& r : rows) {
    MLK_CHECK(r.values.size() == series.size(), "plot row has the wrong number of values");
    for (const auto& v : r.values)
      if (v) {
        MLK_CHECK(*v > 0, "plot value must be positive");
        lo = std::min(lo, *v);
        hi = std::max(hi, *v);
      }
  }
  const double llo = std::floor(std::log2(lo)), lhi = std::ceil(std::log2(hi));
  const double left = 250, plot_w = 620, bar_h = 14, bar_gap = 3, group_gap = 18, top = 92;
  auto x_of = [&](double v) { return left + (std::log2(v) - llo) / (lhi - llo) * plot_w; };
  const double group_h = static_cast<double>(series.size()) * (bar_h + bar_gap) - bar_gap;
  const double plot_h = static_cast<double>(rows.size()) * (group_h + group_gap);
  const double width = left + plot_w + 70, height = top + plot_h + 50;

  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
    << "\" viewBox=\"0 0 " << width << " " << height << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o << "<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">" << xml_escape(title) << "</text>\n";
  o << "<text x=\"10\" y=\"40\" fill=\"#555\">" << xml_escape(subtitle) << "</text>\n";
  // Legend.
  double lx = 10;
  for (size_t s = 0; s < series.size(); ++s) {
    o << "<rect x=\"" << lx << "\" y=\"52\" width=\"12\" height=\"12\" fill=\"" << kColors[s % 8] << "\"/>";
    o << "<text x=\"" << lx + 16 << "\" y=\"62\">" << xml_escape(series[s]) << "</text>\n";
    lx += 30 + 7.5 * static_cast<double>(series[s].size());
  }
  // Grid: one line per power of two, 1x bold.
  for (double e = llo; e <= lhi; e += 1) {
    double v = std::exp2(e), x = x_of(v);
    o << "<line x1=\"" << x << "\" y1=\"" << top - 6 << "\" x2=\"" << x << "\" y2=\"" << top + plot_h
      << "\" stroke=\"" << (e == 0 ? "#000" : "#ccc") << "\" stroke-width=\"" << (e == 0 ? 1.5 : 1) << "\"/>\n";
    o << "<text x=\"" << x << "\" y=\"" << top + plot_h + 16 << "\" text-anchor=\"middle\">"
      << (v >= 1 ? fmt("%.0fx", v) : fmt("%gx", v)) << "</text>\n";
  }
  o << "<text x=\"" << left + plot_w / 2 << "\" y=\"" << top + plot_h + 36
    << "\" text-anchor=\"middle\" fill=\"#555\">peer time / mlk time (log scale; right of 1x: mlk is faster)</text>\n";
  // Bars.
  const double x1 = x_of(1);
  for (size_t r = 0; r < rows.size(); ++r) {
    double gy = top + static_cast<double>(r) * (group_h + group_gap);
    o << "<text x=\"" << left - 8 << "\" y=\"" << gy + group_h / 2 + 4 << "\" text-anchor=\"end\">"
      << xml_escape(rows[r].label) << "</text>\n";
    for (size_t s = 0; s < series.size(); ++s) {
      double y = gy + static_cast<double>(s) * (bar_h + bar_gap);
      const auto& v = rows[r].values[s];
      if (!v) {
        const auto& miss = rows[r].missing;
        std::string why = s < miss.size() && !miss[s].empty() ? miss[s] : "n/a";
        o << "<text x=\"" << x1 + 4 << "\" y=\"" << y + bar_h - 3 << "\" fill=\"#888\">" << xml_escape(series[s])
          << ": " << xml_escape(why) << "</text>\n";
        continue;
      }
      double xv = x_of(*v), x = std::min(x1, xv), w = std::max(1.0, std::abs(xv - x1));
      o << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << w << "\" height=\"" << bar_h << "\" fill=\""
        << kColors[s % 8] << "\"><title>" << xml_escape(rows[r].label + " vs " + series[s] + ": " + ratio_label(*v))
        << "</title></rect>\n";
      bool right = *v >= 1;
      o << "<text x=\"" << (right ? xv + 4 : xv - 4) << "\" y=\"" << y + bar_h - 3 << "\" text-anchor=\""
        << (right ? "start" : "end") << "\">" << ratio_label(*v) << "</text>\n";
    }
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace mlk::bench
