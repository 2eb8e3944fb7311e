// The server's own tables, kept in the store's SQLite file beside cache/'s
// (docs/api.md, "Storage"):
//
//   service_tokens(id, token_sha256 UNIQUE, prefix, team, scopes, note, created, revoked)
//   service_staged(ns, digest, size, time, PRIMARY KEY(ns, digest))
//   service_grants(ns, grantee, created, revoked, PRIMARY KEY(ns, grantee))
//   service_sessions(id_sha256 PRIMARY KEY, token_id, created, expires)
//   service_signature_floors(ns, key, floor, PRIMARY KEY(ns, key))
//
// Only the sha256 of a token (or of a dashboard session id) is stored, never
// the token (or the id). A staged row is a
// blob that a namespace uploaded and no entry of that namespace references
// yet: it is charged to the namespace's quota and readable by it.
//
// Threading: a Db belongs to one thread at a time (the server gives each
// worker its own, see session_pool.h).
#pragma once

#include <memory>
#include <string>

#include "cache/sqlite.h"
#include "base/status.h"

namespace mlk::service {

// Opens the store at `store_path` through cache::Store::Open (which creates it
// with cache/'s schema when create_if_missing, and refuses a file that is not
// an mlk store), then returns a second connection to the same file with the
// service tables created when missing.
Expected<std::unique_ptr<cache::sql::Db>> open_service_db(const std::string& store_path, bool create_if_missing);

}  // namespace mlk::service
