// The routes of the benchmark history (service/bench_history.h, docs/ci.md):
//   POST /v1/bench/results[?baseline_set=NAME]   an mlk bench report (write scope)
//   GET  /v1/bench/history?kernel=ID&target=T&limit=N&before=ID
//        (bounded by max_answer_bytes: `truncated`, and `next` to pass as `before`)
//   GET  /v1/bench/baselines/NAME                 a baseline set as an mlk bench report
// with the same tokens and namespaces (?namespace=NS) as the rest of the API.
#include <algorithm>
#include <cstdlib>

#include "service/api_internal.h"
#include "service/bench_history.h"

namespace mlk::service::detail {

namespace {

std::string query(const Ctx& c, const std::string& name) {
  auto it = c.req.query.find(name);
  return it == c.req.query.end() ? "" : it->second;
}

bool plain_name(const std::string& s) {
  if (s.empty() || s.size() > 128) return false;
  for (char ch : s)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.')) return false;
  return true;
}

}  // namespace

ApiResponse bench_route(Ctx& c, const std::string& arg) {
  const bool read = c.req.method == "GET" || c.req.method == "HEAD";
  const std::string& path = c.api.options().bench_history_path;
  std::string set = query(c, "baseline_set");
  if (arg == "results" && read) return method_not_allowed(c, "POST");
  if (arg != "results" && !read) return method_not_allowed(c, "GET, HEAD");
  const bool is_set = arg.rfind("baselines/", 0) == 0;
  if (is_set) set = arg.substr(10);
  if (arg != "results" && arg != "history" && !is_set)
    return reject(c, 404, "no_route", "no route /v1/bench/" + arg.substr(0, 100) +
                                          " (results, history, baselines/NAME; docs/ci.md)");
  if (!set.empty() && !plain_name(set))
    return reject(c, 400, "bad_name", "baseline set `" + set.substr(0, 100) + "` is not 1-128 of [A-Za-z0-9._-]");
  int limit = 100;
  if (auto l = query(c, "limit"); !l.empty()) {
    char* end = nullptr;
    limit = static_cast<int>(std::strtol(l.c_str(), &end, 10));
    if (*end || limit < 1 || limit > 10000) return reject(c, 400, "bad_query", "limit `" + l + "` is not 1-10000");
  }
  int64_t before = 0;
  if (auto b = query(c, "before"); !b.empty()) {
    char* end = nullptr;
    before = std::strtoll(b.c_str(), &end, 10);
    if (*end || before < 1 || b.size() > 18) return reject(c, 400, "bad_query", "before `" + b.substr(0, 40) + "` is not a result id (a `next`)");
  }
  if (auto r = authorize(c, read ? kScopeRead : kScopeWriteEntries)) return *r;
  if (path.empty()) return reject(c, 404, "no_history", "this server keeps no benchmark history");
  auto h = bench_history_at(path);
  if (!h.ok()) return error_response(http_status(h.status()), h.status().message());
  if (arg == "results") {
    // A report is at most 16 MiB (or --max-body): it is parsed whole, twice.
    Body b = c.body.read(std::min<int64_t>(c.api.options().max_body_bytes, int64_t{16} << 20));
    if (b.outcome != Body::kOk) return body_rejection(c, b);
    NamespaceGuard guard;  // the history is charged to the namespace's quota like its blobs
    if (auto r = lock_namespace(c, guard)) return *r;
    if (auto r = check_quota(c, BenchHistory::charge_of(b.bytes), "", {})) return *r;
    auto n = (*h)->add(c.ns, b.bytes, set);
    if (!n.ok()) return error_response(http_status(n.status()), n.status().message());
    return json_text(201, "{\"stored\":" + std::to_string(*n) + "}");
  }
  const int64_t max = c.api.options().max_answer_bytes;
  auto text = is_set ? (*h)->baseline(c.ns, set, max)
                     : (*h)->history(c.ns, query(c, "kernel"), query(c, "target"), limit, before, max);
  if (text.status().code() == Status::Code::kUnsupported) return reject(c, 413, "too_large", text.status().message());
  if (!text.ok()) return error_response(http_status(text.status()), text.status().message());
  return json_text(200, *text);
}

}  // namespace mlk::service::detail
