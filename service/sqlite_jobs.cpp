// JobTables in the store's SQLite file (jobs.h): the same tables as on
// PostgreSQL; a lease is one write transaction (BEGIN IMMEDIATE), which
// serialises the server's worker threads and any other process on the file.
#include <algorithm>
#include "service/jobs.h"
#include "service/jobs_sql.h"

namespace mlk::service {

namespace {

using cache::sql::Db;
using cache::sql::Stmt;

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS jobs_workers(
  id INTEGER PRIMARY KEY,
  ns TEXT NOT NULL,
  device_key TEXT NOT NULL,
  name TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  registered_ms INTEGER NOT NULL,
  heartbeat_ms INTEGER NOT NULL,
  token_id INTEGER NOT NULL DEFAULT 0,
  secret_sha256 TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS jobs_queue(
  id INTEGER PRIMARY KEY,
  ns TEXT NOT NULL,
  device_key TEXT NOT NULL,
  fingerprint TEXT NOT NULL DEFAULT '',
  setup TEXT NOT NULL,
  payload TEXT NOT NULL,
  state TEXT NOT NULL DEFAULT 'queued',
  worker INTEGER NOT NULL DEFAULT 0,
  lease_until_ms INTEGER NOT NULL DEFAULT 0,
  attempts INTEGER NOT NULL DEFAULT 0,
  result TEXT NOT NULL DEFAULT '',
  created_ms INTEGER NOT NULL,
  finished_ms INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS jobs_queue_order ON jobs_queue(ns, device_key, state, id);
-- Whether a job holds a blob as its setup (staging, the collector): by setup.
CREATE INDEX IF NOT EXISTS jobs_queue_setup ON jobs_queue(setup, state);
)sql";


WorkerInfo worker_row(const Stmt& s) {
  return WorkerInfo{s.i64(0), s.text(1), s.text(2), s.text(3), s.text(4), s.i64(5), s.i64(6), s.i64(7), s.text(8)};
}

JobInfo job_row(const Stmt& s) {
  JobInfo j;
  j.id = s.i64(0);
  j.spec = JobSpec{s.text(1), s.text(2), s.text(3), s.text(4), s.text(5)};
  j.state = s.text(6);
  j.worker = s.i64(7);
  j.worker_name = s.text(8);
  j.worker_fingerprint = s.text(9);
  j.lease_until_ms = s.i64(10);
  j.attempts = static_cast<int>(s.i64(11));
  j.result = s.text(12);
  j.created_ms = s.i64(13);
  j.finished_ms = s.i64(14);
  return j;
}

class SqliteJobs final : public JobTables {
 public:
  explicit SqliteJobs(std::unique_ptr<Db> db) : db_(std::move(db)) {}

  Expected<WorkerInfo> register_worker(const WorkerInfo& w, int64_t now_ms) override {
    auto st = db_->prepare(
        "INSERT INTO jobs_workers(ns, device_key, name, fingerprint, registered_ms, heartbeat_ms, token_id, "
        "secret_sha256) VALUES(?1, ?2, ?3, ?4, ?5, ?5, ?6, ?7)");
    if (!st.ok()) return st.status();
    st->bind(1, w.ns).bind(2, w.device_key).bind(3, w.name).bind(4, w.fingerprint).bind(5, now_ms).bind(6, w.token_id)
        .bind(7, w.secret_sha256);
    MLK_RETURN_IF_ERROR(st->run());
    const int64_t id = sqlite3_last_insert_rowid(db_->raw());
    MLK_RETURN_IF_ERROR(run("DELETE FROM jobs_workers WHERE token_id=?1 AND id NOT IN (SELECT id FROM jobs_workers "
                            "WHERE token_id=?1 ORDER BY heartbeat_ms DESC, id DESC LIMIT ?2)",
                            w.token_id, static_cast<int64_t>(kMaxWorkersPerToken)));
    return find_worker(w.ns, id);
  }
  Expected<WorkerInfo> find_worker(const std::string& ns, int64_t id) override {
    auto st = db_->prepare(std::string("SELECT ") + kWorkerColumns + " FROM jobs_workers WHERE ns=?1 AND id=?2");
    if (!st.ok()) return st.status();
    st->bind(1, ns).bind(2, id);
    auto r = st->step();
    if (!r.ok()) return r.status();
    if (!*r) return Status::NotFound("no worker " + std::to_string(id) + " in namespace `" + ns + "` (register first)");
    return worker_row(*st);
  }
  Expected<std::vector<WorkerInfo>> workers(const std::string& ns, const std::string& device_key, int64_t since_ms,
                                            int limit) override {
    auto st = db_->prepare(std::string("SELECT ") + kWorkerColumns +
                           " FROM jobs_workers WHERE ns=?1 AND (?2='' OR device_key=?2) AND heartbeat_ms>=?3 ORDER BY id DESC LIMIT ?4");
    if (!st.ok()) return st.status();
    st->bind(1, ns).bind(2, device_key).bind(3, since_ms).bind(4, static_cast<int64_t>(limit));
    std::vector<WorkerInfo> out;
    while (true) {
      auto r = st->step();
      if (!r.ok()) return r.status();
      if (!*r) break;
      out.push_back(worker_row(*st));
    }
    std::reverse(out.begin(), out.end());  // the newest `limit`, oldest first
    return out;
  }

  Expected<int64_t> submit(const JobSpec& j, int64_t now_ms) override {
    auto st = db_->prepare(
        "INSERT INTO jobs_queue(ns, device_key, fingerprint, setup, payload, created_ms) VALUES(?1, ?2, ?3, ?4, ?5, ?6)");
    if (!st.ok()) return st.status();
    st->bind(1, j.ns).bind(2, j.device_key).bind(3, j.fingerprint).bind(4, j.setup).bind(5, j.payload).bind(6, now_ms);
    MLK_RETURN_IF_ERROR(st->run());
    return sqlite3_last_insert_rowid(db_->raw());
  }

  Expected<std::optional<JobInfo>> lease(const std::string& ns, const WorkerInfo& w, int64_t lease_ms,
                                         int64_t now_ms) override {
    int64_t id = 0;
    MLK_RETURN_IF_ERROR(cache::sql::write_txn(*db_, [&]() -> Status {
      MLK_RETURN_IF_ERROR(requeue_expired(ns, now_ms));
      MLK_RETURN_IF_ERROR(run("UPDATE jobs_workers SET heartbeat_ms=?2 WHERE id=?1", w.id, now_ms));
      auto st = db_->prepare(
          "SELECT id FROM jobs_queue WHERE ns=?1 AND state='queued' AND device_key=?2 AND (fingerprint='' OR "
          "fingerprint=?3) ORDER BY id LIMIT 1");
      if (!st.ok()) return st.status();
      st->bind(1, ns).bind(2, w.device_key).bind(3, w.fingerprint);
      auto r = st->step();
      if (!r.ok()) return r.status();
      if (!*r) return Status::Ok();
      id = st->i64(0);
      auto up = db_->prepare(
          "UPDATE jobs_queue SET state='running', worker=?2, lease_until_ms=?3, attempts=attempts+1 WHERE id=?1");
      if (!up.ok()) return up.status();
      up->bind(1, id).bind(2, w.id).bind(3, now_ms + lease_ms);
      return up->run();
    }));
    if (id == 0) return std::optional<JobInfo>();
    auto j = read(ns, id);
    if (!j.ok()) return j.status();
    return std::optional<JobInfo>(std::move(*j));
  }

  Expected<bool> extend(const std::string& ns, int64_t id, int64_t worker, int64_t lease_ms, int64_t now_ms) override {
    auto st = db_->prepare(
        "UPDATE jobs_queue SET lease_until_ms=?4 WHERE ns=?1 AND id=?2 AND worker=?3 AND state='running' AND "
        "lease_until_ms>=?5");
    if (!st.ok()) return st.status();
    st->bind(1, ns).bind(2, id).bind(3, worker).bind(4, now_ms + lease_ms).bind(5, now_ms);
    MLK_RETURN_IF_ERROR(st->run());
    bool held = sqlite3_changes(db_->raw()) == 1;
    MLK_RETURN_IF_ERROR(run("UPDATE jobs_workers SET heartbeat_ms=?2 WHERE id=?1", worker, now_ms));
    return held;
  }

  Expected<bool> finish(const std::string& ns, int64_t id, int64_t worker, bool ok, const std::string& result,
                        int64_t now_ms) override {
    auto st = db_->prepare(
        "UPDATE jobs_queue SET state=?4, result=?5, finished_ms=?6 WHERE ns=?1 AND id=?2 AND worker=?3 AND "
        "state='running' AND lease_until_ms>=?6");
    if (!st.ok()) return st.status();
    st->bind(1, ns).bind(2, id).bind(3, worker).bind(4, ok ? "done" : "failed").bind(5, result).bind(6, now_ms);
    MLK_RETURN_IF_ERROR(st->run());
    return sqlite3_changes(db_->raw()) == 1;
  }

  Expected<JobInfo> get(const std::string& ns, int64_t id, int64_t now_ms) override {
    MLK_RETURN_IF_ERROR(cache::sql::write_txn(*db_, [&] { return requeue_expired(ns, now_ms); }));
    return read(ns, id);
  }

  Expected<int64_t> open_jobs(const std::string& ns) override {
    auto st = db_->prepare("SELECT COUNT(*) FROM jobs_queue WHERE ns=?1 AND state IN ('queued', 'running')");
    if (!st.ok()) return st.status();
    st->bind(1, ns);
    auto r = st->step();
    if (!r.ok()) return r.status();
    return *r ? st->i64(0) : int64_t{0};
  }

  Status forget_finished(const std::string& ns, int64_t keep) override {
    auto st = db_->prepare(
        // The newest by when they finished (then by id): a job that finishes
        // late, behind newer ones, keeps its result (review 14).
        "DELETE FROM jobs_queue WHERE ns=?1 AND state IN ('done', 'failed') AND id NOT IN (SELECT id FROM jobs_queue "
        "WHERE ns=?1 AND state IN ('done', 'failed') ORDER BY finished_ms DESC, id DESC LIMIT ?2)");
    if (!st.ok()) return st.status();
    st->bind(1, ns).bind(2, keep);
    return st->run();
  }

  Expected<bool> cancel(const std::string& ns, int64_t id, const std::string& why, int64_t now_ms) override {
    auto st = db_->prepare(
        "UPDATE jobs_queue SET state='failed', result=?3, finished_ms=?4 WHERE ns=?1 AND id=?2 AND "
        "state IN ('queued', 'running')");
    if (!st.ok()) return st.status();
    st->bind(1, ns).bind(2, id).bind(3, why).bind(4, now_ms);
    MLK_RETURN_IF_ERROR(st->run());
    return sqlite3_changes(db_->raw()) == 1;
  }

 private:
  Status run(const char* sql, int64_t a, int64_t b) {
    auto st = db_->prepare(sql);
    if (!st.ok()) return st.status();
    st->bind(1, a).bind(2, b);
    return st->run();
  }
  Expected<JobInfo> read(const std::string& ns, int64_t id) {
    auto st = db_->prepare(std::string(kJobSelect) + "WHERE j.ns=?1 AND j.id=?2");
    if (!st.ok()) return st.status();
    st->bind(1, ns).bind(2, id);
    auto r = st->step();
    if (!r.ok()) return r.status();
    if (!*r) return Status::NotFound("no job " + std::to_string(id) + " in namespace `" + ns + "`");
    return job_row(*st);
  }
  // Expired leases: queued again, or failed after kMaxJobAttempts.
  Status requeue_expired(const std::string& ns, int64_t now_ms) {
    auto fail = db_->prepare(
        "UPDATE jobs_queue SET state='failed', finished_ms=?2, result='{\"error\":\"the lease expired ' || attempts || "
        "' times without a result (the last worker was worker ' || worker || ')\"}' WHERE ns=?1 AND state='running' "
        "AND lease_until_ms<?2 AND attempts>=?3");
    if (!fail.ok()) return fail.status();
    fail->bind(1, ns).bind(2, now_ms).bind(3, int64_t{kMaxJobAttempts});
    MLK_RETURN_IF_ERROR(fail->run());
    auto again = db_->prepare("UPDATE jobs_queue SET state='queued' WHERE ns=?1 AND state='running' AND lease_until_ms<?2");
    if (!again.ok()) return again.status();
    again->bind(1, ns).bind(2, now_ms);
    return again->run();
  }

  std::unique_ptr<Db> db_;
};

}  // namespace

Expected<std::unique_ptr<JobTables>> sqlite_jobs(const std::string& store_path) {
  auto db = Db::Open(store_path, SQLITE_OPEN_READWRITE, 10000);
  if (!db.ok()) return db.status();
  Db& d = **db;
  MLK_RETURN_IF_ERROR(d.exec("PRAGMA synchronous=FULL"));  // an acknowledged result survives a power loss
  MLK_RETURN_IF_ERROR(cache::sql::write_txn(d, [&]() -> Status {
    MLK_RETURN_IF_ERROR(d.exec(kSchema));
    // Stores made before workers had secrets: add the columns (their rows match no secret).
    for (const char* alter : {"ALTER TABLE jobs_workers ADD COLUMN token_id INTEGER NOT NULL DEFAULT 0",
                              "ALTER TABLE jobs_workers ADD COLUMN secret_sha256 TEXT NOT NULL DEFAULT ''"}) {
      Status s = d.exec(alter);
      if (!s.ok() && s.message().find("duplicate column") == std::string::npos) return s;
    }
    return d.exec("CREATE INDEX IF NOT EXISTS jobs_workers_token ON jobs_workers(token_id, heartbeat_ms)");
  }));
  return std::unique_ptr<JobTables>(new SqliteJobs(std::move(*db)));
}

}  // namespace mlk::service
