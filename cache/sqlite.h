// A thin RAII layer over the SQLite C API for cache/: one connection, prepared
// statements, transactions, and the mapping of SQLite result codes to Status
// (messages name the database path and the cause). Internal to cache/.
//
// Threading: a Db and its Stmts belong to one thread at a time (the Store
// serialises access with its own mutex; connections are opened NOMUTEX).
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace mlk::cache::sql {

class Db;

// A prepared statement. Columns and parameters are 0-based / 1-based as in
// SQLite. Reset on destruction.
class Stmt {
 public:
  Stmt(Db* db, sqlite3_stmt* s) : db_(db), s_(s) {}
  Stmt(Stmt&& o) noexcept : db_(o.db_), s_(o.s_) { o.s_ = nullptr; }
  Stmt& operator=(Stmt&&) = delete;
  ~Stmt();

  Stmt& bind(int i, int64_t v);
  Stmt& bind(int i, std::string_view text);
  Stmt& bind(int i, const char* text) { return bind(i, std::string_view(text)); }
  Stmt& bind(int i, const std::string& text) { return bind(i, std::string_view(text)); }
  Stmt& bind_blob(int i, std::string_view bytes);
  // Makes the statement ready to run again (its bindings kept until rebound).
  Stmt& reset();

  // True when a row is ready, false when the statement is done.
  [[nodiscard]] Expected<bool> step();
  // Steps to completion, ignoring any rows.
  [[nodiscard]] Status run();

  int64_t i64(int col) const;
  std::string text(int col) const;
  std::string blob(int col) const;

 private:
  Db* db_;
  sqlite3_stmt* s_;
};

class Db {
 public:
  // flags: SQLITE_OPEN_* (NOMUTEX is added).
  static Expected<std::unique_ptr<Db>> Open(const std::string& path, int flags, int busy_timeout_ms);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  [[nodiscard]] Expected<Stmt> prepare(std::string_view sql);
  // Runs SQL that returns no rows we need (may be several statements).
  [[nodiscard]] Status exec(const std::string& sql);
  // The first column of the first row of `sql` as text (for PRAGMAs).
  [[nodiscard]] Expected<std::string> query_text(const std::string& sql);

  // A Status for SQLite result code `rc`, met while doing `what`.
  Status error(int rc, std::string_view what) const;

  sqlite3* raw() const { return db_; }
  const std::string& path() const { return path_; }
  bool in_transaction() const { return !sqlite3_get_autocommit(db_); }

 private:
  Db(std::string path, sqlite3* db, int busy_ms) : path_(std::move(path)), db_(db), busy_ms_(busy_ms) {}
  std::string path_;
  sqlite3* db_;
  int busy_ms_;
};

// Runs f inside BEGIN IMMEDIATE ... COMMIT (the write lock is taken up front,
// waiting up to the busy timeout); rolls back when f or the COMMIT fails, so a
// write is all or nothing.
[[nodiscard]] Status write_txn(Db& db, const std::function<Status()>& f);
// Runs f inside a deferred (read) transaction: one consistent snapshot.
[[nodiscard]] Status read_txn(Db& db, const std::function<Status()>& f);

}  // namespace mlk::cache::sql
