// The loop of a measurement worker (docs/deploy.md, "Measurement workers"),
// shared by `mlk worker` and mlk-measure-worker: registers with a server
// under a device key and this machine's hardware fingerprint, then leases
// jobs of that key one at a time, measures each, reports it, and extends
// the lease from a second thread while it runs.
//
// A job of built artifacts (payload "kind": "candidates": GPU profiles, or
// `mlk tune --workers-run-artifacts`) is a one-candidate set packed into the
// job's blob (artifact/candidate_set.h); it is unpacked into a private folder
// and run by the candidate runner (runtime/candidate_runner.h) in a child
// process, so a candidate that crashes or hangs takes the child, not the
// worker. Nothing is compiled. A source job is given to `source`, which the
// compiler's side (`mlk worker`) supplies; without one it fails, saying so.
//
// Links no compiler: this is what a GPU machine runs (mlk-measure-worker).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "client/jobs_client.h"

namespace mlk::rt {

struct WorkerLoopOptions {
  std::string program = "mlk worker";  // the prefix of its stderr lines
  std::string server, device_key, name, ns;  // name "": HOST-PID
  std::string token;                         // $MLK_TOKEN
  double lease_s = 30, poll_s = 0.2;
  int64_t max_jobs = 0;  // exit after that many jobs; 0: no limit
  bool quiet = false;    // no line per job
  bool json = false;     // events as JSON lines on stdout (format "mlk-worker-1")
  bool run_artifacts = false;  // run jobs of built artifacts; else they fail, saying how to allow them
  // --trusted-signers (else $MLK_TRUSTED_SIGNERS): Ed25519 public keys. When
  // not empty, a job of built artifacts runs only when its pack carries a
  // signature by one of them for this worker's namespace (cache/signatures.h,
  // check_pack_signed; `mlk tune --sign-packs`); other such jobs fail unrun.
  std::vector<std::string> trusted;
  // Set by run_worker_loop from this machine's fingerprint: whether it has a
  // GPU. Only then may a pack of a CUDA profile run without the CPU memory
  // bound (the driver maps far more than it uses); the pack's word is not enough.
  bool gpu_here = false;
};

// Measures a source job: its measurement as JSON (the wire form of
// autotune/measure_wire.h), or why the job is bad. `payload` is its JSON text.
using SourceJobRunner =
    std::function<Expected<std::string>(client::JobsClient& c, const client::JobView& job, const std::string& payload)>;

// Runs until SIGTERM or SIGINT (then finishes the job in hand) or max_jobs
// jobs; returns the process's exit status: 0, or 1 when it cannot register.
// Blocks SIGTERM and SIGINT in the calling thread (children inherit that).
int run_worker_loop(WorkerLoopOptions o, const SourceJobRunner& source);

// The trust list of --trusted-signers `flag` (base/signing.h,
// parse_trusted_keys), else $MLK_TRUSTED_SIGNERS; a usage error naming the
// flag or the variable when malformed.
Expected<std::vector<std::string>> worker_trusted_signers(const std::string& flag);

// The validity of the options' numbers: the reason, or "" when valid.
std::string check_worker_options(const WorkerLoopOptions& o);

}  // namespace mlk::rt
