#include "cache/pg.h"

#include <libpq-fe.h>

#include <cstdlib>
#include <cstring>

#include "base/sha256.h"

namespace mlk::cache::pg {

Rows::Rows(pg_result* r) : r_(r) {}
Rows::Rows(Rows&& o) noexcept : r_(o.r_) { o.r_ = nullptr; }
Rows& Rows::operator=(Rows&& o) noexcept {
  if (this != &o) {
    if (r_) PQclear(r_);
    r_ = o.r_;
    o.r_ = nullptr;
  }
  return *this;
}
Rows::~Rows() {
  if (r_) PQclear(r_);
}
int Rows::size() const { return r_ ? PQntuples(r_) : 0; }
std::string Rows::text(int row, int col) const {
  if (!r_ || PQgetisnull(r_, row, col)) return "";
  return std::string(PQgetvalue(r_, row, col), static_cast<size_t>(PQgetlength(r_, row, col)));
}
int64_t Rows::i64(int row, int col) const {
  if (!r_ || PQgetisnull(r_, row, col)) return 0;
  return std::strtoll(PQgetvalue(r_, row, col), nullptr, 10);
}
bool Rows::is_null(int row, int col) const { return !r_ || PQgetisnull(r_, row, col); }
int64_t Rows::affected() const {
  const char* n = r_ ? PQcmdTuples(r_) : "";
  return *n ? std::strtoll(n, nullptr, 10) : 0;
}

namespace {

// The URL without its password, for messages.
std::string display_name(pg_conn* c, const std::string& conninfo) {
  if (!c) return conninfo.rfind("postgresql://", 0) == 0 ? "postgresql://..." : "PostgreSQL";
  std::string host = PQhost(c) ? PQhost(c) : "";
  if (!host.empty() && host[0] == '/') host = "[" + host + "]";
  return "postgresql://" + host + ":" + (PQport(c) ? PQport(c) : "") + "/" + (PQdb(c) ? PQdb(c) : "");
}

}  // namespace

Expected<std::unique_ptr<Conn>> Conn::Open(const std::string& conninfo) {
  std::unique_ptr<Conn> c(new Conn());
  c->conninfo_ = conninfo;
  MLK_RETURN_IF_ERROR(c->reconnect());
  return c;
}

Status Conn::reconnect() {
  if (c_) PQfinish(c_);
  // Bounds on every wait (a dead server, a stuck statement, a lock held by
  // a stalled replica, a dead peer on a silent network): a request fails with
  // 503 instead of holding a server thread. The URL's own settings (its
  // `options`, `connect_timeout`, keepalives) override these defaults.
  const char* keys[] = {"connect_timeout", "keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count",
                        "options", "dbname", nullptr};
  const char* values[] = {"10", "1", "30", "10", "3",
                          "-c statement_timeout=30000 -c lock_timeout=10000 -c idle_in_transaction_session_timeout=60000",
                          conninfo_.c_str(), nullptr};
  c_ = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  name_ = display_name(c_, conninfo_);
  if (!c_ || PQstatus(c_) != CONNECTION_OK) {
    std::string why = c_ ? PQerrorMessage(c_) : "out of memory";
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    if (c_) PQfinish(c_);
    c_ = nullptr;
    return Status::IOError(name_ + ": cannot connect to PostgreSQL (" + why +
                           "); check --store and that the server is up");
  }
  PQsetNoticeProcessor(c_, [](void*, const char*) {}, nullptr);  // NOTICEs (IF NOT EXISTS) are not errors
  return Status::Ok();
}

Conn::~Conn() {
  if (c_) PQfinish(c_);
}

Status Conn::error(pg_result* r, const std::string& what) const {
  std::string msg = r ? PQresultErrorMessage(r) : (c_ ? PQerrorMessage(c_) : "no connection");
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  const char* state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  std::string code = state ? state : "";
  std::string text = name_ + ": " + msg + " (while " + what + ")";
  if (!c_ || PQstatus(c_) != CONNECTION_OK || code.rfind("08", 0) == 0 || code.rfind("57P", 0) == 0)
    return Status::IOError(name_ + ": the connection to PostgreSQL was lost (" + msg + "; while " + what + ")");
  if (code == "40001" || code == "40P01") return Status::IOError(text + "; retry");
  if (code == "55P03" || code == "57014")  // lock_timeout, statement_timeout
    return Status::IOError(name_ + ": PostgreSQL is busy (" + msg + "; while " + what + "); retry");
  if (code == "53100") return Status::IOError(name_ + ": the database disk is full (" + msg + ")");
  if (code.rfind("23", 0) == 0 || code.rfind("22", 0) == 0) return Status::InvalidArgument(text);
  if (code == "42501" || code.rfind("28", 0) == 0)  // the role may not do this, or is not who it claims
    return Status::IOError(text + "; check the database role's grants");
  return Status::Internal(text);
}

Expected<Rows> Conn::exec(const std::string& sql, const std::vector<std::string>& params) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!c_ || PQstatus(c_) != CONNECTION_OK) {
      if (depth_ > 0) return Status::IOError(name_ + ": the connection to PostgreSQL was lost inside a transaction");
      if (held_ > 0)  // a new session would not hold the lock the caller's write relies on
        return Status::IOError(name_ + ": the connection to PostgreSQL was lost while it held a lock");
      MLK_RETURN_IF_ERROR(reconnect());
    }
    std::vector<const char*> values;
    for (const auto& p : params) values.push_back(p.c_str());
    pg_result* r = PQexecParams(c_, sql.c_str(), static_cast<int>(params.size()), nullptr,
                                values.empty() ? nullptr : values.data(), nullptr, nullptr, 0);
    ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return Rows(r);
    bool lost = !c_ || PQstatus(c_) != CONNECTION_OK;
    std::string what = "running `" + (sql.size() > 48 ? sql.substr(0, 45) + "..." : sql) + "`";
    Status s = error(r, what);
    if (r) PQclear(r);
    if (lost && held_ > 0)
      return Status::IOError(name_ + ": the connection to PostgreSQL was lost while it held a lock (" + s.message() + ")");
    if (!lost || depth_ > 0 || attempt == 1) return s;
  }
  return Status::Internal("unreachable");
}

Status Conn::exec_script(const std::string& sql) {
  if (!c_ || PQstatus(c_) != CONNECTION_OK) MLK_RETURN_IF_ERROR(reconnect());
  pg_result* r = PQexec(c_, sql.c_str());
  ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
    PQclear(r);
    return Status::Ok();
  }
  Status s = error(r, "creating the schema");
  if (r) PQclear(r);
  return s;
}

Status txn(Conn& c, const std::function<Status()>& f) {
  if (c.depth_ > 0) return f();
  auto begin = c.exec("BEGIN");
  if (!begin.ok()) return begin.status();
  c.depth_ = 1;
  Status s;
  try {
    s = f();
  } catch (...) {  // e.g. a broken invariant in a server request: never leave the session in a transaction
    if (c.c_ && PQstatus(c.c_) == CONNECTION_OK && PQtransactionStatus(c.c_) != PQTRANS_IDLE) (void)c.exec("ROLLBACK");
    c.depth_ = 0;
    throw;
  }
  if (s.ok()) {
    auto commit = c.exec("COMMIT");
    s = commit.status();
  }
  if (!s.ok() && c.c_ && PQstatus(c.c_) == CONNECTION_OK && PQtransactionStatus(c.c_) != PQTRANS_IDLE)
    (void)c.exec("ROLLBACK");
  c.depth_ = 0;
  return s;
}

Expected<int64_t> server_now_ms(Conn& c) {
  auto r = c.exec("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint");
  if (!r.ok()) return r.status();
  return r->i64(0, 0);
}

int64_t lock_key(const std::string& name) {
  std::string h = sha256_hex("mlk-lock/" + name).substr(0, 15);  // 60 bits: a positive bigint
  return std::strtoll(h.c_str(), nullptr, 16);
}

Expected<std::unique_ptr<Conn>> open_with_schema(const std::string& conninfo, const std::string& lock_name,
                                                 const std::string& schema) {
  auto conn = Conn::Open(conninfo);
  if (!conn.ok()) return conn.status();
  Conn& c = **conn;
  MLK_RETURN_IF_ERROR(txn(c, [&]() -> Status {
    auto l = c.exec("SELECT pg_advisory_xact_lock($1)", {std::to_string(lock_key(lock_name))});
    if (!l.ok()) return l.status();
    // A new index on a large table may take longer than a request's statement timeout.
    auto unbounded = c.exec("SET LOCAL statement_timeout = 0");
    if (!unbounded.ok()) return unbounded.status();
    return c.exec_script(schema);
  }));
  return conn;
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char ch : s) out += ch == '\'' ? std::string("''") : std::string(1, ch);
  return out + "'";
}

}  // namespace mlk::cache::pg
