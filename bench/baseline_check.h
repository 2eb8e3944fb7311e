// Whether a baseline can judge this run: the same machine (CPU model, cores,
// features), every kernel of the run in it (by id), and the machine as fast
// now as when it was recorded (the calibration loop of timing.h). What
// `mlk bench --baseline` checks before timing anything (docs/ci.md).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/report.h"
#include "bench/variants.h"
#include "base/status.h"

namespace mlk::bench {

// This machine as a baseline records it.
MachineInfo this_machine();

// InvalidArgument naming `path` when the baseline was recorded on another
// machine (unless `any_machine`), or lacks one of `kernels` (saying when it
// has that kernel for another target only).
Status check_baseline(const BenchReport& base, const std::string& path, const MachineInfo& here,
                      const std::vector<std::unique_ptr<PreparedKernel>>& kernels, bool any_machine);

// What changed for a kernel since its baseline entry (IR, cache key, tuned or
// default), for people; empty when nothing did.
std::vector<std::string> comparison_notes(const KernelResult& now, const KernelResult& base);

// Waits up to `settle_s` seconds for this machine to run the calibration loop
// within 5% of `base_cal`'s median (another process may be finishing), saying
// so through `progress`. Returns the last calibration samples (at once, and
// without waiting, when `base_cal` is empty).
std::vector<double> settle(const std::vector<double>& base_cal, double settle_s,
                           const std::function<void(const std::string&)>& progress);

}  // namespace mlk::bench
