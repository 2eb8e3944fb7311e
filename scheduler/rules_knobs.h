// The knob registry: every knob of the rules declared once
// (scheduler/rules_knobs.cpp) with its name, the profile kind and stage kinds
// it belongs to, where it is searched, its choices and its default. The rules
// (knob_space, default_knobs, seed_knobs, schedule_from_knobs) and the cost
// model read knobs only through it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "scheduler/schedule.h"
#include "targets/profile.h"

namespace mlk {

enum class Knob {
  // CPU profiles.
  kMat, kVec, kPar, kFuseOuter, kTn, kTm, kUnroll, kAtOutput, kResult, kPack, kKc, kMc, kFlash, kAmx, kFuse, kVred,
  kRfactor,
  // GPU profiles.
  kTx, kTy, kSmem, kTile,
};

// The stage kinds a knob belongs to, with the values it takes on them.
struct KnobScope {
  std::vector<StageInfo::Kind> kinds;
  std::vector<int64_t> choices;
};

struct KnobDecl {
  Knob id;
  std::string_view name;  // as in Knobs maps, tuning logs and docs/schedules.md
  bool gpu;               // a knob of GPU profiles (else of CPU profiles)
  std::vector<KnobScope> scopes;
  // Whether the tuner searches it on stage `s` (of one of its kinds);
  // `output` is the output stage or null. Null: on every such stage.
  bool (*searched)(const StageInfo& s, const StageInfo* output) = nullptr;
  // Its default on stage `s` for profile `p` (the naive schedule's value,
  // and the value of a knob a Knobs map leaves out).
  int64_t (*default_value)(const StageInfo& s, const Profile& p) = nullptr;
  // Which stages default_knobs lists it for: kSearched, or every stage of
  // its kinds (kEveryStage; the default knobs recorded in tuning logs), or
  // none (its default applies unlisted).
  enum class Listed { kNone, kSearched, kEveryStage } listed = Listed::kNone;
  // A further condition on the whole stage table (a pattern of several
  // stages, such as an attention chain); null: none.
  bool (*searched_in)(const StageInfo& s, const std::vector<StageInfo>& stages) = nullptr;

  // The choices on stage kind `k`; empty when the knob does not belong to it.
  const std::vector<int64_t>& choices(StageInfo::Kind k) const;
};

// Every knob, CPU knobs first.
const std::vector<KnobDecl>& knob_decls();
const KnobDecl& knob_decl(Knob k);
// The knob called `name` of the given profile kind; InvalidArgument naming it otherwise.
Expected<const KnobDecl*> find_knob(std::string_view name, bool gpu);

// One stage's knob values as a rule reads them: those set in `set` (may be
// null), the registry's defaults for the rest.
class KnobValues {
 public:
  KnobValues(const std::map<std::string, int64_t>* set, const StageInfo& s, const Profile& p)
      : set_(set), stage_(s), profile_(p) {}
  int64_t operator[](Knob k) const;

 private:
  const std::map<std::string, int64_t>* set_;
  const StageInfo& stage_;
  const Profile& profile_;
};

}  // namespace mlk
