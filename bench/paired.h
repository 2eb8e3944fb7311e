// The A/B verdict: a candidate and a baseline artifact timed in the same
// process, round for round interleaved on the same inputs, are compared by
// their paired round medians. Whatever load the machine carries during a
// round hits both of that round's medians alike, so the ratio of the two
// within a round is what a busy machine leaves mostly untouched; the rounds'
// log-ratios are summarised by their mean and a Student t confidence
// interval. Pure computation, no I/O; used by `mlk bench` (docs/ci.md).
#pragma once

#include <vector>

#include "bench/gate.h"

namespace mlk::bench {

// Compares paired round medians: baseline_rounds[i] and current_rounds[i]
// were timed in the same round. Precondition: the same non-zero count on
// both sides, positive values (an internal check). In the result, `ratio` is
// exp(mean log(current/baseline)), the interval is the `opts.confidence` t
// interval of that mean mapped back by exp, p_slower / p_faster the
// one-sided t test's p-values; suspect when ratio and ci_low both exceed
// 1 + pct/100 and p_slower < alpha (faster: the mirror image). With 2 rounds
// or fewer nothing is ever suspect (no spread can be estimated).
Comparison compare_paired(const std::vector<double>& baseline_rounds, const std::vector<double>& current_rounds,
                          const GateOptions& opts);

// The same from the samples of measure_paired (bench/timing.h), where a
// round's samples of both sides were taken in turn on the same buffers:
// each side of a round is summarised by its fastest sample (the machine's
// load only ever adds time, and on a loaded 2-core VM a third of the samples
// of a 0.05 ms kernel were seen 10-70x slower than the rest while the
// fastest stayed within 10%), and the rounds' log-ratios are compared as
// above; the medians reported are those of the rounds' fastest samples.
// Precondition: equal round sizes on both sides, positive samples (an
// internal check).
Comparison compare_paired_samples(const std::vector<double>& baseline_samples, const std::vector<size_t>& baseline_sizes,
                                  const std::vector<double>& current_samples, const std::vector<size_t>& current_sizes,
                                  const GateOptions& opts);

// The Student t distribution with `df` degrees of freedom (df >= 1): its CDF
// and its quantile (0 < p < 1). Closed forms for df 1 and 2, numerical beyond (about 1e-7).
double student_t_cdf(double t, int df);
double student_t_quantile(double p, int df);

}  // namespace mlk::bench
