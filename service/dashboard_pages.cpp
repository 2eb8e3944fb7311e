// The pages of the dashboard (service/dashboard.h): the namespace listing
// with its entries and benchmarked kernels, and a kernel's history. Every
// value from the store or the history is escaped (dashboard_html.h).
#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "base/time.h"
#include "cache/entry_meta.h"
#include "cache/entry_scan.h"
#include "service/bench_history.h"
#include "service/dashboard.h"
#include "service/dashboard_html.h"

namespace mlk::service::detail {

namespace {

using namespace dashboard;
using nlohmann::json;

constexpr size_t kMaxRows = 500;  // entries listed on one page; the rest are counted

std::string who(const Ctx& c) { return "token " + c.token.prefix + " (team " + c.token.team + ")"; }

std::string ms_text(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g ms", v);
  return b;
}

std::string kernel_link(const std::string& ns, const std::string& id, const std::string& target) {
  return "/ui/kernel?namespace=" + url_component(ns) + "&id=" + url_component(id) +
         (target.empty() ? "" : "&target=" + url_component(target));
}

std::string error_page_body(const std::string& message) {
  return "<p class=\"error\">" + html_escape(message) + "</p>\n";
}

// The namespaces `c.token` may read, with their usage: every one for an
// admin, else its team's and those that granted the team read access.
Expected<std::vector<cache::NamespaceUsage>> readable_namespaces(Ctx& c) {
  auto usage = c.store().usage();
  if (!usage.ok()) return usage.status();
  std::map<std::string, cache::NamespaceUsage> by_ns;
  for (const auto& u : *usage) by_ns[u.ns] = u;
  std::vector<cache::NamespaceUsage> out;
  auto add = [&](const std::string& ns) {
    auto it = by_ns.find(ns);
    out.push_back(it == by_ns.end() ? cache::NamespaceUsage{ns, 0, 0} : it->second);
  };
  if (has_scope(c.token.scopes, kScopeAdmin)) {
    for (const auto& [ns, u] : by_ns) out.push_back(u);
    if (!by_ns.count(c.token.team)) add(c.token.team);
    return out;
  }
  add(c.token.team);
  auto grants = c.tables().list_grants();
  if (!grants.ok()) return grants.status();
  for (const auto& g : *grants)
    if (g.grantee == c.token.team && g.revoked == 0 && g.ns != c.token.team) add(g.ns);
  return out;
}

std::string namespaces_nav(const Ctx& c, const std::vector<cache::NamespaceUsage>& all) {
  std::string o = "<h2>Namespaces</h2>\n<table id=\"namespaces\"><tr><th>namespace</th><th>entries</th><th>size</th></tr>\n";
  for (const auto& u : all)
    o += "<tr><td><a" + std::string(u.ns == c.ns ? " class=\"current\"" : "") + " href=\"/ui?namespace=" +
         html_escape(url_component(u.ns)) + "\">" + html_escape(u.ns) + "</a></td><td class=\"num\">" +
         std::to_string(u.entries) + "</td><td class=\"num\">" + format_bytes(u.charged()) + "</td></tr>\n";
  return o + "</table>\n";
}

std::string dims_text(const std::map<std::string, int64_t>& dims) {
  std::string s;
  for (const auto& [k, v] : dims) s += (s.empty() ? "" : ", ") + k + "=" + std::to_string(v);
  return s.empty() ? "-" : s;
}

// Text shown in a cell, at most 200 characters of it (a name is a writer's:
// a megabyte of `&` would grow fivefold escaped).
std::string clip(const std::string& s) { return s.size() <= 200 ? s : s.substr(0, 200) + "..."; }

// `j[name]` when it is a string, else "" (a writer's record may hold anything there).
std::string text_field(const json& j, const char* name) {
  if (!j.is_object()) return "";
  auto it = j.find(name);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// What a row of the entries table shows: only this is held per entry.
struct EntryRow {
  std::string fn, target, dims, verified, key;
  bool measured = false, verified_yes = false;
  int64_t size = 0, last_used = 0;
};

// The first kMaxRows entries of c.ns as listed, most recently used first;
// `history` maps a cache key to the kernel page of its benchmark history.
// The scan stops there, or once it has read as many bytes of manifests as
// a query may (4x --max-answer): reading an entry hashes and parses its
// manifest, so a page that read the whole namespace cost every load work
// in proportion to the namespace's size (review 17).
std::string entries_table(Ctx& c, const std::map<std::string, const BenchHistory::KernelSummary*>& history) {
  // Each shown row held as its few short cells.
  std::vector<EntryRow> rows;
  size_t damaged = 0;
  bool more = false;
  int64_t scanned_bytes = 0;
  const int64_t byte_cap = kScannedPerAnswerByte * c.api.options().max_answer_bytes;
  Status listed = cache::scan_entries(c.store(), c.ns, [&](cache::EntryInfo& e) {
    if (rows.size() + damaged >= kMaxRows || (scanned_bytes > 0 && scanned_bytes > byte_cap)) {
      more = true;
      return false;
    }
    scanned_bytes += std::max<int64_t>({e.record_bytes, static_cast<int64_t>(e.manifest.meta_json.size()), 64});
    if (e.damaged) {
      ++damaged;
      return true;
    }
    auto meta = cache::parse_entry_meta(e.manifest.meta_json);
    cache::EntryMeta m = meta.ok() ? *meta : cache::EntryMeta{};
    std::string verified = m.verification.str();
    rows.push_back({clip(m.fn.empty() ? "-" : m.fn), clip(m.target.empty() ? "-" : m.target), clip(dims_text(m.dims)),
                    clip(verified), e.key, m.measured, m.verification.present && verified != "none", e.size,
                    e.last_used});
    return true;
  });
  if (!listed.ok()) return error_page_body("cannot list the entries: " + listed.message());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return a.last_used != b.last_used ? a.last_used > b.last_used : a.key < b.key;
  });
  std::string o = "<h2>Entries of " + html_escape(c.ns) + "</h2>\n";
  if (rows.empty()) return o + "<p class=\"note\" id=\"no-entries\">no entries</p>\n";
  o += "<table id=\"entries\"><tr><th>fn</th><th>target</th><th>shape</th><th>measured</th><th>verified</th>"
       "<th>size</th><th>last use</th><th>key</th><th>history</th></tr>\n";
  for (const EntryRow& e : rows) {
    auto h = history.find(e.key);
    o += "<tr class=\"entry\"><td>" + html_escape(e.fn) + "</td><td>" + html_escape(e.target) + "</td><td>" +
         html_escape(e.dims) + "</td><td class=\"" + (e.measured ? "yes\">yes" : "no\">no") + "</td><td class=\"" +
         (e.verified_yes ? "yes" : "no") + "\">" + html_escape(e.verified) + "</td><td class=\"num\">" +
         format_bytes(e.size) + "</td><td>" + html_escape(iso_time(e.last_used)) + "</td><td class=\"key\" title=\"" +
         html_escape(e.key) + "\">" + html_escape(e.key.substr(0, 12)) + "</td><td>" +
         (h == history.end() ? "-"
                             : "<a href=\"" + html_escape(kernel_link(c.ns, h->second->kernel, h->second->target)) +
                                   "\">plot</a>") +
         "</td></tr>\n";
  }
  o += "</table>\n";
  if (more)
    o += "<p class=\"note\" id=\"more-entries\">more entries than this page reads: the first " + std::to_string(rows.size()) +
         " listed are shown; <code>GET /v1/entries</code> pages through them all</p>\n";
  if (damaged) o += "<p class=\"note\">" + std::to_string(damaged) + " damaged entries not shown</p>\n";
  return o;
}

std::string kernels_table(const Ctx& c, const std::vector<BenchHistory::KernelSummary>& kernels) {
  std::string o = "<h2>Benchmark history</h2>\n";
  if (kernels.empty())
    return o + "<p class=\"note\" id=\"no-kernels\">no results pushed (<code>mlk bench --record FILE --push</code>)</p>\n";
  o += "<table id=\"kernels\"><tr><th>kernel</th><th>target</th><th>results</th><th>latest median</th>"
       "<th>latest</th></tr>\n";
  for (const auto& k : kernels)
    o += "<tr class=\"kernel\"><td><a href=\"" + html_escape(kernel_link(c.ns, k.kernel, k.target)) + "\">" +
         html_escape(clip(k.kernel)) + "</a></td><td>" + html_escape(clip(k.target)) + "</td><td class=\"num\">" +
         std::to_string(k.results) + "</td><td class=\"num\">" + ms_text(k.last_median_ms) + "</td><td>" +
         html_escape(k.last_created) + "</td></tr>\n";
  return o + "</table>\n";
}

}  // namespace

ApiResponse index_page(Ctx& c) {
  auto all = readable_namespaces(c);
  if (!all.ok()) return html_response(http_status(all.status()), page("error", who(c), error_page_body(all.status().message())));
  std::vector<BenchHistory::KernelSummary> kernels;
  std::string history_note;
  if (c.api.options().bench_history_path.empty()) {
    history_note = "<h2>Benchmark history</h2>\n<p class=\"note\">this server keeps no benchmark history</p>\n";
  } else {
    auto h = bench_history_at(c.api.options().bench_history_path);
    auto k = h.ok() ? (*h)->kernels(c.ns) : Expected<std::vector<BenchHistory::KernelSummary>>(h.status());
    if (!k.ok()) history_note = "<h2>Benchmark history</h2>\n" + error_page_body(k.status().message());
    else kernels = std::move(*k);
  }
  std::map<std::string, const BenchHistory::KernelSummary*> history;  // cache key -> its kernel (a link made when shown)
  for (const auto& k : kernels)
    for (const auto& key : k.cache_keys) history.emplace(key, &k);
  std::string body = "<h1>Namespace " + html_escape(c.ns) + "</h1>\n" + namespaces_nav(c, *all) +
                     entries_table(c, history) + (history_note.empty() ? kernels_table(c, kernels) : history_note);
  return html_response(200, page("namespace " + c.ns, who(c), body));
}

ApiResponse kernel_page(Ctx& c) {
  auto q = [&](const char* name) {
    auto it = c.req.query.find(name);
    return it == c.req.query.end() ? std::string() : it->second;
  };
  const std::string id = q("id"), target = q("target");
  if (id.empty()) return html_response(400, page("error", who(c), error_page_body("/ui/kernel needs ?id=KERNEL (a kernel of /ui)")));
  if (c.api.options().bench_history_path.empty())
    return html_response(404, page("error", who(c), error_page_body("this server keeps no benchmark history")));
  auto h = bench_history_at(c.api.options().bench_history_path);
  auto text = h.ok() ? (*h)->history(c.ns, id, target, 200) : Expected<std::string>(h.status());
  if (!text.ok()) return html_response(http_status(text.status()), page("error", who(c), error_page_body(text.status().message())));
  json doc = json::parse(*text, nullptr, false);
  const json results = doc.is_object() && doc["results"].is_array() ? doc["results"] : json::array();
  std::vector<HistoryPoint> points;
  std::string rows;
  for (const json& r : results) {  // newest first
    double median = r.value("median_ms", json(0.0)).is_number() ? r["median_ms"].get<double>() : 0.0;
    double lo = median, hi = median;
    for (const json& s : r.value("samples_ms", json::array()))
      if (s.is_number()) lo = std::min(lo, s.get<double>()), hi = std::max(hi, s.get<double>());
    const std::string created = text_field(r, "created"), key = text_field(r, "cache_key");
    points.push_back({created, median, lo, hi, key});
    const json machine = r.value("machine", json::object()), versions = r.value("versions", json::object());
    rows += "<tr class=\"result\"><td>" + html_escape(clip(created)) + "</td><td>" + html_escape(clip(text_field(r, "target"))) +
            "</td><td>" + html_escape(clip(text_field(r, "variant"))) + "</td><td class=\"num\">" + ms_text(median) +
            "</td><td class=\"num\">" + std::to_string(r.value("samples_ms", json::array()).size()) + "</td><td>" +
            html_escape(clip(text_field(machine, "cpu"))) + "</td><td>" +
            html_escape(clip(text_field(versions, "mlk"))) + "</td><td class=\"key\" title=\"" +
            html_escape(key) + "\">" + html_escape(key.substr(0, 12)) + "</td></tr>\n";
  }
  std::reverse(points.begin(), points.end());
  std::string body = "<p><a href=\"/ui?namespace=" + html_escape(url_component(c.ns)) + "\">&larr; namespace " +
                     html_escape(c.ns) + "</a></p>\n<h1 id=\"kernel\">" + html_escape(id) +
                     (target.empty() ? "" : " on " + html_escape(target)) + "</h1>\n" + history_svg(points);
  if (results.empty()) body += "<p class=\"note\" id=\"no-results\">no results for this kernel in " + html_escape(c.ns) + "</p>\n";
  else
    body += "<h2>Results, newest first</h2>\n<table id=\"results\"><tr><th>created</th><th>target</th><th>variant</th>"
            "<th>median</th><th>samples</th><th>cpu</th><th>mlk</th><th>artifact</th></tr>\n" + rows + "</table>\n";
  return html_response(200, page(id, who(c), body));
}

}  // namespace mlk::service::detail
