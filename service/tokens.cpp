#include "service/tokens.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <ctime>

#include "cache/store.h"
#include "base/sha256.h"

namespace mlk::service {

namespace {

constexpr const char* kScopeNames[] = {"read", "write-blobs", "write-entries", "admin", "worker"};
constexpr unsigned kScopeCount = sizeof kScopeNames / sizeof kScopeNames[0];


TokenInfo row_info(cache::sql::Stmt& st) {
  TokenInfo t;
  t.id = st.i64(0);
  t.prefix = st.text(1);
  t.team = st.text(2);
  auto scopes = parse_scopes(st.text(3));
  t.scopes = scopes.ok() ? *scopes : 0;  // an unknown scope name (a newer mlk wrote it) grants nothing
  t.note = st.text(4);
  t.created = st.i64(5);
  t.revoked = st.i64(6) != 0;
  return t;
}

constexpr const char* kColumns = "id, prefix, team, scopes, note, created, revoked";

}  // namespace

Expected<std::string> random_secret() {
  unsigned char raw[32];
  if (RAND_bytes(raw, sizeof raw) != 1) return Status::IOError("cannot get random bytes for a secret (OpenSSL RAND_bytes failed)");
  unsigned char b64[64];
  int n = EVP_EncodeBlock(b64, raw, sizeof raw);
  std::string s(reinterpret_cast<char*>(b64), n);
  while (!s.empty() && s.back() == '=') s.pop_back();
  for (char& c : s) c = c == '+' ? '-' : c == '/' ? '_' : c;
  return s;
}

Expected<Scopes> parse_scopes(const std::string& csv) {
  Scopes out = 0;
  size_t start = 0;
  while (start <= csv.size()) {
    size_t comma = csv.find(',', start);
    std::string item = csv.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    bool known = false;
    for (unsigned i = 0; i < kScopeCount; ++i)
      if (item == kScopeNames[i]) {
        out |= 1u << i;
        known = true;
      }
    if (!known)
      return Status::Usage("unknown scope `" + item + "`; scopes are read, write-blobs, write-entries, admin, worker (comma-separated)");
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string scopes_string(Scopes s) {
  std::string out;
  for (unsigned i = 0; i < kScopeCount; ++i)
    if (s & (1u << i)) out += (out.empty() ? "" : ",") + std::string(kScopeNames[i]);
  return out;
}

Expected<NewToken> make_token(const std::string& team, Scopes scopes, const std::string& note) {
  Status ns_ok = cache::validate_namespace(team);
  if (!ns_ok.ok()) return Status::InvalidArgument("team: " + ns_ok.message());
  if (scopes == 0) return Status::InvalidArgument("a token needs at least one scope");
  auto secret = random_secret();
  if (!secret.ok()) return secret.status();
  NewToken out;
  out.token = "mlk_" + *secret;
  out.info.prefix = out.token.substr(0, 12);
  out.info.team = team;
  out.info.scopes = scopes;
  out.info.note = note;
  out.info.created = static_cast<int64_t>(std::time(nullptr));
  return out;
}

Expected<NewToken> create_token(cache::sql::Db& db, const std::string& team, Scopes scopes, const std::string& note) {
  auto made = make_token(team, scopes, note);
  if (!made.ok()) return made.status();
  NewToken out = std::move(*made);
  MLK_RETURN_IF_ERROR(cache::sql::write_txn(db, [&]() -> Status {
    auto st = db.prepare(
        "INSERT INTO service_tokens(token_sha256, prefix, team, scopes, note, created) VALUES(?1, ?2, ?3, ?4, ?5, ?6)");
    if (!st.ok()) return st.status();
    st->bind(1, sha256_hex(out.token)).bind(2, out.info.prefix).bind(3, team).bind(4, scopes_string(scopes));
    st->bind(5, note).bind(6, out.info.created);
    MLK_RETURN_IF_ERROR(st->run());
    out.info.id = sqlite3_last_insert_rowid(db.raw());
    return Status::Ok();
  }));
  return out;
}

Expected<std::vector<TokenInfo>> list_tokens(cache::sql::Db& db) {
  auto st = db.prepare(std::string("SELECT ") + kColumns + " FROM service_tokens ORDER BY id");
  if (!st.ok()) return st.status();
  std::vector<TokenInfo> out;
  while (true) {
    auto r = st->step();
    if (!r.ok()) return r.status();
    if (!*r) break;
    out.push_back(row_info(*st));
  }
  return out;
}

Expected<TokenInfo> revoke_token(cache::sql::Db& db, const std::string& id_or_prefix) {
  bool by_id = !id_or_prefix.empty() && id_or_prefix.find_first_not_of("0123456789") == std::string::npos;
  if (!by_id && id_or_prefix.size() < 8)
    return Status::InvalidArgument("`" + id_or_prefix + "`: give a token id (see `mlk token list`) or a prefix of at least 8 characters");
  TokenInfo found;
  MLK_RETURN_IF_ERROR(cache::sql::write_txn(db, [&]() -> Status {
    auto st = db.prepare(std::string("SELECT ") + kColumns + " FROM service_tokens WHERE " +
                         (by_id ? "id=?1" : "substr(prefix, 1, length(?1))=?1") + " LIMIT 2");
    if (!st.ok()) return st.status();
    if (by_id)
      st->bind(1, static_cast<int64_t>(std::stoll(id_or_prefix.substr(0, 18))));
    else
      st->bind(1, id_or_prefix.substr(0, 12));
    std::vector<TokenInfo> rows;
    while (true) {
      auto r = st->step();
      if (!r.ok()) return r.status();
      if (!*r) break;
      rows.push_back(row_info(*st));
    }
    if (rows.empty()) return Status::NotFound("no token `" + id_or_prefix + "` (see `mlk token list`)");
    if (rows.size() > 1) return Status::InvalidArgument("`" + id_or_prefix + "` names more than one token; give its id");
    found = rows[0];
    auto u = db.prepare("UPDATE service_tokens SET revoked=1 WHERE id=?1");
    if (!u.ok()) return u.status();
    u->bind(1, found.id);
    return u->run();
  }));
  found.revoked = true;
  return found;
}

Expected<std::optional<TokenInfo>> find_token(cache::sql::Db& db, std::string_view token) {
  if (token.size() < 8 || token.size() > 256) return std::optional<TokenInfo>();
  auto st = db.prepare(std::string("SELECT ") + kColumns + " FROM service_tokens WHERE token_sha256=?1 AND revoked=0");
  if (!st.ok()) return st.status();
  st->bind(1, sha256_hex(token));
  auto r = st->step();
  if (!r.ok()) return r.status();
  if (!*r) return std::optional<TokenInfo>();
  return std::optional<TokenInfo>(row_info(*st));
}

}  // namespace mlk::service
