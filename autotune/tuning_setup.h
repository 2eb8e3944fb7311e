// What every candidate of one tuning is measured against: the timing input
// sets and the verification cases (inputs at the verification shape and at a
// ragged one, the reference interpreter's results, tolerances), with the
// record of how they were drawn that the manifest stores (docs/tuning.md,
// "Verification"); the calibration of the tolerances on the naive schedule
// schedule when the program is ill-conditioned on these inputs; the checks of
// a tuning shape; and the compile limits of its candidates.
//
// Everything is drawn from one mt19937_64 seeded with the tuning seed xor
// 0x9e3779b97f4a7c15: the timing sets, then per shape input sets 0 and 1.
// Nothing here runs a JIT pipeline in this process (the calibration measures
// in a worker).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "autotune/measure.h"
#include "autotune/tuner.h"
#include "base/status.h"
#include "scheduler/schedule.h"

namespace mlk::tune {

struct Verification {
  nlohmann::json record;  // TuneResult::verification_json, before the winner's errors
  std::string reference;  // TuneResult::reference
};

// The setup's parts every candidate shares: `fn` of `m` at `dims` for the
// profile's target, the run limit and the test seams of `o`.
MeasureSetup base_setup(const ir::Module& m, const std::string& fn, const Profile& p, const DimEnv& dims,
                        const TuneOptions& o);

// The size of the result dtype of `fn` (4 when there is no such fn).
int result_bytes(const ir::Module& m, const std::string& fn);

// Fills setup.timing (as many input sets as fit in ~256 MiB, 1 to 3) and
// setup.verify for the fn `setup.fn` of `*setup.module` at `setup.dims`
// (`stages`: its stage table there, for `setup.target`). `max_case_bytes`
// > 0 caps the verification shape where the tensors of one case would take
// more (cases that travel with exported candidates). InvalidArgument when
// the reference interpreter fails on the inputs.
Expected<Verification> prepare_measurement(MeasureSetup& setup, const std::vector<StageInfo>& stages, uint64_t seed,
                                           int64_t max_case_bytes = 0);

// v.record with the winner's largest errors ("winner_jit") when there is
// one (`best`), as JSON text: TuneResult::verification_json.
std::string verification_json(const Verification& v, const Trial* best, size_t cases);

// When the naive schedule (trial 0) misses the tolerance by rounding alone (each
// case's largest error within 1% of its references' RMS, measured in a
// worker with MeasureSetup::errors_only within `compile_limit_s`), each
// result's absolute tolerance becomes 4x the naive one's error on it, the
// calibration is recorded in `v.record` ("calibrated_on_default") and a note
// prefixed by `label` says so. Returns whether it calibrated.
bool calibrate_on_default(MeasureSetup& setup, Verification& v, const Schedule& def, double compile_limit_s,
                          const std::string& label);

// The shape `dims` of `f` (named `fn`) checked: every dimension has a value,
// every parameter's shape evaluates, and the shapes bind.
Status check_tuning_shape(const ir::Function& f, const std::string& fn, const DimEnv& dims);

// The compile limit of the next candidate after `trials`
// (TuneOptions::compile_timeout_s; automatic when 0).
double compile_limit(const TuneOptions& o, const std::deque<Trial>& trials);

// Without --compile-timeout, an autoscheduler's candidate compiles (its
// search included) for at most kAutoschedulerCompileFactor x the slowest
// compile of the schedules tried before it, and at least
// kMinAutoschedulerCompileS: on 2 cores Adams2019 spent 24-60 s and more on
// 3- and 4-stage pipelines whose rule schedules compile in 2 s, and lost to
// them.
double autoscheduler_compile_limit(const std::deque<Trial>& trials);

}  // namespace mlk::tune
