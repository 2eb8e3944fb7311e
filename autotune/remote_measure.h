// `mlk tune --workers KEY`: the tuner's candidates measured by `mlk worker`s
// of device key KEY through a server's jobs (client/jobs_client.h,
// docs/deploy.md, "Measurement workers"). The measurement setup (program
// source, inputs, references) is stored once; each candidate is one job.
//
// Results are compared within one fingerprint only: the first result fixes
// the fingerprint of the run, and every later job may only be leased by a
// worker with that fingerprint. A job no worker leases within `wait_s` ends
// the tuning with an error (the measurer's, autotune/measurer.h: the search
// stops with it, and `mlk tune` says it): never a hang.
// Each result is a progress line naming the worker.
//
// Thread-safe: the tuner measures up to TuneOptions::parallel_measurements
// candidates at once (one job each), and use_workers sets that to the number
// of live workers of the key.
#pragma once

#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "autotune/cached_tune.h"
#include "base/signing.h"
#include "autotune/measure.h"
#include "autotune/measurer.h"
#include "client/jobs_client.h"

namespace mlk::tune {

struct RemoteMeasureOptions {
  std::string servers;     // one URL or several, comma-separated
  std::string token;       // bearer token ($MLK_TOKEN)
  std::string ns;          // the server namespace; "" the token's team
  std::string device_key;  // --workers
  double wait_s = 60;      // --worker-wait: the longest a job may stay unleased
  bool progress = true;
  std::string source_path;  // the .tl file the setup's module came from
  std::string precision = "f32";  // the policy applied to it (lang/precision.h), which workers apply too
  // Set (GPU profiles, or `mlk tune --workers-run-artifacts`): each candidate
  // is built here for this profile and sent as a one-candidate set
  // (artifact/candidate_set.h), which the worker runs with mlk-measure's
  // runner, compiling nothing. Unset: the worker compiles the source.
  std::optional<Profile> artifacts_for;
  // `mlk tune --sign-packs KEYFILE`: each pack is signed with this key for the
  // namespace (cache/signatures.h, sign_pack), so that a signed namespace
  // takes the job and workers with trusted signers run it.
  std::optional<SigningKey> pack_key;
};

class RemoteMeasurer : public Measurer {
 public:
  static Expected<std::shared_ptr<RemoteMeasurer>> Open(RemoteMeasureOptions o);
  // Measures one candidate on a worker. An error when remote measurement
  // cannot go on (no worker leased the job within wait_s, the server gone,
  // a bad answer); a job that failed on its worker is a Measurement
  // (verdict error). Several threads may call it at once.
  Expected<Measurement> measure(const MeasureSetup& setup, const Schedule& schedule) override;
  int concurrency() const override { return concurrency_; }
  void set_concurrency(int n) { concurrency_ = std::max(1, n); }
  // The first error measure() returned; OK while there was none.
  Status failure() const;
  // The workers of the device key that sent a heartbeat or registered within
  // the last `seen_s` seconds (whatever their fingerprint); 0 when the server
  // cannot say.
  int live_workers(int seen_s = 60);
  // The fingerprint every result came from ("" before the first), the
  // workers that measured, and how many jobs: read once measuring is over.
  const std::string& fingerprint() const { return fingerprint_; }
  const std::set<std::string>& workers() const { return workers_; }
  int jobs() const { return jobs_; }
  const std::string& device_key() const { return o_.device_key; }

 private:
  RemoteMeasurer(RemoteMeasureOptions o, std::unique_ptr<client::JobsClient> c) : o_(std::move(o)), c_(std::move(c)) {}
  Expected<std::string> setup_digest(const MeasureSetup& setup);
  // The candidate built and packed (a build failure is its Measurement).
  Expected<std::string> candidate_pack(const MeasureSetup& setup, const Schedule& schedule, Measurement& failed);
  Expected<client::JobView> wait_for(int64_t id);
  Status fail(Status s);
  RemoteMeasureOptions o_;
  std::unique_ptr<client::JobsClient> c_;
  std::string pack_ns_;  // the namespace packs are signed for (with pack_key)
  std::string setup_, fingerprint_;
  std::set<std::string> workers_;
  int jobs_ = 0;
  int concurrency_ = 1;
  std::mutex mu_;  // c_ (one connection at a time) and the members above
  mutable std::mutex failure_mu_;
  Status failure_;
};

// Makes `r` measure its candidates through a RemoteMeasurer on `o`, up to
// as many at once as the key has live workers now (at least one), said in a
// progress line, and record in the stored entry's metadata who measured it ("measured_by":
// device key, fingerprint, workers, jobs), after r's own before_store.
// Returns the measurer, whose failure() tells an error of the tuning that
// came from remote measurement from any other.
Expected<std::shared_ptr<RemoteMeasurer>> use_workers(tune::TuneRequest& r, RemoteMeasureOptions o);

}  // namespace mlk::tune
