#include "cache/sqlite.h"

#include <cstring>

namespace mlk::cache::sql {

Stmt::~Stmt() {
  if (s_) sqlite3_finalize(s_);
}

Stmt& Stmt::bind(int i, int64_t v) {
  sqlite3_bind_int64(s_, i, v);
  return *this;
}

Stmt& Stmt::bind(int i, std::string_view text) {
  sqlite3_bind_text64(s_, i, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  return *this;
}

Stmt& Stmt::bind_blob(int i, std::string_view bytes) {
  // A zero-length blob must still be a BLOB, not NULL: pass a non-null pointer.
  static const char kEmpty = 0;
  sqlite3_bind_blob64(s_, i, bytes.empty() ? &kEmpty : bytes.data(), bytes.size(), SQLITE_TRANSIENT);
  return *this;
}

Stmt& Stmt::reset() {
  sqlite3_reset(s_);
  return *this;
}

Expected<bool> Stmt::step() {
  int rc = sqlite3_step(s_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  std::string sql = sqlite3_sql(s_);
  if (sql.size() > 48) sql = sql.substr(0, 45) + "...";
  Status st = db_->error(rc, "running `" + sql + "`");
  sqlite3_reset(s_);
  return st;
}

Status Stmt::run() {
  while (true) {
    auto r = step();
    if (!r.ok()) return r.status();
    if (!*r) return Status::Ok();
  }
}

int64_t Stmt::i64(int col) const { return sqlite3_column_int64(s_, col); }

std::string Stmt::text(int col) const {
  const unsigned char* p = sqlite3_column_text(s_, col);
  int n = sqlite3_column_bytes(s_, col);
  return p ? std::string(reinterpret_cast<const char*>(p), n) : std::string();
}

std::string Stmt::blob(int col) const {
  const void* p = sqlite3_column_blob(s_, col);
  int n = sqlite3_column_bytes(s_, col);
  return p ? std::string(static_cast<const char*>(p), n) : std::string();
}

Expected<std::unique_ptr<Db>> Db::Open(const std::string& path, int flags, int busy_timeout_ms) {
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  std::unique_ptr<Db> db(new Db(path, raw, busy_timeout_ms));
  if (rc != SQLITE_OK) {
    if (!raw) return Status::IOError(path + ": cannot open the database: " + sqlite3_errstr(rc));
    return db->error(rc, "opening the database");
  }
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, busy_timeout_ms);
  return db;
}

Db::~Db() {
  if (db_) sqlite3_close_v2(db_);
}

Expected<Stmt> Db::prepare(std::string_view sql) {
  sqlite3_stmt* s = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &s, nullptr);
  if (rc != SQLITE_OK)
    return error(rc, "preparing `" + (sql.size() > 48 ? std::string(sql.substr(0, 45)) + "..." : std::string(sql)) + "`");
  return Stmt(this, s);
}

Status Db::exec(const std::string& sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  sqlite3_free(err);
  if (rc != SQLITE_OK) return error(rc, "running `" + (sql.size() > 48 ? sql.substr(0, 45) + "..." : sql) + "`");
  return Status::Ok();
}

Expected<std::string> Db::query_text(const std::string& sql) {
  auto st = prepare(sql);
  if (!st.ok()) return st.status();
  auto row = st->step();
  if (!row.ok()) return row.status();
  if (!*row) return std::string();
  return st->text(0);
}

Status Db::error(int rc, std::string_view what) const {
  std::string cause = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  int sys = db_ ? sqlite3_system_errno(db_) : 0;
  int primary = rc & 0xff;
  if (sys != 0 && (primary == SQLITE_IOERR || primary == SQLITE_CANTOPEN || primary == SQLITE_FULL))
    cause += std::string(": ") + std::strerror(sys);
  // "PATH: what went wrong (SQLite's words; while doing what); how to fix it"
  auto msg = [&](const std::string& problem, const std::string& fix) {
    return path_ + ": " + problem + " (" + cause + "; while " + std::string(what) + ")" + (fix.empty() ? "" : "; " + fix);
  };
  switch (primary) {
    case SQLITE_FULL:
      return Status::IOError(msg("the disk or the database is full, nothing was written",
                                 "free disk space or shrink the cache with `mlk cache gc --max-size SIZE`"));
    case SQLITE_READONLY:
      return Status::IOError(msg("the database is read-only, nothing was written",
                                 "check the permissions of the file and its directory, or use another --cache PATH"));
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Status::IOError(msg("the database stayed locked by another process for " + std::to_string(busy_ms_) + " ms",
                                 "retry, or find the process holding it"));
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return Status::Corruption(msg("the database file is damaged or not an SQLite database",
                                    "run `mlk cache verify`, or move the file away to start an empty cache"));
    case SQLITE_CANTOPEN:
      return Status::IOError(msg("cannot open the database file", "check that its directory exists and is writable"));
    case SQLITE_IOERR:
      return Status::IOError(msg("I/O error", ""));
    case SQLITE_NOMEM:
      return Status::IOError(msg("out of memory", ""));
    case SQLITE_TOOBIG:
      return Status::InvalidArgument(msg("a value is larger than SQLite allows (about 1 GB per blob)", ""));
    default:
      return Status::Internal(msg("unexpected SQLite error " + std::to_string(rc), ""));
  }
}

namespace {

Status txn(Db& db, const char* begin, const std::function<Status()>& f) {
  MLK_CHECK(!db.in_transaction(), "nested cache transaction");
  MLK_RETURN_IF_ERROR(db.exec(begin));
  Status s;
  try {
    s = f();
  } catch (...) {  // e.g. a broken invariant in a server request: never leave the session in a transaction
    if (db.in_transaction()) (void)db.exec("ROLLBACK");
    throw;
  }
  if (s.ok()) s = db.exec("COMMIT");
  // After a failed COMMIT (or an error that already rolled back, e.g. SQLITE_FULL)
  // make sure no transaction is left open.
  if (!s.ok() && db.in_transaction()) (void)db.exec("ROLLBACK");
  return s;
}

}  // namespace

Status write_txn(Db& db, const std::function<Status()>& f) { return txn(db, "BEGIN IMMEDIATE", f); }
Status read_txn(Db& db, const std::function<Status()>& f) { return txn(db, "BEGIN", f); }

}  // namespace mlk::cache::sql
