// The dashboard's sign-in sessions and its check against cross-site POSTs
// (service/dashboard.cpp; docs/security.md, "The dashboard"). Internal to
// service/.
//
// Contract:
// - A session id is 256 random bits as unpadded base64url (43 characters).
//   The browser gets it once, in the cookie `mlk_session` (Path=/ui,
//   HttpOnly, SameSite=Strict, `Secure` when ApiOptions::tls, Max-Age
//   ApiOptions::ui_session_s). The service tables keep only its sha256, the
//   id of the token that signed in, and when it expires (tables.h), so the
//   sessions of a store outlive a restart and every replica of the shared
//   backend sees them.
// - Only a read-only token (scopes exactly `read`) signs in; the session
//   then stands for that token: revoking the token ends its sessions at once.
// - A token keeps at most kSessionsPerToken sessions; signing in once more
//   drops its oldest.
// - Signing out deletes the session server-side; a copy of the cookie is no
//   way back in.
#pragma once

#include <optional>
#include <string>

#include "base/status.h"
#include "service/api_internal.h"

namespace mlk::service::detail {

inline constexpr const char* kSessionCookie = "mlk_session";
inline constexpr int kSessionsPerToken = 16;

// Why a POST to /ui/... cannot have come from the dashboard's own pages, or
// nullopt when it may have: `Sec-Fetch-Site` is `same-origin` or `none`
// (typed by the user), or, from a browser that does not send it, `Origin`
// is absent or names the host[:port] of the `Host` header (the scheme is not
// compared: a TLS proxy in front of the server changes it). A request with
// neither header is no browser's cross-site request (browsers send Origin on
// every cross-origin POST).
std::optional<std::string> cross_site(const ApiRequest& req);

// The session id of a Cookie header; "" when there is none, or when its
// value is not of the form of a session id.
std::string session_of_cookie(const std::string& header);

// Starts a session for c.token (authorised, read-only) and returns the
// Set-Cookie value that hands it to the browser.
Expected<std::string> start_session(Ctx& c);

// The Set-Cookie value that makes the browser forget the session.
std::string cleared_session_cookie(const ApiOptions& o);

// The token the session `id` stands for, when the session is known and not
// expired (the token may have been revoked since: TokenInfo::revoked);
// nullopt otherwise. Borrows c.lease when it is not set.
Expected<std::optional<TokenInfo>> find_session(Ctx& c, const std::string& id);

// Deletes the session `id` (nothing when there is none). Borrows c.lease
// when it is not set.
Status end_session(Ctx& c, const std::string& id);

}  // namespace mlk::service::detail
