// The autotuner: an evolutionary search over the rules' knob space (plus
// Halide's autoschedulers as extra candidates), every candidate verified
// against the reference interpreter and measured in an isolated worker.
// Seeded and replayable; the tuning log is appended after every trial, and a
// run pointed at an existing log resumes where it stopped.
//
// The loop (tuner.cpp) wires four parts, each behind its own interface: the
// SearchStrategy that proposes candidates (search_strategy.h), the
// CostModel that predicts and ranks them (cost_model_interface.h), the
// Measurer that times them (measurer.h) and the TuningLog (tuning_log.h);
// the cost model and the measurer are chosen by profile.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autotune/measure.h"
#include "lang/bind.h"
#include "lang/ir.h"
#include "scheduler/rules.h"
#include "targets/profile.h"

namespace mlk::tune {

struct TuneOptions {
  int trials = 40;             // measured candidates, at most
  double time_s = 150;         // wall-clock budget for the search
  uint64_t seed = 1;
  // Per candidate: the limit on its compilation (Halide's JIT, an
  // autoscheduler's run included) and on its run (verification and timing).
  // compile_timeout_s = 0 means automatic: kFirstCompileTimeoutS for trial 0
  // (the naive schedule), then max(60 s, 10 x trial 0's compile time), so
  // that a slow machine does not turn normal candidates into timeouts.
  double compile_timeout_s = 0;
  double run_timeout_s = 60;
  bool autoschedulers = true;  // also try Halide's autoschedulers
  std::string log_path;        // JSON lines, appended per trial; resumed from
  bool progress = true;        // progress lines to the log sink (base/log.h)
  // Test seams, see MeasureSetup.
  std::function<void(const Schedule&, const VerifyCase&, HostTensor&)> fault;
  std::function<void(const Schedule&)> compile_fault;
  // Measures a candidate instead of measure() in a local worker process
  // (`mlk tune --workers`: on a remote worker, autotune/measure_wire.h), as
  // a Measurer does (autotune/measurer.h): an error only when measuring
  // cannot go on, which stops the search with it. Empty: measure().
  std::function<Expected<Measurement>(const MeasureSetup&, const Schedule&)> measurer;
  // How many candidates may be measured at once, with a `measurer` that
  // measures elsewhere (remote workers: `mlk tune --workers` sets it to the
  // number of live workers of the key). Where a group of candidates is known
  // ahead (the rules' seeds, the autoschedulers, each evolution batch), up
  // to this many measurer calls run concurrently, each on its own thread;
  // their trials are recorded in the order the serial search would record
  // them, so the log and the winner for a seed do not depend on it, except
  // that each candidate's cutoff comes from the best before its group was
  // dispatched. The naive schedule (trial 0) is always measured alone
  // first, and the final round one at a time. Ignored (1) without a
  // measurer and on GPU profiles: local candidates are timed one at a time,
  // since two timed on the same cores at once would corrupt both.
  int parallel_measurements = 1;
  // The final round (which picks the winner, the naive schedule's time and what is
  // stored) measures here with measure(), not through `measurer`, and runs
  // even for a single candidate: `mlk tune --workers` sets it where the
  // profile runs on this machine, so that a time a worker reported never
  // alone decides what is stored.
  bool final_round_here = false;
  // Draw the verification cases and compute their references even where
  // nothing measures the candidates (a GPU profile without a GPU), for
  // TuneResult::verify_cases: what --export-candidates carries (at a
  // verification shape capped where one case would pass 4 MiB).
  bool cases_for_export = false;
  // Test seam for tune_cached: called with the stored AOT artifact's output
  // for each verification case before it is compared with the reference.
  std::function<void(const VerifyCase&, HostTensor&)> aot_fault;
};

// The compile limit of trial 0 when TuneOptions::compile_timeout_s is 0.
constexpr double kFirstCompileTimeoutS = 600;
// The automatic compile limit after trial 0: max(kMinCompileTimeoutS,
// kCompileTimeoutFactor x trial 0's compile time).
constexpr double kMinCompileTimeoutS = 60;
constexpr double kCompileTimeoutFactor = 10;
// An autoscheduler's candidate (its search and compile) within the automatic
// limit: at most max(kMinAutoschedulerCompileS, kAutoschedulerCompileFactor x
// the slowest compile of the candidates before it).
constexpr double kMinAutoschedulerCompileS = 15;
constexpr double kAutoschedulerCompileFactor = 8;
// The final round times each candidate for about this many seconds of runs
// (3 to 10 runs), besides its minimum time.
constexpr double kFinalRoundRunS = 2;
// The final round measures only the candidates (of the best three and the
// default) whose search time is within this factor of the best's.
constexpr double kFinalRoundSpread = 2;

struct Trial {
  int index = 0;
  std::string origin;  // "naive", "rule-seed", "Adams2019", "mutation", "crossover", "resumed"
  Knobs knobs;
  Schedule schedule;
  Measurement m;
  double predicted_ms = 0;
  bool resumed = false;  // taken from the log of an earlier run, not measured now
  double score_ms = 0;   // what the search ranked it by (TuneResult::log): its median, else the cost model's estimate
  double at_s = 0;       // seconds of its job's search when it was recorded (resumed: as logged)
};

struct TuneResult {
  std::string fn;
  DimEnv dims;
  bool measured = true;      // false: GPU profile without a GPU (cost model + ptxas)
  Schedule best;
  std::string best_origin;
  // Medians: of the final round for the candidates it measured, else of the
  // search (a winner left alone, a default more than kFinalRoundSpread
  // behind); estimates when !measured.
  double best_ms = 0;        // the winner's
  double default_ms = 0;     // the naive schedule's (trial 0, every knob at its default: the fixed baseline)
  // The default (untuned) schedule's, what runs before tuning (the rules'
  // first seed, scheduler/rules.h untuned_knobs); 0 when it was not
  // measured (it failed, or the budget ended first) or is the naive one.
  double untuned_ms = 0;
  std::vector<double> best_times_ms;
  int trials = 0;
  std::vector<Trial> log;
  std::string reference;     // what verification compared against
  // The cases every candidate is verified on (inputs, shapes, references,
  // tolerances; on GPU profiles without a GPU, what a runner elsewhere
  // checks them on), and a JSON object describing them (generator, seed,
  // per-param ranges, shapes, tolerances): cases_json always,
  // verification_json (with the winner's largest errors, for the manifest
  // and the cache entry; docs/tuning.md, "Verification") when measured.
  std::vector<VerifyCase> verify_cases;
  std::string cases_json = "null";
  std::string verification_json = "null";
  // Measured elsewhere (`mlk tune --import-measurements`): the device
  // (mlk-measure's description of it), the winner's artifact as measured
  // (stored as it is, not built again: a build in another process may name
  // Halide's symbols otherwise) and the sha256 of the library the runner
  // loaded, which that artifact's must equal. Empty otherwise.
  std::string measured_on;
  std::string measured_artifact_dir;
  std::string measured_library_sha256;
};

// One search, advanced in slices of its budget: what `mlk tune --budget`
// interleaves across a program's kernels. Start() checks the shape, computes
// the verification references (not counted in any budget) and opens or
// resumes the log; each advance(s) grants s more seconds of search, which
// continues where the last stopped (TuneOptions::time_s is not consulted;
// TuneOptions::trials still caps the trials). The candidates and their order
// do not depend on the slicing. The module must outlive the task.
class Search;
class TuningTask {
 public:
  static Expected<TuningTask> Start(const ir::Module& m, const std::string& fn, const Profile& profile,
                                    const DimEnv& dims, const TuneOptions& opts);
  TuningTask(TuningTask&&) noexcept;
  TuningTask& operator=(TuningTask&&) noexcept;
  ~TuningTask();

  // An error when the measurer cannot go on (TuneOptions::measurer): the
  // search stops there, and finish() returns the same error.
  Status advance(double seconds);
  bool converged() const;   // nothing left to try, or the trial limit reached
  double best_ms() const;   // best so far (estimate on GPU profiles); 0 before any candidate passed
  double default_ms() const;
  int trials() const;
  int resumed() const;      // trials taken from the log, not measured now
  double spent_s() const;   // search seconds used so far
  // The measurer's error that stopped the search (in advance or finish);
  // OK while it goes on.
  Status stopped() const;
  // The final round (the best few re-measured side by side) and the result;
  // once, after the last advance. An error when no candidate passed, or
  // when the measurer could not go on.
  Expected<TuneResult> finish();

 private:
  struct State;
  explicit TuningTask(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

// Start, advance(opts.time_s), finish.
Expected<TuneResult> tune_function(const ir::Module& m, const std::string& fn, const Profile& profile,
                                   const DimEnv& dims, const TuneOptions& opts);

}  // namespace mlk::tune
