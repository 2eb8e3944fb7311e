// The HTML of the dashboard of `mlk serve` (service/dashboard.cpp, docs/ci.md
// "The dashboard"): escaping, the page frame with the embedded style sheet,
// the pages themselves and the server-side SVG plot of a kernel's benchmark
// history. No external assets and no script: every page is one document.
//
// Contract: every text that comes from a store, a token or a request reaches
// the page through html_escape (text and quoted attribute values) or, inside
// a link, url_component and then html_escape. Internal to service/.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mlk::service::dashboard {

// `s` with &, <, >, " and ' replaced by entities: safe as element text and
// as a double- or single-quoted attribute value.
std::string html_escape(std::string_view s);
// `s` percent-encoded for a query value: everything but [A-Za-z0-9._~-].
std::string url_component(std::string_view s);
// "1.5 KiB", "12 B", "3.2 MiB".
std::string format_bytes(int64_t bytes);

// The whole document: <title>TITLE - mlk</title>, the embedded style sheet,
// a header naming the signed-in token (`who`, escaped here; empty: nobody
// signed in, no sign-out button) and `body`, which is HTML already.
std::string page(const std::string& title, const std::string& who, const std::string& body);

// The sign-in form; `message` (escaped here) above it when not empty, `next`
// the page to return to after signing in (a /ui path).
std::string login_body(const std::string& message, const std::string& next);

// One result of a kernel's history, oldest first in the plot.
struct HistoryPoint {
  std::string created;    // as recorded (ISO 8601)
  double median_ms = 0;   // > 0
  double low_ms = 0;      // the fastest sample (median when none)
  double high_ms = 0;     // the slowest sample (median when none)
  std::string cache_key;  // what was timed; a change of artifact is marked
};
// A line of medians with a bar from the fastest to the slowest sample per
// result, on a linear axis from 0; a complete <svg> element (class
// "history"). An empty list draws "no results".
std::string history_svg(const std::vector<HistoryPoint>& points);

}  // namespace mlk::service::dashboard
