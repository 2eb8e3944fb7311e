// JobTables on PostgreSQL (jobs.h): a worker leases with
// `FOR UPDATE SKIP LOCKED`, so replicas on one database never hand one job
// to two workers, and a job locked by another lease is skipped, not waited on.
#include "cache/pg.h"
#include "service/jobs.h"
#include "service/jobs_sql.h"

namespace mlk::service {

namespace {

using cache::pg::Conn;
using cache::pg::Rows;

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS jobs_workers(
  id bigserial PRIMARY KEY,
  ns text NOT NULL,
  device_key text NOT NULL,
  name text NOT NULL,
  fingerprint text NOT NULL,
  registered_ms bigint NOT NULL,
  heartbeat_ms bigint NOT NULL);
ALTER TABLE jobs_workers ADD COLUMN IF NOT EXISTS token_id bigint NOT NULL DEFAULT 0;
ALTER TABLE jobs_workers ADD COLUMN IF NOT EXISTS secret_sha256 text NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS jobs_workers_token ON jobs_workers(token_id, heartbeat_ms);
CREATE TABLE IF NOT EXISTS jobs_queue(
  id bigserial PRIMARY KEY,
  ns text NOT NULL,
  device_key text NOT NULL,
  fingerprint text NOT NULL DEFAULT '',
  setup text NOT NULL,
  payload text NOT NULL,
  state text NOT NULL DEFAULT 'queued',
  worker bigint NOT NULL DEFAULT 0,
  lease_until_ms bigint NOT NULL DEFAULT 0,
  attempts integer NOT NULL DEFAULT 0,
  result text NOT NULL DEFAULT '',
  created_ms bigint NOT NULL,
  finished_ms bigint NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS jobs_queue_order ON jobs_queue(ns, device_key, state, id);
CREATE INDEX IF NOT EXISTS jobs_queue_setup ON jobs_queue(setup, state);
)sql";


std::string str(int64_t v) { return std::to_string(v); }

WorkerInfo worker_row(const Rows& r, int i) {
  return WorkerInfo{r.i64(i, 0), r.text(i, 1), r.text(i, 2), r.text(i, 3), r.text(i, 4),
                    r.i64(i, 5), r.i64(i, 6), r.i64(i, 7), r.text(i, 8)};
}

JobInfo job_row(const Rows& r, int i) {
  JobInfo j;
  j.id = r.i64(i, 0);
  j.spec = JobSpec{r.text(i, 1), r.text(i, 2), r.text(i, 3), r.text(i, 4), r.text(i, 5)};
  j.state = r.text(i, 6);
  j.worker = r.i64(i, 7);
  j.worker_name = r.text(i, 8);
  j.worker_fingerprint = r.text(i, 9);
  j.lease_until_ms = r.i64(i, 10);
  j.attempts = static_cast<int>(r.i64(i, 11));
  j.result = r.text(i, 12);
  j.created_ms = r.i64(i, 13);
  j.finished_ms = r.i64(i, 14);
  return j;
}

// Times are the database's (cache::pg::server_now_ms), not the replica's:
// every replica sees one clock for leases, heartbeats and expiry, whatever
// `now_ms` its caller passed (JobClock::kCaller: the caller's, for tests).
class PgJobs final : public JobTables {
 public:
  PgJobs(std::unique_ptr<Conn> c, JobClock clock) : c_(std::move(c)), clock_(clock) {}

  Expected<WorkerInfo> register_worker(const WorkerInfo& w, int64_t now_ms) override {
    MLK_RETURN_IF_ERROR(use_db_clock(now_ms));
    auto r = c_->exec(std::string("INSERT INTO jobs_workers(ns, device_key, name, fingerprint, registered_ms, "
                                  "heartbeat_ms, token_id, secret_sha256) VALUES($1, $2, $3, $4, $5, $5, $6, $7) "
                                  "RETURNING ") + kWorkerColumns,
                      {w.ns, w.device_key, w.name, w.fingerprint, str(now_ms), str(w.token_id), w.secret_sha256});
    if (!r.ok()) return r.status();
    MLK_RETURN_IF_ERROR(c_->exec("DELETE FROM jobs_workers WHERE token_id=$1 AND id NOT IN (SELECT id FROM "
                                 "jobs_workers WHERE token_id=$1 ORDER BY heartbeat_ms DESC, id DESC LIMIT $2)",
                                 {str(w.token_id), str(kMaxWorkersPerToken)})
                            .status());
    return worker_row(*r, 0);
  }
  Expected<WorkerInfo> find_worker(const std::string& ns, int64_t id) override {
    auto r = c_->exec(std::string("SELECT ") + kWorkerColumns + " FROM jobs_workers WHERE ns=$1 AND id=$2",
                      {ns, str(id)});
    if (!r.ok()) return r.status();
    if (r->empty()) return Status::NotFound("no worker " + str(id) + " in namespace `" + ns + "` (register first)");
    return worker_row(*r, 0);
  }
  Expected<std::vector<WorkerInfo>> workers(const std::string& ns, const std::string& device_key, int64_t since_ms,
                                            int limit) override {
    auto r = c_->exec(std::string("SELECT ") + kWorkerColumns +
                          " FROM jobs_workers WHERE ns=$1 AND ($2='' OR device_key=$2) AND heartbeat_ms>=$3 ORDER BY id DESC LIMIT $4",
                      {ns, device_key, str(since_ms), str(limit)});
    if (!r.ok()) return r.status();
    std::vector<WorkerInfo> out;
    for (int i = r->size() - 1; i >= 0; --i) out.push_back(worker_row(*r, i));  // the newest `limit`, oldest first
    return out;
  }

  Expected<int64_t> submit(const JobSpec& j, int64_t now_ms) override {
    MLK_RETURN_IF_ERROR(use_db_clock(now_ms));
    auto r = c_->exec("INSERT INTO jobs_queue(ns, device_key, fingerprint, setup, payload, created_ms) "
                      "VALUES($1, $2, $3, $4, $5, $6) RETURNING id",
                      {j.ns, j.device_key, j.fingerprint, j.setup, j.payload, str(now_ms)});
    if (!r.ok()) return r.status();
    return r->i64(0, 0);
  }

  Expected<std::optional<JobInfo>> lease(const std::string& ns, const WorkerInfo& w, int64_t lease_ms,
                                         int64_t now_ms) override {
    MLK_RETURN_IF_ERROR(use_db_clock(now_ms));
    MLK_RETURN_IF_ERROR(requeue_expired(ns, now_ms));
    MLK_RETURN_IF_ERROR(
        c_->exec("UPDATE jobs_workers SET heartbeat_ms=$2 WHERE id=$1", {str(w.id), str(now_ms)}).status());
    auto r = c_->exec(
        "UPDATE jobs_queue SET state='running', worker=$1, lease_until_ms=$2, attempts=attempts+1 "
        "WHERE id=(SELECT id FROM jobs_queue WHERE ns=$3 AND state='queued' AND device_key=$4 "
        "AND (fingerprint='' OR fingerprint=$5) ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id",
        {str(w.id), str(now_ms + lease_ms), ns, w.device_key, w.fingerprint});
    if (!r.ok()) return r.status();
    if (r->empty()) return std::optional<JobInfo>();
    auto j = read(ns, r->i64(0, 0));
    if (!j.ok()) return j.status();
    return std::optional<JobInfo>(std::move(*j));
  }

  Expected<bool> extend(const std::string& ns, int64_t id, int64_t worker, int64_t lease_ms, int64_t now_ms) override {
    MLK_RETURN_IF_ERROR(use_db_clock(now_ms));
    auto r = c_->exec("UPDATE jobs_queue SET lease_until_ms=$4 WHERE ns=$1 AND id=$2 AND worker=$3 AND "
                      "state='running' AND lease_until_ms>=$5",
                      {ns, str(id), str(worker), str(now_ms + lease_ms), str(now_ms)});
    if (!r.ok()) return r.status();
    MLK_RETURN_IF_ERROR(
        c_->exec("UPDATE jobs_workers SET heartbeat_ms=$2 WHERE id=$1", {str(worker), str(now_ms)}).status());
    return r->affected() == 1;
  }

  Expected<bool> finish(const std::string& ns, int64_t id, int64_t worker, bool ok, const std::string& result,
                        int64_t now_ms) override {
    MLK_RETURN_IF_ERROR(use_db_clock(now_ms));
    auto r = c_->exec("UPDATE jobs_queue SET state=$4, result=$5, finished_ms=$6 WHERE ns=$1 AND id=$2 AND "
                      "worker=$3 AND state='running' AND lease_until_ms>=$6",
                      {ns, str(id), str(worker), ok ? "done" : "failed", result, str(now_ms)});
    if (!r.ok()) return r.status();
    return r->affected() == 1;
  }

  Expected<JobInfo> get(const std::string& ns, int64_t id, int64_t now_ms) override {
    MLK_RETURN_IF_ERROR(use_db_clock(now_ms));
    MLK_RETURN_IF_ERROR(requeue_expired(ns, now_ms));
    return read(ns, id);
  }

  Expected<int64_t> open_jobs(const std::string& ns) override {
    auto r = c_->exec("SELECT COUNT(*) FROM jobs_queue WHERE ns=$1 AND state IN ('queued', 'running')", {ns});
    if (!r.ok()) return r.status();
    return r->empty() ? int64_t{0} : r->i64(0, 0);
  }

  Status forget_finished(const std::string& ns, int64_t keep) override {
    // The newest by when they finished (then by id): a job that finishes
    // late, behind newer ones, keeps its result (review 14).
    return c_->exec("DELETE FROM jobs_queue WHERE ns=$1 AND state IN ('done', 'failed') AND id NOT IN (SELECT id FROM "
                    "jobs_queue WHERE ns=$1 AND state IN ('done', 'failed') ORDER BY finished_ms DESC, id DESC LIMIT $2)",
                    {ns, str(keep)})
        .status();
  }

  Expected<bool> cancel(const std::string& ns, int64_t id, const std::string& why, int64_t now_ms) override {
    MLK_RETURN_IF_ERROR(use_db_clock(now_ms));
    auto r = c_->exec("UPDATE jobs_queue SET state='failed', result=$3, finished_ms=$4 WHERE ns=$1 AND id=$2 AND "
                      "state IN ('queued', 'running')",
                      {ns, str(id), why, str(now_ms)});
    if (!r.ok()) return r.status();
    return r->affected() == 1;
  }

 private:
  Expected<JobInfo> read(const std::string& ns, int64_t id) {
    auto r = c_->exec(std::string(kJobSelect) + "WHERE j.ns=$1 AND j.id=$2", {ns, str(id)});
    if (!r.ok()) return r.status();
    if (r->empty()) return Status::NotFound("no job " + str(id) + " in namespace `" + ns + "`");
    return job_row(*r, 0);
  }
  // Expired leases: queued again, or failed after kMaxJobAttempts.
  Status use_db_clock(int64_t& now_ms) {
    if (clock_ == JobClock::kCaller) return Status::Ok();
    auto now = cache::pg::server_now_ms(*c_);
    if (!now.ok()) return now.status();
    now_ms = *now;
    return Status::Ok();
  }

  Status requeue_expired(const std::string& ns, int64_t now_ms) {
    MLK_RETURN_IF_ERROR(
        c_->exec("UPDATE jobs_queue SET state='failed', finished_ms=$2, result='{\"error\":\"the lease expired ' || "
                 "attempts || ' times without a result (the last worker was worker ' || worker || ')\"}' "
                 "WHERE ns=$1 AND state='running' AND lease_until_ms<$2 AND attempts>=$3",
                 {ns, str(now_ms), str(kMaxJobAttempts)})
            .status());
    return c_->exec("UPDATE jobs_queue SET state='queued' WHERE ns=$1 AND state='running' AND lease_until_ms<$2",
                    {ns, str(now_ms)})
        .status();
  }

  std::unique_ptr<Conn> c_;
  JobClock clock_;
};

}  // namespace

Expected<std::unique_ptr<JobTables>> pg_jobs(const std::string& conninfo, JobClock clock) {
  auto c = cache::pg::open_with_schema(conninfo, "service-jobs-schema", kSchema);
  if (!c.ok()) return c.status();
  return std::unique_ptr<JobTables>(new PgJobs(std::move(*c), clock));
}

}  // namespace mlk::service
