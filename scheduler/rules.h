// Rules: the schedule space per op class and profile.
//
// A rule turns a few integer knobs per stage (tile sizes, vector width,
// whether to fuse into the consumer's row loop, ...) into directives. The
// knobs are the space the autotuner searches; default_knobs() is the default
// schedule, a reasonable floor: reductions and matmuls at root with register
// tiles, elementwise chains inlined, innermost dimensions vectorised,
// outermost parallel; on GPU profiles every root stage tiled over blocks and
// threads.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "scheduler/schedule.h"
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
Schedule schedule_from_knobs(const std::vector<StageInfo>& stages, const Knobs& k, const Profile& p);

// Bumped whenever rules or knob spaces change meaning; part of the cache key.
constexpr const char* kScheduleSpaceVersion = "rules-5";

}  // namespace mlk
