// Escaping text for markup: one function for the HTML of the dashboard
// (service/dashboard_html.h) and the SVG of `mlk bench` (bench/svg_plot.h);
// and the one test of text a writer chose before a terminal may print it.
#pragma once

#include <string>
#include <string_view>

namespace mlk {

// `s` with &, <, >, " and ' replaced by entities (&#39; for ', which HTML and
// XML both read), safe as element text and as a quoted attribute value.
std::string markup_escape(std::string_view s);

// True when `s` holds a control character a terminal would obey: C0
// (below 0x20), DEL, or C1 written as UTF-8 (U+0080-U+009F, the bytes C2 80
// to C2 9F). Used wherever a writer's words are stored to be printed:
// provenance, worker fingerprints, benchmark reports, signature namespaces.
bool has_control_char(std::string_view s);

// `s` with every byte that is not printable ASCII (C0, DEL, and any byte of
// 0x80 and above, C1 among them) replaced by `?`: a writer's words as a log
// line that cannot drive the terminal that shows it.
std::string ascii_printable(std::string_view s);

}  // namespace mlk
