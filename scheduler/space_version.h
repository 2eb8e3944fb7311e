// The version of the schedule space (scheduler/rules.h): bumped whenever
// rules or knob spaces change meaning. Part of the cache key, which the
// Halide-free runtime computes, so it lives apart from the rules.
#pragma once

namespace mlk {

constexpr const char* kScheduleSpaceVersion = "rules-15";

}  // namespace mlk
