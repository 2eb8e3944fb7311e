// Timing kernels in this process: warm-up, fast calls batched into samples of
// a minimum duration, and several rounds that interleave everything being
// compared, so that a drift of the machine's speed hits all of it alike.
// Wall-clock time (std::chrono::steady_clock): mlk's kernels use every core.
// Not thread-safe; meant for one benchmark at a time on a quiet machine.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"

namespace mlk::bench {

struct TimingOptions {
  int rounds = 10;            // interleaved rounds
  double min_time_s = 0.5;    // time spent timing each item, summed over the rounds
  double sample_ms = 1.0;     // calls faster than this are timed in batches of about this length
  double warmup_s = 0.05;     // untimed calls before the first round, at least 2 of them
};

// One thing to time. `run` performs one call and reports failure.
struct Timed {
  std::function<Status()> run;
  int min_samples_per_round = 1;  // samples per round, whatever the time
  // Called before each round of this item (may be empty): e.g. to move the
  // kernel's buffers to fresh memory, so that the rounds see different
  // physical pages, as different runs would.
  std::function<void()> before_round;
};

struct TimingResult {
  Status status;                   // the first failure of `run`, if any (timing stops there)
  std::vector<double> samples_ms;  // per call: a batch's time divided by its calls
  std::vector<size_t> round_sizes; // samples of each round, in order (they sum to samples_ms.size())
  int64_t calls_per_sample = 1;
  int64_t calls = 0;               // timed calls in all
};

// Times every item in `items` in opts.rounds interleaved rounds. Each item is
// warmed up first; at the start of each round a fast item (< 10 ms a call)
// gets one untimed batch, so it does not pay for the caches another item left.
std::vector<TimingResult> measure_interleaved(const std::vector<Timed>& items, const TimingOptions& opts);

// A/B: `a` and `b` timed in opts.rounds rounds, sample by sample in turn
// within each round (each pair in the opposite order of the one before), so
// that whatever load the machine carries at any moment hits both alike;
// min_time_s each, as measure_interleaved. `b` may run on buffers that
// a.before_round renews. Results for a and b, in that order; rounds stop
// at the first failure of either.
std::vector<TimingResult> measure_paired(const Timed& a, const Timed& b, const TimingOptions& opts);

// A fixed workload that does not depend on mlk's compiler, run on every core
// at once as mlk's parallel kernels are (so that a core taken by another
// process slows it too): per thread a latency-bound floating-point chain and a
// sequential sum over its share of 16 MiB, about 5 ms in all. Its time,
// recorded with a baseline, tells whether this machine is slower than when
// the baseline was recorded. `n` samples, in milliseconds.
std::vector<double> calibration_samples(int n);

}  // namespace mlk::bench
