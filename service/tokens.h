// Access tokens of `mlk serve`: each is bound to one team (a cache namespace)
// and a set of scopes. Tokens are 256-bit random strings "mlk_<43 base64url>";
// the store keeps only their sha256 and a short prefix for people to name
// them by (docs/api.md, "Tokens").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/sqlite.h"
#include "base/status.h"

namespace mlk::service {

// Bits of a token's scope set.
enum Scope : unsigned {
  kScopeRead = 1,          // GET/HEAD of blobs, entries, ccache objects; status; queries
  kScopeWriteBlobs = 2,    // PUT of blobs (content-addressed: cannot bind a key)
  kScopeWriteEntries = 4,  // PUT/DELETE of entries (binds keys to blobs)
  kScopeAdmin = 8,         // everything, in every namespace; /metrics
  kScopeWorker = 16,       // a measurement worker: register, lease, heartbeat, report (bound by its secret)
};
// Every scope, in the canonical order of scopes_string.
inline constexpr Scope kAllScopes[] = {kScopeRead, kScopeWriteBlobs, kScopeWriteEntries, kScopeAdmin, kScopeWorker};
using Scopes = unsigned;

// "read,write-blobs,write-entries,admin,worker" (any subset, any order) -> bits.
// Usage error naming the bad item and the accepted names.
Expected<Scopes> parse_scopes(const std::string& csv);
// Bits -> "read,write-blobs,..." in the canonical order.
std::string scopes_string(Scopes s);
// admin implies every scope.
inline bool has_scope(Scopes have, Scope need) { return (have & kScopeAdmin) != 0 || (have & need) != 0; }

// 32 random bytes as unpadded base64url (43 characters): the secret of a
// token, a worker or a dashboard session. IOError when OpenSSL has no entropy.
Expected<std::string> random_secret();

struct TokenInfo {
  int64_t id = 0;
  std::string prefix;  // the first 12 characters of the token, e.g. "mlk_Ab3dEf9h"
  std::string team;    // the namespace the token belongs to
  Scopes scopes = 0;
  std::string note;
  int64_t created = 0;  // unix seconds
  bool revoked = false;
};

struct NewToken {
  std::string token;  // shown once; only its sha256 is stored
  TokenInfo info;
};

// A new token for `team` (a valid namespace name) with `scopes` (not 0),
// not yet stored (the backends store it: create_token, tables.h).
Expected<NewToken> make_token(const std::string& team, Scopes scopes, const std::string& note);
// Creates a token for `team` (a valid namespace name) with `scopes` (not 0).
Expected<NewToken> create_token(cache::sql::Db& db, const std::string& team, Scopes scopes, const std::string& note);
// Every token ever created, revoked ones included, oldest first.
Expected<std::vector<TokenInfo>> list_tokens(cache::sql::Db& db);
// Revokes the token with this id ("7") or prefix ("mlk_Ab3dEf9h", at least 8
// characters); NotFound, or InvalidArgument when a prefix is ambiguous.
Expected<TokenInfo> revoke_token(cache::sql::Db& db, const std::string& id_or_prefix);
// The record of `token` when it is known and not revoked; nullopt otherwise.
Expected<std::optional<TokenInfo>> find_token(cache::sql::Db& db, std::string_view token);

}  // namespace mlk::service
