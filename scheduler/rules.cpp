// The rules' entry points: knob spaces, default and seed knobs from the knob
// registry, schedules from the rule of each stage's kind.
#include "scheduler/rules.h"

#include <algorithm>
#include <map>
#include <set>

#include "scheduler/rules_common.h"

namespace mlk {

namespace {

using rules::Kind;

bool belongs(const KnobDecl& d, const StageInfo& s, const Profile& p) {
  return d.gpu == p.is_gpu() && !d.choices(s.kind).empty();
}

bool searched(const KnobDecl& d, const StageInfo& s, const std::vector<StageInfo>& stages, const StageInfo* out) {
  return (!d.searched || d.searched(s, out)) && (!d.searched_in || d.searched_in(s, stages));
}

// The output stages that read `s`, through the stages between (readers).
const std::set<std::string>& outputs_reading(const std::string& s, const std::map<std::string, const StageInfo*>& by_name,
                                             std::map<std::string, std::set<std::string>>& memo) {
  auto it = memo.find(s);
  if (it != memo.end()) return it->second;
  std::set<std::string> outs;
  auto st = by_name.find(s);
  if (st != by_name.end()) {
    if (st->second->kind == Kind::kOutput) outs.insert(s);
    for (const auto& r : st->second->readers)
      for (const auto& o : outputs_reading(r, by_name, memo)) outs.insert(o);
  }
  return memo[s] = std::move(outs);
}

}  // namespace

void confine_to_outputs(const std::vector<StageInfo>& stages, Schedule& sched) {
  std::map<std::string, const StageInfo*> by_name;
  int outputs = 0;
  for (const auto& s : stages) {
    by_name[s.name] = &s;
    outputs += s.kind == Kind::kOutput;
  }
  if (outputs < 2) return;
  std::map<std::string, std::set<std::string>> memo;
  // The stages a directive computes `name` inside: its at_stage, and the
  // stages an attention chain runs in (the operand of `pack` or
  // `result_tiles` is only copied there, not moved).
  auto places = [&](const Directive& d, const std::string& name) {
    std::vector<std::string> at;
    if (!d.at_stage.empty()) at.push_back(d.at_stage);
    if (d.op == "attention_tiles")
      for (const auto& v : d.vars)
        if (by_name.count(v) && v != name) at.push_back(v);
    return at;
  };
  for (auto& [name, ds] : sched.stages) {
    auto self = by_name.find(name);
    if (self == by_name.end() || self->second->kind == Kind::kOutput) continue;
    const std::set<std::string> mine = outputs_reading(name, by_name, memo);
    bool moved = false;
    for (const Directive& d : ds)
      for (const auto& p : places(d, name))
        moved = moved || outputs_reading(p, by_name, memo) != mine;
    if (!moved) continue;
    std::vector<Directive> kept = {rules::D("compute_root")};
    for (const Directive& d : ds)
      if (places(d, name).empty() && d.op != "compute_root" && d.op != "compute_inline") kept.push_back(d);
    ds = std::move(kept);
  }
}

int vector_lanes(const Profile& p) { return std::max(4, p.vector_bits / 32); }

const Rule* rule_for(const StageInfo& s, const Profile& p) {
  for (const Rule* r : {&kCpuMatmulRule, &kCpuReductionRule, &kCpuElementwiseRule, &kGpuRule})
    if (r->gpu == p.is_gpu() && std::find(r->kinds.begin(), r->kinds.end(), s.kind) != r->kinds.end()) return r;
  return nullptr;
}

KnobSpace knob_space(const std::vector<StageInfo>& stages, const Profile& p) {
  KnobSpace ks;
  const StageInfo* out = rules::output_of(stages);
  for (const auto& s : stages)
    for (const auto& d : knob_decls())
      if (belongs(d, s, p) && searched(d, s, stages, out)) ks[s.name][std::string(d.name)] = d.choices(s.kind);
  return ks;
}

Knobs default_knobs(const std::vector<StageInfo>& stages, const Profile& p) {
  Knobs k;
  const StageInfo* out = rules::output_of(stages);
  for (const auto& s : stages)
    for (const auto& d : knob_decls()) {
      if (!belongs(d, s, p) || d.listed == KnobDecl::Listed::kNone) continue;
      if (d.listed == KnobDecl::Listed::kSearched && !searched(d, s, stages, out)) continue;
      k[s.name][std::string(d.name)] = d.default_value(s, p);
    }
  return k;
}

std::vector<Knobs> seed_knobs(const std::vector<StageInfo>& stages, const Profile& p) {
  if (p.is_gpu()) return {};
  const KnobSpace space = knob_space(stages, p);
  const Knobs def = default_knobs(stages, p);
  const RuleContext ctx{stages, rules::output_of(stages), nullptr, p, vector_lanes(p)};
  std::vector<Knobs> seeds;
  for (int plan = 0; plan < 2; ++plan) {
    Knobs k = def;
    for (const auto& s : stages) {
      const Rule* rule = rule_for(s, p);
      auto st = space.find(s.name);
      if (!rule || !rule->seed || st == space.end()) continue;
      for (const auto& [knob, v] : rule->seed(ctx, s, plan)) {
        auto kn = st->second.find(std::string(knob_decl(knob).name));
        if (kn != st->second.end() && std::find(kn->second.begin(), kn->second.end(), v) != kn->second.end())
          k[s.name][kn->first] = v;
      }
    }
    if (k != def && std::find(seeds.begin(), seeds.end(), k) == seeds.end()) seeds.push_back(k);
  }
  return seeds;
}

Knobs untuned_knobs(const std::vector<StageInfo>& stages, const Profile& p) {
  std::vector<Knobs> seeds = seed_knobs(stages, p);
  return seeds.empty() ? default_knobs(stages, p) : std::move(seeds.front());
}

Schedule schedule_from_knobs(const std::vector<StageInfo>& stages, const Knobs& k, const Profile& p) {
  RuleContext ctx{stages, rules::output_of(stages), nullptr, p, vector_lanes(p), &k};
  auto values = [&](const StageInfo& s) {
    auto it = k.find(s.name);
    return KnobValues(it == k.end() ? nullptr : &it->second, s, p);
  };
  for (const auto& s : stages) {
    const Rule* rule = rule_for(s, p);
    if (rule && rule->owns_output && rule->owns_output(ctx, s, values(s))) ctx.output_owner = &s;
  }
  Schedule sched;
  for (const auto& s : stages) {
    const Rule* rule = rule_for(s, p);
    if (!rule || (ctx.output_owner && &s == ctx.output)) continue;
    rule->schedule(ctx, s, values(s), sched);
  }
  confine_to_outputs(stages, sched);
  for (auto it = sched.stages.begin(); it != sched.stages.end();)
    it = it->second.empty() ? sched.stages.erase(it) : std::next(it);
  return sched;
}

Status check_knobs(const std::vector<StageInfo>& stages, const Knobs& k, const Profile& p) {
  for (const auto& [stage, knobs] : k) {
    auto s = std::find_if(stages.begin(), stages.end(), [&](const StageInfo& x) { return x.name == stage; });
    if (s == stages.end()) return Status::InvalidArgument("knobs: unknown stage `" + stage + "`");
    for (const auto& [name, v] : knobs) {
      auto d = find_knob(name, p.is_gpu());
      if (!d.ok()) return Status::InvalidArgument("knobs: stage `" + stage + "`: " + d.status().message());
      const auto& choices = (*d)->choices(s->kind);
      if (choices.empty())
        return Status::InvalidArgument("knobs: stage `" + stage + "`: knob `" + name + "` does not apply to this stage");
      if (std::find(choices.begin(), choices.end(), v) == choices.end())
        return Status::InvalidArgument("knobs: stage `" + stage + "`: knob `" + name + "` = " + std::to_string(v) +
                                       " is not one of its choices");
    }
  }
  return Status::Ok();
}

}  // namespace mlk
