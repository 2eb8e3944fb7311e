#include "scheduler/schedule.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "base/sha256.h"
#include "scheduler/directives.h"

namespace mlk {

using nlohmann::json;

std::string Schedule::to_json() const {
  json j = json::object();
  j["version"] = 1;
  json st = json::object();
  for (const auto& [name, ds] : stages) {
    json arr = json::array();
    for (const auto& d : ds) {
      json x = json::object();
      x["op"] = d.op;
      if (!d.vars.empty()) x["vars"] = d.vars;
      if (!d.factors.empty()) x["factors"] = d.factors;
      if (!d.at_stage.empty()) x["at_stage"] = d.at_stage;
      if (!d.at_var.empty()) x["at_var"] = d.at_var;
      if (d.update >= 0) x["update"] = d.update;
      arr.push_back(x);
    }
    st[name] = arr;
  }
  j["stages"] = st;
  if (!autoscheduler.empty()) j["autoscheduler"] = autoscheduler;
  return j.dump(2);
}

Expected<Schedule> Schedule::from_json(const std::string& text) {
  Schedule s;
  try {
    json j = json::parse(text);
    if (!j.is_object()) return Status::InvalidArgument("schedule: the top level must be an object");
    for (const auto& [k, v] : j.items())
      if (k != "version" && k != "stages" && k != "autoscheduler")
        return Status::InvalidArgument("schedule: unknown field \"" + k + "\"");
    if (j.contains("autoscheduler")) {
      if (!j["autoscheduler"].is_string()) return Status::InvalidArgument("schedule: \"autoscheduler\" must be a string");
      s.autoscheduler = j["autoscheduler"];
    }
    if (j.value("version", 1) != 1) return Status::InvalidArgument("schedule: unsupported version");
    if (!j.contains("stages") || !j["stages"].is_object())
      return Status::InvalidArgument("schedule: \"stages\" must be an object of stage name -> directive list");
    for (const auto& [name, arr] : j["stages"].items()) {
      if (!arr.is_array()) return Status::InvalidArgument("schedule: stage `" + name + "` must map to a list");
      int i = 0;
      for (const auto& x : arr) {
        std::string where = "schedule: stage `" + name + "` directive " + std::to_string(i++);
        if (!x.is_object() || !x.contains("op") || !x["op"].is_string())
          return Status::InvalidArgument(where + ": needs a string \"op\"");
        for (const auto& [k, v] : x.items())
          if (k != "op" && k != "vars" && k != "factors" && k != "at_stage" && k != "at_var" && k != "update")
            return Status::InvalidArgument(where + ": unknown field \"" + k + "\"");
        Directive d;
        d.op = x["op"];
        d.vars = x.value("vars", std::vector<std::string>{});
        d.factors = x.value("factors", std::vector<int64_t>{});
        d.at_stage = x.value("at_stage", "");
        d.at_var = x.value("at_var", "");
        d.update = x.value("update", -1);
        s.stages[name].push_back(d);
      }
    }
  } catch (const json::exception& e) {
    return Status::InvalidArgument(std::string("schedule: ") + e.what());
  }
  return s;
}

std::string Schedule::hash() const { return sha256_hex(to_json()); }

namespace {

std::string describe(const Directive& d, size_t i) {
  std::string s = "directive " + std::to_string(i) + " `" + d.op + "(";
  for (size_t k = 0; k < d.vars.size(); ++k) s += (k ? ", " : "") + d.vars[k];
  for (size_t k = 0; k < d.factors.size(); ++k) s += (k || !d.vars.empty() ? ", " : "") + std::to_string(d.factors[k]);
  return s + ")`";
}

// What the registry's forms cannot say: an operand slot names a stage this
// stage reads as a matmul operand, a vector width is a power of two, and a
// tile's third factor (full tiles, apply::tile) is 1, on the output's pure
// definition and variables.
Status check_specific(const Directive& d, const StageInfo& st, const std::string& where) {
  if (d.op == "result_tiles" && (st.kind != StageInfo::Kind::kMatmul || st.rank < 2))
    return Status::InvalidArgument(where + ": only a matmul stage of rank >= 2 has result tiles");
  if (d.op == "amx_tiles" && !st.amx)
    return Status::InvalidArgument(where + ": only a product of BF16 operands lowered for AMX tiles has AMX tiles");
  if (d.op == "attention_tiles" && (st.kind != StageInfo::Kind::kMatmul || st.rank < 3))
    return Status::InvalidArgument(where + ": only a matmul stage of rank >= 3 has attention tiles");
  if (d.op == "amx_tiles" && st.operands.size() == 2 && d.vars[0] == st.operands[0])
    return Status::InvalidArgument(where + ": it names `" + d.vars[0] + "`, a's copy; the panels pack b's, `" +
                                   st.operands[1] + "`");
  if (d.op == "amx_tiles" && (d.factors[0] % 16 != 0 || d.factors[0] > 1024))
    return Status::InvalidArgument(where + ": the panel of " + std::to_string(d.factors[0]) +
                                   " columns is not a multiple of 16 no wider than 1024");
  if (d.op == "pack" || d.op == "amx_tiles" || (d.op == "result_tiles" && !d.vars.empty())) {
    const auto& ops = st.operands;
    if (std::find(ops.begin(), ops.end(), d.vars[0]) != ops.end()) return Status::Ok();
    std::string list;
    for (const auto& o : ops) list += (list.empty() ? "" : ", ") + o;
    return Status::InvalidArgument(where + ": `" + d.vars[0] + "` is not an operand of stage `" + st.name + "`" +
                                   (list.empty() ? " (it reads none)" : " (operands: " + list + ")"));
  }
  // Vector widths are powers of two (rules_common.h, vector_clip): Halide 21
  // aborts inside LLVM on some predicated loads of other widths.
  auto pow2 = [](int64_t w) { return w > 0 && (w & (w - 1)) == 0; };
  const int vf = d.op == "vectorize" || d.op == "pack" || d.op == "rfactor_vector" ? 0
                 : d.op == "result_tiles" || d.op == "attention_tiles"             ? 2
                 : d.op == "rfactor_par"                                            ? 1
                                                                                   : -1;
  if (vf >= 0 && vf < static_cast<int>(d.factors.size()) && !pow2(d.factors[vf]))
    return Status::InvalidArgument(where + ": the vector width " + std::to_string(d.factors[vf]) +
                                   " is not a power of two (Halide 21 aborts on predicated loads of some other widths)");
  const std::string v0 = d.vars.empty() ? std::string() : d.vars[0];
  if (d.op == "vectorize" && d.factors.empty() && v0.size() >= 2 && v0.size() <= 5 && v0[0] == 'a' &&
      v0.find_first_not_of("0123456789", 1) == std::string::npos) {
    const size_t i = std::stoul(v0.substr(1));
    if (i < st.extents.size() && st.extents[i] > 0 && !pow2(st.extents[i]))
      return Status::InvalidArgument(where + ": it vectorises all of `" + v0 + "`, whose extent " +
                                     std::to_string(st.extents[i]) + " is not a power of two; give a factor that is");
  }
  if (d.op == "tile" && d.factors.size() == 3) {
    if (d.factors[2] != 1) return Status::InvalidArgument(where + ": the third factor (full tiles) must be 1");
    if (d.update >= 0 || st.kind != StageInfo::Kind::kOutput)
      return Status::InvalidArgument(where + ": full tiles apply only to the output stage's pure definition");
    for (int k = 0; k < 2; ++k)
      if (d.vars[k].size() < 2 || d.vars[k][0] != 'a' || d.vars[k].find_first_not_of("0123456789", 1) != std::string::npos)
        return Status::InvalidArgument(where + ": full tiles split pure variables (a0, a1, ...), not `" + d.vars[k] + "`");
  }
  return Status::Ok();
}

}  // namespace

std::vector<std::string> autoschedulers_for(bool gpu) {
  if (gpu) return {"Anderson2021", "Li2018", "Mullapudi2016"};
  return {"Adams2019", "Li2018", "Mullapudi2016"};
}

// Adams2019 keeps every state of its beam search; on mlk's pipelines its
// memory and time grow with the stage count. Measured with Halide 21 on 2
// cores (`mlk build --schedule {"autoscheduler": "Adams2019"}`, peak RSS):
//   beam 32 (its default): sgemm, qk_scores, softmax, layernorm (3-4 stages)
//     2-42 s and 0.3-1.3 GB; the attention example (10 stages) over 100 s and
//     6.7 GB, unfinished; the MiniLM layer (29 stages) past 23 GB in 120 s.
//   beam 1 (greedy): 2-2.5 s and under 150 MB on the small ones; attention
//     5.5 s and 290 MB; the layer 62 s and 1.9 GB, for a schedule Halide then
//     refuses ("Can only unroll for loops over a constant extent").
AutoschedulerBudget autoscheduler_budget(const std::string& name, int stages) {
  constexpr int kFullBeamStages = 8, kMaxStages = 16;
  AutoschedulerBudget b;
  if (name != "Adams2019") return b;
  b.beam_size = stages <= kFullBeamStages ? 32 : 1;
  if (stages > kMaxStages) {
    b.tried_by_tune = false;
    b.why_not = "Adams2019 not tried: on " + std::to_string(stages) + " stages (more than " +
                std::to_string(kMaxStages) + ") even its greedy search takes a minute and gigabytes";
  }
  return b;
}

Status validate_schedule(const Schedule& s, const std::vector<StageInfo>& stages, bool gpu) {
  if (!s.autoscheduler.empty()) {
    auto ok = autoschedulers_for(gpu);
    if (std::find(ok.begin(), ok.end(), s.autoscheduler) == ok.end()) {
      std::string list;
      for (const auto& n : ok) list += (list.empty() ? "" : ", ") + n;
      return Status::InvalidArgument("schedule: autoscheduler `" + s.autoscheduler + "` is not available for " +
                                     (gpu ? "GPU" : "CPU") + " profiles (available: " + list + ")");
    }
    if (!s.stages.empty())
      return Status::InvalidArgument("schedule: give either \"autoscheduler\" or \"stages\", not both");
    return Status::Ok();
  }
  std::map<std::string, std::set<std::string>> vars;  // known variable names per stage
  std::map<std::string, const StageInfo*> by_name;
  for (const auto& st : stages) {
    by_name[st.name] = &st;
    for (int i = 0; i < st.rank; ++i) vars[st.name].insert("a" + std::to_string(i));
    for (int i = 0; i < st.rvars; ++i) vars[st.name].insert("r" + std::to_string(i));
  }
  // Pass 1: each directive against its kind's forms; names introduced.
  for (const auto& [name, ds] : s.stages) {
    if (!by_name.count(name)) {
      std::string known;
      for (const auto& st : stages) known += (known.empty() ? "" : ", ") + st.name;
      return Status::InvalidArgument("schedule: unknown stage `" + name + "` (stages: " + known + ")");
    }
    for (size_t i = 0; i < ds.size(); ++i) {
      const Directive& d = ds[i];
      std::string where = "schedule: stage `" + name + "` " + describe(d, i);
      const DirectiveKind* kind = find_directive(d.op);
      if (!kind) return Status::InvalidArgument(where + ": unknown directive `" + d.op + "`");
      if (kind->gpu && !gpu) return Status::InvalidArgument(where + ": a GPU directive, but the target profile is a CPU profile");
      const DirectiveForm* form = nullptr;
      for (const auto& f : kind->forms)
        if (f.variadic ? !d.vars.empty() : d.vars.size() == f.vars.size()) form = &f;
      if (!form) return Status::InvalidArgument(where + ": wrong number of variables");
      if (static_cast<int>(d.factors.size()) < form->min_factors || static_cast<int>(d.factors.size()) > form->max_factors)
        return Status::InvalidArgument(where + ": wrong number of factors");
      for (int64_t f : d.factors)
        if (f < 1 || f > 65536) return Status::InvalidArgument(where + ": factor " + std::to_string(f) + " must be in [1, 65536]");
      if (kind->at != AtRole::kNone && (d.at_stage.empty() || d.at_var.empty()))
        return Status::InvalidArgument(where + ": needs at_stage and at_var");
      if (d.update >= 0 && d.update >= (by_name[name]->rvars > 0 ? 1 : 0))
        return Status::InvalidArgument(where + ": stage has no update definition " + std::to_string(d.update));
      MLK_RETURN_IF_ERROR(check_specific(d, *by_name[name], where));
      // Variables read must exist; names introduced are added.
      for (size_t k = 0; k < d.vars.size(); ++k) {
        const VarRole role = form->variadic ? VarRole::kRead : form->vars[k];
        const std::string& v = d.vars[k];
        if (role == VarRole::kStage && (!by_name.count(v) || v == name || by_name[v]->kind == StageInfo::Kind::kInput))
          return Status::InvalidArgument(where + ": `" + v + "` is not another computed stage");
        if (role == VarRole::kStage && k == 0 && by_name[v]->kind != StageInfo::Kind::kMatmul)
          return Status::InvalidArgument(where + ": the first stage, `" + v + "`, must be a matmul (the scores)");
        if (role == VarRole::kNew) vars[name].insert(v);
        if (role != VarRole::kRead && role != VarRole::kReduction) continue;
        if (!vars[name].count(v))
          return Status::InvalidArgument(where + ": unknown variable `" + v + "` of stage `" + name + "`");
        if (role == VarRole::kReduction && v[0] != 'r')
          return Status::InvalidArgument(where + ": rfactor needs a reduction variable (r0, r1, ...)");
      }
    }
  }
  // Pass 2: compute_at / store_at / stage_shared targets.
  for (const auto& [name, ds] : s.stages)
    for (size_t i = 0; i < ds.size(); ++i) {
      const Directive& d = ds[i];
      const AtRole at = find_directive(d.op)->at;
      if (at == AtRole::kNone) continue;
      std::string where = "schedule: stage `" + name + "` " + describe(d, i);
      if (at == AtRole::kInputShared) {
        if (!by_name.count(d.at_stage) || by_name[d.at_stage]->kind != StageInfo::Kind::kInput)
          return Status::InvalidArgument(where + ": `" + d.at_stage + "` is not an input stage (load_<param>)");
        if (!vars[name].count(d.at_var))
          return Status::InvalidArgument(where + ": unknown variable `" + d.at_var + "` of stage `" + name + "`");
        continue;
      }
      if (!by_name.count(d.at_stage)) return Status::InvalidArgument(where + ": unknown stage `" + d.at_stage + "`");
      if (d.at_stage == name) return Status::InvalidArgument(where + ": a stage cannot be computed at itself");
      if (!vars[d.at_stage].count(d.at_var))
        return Status::InvalidArgument(where + ": stage `" + d.at_stage + "` has no variable `" + d.at_var + "`");
    }
  return Status::Ok();
}

}  // namespace mlk
