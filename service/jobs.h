// Measurement jobs and the workers that run them (docs/api.md, "Jobs"), in
// the way TVM's tracker queues work per device key, but on the database:
//
//   jobs_workers(id, ns, device_key, name, fingerprint, registered_ms, heartbeat_ms,
//                token_id, secret_sha256)
//   jobs_queue(id, ns, device_key, fingerprint, setup, payload, state, worker,
//                lease_until_ms, attempts, result, created_ms, finished_ms)
//
// A job is a candidate schedule (`payload`, JSON) to measure with the
// measurement setup stored as the blob `setup` (sha256), on a worker of
// `device_key` whose hardware fingerprint is `fingerprint` (empty: any).
// States: queued -> running (leased by one worker until lease_until_ms) ->
// done or failed; a running job whose lease expired is queued again (its
// attempts counted) or, after kMaxAttempts leases, failed with a message
// naming the last worker. Leasing takes the oldest queued job of the key
// that nobody else is taking: `FOR UPDATE SKIP LOCKED` on PostgreSQL, one
// write transaction on SQLite. Only the worker that holds a job's lease may
// extend it or report its result, and the API lets a worker act only with
// the secret it was given at registration, from the token that registered it
// (token_id; the secret is stored as its sha256).
//
// Times are unix milliseconds, passed in by the caller (the API uses the
// clock; tests may not).
//
// Threading: one JobTables per thread (the SessionPool gives each request
// its own).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cache/sqlite.h"

namespace mlk::service {

// A job whose lease expired this many times is failed, not queued again.
constexpr int kMaxJobAttempts = 3;

struct WorkerInfo {
  int64_t id = 0;
  std::string ns, device_key, name, fingerprint;
  int64_t registered_ms = 0, heartbeat_ms = 0;
  int64_t token_id = 0;       // the token that registered the worker
  std::string secret_sha256;  // of the secret handed out at registration ("" for rows of older servers: no secret matches)
};

struct JobSpec {
  std::string ns, device_key;
  std::string fingerprint;  // the fingerprint a worker must have; "" any
  std::string setup;        // sha256 of the measurement setup blob
  std::string payload;      // JSON object: the candidate and its limits
};

struct JobInfo {
  int64_t id = 0;
  JobSpec spec;
  std::string state;  // queued, running, done, failed
  int64_t worker = 0; // the worker holding (or that last held) the lease; 0 none
  std::string worker_name, worker_fingerprint;
  int64_t lease_until_ms = 0;
  int attempts = 0;
  std::string result;  // JSON (done: the measurement; failed: {"error": ...}); "" while not finished
  int64_t created_ms = 0, finished_ms = 0;
};

// Registrations one worker token keeps (JobTables::register_worker).
inline constexpr int kMaxWorkersPerToken = 1000;

class JobTables {
 public:
  virtual ~JobTables() = default;

  // A new worker row (each start of `mlk worker` registers anew), from the
  // fields of `w` but its id and times. A token keeps at most
  // kMaxWorkersPerToken rows: beyond them, the ones heard from longest ago
  // are dropped (their leases run out and requeue), so one worker token
  // cannot grow the table without bound.
  virtual Expected<WorkerInfo> register_worker(const WorkerInfo& w, int64_t now_ms) = 0;
  // NotFound for an unknown worker (or one of another namespace).
  virtual Expected<WorkerInfo> find_worker(const std::string& ns, int64_t id) = 0;
  // Workers of `ns` and `device_key` ("" every key) seen at or after
  // `since_ms`: the `limit` registered last, oldest first.
  virtual Expected<std::vector<WorkerInfo>> workers(const std::string& ns, const std::string& device_key,
                                                    int64_t since_ms, int limit) = 0;

  virtual Expected<int64_t> submit(const JobSpec& job, int64_t now_ms) = 0;
  // Requeues (or fails) the expired leases of `ns`, then leases the oldest
  // queued job for `worker`'s key and fingerprint until now + lease_ms;
  // nullopt when there is none. Counts as the worker's heartbeat.
  virtual Expected<std::optional<JobInfo>> lease(const std::string& ns, const WorkerInfo& worker, int64_t lease_ms,
                                                 int64_t now_ms) = 0;
  // Extends the lease of job `id` held by `worker` to now + lease_ms; false
  // when the worker does not hold it (expired and requeued, or finished).
  virtual Expected<bool> extend(const std::string& ns, int64_t id, int64_t worker, int64_t lease_ms, int64_t now_ms) = 0;
  // Records the result of job `id` (state done, or failed when !ok); false
  // when `worker` does not hold its lease (the result is dropped).
  virtual Expected<bool> finish(const std::string& ns, int64_t id, int64_t worker, bool ok, const std::string& result,
                                int64_t now_ms) = 0;
  // The job with the worker's name and fingerprint (NotFound when `ns` has
  // no job `id`). Requeues the expired leases of `ns` first.
  virtual Expected<JobInfo> get(const std::string& ns, int64_t id, int64_t now_ms) = 0;
  // How many jobs of `ns` are queued or running.
  virtual Expected<int64_t> open_jobs(const std::string& ns) = 0;
  // Deletes the finished (done or failed) jobs of `ns` but the newest `keep`:
  // what a namespace's jobs hold is bounded, however many it submits.
  virtual Status forget_finished(const std::string& ns, int64_t keep) = 0;
  // A queued or running job is failed with `why`; false when it had finished.
  virtual Expected<bool> cancel(const std::string& ns, int64_t id, const std::string& why, int64_t now_ms) = 0;
};

// The tables in the store's SQLite file (a second connection, service_db.h).
Expected<std::unique_ptr<JobTables>> sqlite_jobs(const std::string& store_path);
// The tables in the shared backend's PostgreSQL database; created when missing.
// Which clock times leases, heartbeats and expiry on PostgreSQL: the
// database's (one for every replica; what `mlk serve` uses), or the
// `now_ms` callers pass (tests that step a clock of their own).
enum class JobClock { kDatabase, kCaller };
Expected<std::unique_ptr<JobTables>> pg_jobs(const std::string& conninfo, JobClock clock = JobClock::kDatabase);

}  // namespace mlk::service
