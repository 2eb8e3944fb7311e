// Helpers of the rule tests: stage tables written by hand, as the lowering
// would give them, a profile by name, and a schedule's directives as one
// line ("tile:a1:a0:no:mo:ni:mi:48:8:1 vectorize:ni:16 ...", `@u0` for an
// update, `@stage.var` for a placement).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "scheduler/schedule.h"
#include "targets/profile.h"

namespace mlk::testing_support {

inline StageInfo stage(std::string name, StageInfo::Kind kind, std::vector<int64_t> extents,
                       std::vector<int64_t> rextents = {}, bool innermost = false) {
  StageInfo s;
  s.name = std::move(name);
  s.kind = kind;
  s.rank = static_cast<int>(extents.size());
  s.rvars = static_cast<int>(rextents.size());
  s.extents = std::move(extents);
  s.rextents = std::move(rextents);
  s.reduces_innermost = innermost;
  return s;
}

inline Profile profile(const std::string& name) {
  auto p = find_profile(name);
  EXPECT_TRUE(p.ok()) << name;
  return p.ok() ? *p : Profile{};
}

inline std::string ops(const std::vector<Directive>& ds) {
  std::string out;
  for (const auto& d : ds) {
    out += (out.empty() ? "" : " ") + d.op;
    for (const auto& v : d.vars) out += ":" + v;
    for (int64_t f : d.factors) out += ":" + std::to_string(f);
    if (d.update >= 0) out += "@u" + std::to_string(d.update);
    if (!d.at_stage.empty()) out += "@" + d.at_stage + "." + d.at_var;
  }
  return out;
}

}  // namespace mlk::testing_support
