// The dashboard's sessions and cross-site check (service/dashboard_session.h).
#include "service/dashboard_session.h"

#include <cctype>
#include <cstring>
#include <ctime>

#include "base/sha256.h"
#include "service/tokens.h"

namespace mlk::service::detail {

namespace {

constexpr size_t kIdChars = 43;  // 32 bytes, unpadded base64url

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// At most 100 characters of a header value, for a message.
std::string shown(const std::string& v) { return v.size() > 100 ? v.substr(0, 100) + "..." : v; }

void ensure_lease(Ctx& c) {
  if (!c.lease) c.lease.emplace(c.api.pool().acquire());
}

int64_t now_s() { return static_cast<int64_t>(std::time(nullptr)); }

}  // namespace

std::optional<std::string> cross_site(const ApiRequest& req) {
  // A browser that sends Sec-Fetch-Site says where the request came from,
  // and no page can forge it; Origin is then not needed (it is `null` for a
  // same-origin POST from a page whose Referrer-Policy is no-referrer).
  const std::string site = lower(req.sec_fetch_site);
  if (!site.empty()) {
    if (site == "same-origin" || site == "none") return std::nullopt;
    return "refused: the browser says this form was posted from another site (Sec-Fetch-Site: " + shown(site) +
           "), a cross-site request; sign in and out from the dashboard's own pages (/ui/login)";
  }
  if (req.origin.empty()) return std::nullopt;
  size_t scheme = req.origin.find("://");
  std::string authority = scheme == std::string::npos ? "" : lower(req.origin.substr(scheme + 3));
  bool plain = !authority.empty() && authority.find_first_of("/?#@ ") == std::string::npos;
  if (!plain || req.host.empty() || authority != lower(req.host))
    return "refused: this form was posted from another origin (Origin: " + shown(req.origin) + ", this server: " +
           (req.host.empty() ? std::string("no Host header") : shown(req.host)) +
           "), a cross-site request; sign in and out from the dashboard's own pages (/ui/login)";
  return std::nullopt;
}

std::string session_of_cookie(const std::string& header) {
  const std::string name = std::string(kSessionCookie) + "=";
  size_t start = 0;
  while (start < header.size()) {
    size_t semi = header.find(';', start);
    std::string part = header.substr(start, semi == std::string::npos ? std::string::npos : semi - start);
    start = semi == std::string::npos ? header.size() : semi + 1;
    size_t b = part.find_first_not_of(' ');
    if (b == std::string::npos || part.compare(b, name.size(), name) != 0) continue;
    std::string v = part.substr(b + name.size());
    while (!v.empty() && v.back() == ' ') v.pop_back();
    bool ok = v.size() == kIdChars;
    for (char ch : v) ok = ok && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-');
    return ok ? v : "";
  }
  return "";
}

Expected<std::string> start_session(Ctx& c) {
  ensure_lease(c);
  auto id = random_secret();  // service/tokens.h: 32 random bytes, unpadded base64url
  if (!id.ok()) return id.status();
  const ApiOptions& o = c.api.options();
  int64_t now = now_s();
  MLK_RETURN_IF_ERROR(
      c.tables().create_ui_session(sha256_hex(*id), c.token.id, now, now + o.ui_session_s, kSessionsPerToken));
  return std::string(kSessionCookie) + "=" + *id + "; Path=/ui; Max-Age=" + std::to_string(o.ui_session_s) +
         "; HttpOnly; SameSite=Strict" + (o.tls ? "; Secure" : "");
}

std::string cleared_session_cookie(const ApiOptions& o) {
  return std::string(kSessionCookie) + "=; Path=/ui; Max-Age=0; HttpOnly; SameSite=Strict" + (o.tls ? "; Secure" : "");
}

Expected<std::optional<TokenInfo>> find_session(Ctx& c, const std::string& id) {
  ensure_lease(c);
  auto s = c.tables().find_ui_session(sha256_hex(id), now_s());
  if (!s.ok()) return s.status();
  if (!s->has_value()) return std::optional<TokenInfo>();
  return std::optional<TokenInfo>((*s)->token);
}

Status end_session(Ctx& c, const std::string& id) {
  ensure_lease(c);
  return c.tables().delete_ui_session(sha256_hex(id));
}

}  // namespace mlk::service::detail
