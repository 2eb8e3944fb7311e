// A thin layer over libpq for the PostgreSQL backend (pg_store.h,
// service/pg_tables.h): one connection, parameterised statements in text
// format, transactions, and the mapping of failures to Status (messages name
// the server and PostgreSQL's words). Internal to cache/ and service/.
//
// Errors: a connection that cannot be made or is lost is IOError (the server
// answers 503); a unique or check violation is InvalidArgument; a
// serialization failure or deadlock is IOError with "retry" in it; others
// are Internal.
// Threading: a Conn belongs to one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

struct pg_conn;
struct pg_result;

namespace mlk::cache::pg {

// The rows of one statement, every value as text (SQL NULL as nullopt).
class Rows {
 public:
  Rows() = default;
  explicit Rows(pg_result* r);
  Rows(Rows&& o) noexcept;
  Rows& operator=(Rows&& o) noexcept;
  ~Rows();
  int size() const;
  bool empty() const { return size() == 0; }
  std::string text(int row, int col) const;   // "" for NULL
  int64_t i64(int row, int col) const;        // 0 for NULL
  bool is_null(int row, int col) const;
  int64_t affected() const;                   // rows changed by an INSERT/UPDATE/DELETE

 private:
  pg_result* r_ = nullptr;
};

class Conn {
 public:
  // conninfo: a postgresql:// URL or "key=value ..." (libpq's syntax).
  static Expected<std::unique_ptr<Conn>> Open(const std::string& conninfo);
  ~Conn();
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  // Runs one statement with $1.. parameters (text). A lost connection is
  // re-opened once, outside a transaction and while no session lock is
  // held (then it is IOError: the lock went with the session).
  // Every connection has a connect timeout, TCP keepalives, a statement
  // timeout (30 s), a lock timeout (10 s) and an idle-in-transaction timeout
  // (60 s); a URL's `options` replaces the three server-side ones.
  [[nodiscard]] Expected<Rows> exec(const std::string& sql, const std::vector<std::string>& params = {});
  // Runs several statements without parameters.
  [[nodiscard]] Status exec_script(const std::string& sql);
  bool in_transaction() const { return depth_ > 0; }
  // Marks a session-level lock taken (+1) or released (-1): while one is
  // held, a lost connection fails the statement instead of reconnecting.
  void hold_session(int delta) { held_ += delta; }
  // A name for messages: "postgresql://HOST:PORT/DB".
  const std::string& name() const { return name_; }

 private:
  friend Status txn(Conn&, const std::function<Status()>&);
  Conn() = default;
  Status reconnect();
  Status error(pg_result* r, const std::string& what) const;
  std::string conninfo_, name_;
  pg_conn* c_ = nullptr;
  int depth_ = 0;
  int held_ = 0;  // session locks held (hold_session)
};

// Runs f in BEGIN ... COMMIT (READ COMMITTED); rolls back when f or the
// COMMIT fails. Nested calls join the outer transaction.
[[nodiscard]] Status txn(Conn& c, const std::function<Status()>& f);

// The database's clock, in milliseconds since the epoch: what replicas share
// for leases and sessions (each machine's own clock may be off).
[[nodiscard]] Expected<int64_t> server_now_ms(Conn& c);

// The stable 63-bit key of an advisory lock named `name`.
int64_t lock_key(const std::string& name);

// Opens a connection to `conninfo` and runs `schema` (statements without
// parameters, such as CREATE TABLE IF NOT EXISTS ...) in one transaction
// holding the advisory lock named `lock_name` (lock_key), so that replicas
// starting at once do not race: one creates the schema, the others wait.
// Errors of the connection, the lock or the script are returned as they are.
Expected<std::unique_ptr<Conn>> open_with_schema(const std::string& conninfo, const std::string& lock_name,
                                                 const std::string& schema);

// `s` as a SQL text literal ('...', quotes doubled), for scripts.
std::string quote(const std::string& s);

}  // namespace mlk::cache::pg
