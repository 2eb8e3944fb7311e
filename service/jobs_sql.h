// The SQL both job backends (service/pg_jobs.cpp, service/sqlite_jobs.cpp)
// share: the column lists their row readers expect, in that order. Internal
// to service/.
#pragma once

namespace mlk::service {

constexpr const char* kWorkerColumns =
    "id, ns, device_key, name, fingerprint, registered_ms, heartbeat_ms, token_id, secret_sha256";
constexpr const char* kJobSelect =
    "SELECT j.id, j.ns, j.device_key, j.fingerprint, j.setup, j.payload, j.state, j.worker, COALESCE(w.name, ''), "
    "COALESCE(w.fingerprint, ''), j.lease_until_ms, j.attempts, j.result, j.created_ms, j.finished_ms "
    "FROM jobs_queue j LEFT JOIN jobs_workers w ON w.id=j.worker ";

}  // namespace mlk::service
