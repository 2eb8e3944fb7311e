// The server's own records behind one narrow interface, beside the artifact
// store (cache/artifact_store.h): tokens, staged uploads (staging.h), read
// grants between teams, the dashboard's sign-in sessions, and the namespace
// write lock that makes quotas
// exact. Two implementations: SQLite tables in the store's file
// (service_db.h), and PostgreSQL tables in the shared backend's database
// (pg_tables.cpp), where the lock is an advisory lock held across replicas.
//
// Threading: one ServiceTables per thread (the SessionPool gives each
// request its own).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "cache/pg_store.h"
#include "cache/sqlite.h"
#include "service/tokens.h"

namespace mlk::service {

// A read grant: team `grantee` may read namespace `ns` (docs/api.md, "Grants").
struct GrantInfo {
  std::string ns, grantee;
  int64_t created = 0;
  int64_t revoked = 0;  // unix seconds; 0 while in force
};

class ServiceTables {
 public:
  virtual ~ServiceTables() = default;

  virtual Expected<NewToken> create_token(const std::string& team, Scopes scopes, const std::string& note) = 0;
  virtual Expected<std::vector<TokenInfo>> list_tokens() = 0;
  virtual Expected<TokenInfo> revoke_token(const std::string& id_or_prefix) = 0;
  virtual Expected<std::optional<TokenInfo>> find_token(std::string_view token) = 0;

  virtual Status stage_blob(const std::string& ns, const std::string& digest, int64_t size, int64_t now) = 0;
  // Unstages `digests` (an entry now references them), but those an
  // unfinished job of `ns` holds as its setup: they stay staged, and charged.
  virtual Status unstage(const std::string& ns, const std::set<std::string>& digests) = 0;
  virtual Status expire_staged(const std::string& ns, int64_t before) = 0;
  virtual Expected<int64_t> staged_bytes(const std::string& ns, const std::set<std::string>& excluding) = 0;
  virtual Expected<std::map<std::string, int64_t>> staged_by_namespace() = 0;
  virtual Expected<bool> blob_staged(const std::string& ns, const std::string& digest) = 0;
  virtual Expected<bool> blob_referenced(const std::string& ns, const std::string& digest) = 0;
  // Whether an entry of any namespace references `digest` (so its bytes are
  // charged to that namespace, and stay stored while it does).
  virtual Expected<bool> blob_held(const std::string& digest) = 0;
  Expected<bool> blob_visible(const std::string& ns, const std::string& digest);

  // Grants: give (again) or revoke team `grantee` read access to `ns`.
  virtual Status grant(const std::string& ns, const std::string& grantee, int64_t now) = 0;
  virtual Status revoke_grant(const std::string& ns, const std::string& grantee, int64_t now) = 0;
  // The grant of `ns` to `grantee` ever given (revoked ones too), or nullopt.
  virtual Expected<std::optional<GrantInfo>> find_grant(const std::string& ns, const std::string& grantee) = 0;
  virtual Expected<std::vector<GrantInfo>> list_grants() = 0;

  // Signed namespaces (issue 49, finding 11): the lowest signature sequence
  // (cache/signatures.h) a signed entry `key` of `ns` may carry, 0 when
  // none is remembered. Raised, never lowered, by each signed PUT (to its
  // sequence) and by a DELETE (past the deleted entry's); kept after the
  // entry is gone, so a replaced or withdrawn signed build is not stored
  // under its key again.
  virtual Expected<int64_t> signature_floor(const std::string& ns, const std::string& key) = 0;
  virtual Status raise_signature_floor(const std::string& ns, const std::string& key, int64_t floor) = 0;

  // Sign-in sessions of the dashboard (service/dashboard_session.h), keyed
  // by the sha256 of the session id (the id itself is never stored). Each
  // stands for one token, by its id, until `expires` (unix seconds).
  // create_ui_session also drops every expired session and the oldest of the
  // token's beyond its newest `per_token_cap`; find_ui_session gives the
  // session's token (revoked ones too, for the message) when the session is
  // known and not expired at `now`.
  struct UiSession {
    TokenInfo token;
    int64_t expires = 0;
  };
  virtual Status create_ui_session(const std::string& id_sha256, int64_t token_id, int64_t now, int64_t expires,
                                   int per_token_cap) = 0;
  virtual Expected<std::optional<UiSession>> find_ui_session(const std::string& id_sha256, int64_t now) = 0;
  virtual Status delete_ui_session(const std::string& id_sha256) = 0;

  // Serialises quota-checked writes of `ns` across every server on this
  // backend until the returned object is destroyed. SQLite: nothing (one
  // server per store file, which serialises with its own mutex).
  class Lock {
   public:
    virtual ~Lock() = default;
  };
  virtual Expected<std::unique_ptr<Lock>> lock_namespace(const std::string& ns) = 0;
};

// The SQLite tables on a connection to the store's file (service_db.h).
std::unique_ptr<ServiceTables> sqlite_tables(std::unique_ptr<cache::sql::Db> db);
// The PostgreSQL tables; creates them when missing.
Expected<std::unique_ptr<ServiceTables>> pg_tables(const std::string& conninfo);

// The tables of --store SPEC: a postgresql:// URL, else an SQLite store path
// (created when missing and create_if_missing).
Expected<std::unique_ptr<ServiceTables>> open_tables(const std::string& spec, bool create_if_missing);

}  // namespace mlk::service
