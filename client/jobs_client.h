// The client of a server's measurement jobs (/v1/jobs/..., docs/api.md,
// "Jobs"): the side that submits candidates (`mlk tune --workers`) and the
// side that measures them (`mlk worker`). Over RemoteStore, so several
// comma-separated URLs fail over and transient failures are retried.
//
// Errors as RemoteStore's (remote_store.h); a lease that is no longer held
// (409) is not an error but `false`. What the server answers is checked:
// an answer that is not the expected JSON is Corruption naming the route.
//
// Each request is a new connection (RemoteOptions::keep_alive false): a
// server thread serves one connection at a time, and polling workers and
// tuners holding theirs open would use up `mlk serve --threads`.
//
// Not thread-safe (one connection); a worker's heartbeat thread opens its own.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "client/remote_store.h"

namespace mlk::client {

struct WorkerView {
  int64_t id = 0;
  std::string device_key, name, fingerprint;
  int64_t heartbeat_ms = 0;
  std::string secret;  // register_worker's answer only: what lease, heartbeat and report present
};

struct JobView {
  int64_t id = 0;
  std::string device_key, setup, payload;  // payload: JSON text
  std::string state;                       // queued, running, done, failed
  int64_t worker = 0;
  std::string worker_name, worker_fingerprint;
  int attempts = 0;
  std::string result;  // JSON text; "" while not finished
};

class JobsClient {
 public:
  static Expected<std::unique_ptr<JobsClient>> Open(RemoteOptions options);
  const std::string& url() const { return remote_->url(); }
  // The token's team (GET /v1/whoami): the namespace when none was given.
  Expected<std::string> whoami() { return remote_->whoami(); }

  // The submitting side.
  Expected<std::string> put_setup(std::string_view bytes);  // the setup's sha256
  Expected<int64_t> submit(const std::string& device_key, const std::string& setup, const std::string& payload_json,
                           const std::string& fingerprint);
  Expected<JobView> get(int64_t id);
  Status cancel(int64_t id, const std::string& why);
  Expected<std::vector<WorkerView>> workers(const std::string& device_key, int seen_s);

  // The measuring side.
  Expected<WorkerView> register_worker(const std::string& device_key, const std::string& name,
                                       const std::string& fingerprint);
  // `me` is what register_worker answered (its id and secret), with the same token.
  Expected<std::optional<JobView>> lease(const WorkerView& me, double lease_s);
  Expected<bool> heartbeat(int64_t job, const WorkerView& me, double lease_s);
  Expected<bool> report(int64_t job, const WorkerView& me, bool ok, const std::string& result_json);
  // The job's setup bytes, checked against its sha256.
  Expected<std::string> setup_of(const JobView& job);

 private:
  explicit JobsClient(std::unique_ptr<RemoteStore> r) : remote_(std::move(r)) {}
  // POST path with a JSON body (or GET when body is null); the parsed answer
  // of a 2xx, `conflict` set on a 409 when asked for, else the failure.
  Expected<std::string> call(const std::string& method, const std::string& path, const std::string& body,
                             bool* conflict = nullptr);
  std::unique_ptr<RemoteStore> remote_;
};

}  // namespace mlk::client
