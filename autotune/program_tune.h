// Tuning a whole program under one search budget: the budget is split
// across its (fn, shape) jobs by expected gain, the way Ansor's task
// scheduler does it. Each job first gets one slice (the naive schedule and
// the rules' seeds are measured there); then each slice goes to the job whose
// best time is expected to fall fastest per second of search: a weighted
// sum of its recent rate (the drop in its best time over its last slice) and
// an optimistic one (its best time over the seconds it has had). A job that
// converges (its evolution went stale, or --trials) is finished at once:
// final round, build, check, store. A measurer that cannot go on (remote
// workers gone: TuningTask::stopped) stops every job, and each one not
// finished yet fails with its error. At the end each tuned job's best-so-far
// curve is reported (best at 10, 30, 60 s and final, and when it came within
// 5% of its final best), with how many were within 5% after 60 s. A job found in the cache costs nothing.
// Every job's log is kept next to the store as `mlk tune` keeps it, so a
// rerun after an interruption replays the logged trials of every unfinished
// job (not measured again) and continues.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "autotune/cached_tune.h"
#include "autotune/convergence.h"

namespace mlk::tune {

struct ProgramTuneOptions {
  double budget_s = 600;  // search seconds for all jobs together (references and final rounds not counted)
  double slice_s = 0;     // seconds per slice; 0: budget / (4 x jobs to tune), within [5, 60]
  bool progress = true;   // one line per slice (job, trials, best, program ETA) to the log sink
  // The weight of the recent rate against the optimistic one (Ansor's alpha).
  double alpha = 0.2;
};

// What one job came to: its outcome (a cache hit or tuned now) or its error.
struct ProgramJobResult {
  Status status = Status::Ok();
  Outcome outcome;             // set when status is OK
  double search_s = 0;         // search seconds it was given (0 for a hit)
  int trials = 0, resumed = 0; // trials, and how many of them came from its log
  std::vector<CurvePoint> curve;  // its best-so-far curve (tuned now; empty for a hit)
};

// A program's convergence in the terms `mlk tune` reports (and the
// performance issue's target): how many tuned jobs were within 5% of their
// final best after 60 s of their own search.
struct ConvergenceSummary {
  int jobs = 0;       // jobs tuned now with at least one passing trial
  int converged = 0;  // of them, within `fraction` of their final best by `by_s`
};
ConvergenceSummary summarize_convergence(const std::vector<ProgramJobResult>& results, double fraction = 0.05,
                                         double by_s = 60);

// The requests' opts.trials caps each job; opts.time_s is not used.
// Results are in the order of `jobs`.
std::vector<ProgramJobResult> tune_program(const std::vector<TuneRequest>& jobs, const ProgramTuneOptions& options);

// The slice length `options` gives `n` jobs to tune.
double program_slice_s(const ProgramTuneOptions& options, size_t n);

// The scheduler's choice, separate for testing: the expected gain per
// second of one more slice of a job whose best time went from `best_before`
// to `best_now` over its last `last_slice_s` seconds, with `spent_s` seconds
// in all. Jobs with no passing candidate yet have infinite gain.
double expected_gain(double best_before, double best_now, double last_slice_s, double spent_s, double alpha);

}  // namespace mlk::tune
