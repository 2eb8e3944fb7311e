// ServiceTables on the SQLite tables of the store's file (service_db.h): the
// functions of tokens.h and staging.h, and the grants table.
#include "service/service_db.h"
#include "service/staging.h"
#include "service/tables.h"

namespace mlk::service {

Expected<bool> ServiceTables::blob_visible(const std::string& ns, const std::string& digest) {
  auto staged = blob_staged(ns, digest);
  if (!staged.ok() || *staged) return staged;
  return blob_referenced(ns, digest);
}

namespace {

class SqliteTables final : public ServiceTables {
 public:
  explicit SqliteTables(std::unique_ptr<cache::sql::Db> db) : db_(std::move(db)) {}

  Expected<NewToken> create_token(const std::string& team, Scopes scopes, const std::string& note) override {
    return service::create_token(*db_, team, scopes, note);
  }
  Expected<std::vector<TokenInfo>> list_tokens() override { return service::list_tokens(*db_); }
  Expected<TokenInfo> revoke_token(const std::string& id_or_prefix) override {
    return service::revoke_token(*db_, id_or_prefix);
  }
  Expected<std::optional<TokenInfo>> find_token(std::string_view token) override {
    return service::find_token(*db_, token);
  }
  Status stage_blob(const std::string& ns, const std::string& digest, int64_t size, int64_t now) override {
    return service::stage_blob(*db_, ns, digest, size, now);
  }
  Status unstage(const std::string& ns, const std::set<std::string>& digests) override {
    return service::unstage(*db_, ns, digests);
  }
  Status expire_staged(const std::string& ns, int64_t before) override { return service::expire_staged(*db_, ns, before); }
  Expected<int64_t> staged_bytes(const std::string& ns, const std::set<std::string>& excluding) override {
    return service::staged_bytes(*db_, ns, excluding);
  }
  Expected<std::map<std::string, int64_t>> staged_by_namespace() override { return service::staged_by_namespace(*db_); }
  Expected<bool> blob_staged(const std::string& ns, const std::string& digest) override {
    return service::blob_staged(*db_, ns, digest);
  }
  Expected<bool> blob_referenced(const std::string& ns, const std::string& digest) override {
    return service::blob_referenced(*db_, ns, digest);
  }
  Expected<bool> blob_held(const std::string& digest) override { return service::blob_held(*db_, digest); }

  Status grant(const std::string& ns, const std::string& grantee, int64_t now) override {
    auto st = db_->prepare(
        "INSERT INTO service_grants(ns, grantee, created, revoked) VALUES(?1, ?2, ?3, 0) "
        "ON CONFLICT(ns, grantee) DO UPDATE SET created=excluded.created, revoked=0");
    if (!st.ok()) return st.status();
    st->bind(1, ns).bind(2, grantee).bind(3, now);
    return st->run();
  }
  Status revoke_grant(const std::string& ns, const std::string& grantee, int64_t now) override {
    auto st = db_->prepare("UPDATE service_grants SET revoked=?3 WHERE ns=?1 AND grantee=?2 AND revoked=0");
    if (!st.ok()) return st.status();
    st->bind(1, ns).bind(2, grantee).bind(3, now);
    MLK_RETURN_IF_ERROR(st->run());
    if (sqlite3_changes(db_->raw()) == 0)
      return Status::NotFound("no grant of namespace `" + ns + "` to team `" + grantee + "` in force");
    return Status::Ok();
  }
  Expected<std::optional<GrantInfo>> find_grant(const std::string& ns, const std::string& grantee) override {
    auto st = db_->prepare("SELECT ns, grantee, created, revoked FROM service_grants WHERE ns=?1 AND grantee=?2");
    if (!st.ok()) return st.status();
    st->bind(1, ns).bind(2, grantee);
    auto r = st->step();
    if (!r.ok()) return r.status();
    if (!*r) return std::optional<GrantInfo>();
    return std::optional<GrantInfo>(GrantInfo{st->text(0), st->text(1), st->i64(2), st->i64(3)});
  }
  Expected<int64_t> signature_floor(const std::string& ns, const std::string& key) override {
    auto st = db_->prepare("SELECT floor FROM service_signature_floors WHERE ns=?1 AND key=?2");
    if (!st.ok()) return st.status();
    st->bind(1, ns).bind(2, key);
    auto r = st->step();
    if (!r.ok()) return r.status();
    return *r ? st->i64(0) : int64_t{0};
  }
  Status raise_signature_floor(const std::string& ns, const std::string& key, int64_t floor) override {
    auto st = db_->prepare(
        "INSERT INTO service_signature_floors(ns, key, floor) VALUES(?1, ?2, ?3) "
        "ON CONFLICT(ns, key) DO UPDATE SET floor=max(floor, excluded.floor)");
    if (!st.ok()) return st.status();
    st->bind(1, ns).bind(2, key).bind(3, floor);
    return st->run();
  }
  Expected<std::vector<GrantInfo>> list_grants() override {
    auto st = db_->prepare("SELECT ns, grantee, created, revoked FROM service_grants ORDER BY ns, grantee");
    if (!st.ok()) return st.status();
    std::vector<GrantInfo> out;
    while (true) {
      auto r = st->step();
      if (!r.ok()) return r.status();
      if (!*r) break;
      out.push_back(GrantInfo{st->text(0), st->text(1), st->i64(2), st->i64(3)});
    }
    return out;
  }
  Status create_ui_session(const std::string& id_sha256, int64_t token_id, int64_t now, int64_t expires,
                           int per_token_cap) override {
    return cache::sql::write_txn(*db_, [&]() -> Status {
      auto purge = db_->prepare("DELETE FROM service_sessions WHERE expires<=?1");
      if (!purge.ok()) return purge.status();
      purge->bind(1, now);
      MLK_RETURN_IF_ERROR(purge->run());
      auto cap = db_->prepare(
          "DELETE FROM service_sessions WHERE token_id=?1 AND id_sha256 NOT IN (SELECT id_sha256 FROM service_sessions "
          "WHERE token_id=?1 ORDER BY created DESC, id_sha256 LIMIT ?2)");
      if (!cap.ok()) return cap.status();
      cap->bind(1, token_id).bind(2, static_cast<int64_t>(per_token_cap) - 1);
      MLK_RETURN_IF_ERROR(cap->run());
      auto ins = db_->prepare("INSERT INTO service_sessions(id_sha256, token_id, created, expires) VALUES(?1, ?2, ?3, ?4)");
      if (!ins.ok()) return ins.status();
      ins->bind(1, id_sha256).bind(2, token_id).bind(3, now).bind(4, expires);
      return ins->run();
    });
  }
  Expected<std::optional<UiSession>> find_ui_session(const std::string& id_sha256, int64_t now) override {
    auto st = db_->prepare(
        "SELECT t.id, t.prefix, t.team, t.scopes, t.note, t.created, t.revoked, s.expires FROM service_sessions s "
        "JOIN service_tokens t ON t.id=s.token_id WHERE s.id_sha256=?1 AND s.expires>?2");
    if (!st.ok()) return st.status();
    st->bind(1, id_sha256).bind(2, now);
    auto r = st->step();
    if (!r.ok()) return r.status();
    if (!*r) return std::optional<UiSession>();
    UiSession out;
    out.token.id = st->i64(0);
    out.token.prefix = st->text(1);
    out.token.team = st->text(2);
    auto scopes = parse_scopes(st->text(3));
    out.token.scopes = scopes.ok() ? *scopes : 0;  // an unknown scope name grants nothing
    out.token.note = st->text(4);
    out.token.created = st->i64(5);
    out.token.revoked = st->i64(6) != 0;
    out.expires = st->i64(7);
    return std::optional<UiSession>(std::move(out));
  }
  Status delete_ui_session(const std::string& id_sha256) override {
    auto st = db_->prepare("DELETE FROM service_sessions WHERE id_sha256=?1");
    if (!st.ok()) return st.status();
    st->bind(1, id_sha256);
    return st->run();
  }

  Expected<std::unique_ptr<Lock>> lock_namespace(const std::string&) override { return std::make_unique<Lock>(); }

 private:
  std::unique_ptr<cache::sql::Db> db_;
};

}  // namespace

std::unique_ptr<ServiceTables> sqlite_tables(std::unique_ptr<cache::sql::Db> db) {
  return std::make_unique<SqliteTables>(std::move(db));
}

Expected<std::unique_ptr<ServiceTables>> open_tables(const std::string& spec, bool create_if_missing) {
  if (cache::is_postgres_url(spec)) return pg_tables(spec);
  auto db = open_service_db(spec, create_if_missing);
  if (!db.ok()) return db.status();
  return sqlite_tables(std::move(*db));
}

}  // namespace mlk::service
