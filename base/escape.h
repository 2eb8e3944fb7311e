// Escaping text for markup: one function for the HTML of the dashboard
// (service/dashboard_html.h) and the SVG of `mlk bench` (bench/svg_plot.h).
#pragma once

#include <string>
#include <string_view>

namespace mlk {

// `s` with &, <, >, " and ' replaced by entities (&#39; for ', which HTML and
// XML both read), safe as element text and as a quoted attribute value.
std::string markup_escape(std::string_view s);

}  // namespace mlk
