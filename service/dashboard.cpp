// The dashboard of `mlk serve` (docs/ci.md, "The dashboard"): HTML pages for
// people, under /ui, beside the API and with the same tokens.
//   GET  /ui                   the namespaces the token may read, the entries
//                              of one (?namespace=NS, else the token's team)
//                              and the kernels with a benchmark history
//   GET  /ui/kernel?id=ID      one kernel's benchmark history, plotted
//                              (&target=T narrows it, &namespace=NS)
//   GET  /ui/login             the sign-in form
//   POST /ui/login             token=TOKEN[&next=/ui...]: a read-only token
//                              checked, a session started (its id in the
//                              cookie mlk_session), 303 to next
//   POST /ui/logout            the session ended, the cookie cleared, 303 to
//                              /ui/login
// Both POSTs are refused (403) when they come from another site
// (dashboard_session.h: Origin, Sec-Fetch-Site). The token of a page comes
// from the session of the cookie or from an Authorization header and passes
// the API's authorize (read scope, namespaces, grants). Without a valid one
// every page is 401 with the sign-in form and no data; a forbidden namespace
// is 403. The pages are in dashboard_pages.cpp, the HTML pieces in
// dashboard_html.h, the sessions in dashboard_session.h.
#include "service/dashboard.h"

#include <cctype>
#include <cstring>
#include <nlohmann/json.hpp>

#include "service/dashboard_html.h"
#include "service/dashboard_session.h"

namespace mlk::service::detail {

namespace {

using namespace dashboard;

// `%XX` and `+` of a form or query value decoded; a broken escape kept as it is.
std::string form_decode(std::string_view s) {
  std::string o;
  for (size_t i = 0; i < s.size(); ++i) {
    auto hex = [](char ch) { return std::isxdigit(static_cast<unsigned char>(ch)) != 0; };
    if (s[i] == '+') {
      o += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) && hex(s[i + 2])) {
      o += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      o += s[i];
    }
  }
  return o;
}

// The value of `name` in an application/x-www-form-urlencoded body; "" when absent.
std::string form_value(const std::string& body, const std::string& name) {
  size_t start = 0;
  while (start <= body.size()) {
    size_t amp = body.find('&', start);
    std::string_view pair(body.data() + start, (amp == std::string::npos ? body.size() : amp) - start);
    size_t eq = pair.find('=');
    if (eq != std::string_view::npos && form_decode(pair.substr(0, eq)) == name) return form_decode(pair.substr(eq + 1));
    if (amp == std::string::npos) break;
    start = amp + 1;
  }
  return "";
}

// Where to go after signing in: a dashboard path, else /ui (no open redirect).
std::string safe_next(const std::string& next) {
  bool dashboard = next == "/ui" || next.rfind("/ui/", 0) == 0 || next.rfind("/ui?", 0) == 0;
  bool plain = next.find_first_of("\r\n\\") == std::string::npos && next.find("//") == std::string::npos;
  return dashboard && plain && next.size() <= 2000 ? next : "/ui";
}

// The path and query of this request, for `next`.
std::string here(const ApiRequest& req) {
  std::string s = req.path;
  char sep = '?';
  for (const auto& [k, v] : req.query) {
    s += sep + url_component(k) + "=" + url_component(v);
    sep = '&';
  }
  return s;
}

// The message of an API error body, or the body itself.
std::string message_of(const ApiResponse& r) {
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  return j.is_object() && j.contains("error") && j["error"].is_string() ? j["error"].get<std::string>() : r.body;
}

ApiResponse redirect(const std::string& to, const std::string& cookie) {
  ApiResponse r = html_response(303, page("redirect", "", "<p><a href=\"" + html_escape(to) + "\">continue</a></p>\n"));
  r.headers.push_back({"Location", to});
  r.headers.push_back({"Set-Cookie", cookie});
  return r;
}

ApiResponse login_page(int status, const std::string& message, const std::string& next) {
  ApiResponse r = html_response(status, page("sign in", "", login_body(message, safe_next(next))));
  if (status == 401) r.headers.push_back({"WWW-Authenticate", "Bearer realm=\"mlk\""});
  return r;
}

// The refusal of a POST from another site (dashboard_session.h), or nullopt.
std::optional<ApiResponse> refuse_cross_site(Ctx& c) {
  auto why = cross_site(c.req);
  if (!why) return std::nullopt;
  return reject_html(c, 403, "cross_site", *why);
}

ApiResponse sign_in(Ctx& c) {
  if (auto r = refuse_cross_site(c)) return *r;
  Body b = c.body.read(std::min<int64_t>(c.api.options().max_body_bytes, 8192));
  if (b.outcome != Body::kOk) return login_page(400, "the sign-in form did not arrive whole; try again", "/ui");
  std::string token = form_value(b.bytes, "token"), next = form_value(b.bytes, "next");
  if (token.empty()) return login_page(401, "give a token (from `mlk token create`)", next);
  ApiRequest authed = c.req;
  authed.authorization = "Bearer " + token;
  authed.query.clear();
  Ctx a{c.api, authed, c.body, c.route, "", {}, std::nullopt};
  if (auto r = authorize(a, kScopeRead)) return login_page(r->status == 403 ? 403 : 401, message_of(*r), next);
  // A cookie stands for its token to anything the browser is made to send
  // to /ui: only the read scope may be behind one.
  if (a.token.scopes != kScopeRead)
    return login_page(403,
                      "token " + a.token.prefix + " has the scopes " + scopes_string(a.token.scopes) +
                          "; the dashboard accepts only read-only tokens (create one with `mlk token create --team " +
                          a.token.team + " --scopes read`)",
                      next);
  auto cookie = start_session(a);
  if (!cookie.ok())
    return login_page(http_status(cookie.status()) == 500 ? 500 : 503,
                      "cannot start a session: " + cookie.status().message(), next);
  return redirect(safe_next(next), *cookie);
}

ApiResponse sign_out(Ctx& c) {
  if (auto r = refuse_cross_site(c)) return *r;
  std::string id = session_of_cookie(c.req.cookie);
  if (!id.empty()) {
    Status ended = end_session(c, id);
    if (!ended.ok())
      return reject_html(c, http_status(ended) == 500 ? 500 : 503, "store_error",
                         "cannot end the session: " + ended.message() + "; try again");
  }
  return redirect("/ui/login", cleared_session_cookie(c.api.options()));
}

// "8 hours", "90 seconds": how long a session lasts.
std::string lifetime(const ApiOptions& o) {
  int64_t s = o.ui_session_s;
  return s % 3600 == 0 ? std::to_string(s / 3600) + (s == 3600 ? " hour" : " hours")
                       : std::to_string(s) + (s == 1 ? " second" : " seconds");
}

// The token of a page request: the Authorization header's, else the
// session's. Returns the rejection, or nullopt with a.token, a.ns, a.lease set.
std::optional<ApiResponse> page_token(Ctx& c, Ctx& a) {
  if (!c.req.authorization.empty()) {
    if (auto r = authorize(a, kScopeRead)) {
      if (r->status == 401) return login_page(401, message_of(*r), here(c.req));
      return html_response(r->status, page("error", "", "<p class=\"error\">" + html_escape(message_of(*r)) + "</p>\n"));
    }
    return std::nullopt;
  }
  std::string id = session_of_cookie(c.req.cookie);
  if (id.empty()) return login_page(401, "", here(c.req));
  auto found = find_session(a, id);
  if (!found.ok())
    return reject_html(a, http_status(found.status()) == 500 ? 500 : 503, "store_error", found.status().message());
  if (!found->has_value())
    return login_page(401,
                      "no such session: it was signed out, or it is over its " + lifetime(c.api.options()) +
                          "; sign in again",
                      here(c.req));
  if ((*found)->revoked) return login_page(401, "unknown or revoked token (see `mlk token list`)", here(c.req));
  a.token = **found;
  if (auto r = authorize_token(a, kScopeRead))
    return html_response(r->status, page("error", "", "<p class=\"error\">" + html_escape(message_of(*r)) + "</p>\n"));
  return std::nullopt;
}

}  // namespace

ApiResponse html_response(int status, std::string body) {
  ApiResponse r;
  r.status = status;
  r.body = std::move(body);
  r.content_type = "text/html; charset=utf-8";
  // No script, no external asset, no framing: what a stored name could smuggle in cannot run.
  r.headers.push_back({"Content-Security-Policy",
                       "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; "
                       "frame-ancestors 'none'; base-uri 'none'"});
  r.headers.push_back({"X-Content-Type-Options", "nosniff"});
  r.headers.push_back({"Cache-Control", "no-store"});
  // same-origin, not no-referrer: under no-referrer a browser sends
  // `Origin: null` even with the dashboard's own forms (dashboard_session.h).
  r.headers.push_back({"Referrer-Policy", "same-origin"});
  return r;
}

ApiResponse dashboard_route(Ctx& c, const std::string& arg) {
  const std::string& m = c.req.method;
  const bool known = arg.empty() || arg == "kernel" || arg == "login" || arg == "logout";
  if (!known)
    return reject_html(c, 404, "no_route", "no dashboard page /ui/" + arg.substr(0, 100) + " (pages: /ui, /ui/kernel?id=ID)");
  const char* allow = arg == "login" ? "GET, HEAD, POST" : arg == "logout" ? "POST" : "GET, HEAD";
  const bool read = m == "GET" || m == "HEAD";
  if (read ? arg == "logout" : !(m == "POST" && (arg == "login" || arg == "logout"))) {
    ApiResponse r = reject_html(c, 405, "method", m + " is not allowed on " + c.req.path + " (allowed: " + allow + ")");
    r.headers.push_back({"Allow", allow});
    return r;
  }
  if (arg == "login") {
    if (m == "POST") return sign_in(c);
    auto next = c.req.query.find("next");
    return login_page(200, "", next == c.req.query.end() ? "/ui" : next->second);
  }
  if (arg == "logout") return sign_out(c);
  Ctx a{c.api, c.req, c.body, c.route, "", {}, std::nullopt};
  if (auto r = page_token(c, a)) return *r;
  // The page is its token's team's answer: it counts against that team's
  // share of the answer memory and is logged under it (review 14).
  c.token = a.token;
  return arg.empty() ? index_page(a) : kernel_page(a);
}

ApiResponse reject_html(Ctx& c, int status, const std::string& reason, const std::string& message) {
  c.api.metrics().reject(c.ns, reason);
  return html_response(status, page("error", "", "<p class=\"error\">" + html_escape(message) + "</p>\n"));
}

}  // namespace mlk::service::detail
