// Measuring one candidate schedule in an isolated worker process.
//
// The worker (a fork of the tuner) compiles the candidate with Halide's JIT,
// checks its output against the reference on the verification inputs, then
// times it on the tuning inputs (warm-up, repetitions, median), rotating
// between input sets so that caches do not flatter. A worker that crashes or
// hangs past the timeout is killed and costs one trial, not the run.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lang/bind.h"
#include "lang/compare.h"
#include "lang/ir.h"
#include "lang/tensor.h"
#include "scheduler/schedule.h"

namespace mlk::tune {

struct Measurement {
  enum class Verdict { kOk, kWrong, kCrash, kTimeout, kError };
  Verdict verdict = Verdict::kError;
  std::string detail;            // what went wrong, or the comparison summary
  double compile_ms = 0;
  double median_ms = 0;
  std::vector<double> times_ms;  // every timed run
  bool ok() const { return verdict == Verdict::kOk; }
};

const char* verdict_name(Measurement::Verdict v);

struct MeasureSetup {
  const ir::Module* module = nullptr;
  std::string fn;
  std::string target = "host";                  // Halide target the worker JITs for
  DimEnv dims;                                  // tuning shape
  std::vector<std::vector<HostTensor>> timing;  // input sets at the tuning shape
  DimEnv verify_dims;                           // verification shape (often smaller)
  std::vector<HostTensor> verify_inputs;
  HostTensor reference;                         // interpreter output on verify_inputs
  Tolerance tol;
  double timeout_s = 60;
  double min_time_s = 0.2;                      // time spent in timed runs, at least
  int min_reps = 5, max_reps = 50;
  // > 0: a candidate whose first timed run takes longer than this is timed
  // once, not min_reps times: it cannot win, and slow candidates would eat
  // the budget (the tuner passes a multiple of the best time so far).
  double cutoff_ms = 0;
  // Test seam, called in the worker with the candidate's verification output
  // before it is compared: it may crash, hang or corrupt the output.
  std::function<void(const Schedule&, HostTensor&)> fault;
};

Measurement measure(const MeasureSetup& setup, const Schedule& schedule);

}  // namespace mlk::tune
