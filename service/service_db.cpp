#include "service/service_db.h"

#include "cache/store.h"

namespace mlk::service {

namespace {

constexpr const char* kServiceSchema = R"sql(
CREATE TABLE IF NOT EXISTS service_tokens(
  id INTEGER PRIMARY KEY,
  token_sha256 TEXT NOT NULL UNIQUE,
  prefix TEXT NOT NULL,
  team TEXT NOT NULL,
  scopes TEXT NOT NULL,
  note TEXT NOT NULL DEFAULT '',
  created INTEGER NOT NULL,
  revoked INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS service_staged(
  ns TEXT NOT NULL,
  digest TEXT NOT NULL,
  size INTEGER NOT NULL,
  time INTEGER NOT NULL,
  PRIMARY KEY(ns, digest)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS service_grants(
  ns TEXT NOT NULL,
  grantee TEXT NOT NULL,
  created INTEGER NOT NULL,
  revoked INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY(ns, grantee)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS service_sessions(
  id_sha256 TEXT PRIMARY KEY,
  token_id INTEGER NOT NULL,
  created INTEGER NOT NULL,
  expires INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS service_sessions_token ON service_sessions(token_id, created);
-- Whether a blob is staged anywhere (the collector, entry deletion): by digest.
CREATE INDEX IF NOT EXISTS service_staged_digest ON service_staged(digest);
CREATE TABLE IF NOT EXISTS service_signature_floors(
  ns TEXT NOT NULL,
  key TEXT NOT NULL,
  floor INTEGER NOT NULL,
  PRIMARY KEY(ns, key)) WITHOUT ROWID;
)sql";

}  // namespace

Expected<std::unique_ptr<cache::sql::Db>> open_service_db(const std::string& store_path, bool create_if_missing) {
  {
    cache::StoreOptions so;
    so.create_if_missing = create_if_missing;
    auto store = cache::Store::Open(store_path, so);
    if (!store.ok()) return store.status();
    if ((*store)->read_only())
      return Status::IOError(store_path + ": the store is read-only; the server and `mlk token` need to write it");
  }
  auto db = cache::sql::Db::Open(store_path, SQLITE_OPEN_READWRITE, 10000);
  if (!db.ok()) return db.status();
  cache::sql::Db& d = **db;
  // FULL: a token revoked or a grant withdrawn stays so across a power loss.
  MLK_RETURN_IF_ERROR(d.exec("PRAGMA synchronous=FULL"));
  auto have = d.query_text("SELECT count(*) FROM sqlite_master WHERE type='table' AND name LIKE 'service_%'");
  if (!have.ok()) return have.status();
  if (*have != "5") MLK_RETURN_IF_ERROR(cache::sql::write_txn(d, [&] { return d.exec(kServiceSchema); }));
  return std::move(*db);
}

}  // namespace mlk::service
