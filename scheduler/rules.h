// Rules: the schedule space per op class and profile.
//
// A rule turns a few integer knobs per stage (tile sizes, vector width,
// whether to fuse into the consumer's row loop, ...) into directives. The
// knobs are the space the autotuner searches. default_knobs() is every knob
// at its registry default: the naive schedule, a fixed floor (reductions and
// matmuls at root with register tiles, elementwise chains inlined, innermost
// dimensions vectorised, outermost parallel; on GPU profiles every root stage
// tiled over blocks and threads) that the tuner measures first as its
// baseline. untuned_knobs() is the default schedule, what runs before any
// tuning: the rules' first seed (derived from the profile's vector width,
// registers and cache sizes), else the naive one.
//
// Each knob is declared once, in the knob registry (scheduler/rules_knobs.h);
// each stage kind's rule is its own file (rules_cpu_matmul.cpp,
// rules_cpu_reduction.cpp, rules_cpu_elementwise.cpp, rules_gpu.cpp) behind
// the Rule interface below; rules.cpp dispatches to them.
#pragma once

#include <cstdint>
#include <map>
#include <string_view>
#include <utility>
#include <string>
#include <vector>

#include "scheduler/rules_knobs.h"
#include "scheduler/schedule.h"
#include "scheduler/space_version.h"
#include "targets/profile.h"

namespace mlk {

// Stage name -> knob name -> value.
using Knobs = std::map<std::string, std::map<std::string, int64_t>>;

// The values each knob may take, per stage (for mutators and search).
using KnobSpace = std::map<std::string, std::map<std::string, std::vector<int64_t>>>;

// `lanes`: vector lanes of 32-bit values on the profile (8 for AVX2).
int vector_lanes(const Profile& p);

KnobSpace knob_space(const std::vector<StageInfo>& stages, const Profile& p);
Knobs default_knobs(const std::vector<StageInfo>& stages, const Profile& p);
// Settings the rules expect to be good (the tuner measures them first):
// for CPU profiles, matmuls computed per output register tile and row
// reductions fused and vectorised, in one or two tile shapes. Empty for GPU
// profiles. Every seed lies in knob_space().
std::vector<Knobs> seed_knobs(const std::vector<StageInfo>& stages, const Profile& p);
// The default (untuned) schedule's knobs: seed_knobs()'s first (the plan
// the tuner's first "rule-seed" trial measures), or default_knobs() where
// the rules have no seed (GPU profiles, a stage table with nothing to seed).
Knobs untuned_knobs(const std::vector<StageInfo>& stages, const Profile& p);
Schedule schedule_from_knobs(const std::vector<StageInfo>& stages, const Knobs& k, const Profile& p);

// A pipeline with several outputs (a fn with several results) realises each
// output in its own loop nest. A stage placed in another stage's loops
// (compute_at, store_at, pack's loop, an attention chain's tiles) stays there
// only when the outputs that read it are exactly those that read that
// stage; otherwise it is computed once, at root, for all its readers, with
// its own directives kept. schedule_from_knobs applies it; no-op with one
// output.
void confine_to_outputs(const std::vector<StageInfo>& stages, Schedule& sched);

// Checks knobs read from outside (a tuning log): every stage is one of
// `stages`, every knob is registered for the profile kind and the stage's
// kind, and every value is one of its choices. Errors name the stage and knob.
Status check_knobs(const std::vector<StageInfo>& stages, const Knobs& k, const Profile& p);

// --- the rule interface ------------------------------------------------------

// What a rule sees besides its stage and that stage's knob values.
struct RuleContext {
  const std::vector<StageInfo>& stages;
  const StageInfo* output;        // the output stage, or null
  const StageInfo* output_owner;  // the stage whose rule schedules the output too (see Rule), or null
  const Profile& profile;
  int lanes;                      // vector_lanes(profile)
  const Knobs* knobs = nullptr;   // every stage's knobs (schedule_from_knobs), or null
};

// The rule of some stage kinds on one profile kind.
struct Rule {
  std::string_view name;
  bool gpu;                          // the rule of GPU profiles (else of CPU profiles)
  std::vector<StageInfo::Kind> kinds;
  // Appends the directives of `s` to out.stages[s.name] (an empty list is
  // dropped); the rule of ctx.output_owner writes the output's too.
  void (*schedule)(const RuleContext& ctx, const StageInfo& s, const KnobValues& k, Schedule& out);
  // Whether `s` with knobs `k` schedules the output as well (the output's own
  // rule then does not run). Null: never. The last such stage is the owner.
  bool (*owns_output)(const RuleContext& ctx, const StageInfo& s, const KnobValues& k) = nullptr;
  // The knob values of seed plan `plan` (0, 1: see seed_knobs) for `s`; each
  // is used where it lies in the knob space. Null: none.
  std::vector<std::pair<Knob, int64_t>> (*seed)(const RuleContext& ctx, const StageInfo& s, int plan) = nullptr;
};

extern const Rule kCpuMatmulRule;       // matmulN
extern const Rule kCpuReductionRule;    // reductionN, softmax_maxN, softmax_expN, softmax_sumN
extern const Rule kCpuElementwiseRule;  // output, operandN
extern const Rule kGpuRule;             // every stage but inputs and operands
// The rule for stage `s` on profile `p`, or null (inputs; operands on GPUs).
const Rule* rule_for(const StageInfo& s, const Profile& p);

// kScheduleSpaceVersion (scheduler/space_version.h) is bumped whenever rules
// or knob spaces change meaning; it is part of the cache key.

}  // namespace mlk
