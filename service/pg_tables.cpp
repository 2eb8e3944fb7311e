// ServiceTables on PostgreSQL (tables.h): the same tables as the SQLite
// ones (service_db.h), in the shared backend's database beside cache/'s
// mlk_* tables; the namespace lock is a session advisory lock, so quota
// checks are exact across replicas.
#include <ctime>

#include "base/sha256.h"
#include "cache/manifest.h"
#include "cache/pg.h"
#include "service/tables.h"

namespace mlk::service {

namespace {

using cache::pg::Conn;
using cache::pg::Rows;

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS service_tokens(
  id bigserial PRIMARY KEY,
  token_sha256 text NOT NULL UNIQUE,
  prefix text COLLATE "C" NOT NULL,
  team text NOT NULL,
  scopes text NOT NULL,
  note text NOT NULL DEFAULT '',
  created bigint NOT NULL,
  revoked integer NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS service_staged(
  ns text NOT NULL,
  digest text NOT NULL,
  size bigint NOT NULL,
  time bigint NOT NULL,
  PRIMARY KEY(ns, digest));
CREATE TABLE IF NOT EXISTS service_grants(
  ns text COLLATE "C" NOT NULL,
  grantee text COLLATE "C" NOT NULL,
  created bigint NOT NULL,
  revoked bigint NOT NULL DEFAULT 0,
  PRIMARY KEY(ns, grantee));
CREATE TABLE IF NOT EXISTS service_sessions(
  id_sha256 text PRIMARY KEY,
  token_id bigint NOT NULL,
  created bigint NOT NULL,
  expires bigint NOT NULL);
CREATE INDEX IF NOT EXISTS service_sessions_token ON service_sessions(token_id, created);
CREATE INDEX IF NOT EXISTS service_staged_digest ON service_staged(digest);
CREATE TABLE IF NOT EXISTS service_signature_floors(
  ns text COLLATE "C" NOT NULL,
  key text COLLATE "C" NOT NULL,
  floor bigint NOT NULL,
  PRIMARY KEY(ns, key));
)sql";

constexpr const char* kTokenColumns = "id, prefix, team, scopes, note, created, revoked";

std::string str(int64_t v) { return std::to_string(v); }

TokenInfo token_row(const Rows& r, int i) {
  TokenInfo t;
  t.id = r.i64(i, 0);
  t.prefix = r.text(i, 1);
  t.team = r.text(i, 2);
  auto scopes = parse_scopes(r.text(i, 3));
  t.scopes = scopes.ok() ? *scopes : 0;  // an unknown scope name grants nothing
  t.note = r.text(i, 4);
  t.created = r.i64(i, 5);
  t.revoked = r.i64(i, 6) != 0;
  return t;
}

GrantInfo grant_row(const Rows& r, int i) { return GrantInfo{r.text(i, 0), r.text(i, 1), r.i64(i, 2), r.i64(i, 3)}; }

class AdvisoryLock final : public ServiceTables::Lock {
 public:
  AdvisoryLock(Conn& c, int64_t key) : c_(c), key_(key) { c_.hold_session(+1); }
  ~AdvisoryLock() override {
    (void)c_.exec("SELECT pg_advisory_unlock($1)", {str(key_)});
    c_.hold_session(-1);
  }

 private:
  Conn& c_;
  int64_t key_;
};

class PgTables final : public ServiceTables {
 public:
  explicit PgTables(std::unique_ptr<Conn> c) : c_(std::move(c)) {}

  Expected<NewToken> create_token(const std::string& team, Scopes scopes, const std::string& note) override {
    auto t = make_token(team, scopes, note);
    if (!t.ok()) return t.status();
    auto r = c_->exec(
        "INSERT INTO service_tokens(token_sha256, prefix, team, scopes, note, created) VALUES($1, $2, $3, $4, $5, $6) "
        "RETURNING id",
        {sha256_hex(t->token), t->info.prefix, team, scopes_string(scopes), note, str(t->info.created)});
    if (!r.ok()) return r.status();
    t->info.id = r->i64(0, 0);
    return t;
  }
  Expected<std::vector<TokenInfo>> list_tokens() override {
    auto r = c_->exec(std::string("SELECT ") + kTokenColumns + " FROM service_tokens ORDER BY id");
    if (!r.ok()) return r.status();
    std::vector<TokenInfo> out;
    for (int i = 0; i < r->size(); ++i) out.push_back(token_row(*r, i));
    return out;
  }
  Expected<TokenInfo> revoke_token(const std::string& id_or_prefix) override {
    bool by_id = !id_or_prefix.empty() && id_or_prefix.find_first_not_of("0123456789") == std::string::npos;
    if (!by_id && id_or_prefix.size() < 8)
      return Status::InvalidArgument("`" + id_or_prefix +
                                     "`: give a token id (see `mlk token list`) or a prefix of at least 8 characters");
    auto r = by_id ? c_->exec(std::string("SELECT ") + kTokenColumns + " FROM service_tokens WHERE id=$1 LIMIT 2",
                              {id_or_prefix.substr(0, 18)})
                   : c_->exec(std::string("SELECT ") + kTokenColumns +
                                  " FROM service_tokens WHERE left(prefix, length($1))=$1 LIMIT 2",
                              {id_or_prefix.substr(0, 12)});
    if (!r.ok()) return r.status();
    if (r->empty()) return Status::NotFound("no token `" + id_or_prefix + "` (see `mlk token list`)");
    if (r->size() > 1) return Status::InvalidArgument("`" + id_or_prefix + "` names more than one token; give its id");
    TokenInfo found = token_row(*r, 0);
    auto u = c_->exec("UPDATE service_tokens SET revoked=1 WHERE id=$1", {str(found.id)});
    if (!u.ok()) return u.status();
    found.revoked = true;
    return found;
  }
  Expected<std::optional<TokenInfo>> find_token(std::string_view token) override {
    if (token.size() < 8 || token.size() > 256) return std::optional<TokenInfo>();
    auto r = c_->exec(std::string("SELECT ") + kTokenColumns + " FROM service_tokens WHERE token_sha256=$1 AND revoked=0",
                      {sha256_hex(token)});
    if (!r.ok()) return r.status();
    if (r->empty()) return std::optional<TokenInfo>();
    return std::optional<TokenInfo>(token_row(*r, 0));
  }

  Status stage_blob(const std::string& ns, const std::string& digest, int64_t size, int64_t now) override {
    return c_->exec("INSERT INTO service_staged(ns, digest, size, time) VALUES($1, $2, $3, $4) "
                    "ON CONFLICT(ns, digest) DO UPDATE SET time=excluded.time",
                    {ns, digest, str(size), str(now)})
        .status();
  }
  // " AND NOT EXISTS (...)": a staged row an unfinished job of $1 holds as its
  // setup (service/pg_jobs.cpp makes jobs_queue; a database without it has
  // no jobs to hold anything).
  Expected<std::string> unless_a_job_holds_it() {
    auto jobs = c_->exec("SELECT to_regclass('jobs_queue') IS NOT NULL");
    if (!jobs.ok()) return jobs.status();
    if (jobs->empty() || jobs->text(0, 0) != "t") return std::string();
    return std::string(" AND NOT EXISTS (SELECT 1 FROM jobs_queue q WHERE q.ns=$1 AND "
                       "q.setup=service_staged.digest AND q.state IN ('queued', 'running'))");
  }
  Status unstage(const std::string& ns, const std::set<std::string>& digests) override {
    // A setup an unfinished job holds stays staged, charged (review 7 of issue 49).
    auto held = unless_a_job_holds_it();
    if (!held.ok()) return held.status();
    return cache::pg::txn(*c_, [&]() -> Status {
      for (const auto& d : digests)
        MLK_RETURN_IF_ERROR(c_->exec("DELETE FROM service_staged WHERE ns=$1 AND digest=$2" + *held, {ns, d}).status());
      return Status::Ok();
    });
  }
  Status expire_staged(const std::string& ns, int64_t before) override {
    // A setup an unfinished job of the namespace holds stays staged, and so charged.
    auto held = unless_a_job_holds_it();
    if (!held.ok()) return held.status();
    return c_->exec("DELETE FROM service_staged WHERE ns=$1 AND time<$2" + *held, {ns, str(before)}).status();
  }
  Expected<int64_t> staged_bytes(const std::string& ns, const std::set<std::string>& excluding) override {
    // Summed by the database: a namespace's many staged rows never come
    // back whole to a replica on each quota check (review 18 of issue 49).
    std::string list = "{";
    for (const std::string& d : excluding)  // only digests (hex: no quoting needed); no other string is staged
      if (cache::is_sha256_hex(d)) list += (list.size() > 1 ? "," : "") + d;
    list += "}";
    auto r = c_->exec("SELECT COALESCE(SUM(size), 0) FROM service_staged WHERE ns=$1 AND NOT (digest = ANY($2::text[]))",
                      {ns, list});
    if (!r.ok()) return r.status();
    return r->size() == 1 ? r->i64(0, 0) : 0;
  }
  Expected<std::map<std::string, int64_t>> staged_by_namespace() override {
    auto r = c_->exec("SELECT ns, SUM(size) FROM service_staged GROUP BY ns ORDER BY ns");
    if (!r.ok()) return r.status();
    std::map<std::string, int64_t> out;
    for (int i = 0; i < r->size(); ++i) out[r->text(i, 0)] = r->i64(i, 1);
    return out;
  }
  Expected<bool> blob_staged(const std::string& ns, const std::string& digest) override {
    auto r = c_->exec("SELECT 1 FROM service_staged WHERE ns=$1 AND digest=$2", {ns, digest});
    if (!r.ok()) return r.status();
    return !r->empty();
  }
  Expected<bool> blob_referenced(const std::string& ns, const std::string& digest) override {
    auto r = c_->exec(
        "SELECT 1 FROM mlk_refs r JOIN mlk_entries e ON e.id=r.entry_id WHERE e.ns=$1 AND r.digest=$2 LIMIT 1",
        {ns, digest});
    if (!r.ok()) return r.status();
    return !r->empty();
  }

  Expected<bool> blob_held(const std::string& digest) override {
    auto r = c_->exec("SELECT 1 FROM mlk_refs WHERE digest=$1 LIMIT 1", {digest});
    if (!r.ok()) return r.status();
    return !r->empty();
  }

  Status grant(const std::string& ns, const std::string& grantee, int64_t now) override {
    return c_->exec("INSERT INTO service_grants(ns, grantee, created, revoked) VALUES($1, $2, $3, 0) "
                    "ON CONFLICT(ns, grantee) DO UPDATE SET created=excluded.created, revoked=0",
                    {ns, grantee, str(now)})
        .status();
  }
  Status revoke_grant(const std::string& ns, const std::string& grantee, int64_t now) override {
    auto r = c_->exec("UPDATE service_grants SET revoked=$3 WHERE ns=$1 AND grantee=$2 AND revoked=0",
                      {ns, grantee, str(now)});
    if (!r.ok()) return r.status();
    if (r->affected() == 0) return Status::NotFound("no grant of namespace `" + ns + "` to team `" + grantee + "` in force");
    return Status::Ok();
  }
  Expected<std::optional<GrantInfo>> find_grant(const std::string& ns, const std::string& grantee) override {
    auto r = c_->exec("SELECT ns, grantee, created, revoked FROM service_grants WHERE ns=$1 AND grantee=$2", {ns, grantee});
    if (!r.ok()) return r.status();
    if (r->empty()) return std::optional<GrantInfo>();
    return std::optional<GrantInfo>(grant_row(*r, 0));
  }
  Expected<int64_t> signature_floor(const std::string& ns, const std::string& key) override {
    auto r = c_->exec("SELECT floor FROM service_signature_floors WHERE ns=$1 AND key=$2", {ns, key});
    if (!r.ok()) return r.status();
    return r->empty() ? int64_t{0} : r->i64(0, 0);
  }
  Status raise_signature_floor(const std::string& ns, const std::string& key, int64_t floor) override {
    return c_->exec("INSERT INTO service_signature_floors(ns, key, floor) VALUES($1, $2, $3) ON CONFLICT(ns, key) "
                    "DO UPDATE SET floor=GREATEST(service_signature_floors.floor, excluded.floor)",
                    {ns, key, str(floor)})
        .status();
  }
  Expected<std::vector<GrantInfo>> list_grants() override {
    auto r = c_->exec("SELECT ns, grantee, created, revoked FROM service_grants ORDER BY ns, grantee");
    if (!r.ok()) return r.status();
    std::vector<GrantInfo> out;
    for (int i = 0; i < r->size(); ++i) out.push_back(grant_row(*r, i));
    return out;
  }

  Status create_ui_session(const std::string& id_sha256, int64_t token_id, int64_t now, int64_t expires,
                           int per_token_cap) override {
    auto db_now = cache::pg::server_now_ms(*c_);  // one clock for every replica
    if (!db_now.ok()) return db_now.status();
    expires = *db_now / 1000 + (expires - now);
    now = *db_now / 1000;
    return cache::pg::txn(*c_, [&]() -> Status {
      MLK_RETURN_IF_ERROR(c_->exec("DELETE FROM service_sessions WHERE expires<=$1", {str(now)}).status());
      // Room for the new one: the token's newest per_token_cap - 1 stay.
      MLK_RETURN_IF_ERROR(c_->exec("DELETE FROM service_sessions WHERE token_id=$1 AND id_sha256 NOT IN (SELECT "
                                   "id_sha256 FROM service_sessions WHERE token_id=$1 ORDER BY created DESC, id_sha256 "
                                   "LIMIT $2)",
                                   {str(token_id), str(per_token_cap - 1)})
                              .status());
      return c_->exec("INSERT INTO service_sessions(id_sha256, token_id, created, expires) VALUES($1, $2, $3, $4)",
                      {id_sha256, str(token_id), str(now), str(expires)})
          .status();
    });
  }
  Expected<std::optional<UiSession>> find_ui_session(const std::string& id_sha256, int64_t now) override {
    auto db_now = cache::pg::server_now_ms(*c_);  // one clock for every replica
    if (!db_now.ok()) return db_now.status();
    now = *db_now / 1000;
    auto r = c_->exec("SELECT t.id, t.prefix, t.team, t.scopes, t.note, t.created, t.revoked, s.expires "
                      "FROM service_sessions s JOIN service_tokens t ON t.id=s.token_id "
                      "WHERE s.id_sha256=$1 AND s.expires>$2",
                      {id_sha256, str(now)});
    if (!r.ok()) return r.status();
    if (r->empty()) return std::optional<UiSession>();
    return std::optional<UiSession>(UiSession{token_row(*r, 0), r->i64(0, 7)});
  }
  Status delete_ui_session(const std::string& id_sha256) override {
    return c_->exec("DELETE FROM service_sessions WHERE id_sha256=$1", {id_sha256}).status();
  }

  Expected<std::unique_ptr<Lock>> lock_namespace(const std::string& ns) override {
    int64_t key = cache::pg::lock_key("ns/" + ns);
    auto r = c_->exec("SELECT pg_advisory_lock($1)", {str(key)});
    if (!r.ok()) return r.status();
    return std::unique_ptr<Lock>(new AdvisoryLock(*c_, key));
  }

 private:
  std::unique_ptr<Conn> c_;
};

}  // namespace

Expected<std::unique_ptr<ServiceTables>> pg_tables(const std::string& conninfo) {
  auto c = cache::pg::open_with_schema(conninfo, "service-schema", kSchema);
  if (!c.ok()) return c.status();
  return std::unique_ptr<ServiceTables>(new PgTables(std::move(*c)));
}

}  // namespace mlk::service
