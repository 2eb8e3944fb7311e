// history_svg (service/dashboard_html.h): a kernel's benchmark history drawn
// on the server, so that the page needs no script.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "service/dashboard_html.h"

namespace mlk::service::dashboard {

namespace {

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

std::string ms(double v) {
  char b[32];
  std::snprintf(b, sizeof b, v >= 100 ? "%.0f" : "%.3g", v);
  return b;
}

// The smallest of 1, 2, 5 times a power of ten that is at least `v` / 5:
// the axis then has at most five steps.
double tick_step(double v) {
  double raw = v / 5, p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

}  // namespace

std::string history_svg(const std::vector<HistoryPoint>& points) {
  const double width = 900, height = 320, left = 70, right = 20, top = 20, bottom = 56;
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  std::ostringstream o;
  o << "<svg class=\"history\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
    << "\" viewBox=\"0 0 " << width << " " << height << "\" font-family=\"sans-serif\" font-size=\"12\" role=\"img\""
    << " aria-label=\"median time per result\">\n";
  if (points.empty()) {
    o << "<text x=\"" << width / 2 << "\" y=\"" << height / 2 << "\" text-anchor=\"middle\" fill=\"#555\">"
      << "no results</text>\n</svg>\n";
    return o.str();
  }
  double hi = 0;
  for (const auto& p : points) hi = std::max({hi, p.high_ms, p.median_ms});
  if (!(hi > 0)) hi = 1;
  const double step = tick_step(hi), top_v = std::ceil(hi / step) * step;
  auto y_of = [&](double v) { return top + plot_h - v / top_v * plot_h; };
  const size_t n = points.size();
  auto x_of = [&](size_t i) { return n == 1 ? left + plot_w / 2 : left + plot_w * static_cast<double>(i) / (n - 1); };
  for (double v = 0; v <= top_v + step / 2; v += step) {
    o << "<line x1=\"" << left << "\" y1=\"" << num(y_of(v)) << "\" x2=\"" << left + plot_w << "\" y2=\""
      << num(y_of(v)) << "\" stroke=\"" << (v == 0 ? "#000" : "#ddd") << "\"/>";
    o << "<text x=\"" << left - 6 << "\" y=\"" << num(y_of(v) + 4) << "\" text-anchor=\"end\">" << ms(v)
      << "</text>\n";
  }
  o << "<text x=\"14\" y=\"" << top + plot_h / 2 << "\" transform=\"rotate(-90 14 " << top + plot_h / 2
    << ")\" text-anchor=\"middle\" fill=\"#555\">ms (median; bar: fastest to slowest sample)</text>\n";
  // A change of artifact (another cache key) between two results.
  for (size_t i = 1; i < n; ++i)
    if (points[i].cache_key != points[i - 1].cache_key) {
      double x = (x_of(i) + x_of(i - 1)) / 2;
      o << "<line class=\"artifact-change\" x1=\"" << num(x) << "\" y1=\"" << top << "\" x2=\"" << num(x)
        << "\" y2=\"" << top + plot_h << "\" stroke=\"#E69F00\" stroke-dasharray=\"4 3\"><title>another artifact"
        << "</title></line>\n";
    }
  o << "<polyline class=\"medians\" fill=\"none\" stroke=\"#0072B2\" stroke-width=\"1.5\" points=\"";
  for (size_t i = 0; i < n; ++i) o << (i ? " " : "") << num(x_of(i)) << "," << num(y_of(points[i].median_ms));
  o << "\"/>\n";
  for (size_t i = 0; i < n; ++i) {
    const HistoryPoint& p = points[i];
    const double x = x_of(i);
    o << "<line x1=\"" << num(x) << "\" y1=\"" << num(y_of(p.low_ms)) << "\" x2=\"" << num(x) << "\" y2=\""
      << num(y_of(p.high_ms)) << "\" stroke=\"#56B4E9\" stroke-width=\"3\"/>";
    o << "<circle class=\"result\" cx=\"" << num(x) << "\" cy=\"" << num(y_of(p.median_ms))
      << "\" r=\"4\" fill=\"#0072B2\"><title>" << html_escape(p.created) << ": " << ms(p.median_ms) << " ms ("
      << ms(p.low_ms) << "-" << ms(p.high_ms) << "), artifact " << html_escape(p.cache_key.substr(0, 12))
      << "</title></circle>\n";
  }
  o << "<text x=\"" << left << "\" y=\"" << height - 30 << "\">" << html_escape(points.front().created) << "</text>";
  if (n > 1)
    o << "<text x=\"" << left + plot_w << "\" y=\"" << height - 30 << "\" text-anchor=\"end\">"
      << html_escape(points.back().created) << "</text>";
  o << "<text x=\"" << left + plot_w / 2 << "\" y=\"" << height - 10 << "\" text-anchor=\"middle\" fill=\"#555\">"
    << n << " result" << (n == 1 ? "" : "s") << ", oldest left; dashed: another artifact</text>\n</svg>\n";
  return o.str();
}

}  // namespace mlk::service::dashboard
