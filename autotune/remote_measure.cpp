#include "autotune/remote_measure.h"

#include "cache/signatures.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include <unistd.h>

#include "autotune/candidate_export.h"
#include "autotune/measure_wire.h"
#include "base/files.h"
#include "base/log.h"
#include "base/sha256.h"
#include "cache/signatures.h"
#include "targets/detect.h"
#include "base/json.h"

namespace mlk::tune {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

Expected<std::shared_ptr<RemoteMeasurer>> RemoteMeasurer::Open(RemoteMeasureOptions o) {
  if (o.servers.empty())
    return Status::Usage("--workers needs a server: give --server URL (or --cache URL, or set $MLK_SERVERS)");
  client::RemoteOptions ro;
  ro.url = o.servers;
  ro.token = o.token;
  ro.ns = o.ns;
  auto c = client::JobsClient::Open(ro);
  if (!c.ok()) return c.status();
  std::string pack_ns = o.ns;
  if (o.pack_key && pack_ns.empty()) {  // signed for the token's team
    auto team = (*c)->whoami();
    if (!team.ok()) return Status::InvalidArgument("--sign-packs: cannot tell which namespace to sign for (" +
                                                   team.status().message() + "); give --namespace NAME");
    pack_ns = *team;
  }
  auto m = std::shared_ptr<RemoteMeasurer>(new RemoteMeasurer(std::move(o), std::move(*c)));
  m->pack_ns_ = pack_ns;
  return m;
}

Status RemoteMeasurer::fail(Status s) {
  std::lock_guard lock(failure_mu_);
  if (failure_.ok()) failure_ = s;
  return s;
}

Status RemoteMeasurer::failure() const {
  std::lock_guard lock(failure_mu_);
  return failure_;
}

// The setup is the same for every candidate of one tuning (the limits that
// differ go into each job's payload): stored once.
// Called with mu_ held.
Expected<std::string> RemoteMeasurer::setup_digest(const tune::MeasureSetup& setup) {
  if (!setup_.empty()) return setup_;
  auto source = read_file(o_.source_path);
  if (!source.ok()) return Status(source.status());
  auto bytes =
      tune::encode_setup(setup, *source, std::filesystem::path(o_.source_path).filename().string(), o_.precision);
  if (!bytes.ok()) return Status(bytes.status());
  auto d = c_->put_setup(*bytes);
  if (!d.ok()) return Status::IOError("storing the measurement setup: " + d.status().message());
  setup_ = *d;
  return setup_;
}

// Polls job `id` until it finished; cancels it and fails when it stayed
// queued for wait_s: no worker leased it, or none took it again after a
// lease expired (its workers died).
Expected<client::JobView> RemoteMeasurer::wait_for(int64_t id) {
  auto queued_since = Clock::now();
  auto poll = std::chrono::milliseconds(20);
  while (true) {
    std::unique_lock lock(mu_);
    auto j = c_->get(id);
    if (!j.ok()) return Status::IOError("job " + std::to_string(id) + ": " + j.status().message());
    if (j->state == "done" || j->state == "failed") return *j;
    if (j->state != "queued") queued_since = Clock::now();
    double waited = std::chrono::duration<double>(Clock::now() - queued_since).count();
    if (j->state == "queued" && waited > o_.wait_s) {
      (void)c_->cancel(id, "no worker leased it within " + tune::seconds_str(o_.wait_s) + " s");
      auto ws = c_->workers(o_.device_key, 60);
      std::string seen = "none";
      if (ws.ok() && !ws->empty()) {
        seen.clear();
        for (const auto& w : *ws) seen += (seen.empty() ? "" : ", ") + w.name + " (fingerprint " + fingerprint_id(w.fingerprint) + ")";
      }
      return Status::Unsupported(
          "no worker with device key `" + o_.device_key + "`" +
          (fingerprint_.empty() ? "" : " and fingerprint " + fingerprint_id(fingerprint_)) + " took job " +
          std::to_string(id) + " within " + tune::seconds_str(o_.wait_s) + " s (workers of that key seen in the last 60 s: " +
          seen + "); start `mlk worker --device-key " + o_.device_key + "`, raise --worker-wait, or tune without --workers");
    }
    lock.unlock();
    std::this_thread::sleep_for(poll);
    poll = std::min(poll * 2, std::chrono::milliseconds(200));
  }
}

Expected<std::string> RemoteMeasurer::candidate_pack(const MeasureSetup& setup, const Schedule& schedule,
                                                     Measurement& failed) {
  static std::atomic<int> n{0};
  const std::string dir = gpu_scratch_dir() + "/remote-" + std::to_string(getpid()) + "-" + std::to_string(n++);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  Status built = export_one(setup, *o_.artifacts_for, o_.source_path, schedule, dir);
  auto pack = built.ok() ? pack_candidate_set(dir) : Expected<std::string>(built);
  std::filesystem::remove_all(dir, ec);
  if (!built.ok()) failed.detail = "the candidate did not build here: " + built.message();
  return pack;
}

Expected<tune::Measurement> RemoteMeasurer::measure(const tune::MeasureSetup& setup, const Schedule& schedule) {
  // Artifact jobs: the candidate is built here; each job's blob is its pack.
  std::optional<std::string> pack;
  if (o_.artifacts_for) {
    Measurement failed;
    failed.verdict = Measurement::Verdict::kError;
    auto p = candidate_pack(setup, schedule, failed);
    if (!failed.detail.empty()) return failed;
    if (!p.ok()) return fail(p.status());
    pack = std::move(*p);
  }
  json payload = {{"schedule", json::parse(schedule.to_json())},
                  {"kind", pack ? "candidates" : "source"},
                  {"compile_timeout_s", setup.compile_timeout_s},
                  {"run_timeout_s", setup.run_timeout_s},
                  {"min_time_s", setup.min_time_s},
                  {"min_reps", setup.min_reps},
                  {"max_reps", setup.max_reps},
                  {"cutoff_ms", setup.cutoff_ms}};
  // Jobs submitted at once before the run's fingerprint was fixed (a resumed
  // run whose naive schedule was not measured now) may go to workers of
  // different fingerprints: a result of another fingerprint than the one
  // fixed meanwhile is measured again, on that one.
  client::JobView j;
  std::unique_lock lock(mu_, std::defer_lock);
  for (bool again = true; again;) {
    lock.lock();
    auto digest = pack ? c_->put_setup(*pack) : setup_digest(setup);
    if (!digest.ok()) return fail(digest.status());
    if (pack && o_.pack_key) {
      auto sig = cache::sign_pack(*digest, pack_ns_, *o_.pack_key);
      if (!sig.ok()) return fail(sig.status());
      payload["pack_signature"] = json::parse(*sig);
    }
    auto id = c_->submit(o_.device_key, *digest, payload.dump(), fingerprint_);
    lock.unlock();
    if (!id.ok()) return fail(Status::IOError("submitting a job: " + id.status().message()));
    auto done = wait_for(*id);
    if (!done.ok()) return fail(done.status());
    j = std::move(*done);
    lock.lock();
    ++jobs_;
    again = j.state == "done" && !fingerprint_.empty() && j.worker_fingerprint != fingerprint_;
    if (again) lock.unlock();
  }
  json r = parse_json(j.result);
  if (j.state == "failed") {
    tune::Measurement m;
    m.verdict = tune::Measurement::Verdict::kError;
    m.detail = "job " + std::to_string(j.id) + " failed" + (j.worker_name.empty() ? "" : " on worker " + j.worker_name) +
               ": " + (r.is_object() && r.contains("error") ? r["error"].dump() : j.result);
    if (o_.progress) log_linef(LogLevel::kWarning, "[workers %s] %s", o_.device_key.c_str(), m.detail.c_str());
    return m;
  }
  auto m = tune::parse_measurement(j.result);
  if (!m.ok())
    return fail(Status::Corruption("job " + std::to_string(j.id) + " from worker " + j.worker_name + ": " +
                                   m.status().message()));
  if (fingerprint_.empty()) fingerprint_ = j.worker_fingerprint;
  workers_.insert(j.worker_name);
  lock.unlock();
  if (o_.progress) {
    char ms[32] = "";
    if (m->ok()) std::snprintf(ms, sizeof ms, " %.3f ms", m->median_ms);
    log_linef(LogLevel::kProgress, "[workers %s] job %lld measured by worker %s (fingerprint %s, attempt %d): %s%s",
              o_.device_key.c_str(), static_cast<long long>(j.id), j.worker_name.c_str(),
              fingerprint_id(j.worker_fingerprint).c_str(), j.attempts, tune::verdict_name(m->verdict), ms);
  }
  return *m;
}

int RemoteMeasurer::live_workers(int seen_s) {
  std::lock_guard lock(mu_);
  auto ws = c_->workers(o_.device_key, seen_s);
  return ws.ok() ? static_cast<int>(ws->size()) : 0;
}

Expected<std::shared_ptr<RemoteMeasurer>> use_workers(tune::TuneRequest& r, RemoteMeasureOptions o) {
  if (r.profile.is_gpu()) o.artifacts_for = r.profile;  // GPU workers compile nothing
  if (o.artifacts_for) o.artifacts_for = r.profile;
  if (!(o.wait_s > 0)) return Status::Usage("--worker-wait must be more than 0 seconds");
  auto m = RemoteMeasurer::Open(std::move(o));
  if (!m.ok()) return m.status();
  std::shared_ptr<RemoteMeasurer> rm = *m;
  // One candidate per live worker at a time; a worker that joins later
  // helps with the queue but does not widen it, and one that has left makes
  // a job wait for the others (within --worker-wait of no lease at all).
  const int live = rm->live_workers();
  r.opts.parallel_measurements = std::max(1, live);
  rm->set_concurrency(r.opts.parallel_measurements);
  if (r.opts.progress)
    log_linef(LogLevel::kProgress, "[workers %s] %d live worker%s of this key: measuring up to %d candidate%s at once",
              rm->device_key().c_str(), live, live == 1 ? "" : "s", r.opts.parallel_measurements,
              r.opts.parallel_measurements == 1 ? "" : "s");
  r.opts.measurer = [rm](const tune::MeasureSetup& s, const Schedule& sched) { return rm->measure(s, sched); };
  // Workers' times rank the search; where the profile runs here, the final
  // round re-measures the leaders locally, so a forged or wrong report
  // cannot alone pick what is stored.
  Runnable here = can_run(r.profile, detect_cpu(), CudaInfo{});
  r.opts.final_round_here = here.ok;
  if (r.opts.progress && !here.ok)
    log_linef(LogLevel::kProgress, "[workers %s] `%s` does not run here (%s): the winner is picked by the workers' times",
              rm->device_key().c_str(), r.profile.name.c_str(), here.reason.c_str());
  auto inner = r.before_store;
  std::string key = rm->device_key();
  const bool checked_here = here.ok;
  // Who measured goes into the metadata before r's own hook (a signature
  // made there covers it): the workers' key, and whether the winner's time
  // was checked here or rests on the workers' word alone.
  r.before_store = [inner, rm, key, checked_here](std::map<std::string, std::string>& files, std::string& meta) -> Status {
    json j = parse_json(meta);
    if (!j.is_object()) return Status::Internal("the entry's metadata is not a JSON object");
    j["measured_by"] = {{"device_key", key},
                        {"fingerprint", rm->fingerprint()},
                        {"fingerprint_id", fingerprint_id(rm->fingerprint())},
                        {"workers", rm->workers()},
                        {"jobs", rm->jobs()},
                        {"winner_checked_here", checked_here}};
    meta = j.dump();
    if (inner) MLK_RETURN_IF_ERROR(inner(files, meta));
    return Status::Ok();
  };
  return rm;
}

}  // namespace mlk::tune
