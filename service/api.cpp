// Api: routing, authentication, errors, and the small routes (health,
// whoami, status, metrics). Blobs and entries are in api_objects.cpp, the
// ccache protocol in api_ccache.cpp.
#include "service/api.h"

#include <openssl/evp.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/json.h"
#include "base/log.h"
#include "base/sha256.h"
#include "service/api_internal.h"
#include "service/dashboard_session.h"
#include "service/bench_history.h"
#include "service/dashboard.h"

namespace mlk::service {

using nlohmann::json;
using detail::Ctx;

Body StringBody::read(int64_t max_bytes) {
  Body b;
  if (static_cast<int64_t>(bytes_.size()) > max_bytes) {
    b.outcome = Body::kTooLarge;
    return b;
  }
  b.bytes = std::move(bytes_);
  b.sha256 = sha256_hex(b.bytes);
  return b;
}

ApiResponse error_response(int status, const std::string& message) {
  ApiResponse r;
  r.status = status;
  r.body = dump_json(json{{"error", message}}) + "\n";  // a key echoed from the path may be invalid UTF-8
  return r;
}

int http_status(const Status& s) {
  switch (s.code()) {
    case Status::Code::kOk: return 200;
    case Status::Code::kNotFound: return 404;
    case Status::Code::kInvalidArgument:
    case Status::Code::kUsage: return 400;
    case Status::Code::kIOError: return s.message().find("is full") != std::string::npos ? 507 : 503;
    default: return 500;
  }
}

Api::Api(ApiOptions options, SessionPool& pool, Metrics& metrics)
    : opt_(std::move(options)), pool_(pool), metrics_(metrics) {}

std::mutex& Api::namespace_lock(const std::string& ns) {
  std::lock_guard<std::mutex> lock(locks_mu_);
  auto& m = ns_locks_[ns];
  if (!m) m = std::make_unique<std::mutex>();
  return *m;
}

namespace detail {

ApiResponse json_text(int status, std::string text) {
  ApiResponse r;
  r.status = status;
  r.body = std::move(text) + "\n";
  return r;
}

ApiResponse reject(Ctx& c, int status, const std::string& reason, const std::string& message) {
  c.api.metrics().reject(c.ns, reason);
  return error_response(status, message);
}

ApiResponse method_not_allowed(Ctx& c, const std::string& allow) {
  ApiResponse r = reject(c, 405, "method",
                         c.req.method.substr(0, 20) + " is not allowed on " + c.req.path.substr(0, 200) + " (allowed: " + allow + ")");
  r.headers.push_back({"Allow", allow});
  return r;
}

ApiResponse body_rejection(Ctx& c, const Body& b) {
  if (b.outcome == Body::kTooLarge)
    return reject(c, 413, "too_large",
                  "the request body is larger than this server accepts (" + std::to_string(c.api.options().max_body_bytes) +
                      " bytes, `mlk serve --max-body`); nothing was stored");
  return reject(c, 400, "broken_body", "the request body did not arrive whole (" + b.why + "); nothing was stored");
}

Status validate_entry_key(const std::string& key) {
  bool ok = !key.empty() && key.size() <= 256 && key[0] != '.';
  for (char c : key)
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-');
  if (!ok)
    return Status::InvalidArgument("entry key `" + key.substr(0, 80) +
                                   "` must be 1-256 characters of [A-Za-z0-9._-], not starting with `.`");
  return Status::Ok();
}

// The token in an Authorization header: "Bearer TOKEN", or "Basic
// base64(USER:TOKEN)" (what ccache sends for http://USER:TOKEN@HOST/...).
std::string token_of(const std::string& header) {
  auto starts = [&](const char* scheme) {
    size_t n = std::strlen(scheme);
    if (header.size() <= n) return false;
    for (size_t i = 0; i < n; ++i)
      if (std::tolower(static_cast<unsigned char>(header[i])) != scheme[i]) return false;
    return true;
  };
  if (starts("bearer ")) return header.substr(7);
  if (!starts("basic ")) return "";
  std::string b64 = header.substr(6);
  if (b64.empty() || b64.size() > 1024 || b64.size() % 4 != 0) return "";
  std::string raw(b64.size(), '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(raw.data()), reinterpret_cast<const unsigned char*>(b64.data()),
                          static_cast<int>(b64.size()));
  if (n < 0) return "";
  size_t pad = b64.size() - b64.find_last_not_of('=') - 1;
  raw.resize(static_cast<size_t>(n) - std::min<size_t>(pad, 2));
  size_t colon = raw.find(':');
  return colon == std::string::npos ? "" : raw.substr(colon + 1);
}

std::optional<ApiResponse> authorize(Ctx& c, Scopes need) {
  std::string token = token_of(c.req.authorization);
  if (token.empty()) {
    ApiResponse r = reject(c, 401, "unauthenticated",
                           c.req.authorization.empty()
                               ? "this request needs an `Authorization: Bearer TOKEN` header (tokens come from `mlk token create`)"
                               : "the Authorization header is neither `Bearer TOKEN` nor `Basic` with the token as password");
    r.headers.push_back({"WWW-Authenticate", "Bearer realm=\"mlk\""});
    return r;
  }
  c.lease.emplace(c.api.pool().acquire());
  auto found = c.tables().find_token(token);
  if (!found.ok()) return reject(c, http_status(found.status()), "store_error", found.status().message());
  if (!found->has_value()) {
    ApiResponse r = reject(c, 401, "unauthenticated", "unknown or revoked token (see `mlk token list`)");
    r.headers.push_back({"WWW-Authenticate", "Bearer realm=\"mlk\", error=\"invalid_token\""});
    return r;
  }
  c.token = **found;
  return authorize_token(c, need);
}

std::optional<ApiResponse> authorize_token(Ctx& c, Scopes need) {
  c.ns = c.token.team;  // until the namespace is known, rejections count against the token's team
  auto it = c.req.query.find("namespace");
  std::string ns = it == c.req.query.end() ? c.token.team : it->second;
  Status valid = cache::validate_namespace(ns);
  if (!valid.ok()) return reject(c, 400, "bad_request", valid.message());
  if (ns != c.token.team && !has_scope(c.token.scopes, kScopeAdmin)) {
    auto refused = [&](const std::string& reason, const std::string& why) {
      return reject(c, 403, reason,
                    "token " + c.token.prefix + " belongs to team `" + c.token.team + "` and may not use namespace `" +
                        ns + "`" + why);
    };
    if (need != kScopeRead) return refused("forbidden", "");
    auto g = c.tables().find_grant(ns, c.token.team);
    if (!g.ok()) return reject(c, http_status(g.status()), "store_error", g.status().message());
    if (!g->has_value()) return refused("forbidden", "");
    if ((*g)->revoked != 0) return refused("grant_revoked", "; its read grant to team `" + c.token.team + "` was revoked");
    c.granted = true;
  }
  c.ns = ns;
  for (Scope s : kAllScopes)
    if ((need & s) && !has_scope(c.token.scopes, s))
      return reject(c, 403, "forbidden",
                    "token " + c.token.prefix + " lacks the scope `" + scopes_string(s) + "` (it has " +
                        (c.token.scopes ? scopes_string(c.token.scopes) : std::string("none")) + ")");
  if (c.granted) c.api.metrics().grant_read(c.ns, c.token.team);
  return std::nullopt;
}

std::optional<ApiResponse> lock_namespace(Ctx& c, NamespaceGuard& guard) {
  guard.local = std::unique_lock<std::mutex>(c.api.namespace_lock(c.ns));
  auto shared = c.tables().lock_namespace(c.ns);
  if (!shared.ok()) return reject(c, http_status(shared.status()), "store_error", shared.status().message());
  guard.shared = std::move(*shared);
  return std::nullopt;
}

std::optional<ApiResponse> check_quota(Ctx& c, int64_t delta_charge, const std::string& replacing_key,
                                       const std::set<std::string>& unstaging) {
  auto limit = c.api.options().quotas.limit_for(c.ns);
  if (!limit) return std::nullopt;
  auto charged = c.store().namespace_bytes(c.ns);
  if (!charged.ok()) return reject(c, http_status(charged.status()), "store_error", charged.status().message());
  auto staged = c.tables().staged_bytes(c.ns, unstaging);
  if (!staged.ok()) return reject(c, http_status(staged.status()), "store_error", staged.status().message());
  int64_t old = 0;
  if (!replacing_key.empty()) {
    auto e = c.store().show_entry(c.ns, replacing_key);
    if (e.ok()) old = e->size + e->record_bytes;
  }
  int64_t history = 0;  // the benchmark history's rows of the namespace count too
  if (const std::string& path = c.api.options().bench_history_path; !path.empty()) {
    auto h = bench_history_at(path);
    if (!h.ok()) return reject(c, http_status(h.status()), "store_error", h.status().message());
    auto n = (*h)->bytes(c.ns);
    if (!n.ok()) return reject(c, http_status(n.status()), "store_error", n.status().message());
    history = *n;
  }
  int64_t after = *charged + *staged + history - old + delta_charge;
  if (after <= *limit) return std::nullopt;
  int64_t now = *charged + *staged + history;
  return reject(c, 507, "quota",
                "namespace `" + c.ns + "` is over its quota: it holds " + std::to_string(now) + " bytes of " +
                    std::to_string(*limit) + " allowed, and this request would make it " + std::to_string(after) +
                    "; nothing was stored (delete entries, or ask for a larger `--quota`)");
}

}  // namespace detail

namespace {

using namespace detail;

// bytes: what the namespace's entries are charged (blobs and manifests);
// record_bytes: the manifests' part of it.
json usage_row(const std::string& ns, int64_t entries, const cache::NamespaceUsage& u, int64_t staged,
               std::optional<int64_t> quota) {
  return json{{"namespace", ns},
              {"entries", entries},
              {"bytes", u.charged()},
              {"record_bytes", u.record_bytes},
              {"staged_bytes", staged},
              {"quota_bytes", quota ? json(*quota) : json(nullptr)}};
}

ApiResponse status_route(Ctx& c) {
  if (auto r = authorize(c, kScopeRead)) return *r;
  bool admin = has_scope(c.token.scopes, kScopeAdmin) && !c.req.query.count("namespace");
  auto usage = c.store().usage();
  if (!usage.ok()) return reject(c, http_status(usage.status()), "store_error", usage.status().message());
  auto staged = c.tables().staged_by_namespace();
  if (!staged.ok()) return reject(c, http_status(staged.status()), "store_error", staged.status().message());
  json rows = json::array();
  bool own_listed = false;
  for (const auto& u : *usage) {
    if (!admin && u.ns != c.ns) continue;
    own_listed = own_listed || u.ns == c.ns;
    rows.push_back(usage_row(u.ns, u.entries, u, (*staged)[u.ns], c.api.options().quotas.limit_for(u.ns)));
  }
  if (!own_listed && !admin)
    rows.push_back(usage_row(c.ns, 0, cache::NamespaceUsage{}, (*staged)[c.ns], c.api.options().quotas.limit_for(c.ns)));
  json out = {{"namespaces", rows}};
  if (admin) {
    auto st = c.store().stats();
    if (!st.ok()) return reject(c, http_status(st.status()), "store_error", st.status().message());
    out["store"] = {{"entries", st->entries},
                    {"blobs", st->blobs},
                    {"blob_bytes", st->blob_bytes},
                    {"unreferenced_blobs", st->unreferenced_blobs},
                    {"quarantined", st->quarantined}};
  }
  return json_text(200, out.dump());
}

ApiResponse metrics_route(Ctx& c) {
  if (auto r = authorize(c, kScopeAdmin)) return *r;
  auto usage = c.store().usage();
  if (!usage.ok()) return reject(c, http_status(usage.status()), "store_error", usage.status().message());
  ApiResponse r;
  r.body = c.api.metrics().render(*usage);
  r.content_type = "text/plain; version=0.0.4";
  return r;
}

ApiResponse whoami_route(Ctx& c) {
  if (auto r = authorize(c, 0)) return *r;
  json scopes = json::array();
  for (Scope s : kAllScopes)
    if (c.token.scopes & s) scopes.push_back(scopes_string(s));
  return json_text(200, json{{"team", c.token.team}, {"namespace", c.ns}, {"scopes", scopes}, {"token", c.token.prefix}}.dump());
}

struct Route {
  const char* prefix;  // exact path, or a prefix ending in '/'
  const char* name;    // metrics label
  std::vector<std::string> methods;
};

const std::vector<Route>& routes() {
  static const std::vector<Route> r = {
      {"/healthz", "health", {"GET", "HEAD"}},
      {"/metrics", "metrics", {"GET", "HEAD"}},
      {"/v1/whoami", "whoami", {"GET", "HEAD"}},
      {"/v1/status", "status", {"GET", "HEAD"}},
      {"/v1/blobs/", "blobs", {"GET", "HEAD", "PUT"}},
      {"/v1/entries", "query", {"GET", "HEAD"}},
      {"/v1/entries/", "entries", {"GET", "HEAD", "PUT", "DELETE"}},
      {"/ccache/", "ccache", {"GET", "HEAD", "PUT", "DELETE"}},
      {"/v1/bench/", "bench", {"GET", "HEAD", "POST"}},  // service/api_bench.cpp
      {"/ui", "dashboard", {"GET", "HEAD"}},            // service/dashboard.cpp
      {"/ui/", "dashboard", {"GET", "HEAD", "POST"}},
      {"/v1/jobs/", "jobs", {"GET", "HEAD", "POST"}},    // service/api_jobs.cpp
  };
  return r;
}

}  // namespace

std::vector<RouteInfo> route_table() {
  std::vector<RouteInfo> out;
  for (const auto& r : routes()) out.push_back({r.prefix, r.name, r.methods});
  return out;
}

std::vector<std::string> route_prefixes() {
  std::vector<std::string> out;
  for (const auto& r : routes()) out.push_back(r.prefix);
  return out;
}

namespace {

ApiResponse no_route(Ctx& c) {
  return reject(c, 404, "no_route",
                "no route " + c.req.method + " " + c.req.path.substr(0, 200) +
                    "; the API is under /v1/ (blobs, entries, status, whoami, bench, jobs), /ccache/ and /metrics, the "
                    "dashboard under /ui (every route: docs/openapi.yaml)");
}

// The route of `path` (the first whose exact path or prefix matches), or null.
const Route* find_route(const std::string& path) {
  for (const auto& r : routes()) {
    const std::string p = r.prefix;
    if (p.back() == '/' ? path.rfind(p, 0) == 0 : path == p) return &r;
  }
  return nullptr;
}

// Whether `route` takes `method`; `allow` gets the methods it takes ("GET, HEAD").
bool takes_method(const Route& route, const std::string& method, std::string& allow) {
  bool allowed = false;
  for (const auto& m : route.methods) {
    allowed = allowed || m == method;
    allow += (allow.empty() ? "" : ", ") + m;
  }
  return allowed;
}

ApiResponse dispatch(Ctx& c) {
  const std::string& path = c.req.path;
  const Route* route = find_route(path);
  const std::string prefix = route ? route->prefix : "";
  std::string arg = route && prefix.back() == '/' ? path.substr(prefix.size()) : "";
  if (!route) return no_route(c);
  c.route = route->name;
  std::string allow;
  if (!takes_method(*route, c.req.method, allow)) return method_not_allowed(c, allow);
  const std::string& m = c.req.method;
  bool read = m == "GET" || m == "HEAD";
  // A browser's request from another site: its cached Basic credentials (a
  // token once typed into http://USER:TOKEN@HOST/...) would go along with a
  // cross-site form's POST. The API's clients are programs, which send
  // neither header (review 18 of issue 49); the dashboard checks its own.
  if (!read && c.route != "dashboard")
    if (cross_site(c.req))
      return reject(c, 403, "cross_site",
                    "refused: a browser sent this request from another site; the API takes writes from programs "
                    "(mlk, ccache, bazel), not from web pages");
  if (c.route == "health") return json_text(200, R"({"ok":true})");
  if (c.route == "metrics") return metrics_route(c);
  if (c.route == "whoami") return whoami_route(c);
  if (c.route == "status") return status_route(c);
  if (c.route == "query") return query_entries(c);
  if (c.route == "bench") return bench_route(c, arg);
  if (c.route == "dashboard") return dashboard_route(c, arg);
  if (c.route == "jobs") return jobs_route(c, arg);
  if (c.route == "blobs") return read ? get_blob(c, arg) : put_blob(c, arg);
  if (c.route == "entries") return read ? get_entry(c, arg) : m == "PUT" ? put_entry(c, arg) : delete_entry(c, arg);
  return read ? ccache_get(c, arg) : m == "PUT" ? ccache_put(c, arg) : ccache_delete(c, arg);
}

}  // namespace

namespace {

// Every 5xx answer, with its cause, goes to the log sink (base/log.h): the
// client sees only the message, the operator sees where and why.
void log_server_error(const ApiRequest& req, const std::string& route, const ApiResponse& r) {
  std::string cause = "(no message)";
  try {
    cause = json::parse(r.body).value("error", cause);
  } catch (...) {
  }
  // The path (URL-decoded) and the cause may hold what a client sent: one log line, no control bytes.
  auto loggable = [](const std::string& s) {
    std::string out;
    for (unsigned char c : s.substr(0, 200)) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += c < 0x20 || c == 0x7f ? std::string(hex) : std::string(1, static_cast<char>(c));
    }
    return out;
  };
  log_linef(LogLevel::kWarning, "server error %d on %s %s (route %s): %s", r.status, loggable(req.method).c_str(),
            loggable(req.path).c_str(), route.c_str(), loggable(cause).c_str());
}

}  // namespace

namespace {

// The scopes of which a body on this route needs one (all of them for
// ccache, which writes a blob and binds a key). Routes that take no body
// from a token need a write scope of some kind.
bool may_send_body(const std::string& path, Scopes have) {
  auto has = [&](Scope s) { return has_scope(have, s); };
  if (path.rfind("/v1/blobs/", 0) == 0) return has(kScopeWriteBlobs);
  if (path.rfind("/v1/entries/", 0) == 0 || path.rfind("/v1/bench/", 0) == 0) return has(kScopeWriteEntries);
  if (path.rfind("/ccache/", 0) == 0) return has(kScopeWriteBlobs) && has(kScopeWriteEntries);
  if (path.rfind("/v1/jobs/", 0) == 0) return has(kScopeWriteEntries) || has(kScopeWorker);
  return has(kScopeWriteBlobs) || has(kScopeWriteEntries) || has(kScopeWorker);
}

}  // namespace

void Api::body_broken(const ApiRequest& req) {
  StringBody none("");
  Ctx c{*this, req, none, "unknown", "", {}, std::nullopt};
  try {
    if (const Route* route = find_route(req.path)) c.route = route->name;
    if (!authorize(c, Scopes{0})) {  // the token's namespace, for the count; nothing of the route runs
      Body broken{Body::kBroken, "", "", "the connection closed or timed out before the whole body arrived"};
      (void)body_rejection(c, broken);
    }
  } catch (...) {  // a count is not worth failing the transport for
  }
  metrics_.request(c.route, req.method, 400, 0);
}

std::optional<ApiResponse> Api::admit_body(const ApiRequest& req, bool too_large, std::string* holder) {
  StringBody none("");
  Ctx c{*this, req, none, "unknown", "", {}, std::nullopt};
  ApiResponse r;
  try {
    const Route* route = find_route(req.path);
    std::string allow;
    if (route) c.route = route->name;
    if (!route) {
      r = no_route(c);
    } else if (!takes_method(*route, req.method, allow)) {
      r = method_not_allowed(c, allow);
    } else if (auto refused = authorize(c, Scopes{0})) {  // the token, and that it may use the namespace
      r = *refused;
    } else if (!may_send_body(req.path, c.token.scopes)) {
      // Named as the route's handler names it: the first write scope it lacks.
      Scope lacking = req.path.rfind("/v1/blobs/", 0) == 0 ||
                              (req.path.rfind("/ccache/", 0) == 0 && !has_scope(c.token.scopes, kScopeWriteBlobs))
                          ? kScopeWriteBlobs
                          : kScopeWriteEntries;
      r = reject(c, 403, "forbidden",
                 "token " + c.token.prefix + " lacks the scope `" + scopes_string(lacking) + "` (it has " +
                     (c.token.scopes ? scopes_string(c.token.scopes) : std::string("none")) + ")");
    } else if (too_large) {
      r = reject(c, 413, "too_large",
                 "the body is over twice the server's limit of " + std::to_string(opt_.max_body_bytes) +
                     " bytes (`mlk serve --max-body`)");
    } else {
      if (holder) *holder = std::to_string(c.token.id);
      return std::nullopt;  // buffered; the route's handler answers once it is in
    }
  } catch (const std::exception& e) {
    r = error_response(500, std::string("internal error: ") + e.what());
  }
  metrics_.request(c.route, req.method, r.status, 0);
  r.team = c.token.team;
  return r;
}

ApiResponse Api::handle(const ApiRequest& req, BodySource& body) {
  auto t0 = std::chrono::steady_clock::now();
  Ctx c{*this, req, body, "unknown", "", {}, std::nullopt};
  ApiResponse r;
  try {
    CheckThrows checks_throw;  // a broken invariant fails this request (500, logged), not the server
    r = dispatch(c);
  } catch (const std::exception& e) {
    r = error_response(500, std::string("internal error: ") + e.what());
  } catch (...) {
    r = error_response(500, "internal error");
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  metrics_.request(c.route, req.method, r.status, secs);
  if (r.status >= 500) log_server_error(req, c.route, r);
  r.team = c.token.team;
  return r;
}

}  // namespace mlk::service
