// Measuring one candidate schedule in an isolated worker process.
//
// The worker (a fork of the tuner) compiles the candidate with Halide's JIT,
// tells the parent that compilation finished (a first line on the pipe),
// checks its output against the reference on every verification case, then
// times it on the tuning inputs (warm-up, repetitions, median), rotating
// between input sets so that caches do not flatter. Two limits apply: the
// compile limit from the fork until the worker reports that it compiled
// (this covers an autoscheduler's run), the run limit from then on
// (verification and timing). A worker that crashes or passes a limit is
// killed and costs one trial, not the run.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lang/bind.h"
#include "lang/compare.h"
#include "lang/ir.h"
#include "lang/tensor.h"
#include "scheduler/schedule.h"
#include "targets/detect.h"

namespace mlk::tune {

struct Measurement {
  enum class Verdict { kOk, kWrong, kCrash, kTimeout, kError };
  Verdict verdict = Verdict::kError;
  std::string detail;            // what went wrong, or the comparison summary
  double compile_ms = 0;         // 0 when the worker never reported it compiled
  double median_ms = 0;
  std::vector<double> times_ms;  // every timed run
  // Over all verification cases (set when every case passed): the largest
  // |actual - expected| and |actual - expected| / |expected| (expected != 0);
  // elements where both are NaN or the same infinity count as 0.
  double max_abs_error = 0, max_rel_error = 0;
  // MeasureSetup::errors_only: the largest |actual - expected| of each
  // result of each verification case, case by case (a case's results
  // together, in order; nothing compared, nothing timed).
  std::vector<double> case_max_abs_errors;
  // A candidate built but not run (a GPU profile with no GPU here,
  // autotune/measurer.h): its artifact's manifest.json, whose ptxas report
  // the cost model estimates its time from (CostModel::complete). Neither
  // logged nor sent to workers.
  std::string manifest_json;
  bool ok() const { return verdict == Verdict::kOk; }
};

const char* verdict_name(Measurement::Verdict v);

// One verification case: inputs at a shape and the reference interpreter's
// value of each result for them (one, but for a fn with several), each
// compared with its tolerance.
struct VerifyCase {
  std::string name;  // "verification shape, set 0", "ragged shape, set 1", ...
  std::string shape; // "verification" or "ragged"
  int set = 0;       // which input set (0, 1)
  DimEnv dims;
  std::vector<HostTensor> inputs;
  std::vector<HostTensor> references;  // one per result
  std::vector<Tolerance> tols;         // one per result
};

// ErrorStats and error_stats(expected, actual): lang/compare.h.
// Over every result of a case: `outs` holds one tensor per reference.
ErrorStats error_stats(const VerifyCase& c, const std::vector<HostTensor>& outs);
// compare() of every result with its reference and tolerance; the message
// names the result ("result 2: ...") when the fn has several.
Status compare_case(const VerifyCase& c, const std::vector<HostTensor>& outs);

struct MeasureSetup {
  const ir::Module* module = nullptr;
  std::string fn;
  std::string target = "host";                  // Halide target the worker JITs for
  DimEnv dims;                                  // tuning shape
  std::vector<std::vector<HostTensor>> timing;  // input sets at the tuning shape
  std::vector<VerifyCase> verify;               // every one must pass
  // Seconds from the fork until the worker reports that the candidate
  // compiled (JIT compile, autoscheduler included), and from then until it
  // sends its result. Passing either is a `timeout` whose detail names it:
  // "compile took longer than 60 s" / "run took longer than 60 s".
  double compile_timeout_s = 60;
  double run_timeout_s = 60;
  double min_time_s = 0.2;                      // time spent in timed runs, at least
  int min_reps = 5, max_reps = 50;
  // > 0: a candidate whose first timed run takes longer than this is timed
  // once, not min_reps times: it cannot win, and slow candidates would eat
  // the budget (the tuner passes a multiple of the best time so far).
  double cutoff_ms = 0;
  // Only run the candidate on every verification case and report each
  // case's largest error (Measurement::case_max_abs_errors), verdict ok even
  // when a case misses its tolerance; no timing. What the tuner calibrates
  // tolerances with: in a worker, because the tuner's own process must never
  // run a JIT pipeline (Halide's thread pool, once started, does not survive
  // fork(): every later worker would compute on one thread).
  bool errors_only = false;
  // The address space the worker may map (RLIMIT_AS), so that a candidate
  // (or an autoscheduler) that wants more fails with a clear error instead
  // of taking the machine's memory. 0: default_worker_memory_limit().
  // Not applied to CUDA targets, whose driver reserves far more address
  // space than it uses.
  int64_t memory_limit_bytes = 0;
  // Test seam, called in the worker with the candidate's output for each
  // verification case before it is compared: it may crash, hang or corrupt
  // the output.
  std::function<void(const Schedule&, const VerifyCase&, HostTensor&)> fault;
  // Test seam, called in the worker before the candidate is compiled (so in
  // the compile phase): it may crash or hang.
  std::function<void(const Schedule&)> compile_fault;
};

Measurement measure(const MeasureSetup& setup, const Schedule& schedule);

// default_worker_memory_limit() is targets/detect.h's (the worker loop of
// runtime/ uses it too).
using mlk::default_worker_memory_limit;

// "60" or "2.5": seconds as the timeout details print them.
std::string seconds_str(double s);

}  // namespace mlk::tune
