// The runner of `mlk-measure`: measures a candidate set
// (artifact/candidate_set.h) on the machine it runs on, with nothing but the
// runtime's artifact loader: no Halide, no LLVM, no compiler. CUDA
// candidates run on device memory of MLK_CUDA_DEVICE (default 0) through the
// driver, loaded at run time (targets/cuda_driver.h), and are timed with
// CUDA events; CPU candidates run on host memory, timed by the steady clock.
//
// For each candidate, in the set's order: its artifact is loaded (every file
// checked against its manifest, its library against the set's sha256); its
// output on every case is compared with the expected one within the case's
// tolerance (verdict "wrong" naming the case and the first differing element
// otherwise); then it is timed on inputs drawn uniform in [-1, 1) at the
// tuning shape, resident on the device: `warmup` runs, then runs until
// min_time_s is spent (min_reps..max_reps), median. A candidate whose first
// timed run is slower than cutoff_factor times the best median so far is
// timed that once: it cannot win. A candidate that cannot be loaded or
// fails to run is verdict "error"; none of these stops the run.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "artifact/candidate_set.h"
#include "base/status.h"

namespace mlk::rt {

struct RunnerOptions {
  std::vector<std::string> only;  // ids to measure; empty: all
  double cutoff_factor = 4;
  // A progress line per candidate ("[mlk-measure] c03 ok 1.234 ms (7 runs)").
  std::function<void(const std::string&)> progress;
  // Test seam: called with each case's output before it is compared.
  std::function<void(const std::string& id, HostTensor& out)> fault;
};

// Measures the set in `dir`. Unsupported, naming what is missing, when the
// set's profile cannot run here (no CUDA driver or device, a CPU without the
// profile's features); InvalidArgument or Corruption for a damaged set.
Expected<Measurements> run_candidates(const std::string& dir, const RunnerOptions& opts);

// The runner: $MLK_MEASURE, or mlk-measure beside the running program (mlk,
// mlk worker and mlk-measure-worker are installed with it, docs/deploy.md),
// as a canonical path. Unsupported, saying that `who` needs it and where it
// looked, when there is none.
Expected<std::string> measure_program(const std::string& who);

}  // namespace mlk::rt
