// The identity level: the artifact's recorded algorithm hash against the hash
// of the algorithm the typed IR lowers to now, and the schedule's directives
// that may reassociate floating-point sums.
#include <set>

#include <nlohmann/json.hpp>

#include "lang/ir_printer.h"
#include "scheduler/algorithm.h"
#include "verify/levels.h"
#include "base/json.h"

namespace mlk::verify {

using nlohmann::json;

namespace {

// Directives that may change the order of a reduction's floating-point
// additions: rfactor (partial sums), and vectorised, parallel, unrolled or
// GPU-mapped reduction variables (names r..., or introduced from them).
std::vector<std::string> reassociating(const json& schedule) {
  std::vector<std::string> out;
  if (!schedule.is_object()) return out;
  if (schedule.value("autoscheduler", "") != "")
    out.push_back("autoscheduler " + schedule.value("autoscheduler", "") + " (its directives are not listed)");
  const json stages = schedule.value("stages", json::object());
  if (!stages.is_object()) return out;
  for (const auto& [stage, ds] : stages.items()) {
    if (!ds.is_array()) continue;
    std::set<std::string> rnames;  // reduction variables and names introduced from them
    for (const auto& d : ds) {
      const std::string op = d.value("op", "");
      std::vector<std::string> vars;
      if (d.contains("vars") && d["vars"].is_array())
        for (const auto& v : d["vars"])
          if (v.is_string()) vars.push_back(v.get<std::string>());
      bool on_r = false;
      for (const auto& v : vars) on_r = on_r || v.starts_with("r") || rnames.count(v);
      if (on_r && (op == "split" || op == "tile" || op == "fuse"))
        for (const auto& v : vars) rnames.insert(v);
      const bool moves = op == "vectorize" || op == "parallel" || op == "unroll" || op.starts_with("gpu_");
      if (op.starts_with("rfactor") || op == "atomic" || (moves && on_r)) {
        std::string v;
        for (const auto& x : vars) v += (v.empty() ? "" : ", ") + x;
        out.push_back(stage + ": " + op + "(" + v + ")");
      }
    }
  }
  return out;
}

}  // namespace

LevelReport check_identity(const Context& c) {
  LevelReport r;
  r.checked = "the algorithm hash recorded when the artifact was built against the hash of the unscheduled Halide "
              "algorithm the typed IR lowers to now; the schedule's directives that may reassociate floating-point sums";
  r.guarantee = "the artifact was compiled from the algorithm the typed IR lowers to, so (by Halide's claim that a "
                "schedule preserves meaning) its schedule can only have changed evaluation order: results are those of "
                "the algorithm up to reassociation in the listed directives and FMA contraction when strict_float is off "
                "(the object code itself is not re-derived, and Halide is trusted)";
  json man = parse_json(c.manifest);
  if (!man.is_object()) {
    r.counterexample = "manifest.json is not a JSON object";
    return r;
  }
  const std::string ir_hash = ir::function_hash(c.m, c.f);
  if (man.value("ir_hash", "") != ir_hash) {
    r.counterexample = "the artifact was built from other typed IR: its ir_hash is " + man.value("ir_hash", "(none)") +
                       ", `" + c.fn + "` hashes to " + ir_hash;
    return r;
  }
  auto alg = summarize_algorithm(c.m, c.fn, c.profile.halide_target);
  if (!alg.ok()) {
    r.counterexample = "the typed IR does not lower: " + alg.status().message();
    return r;
  }
  const json recorded = man.value("algorithm_hash", json());
  if (!recorded.is_string()) {
    r.counterexample = "the artifact records no algorithm_hash (built by an mlk without it; rebuild it)";
    return r;
  }
  if (recorded.get<std::string>() != alg->hash) {
    r.counterexample = "the artifact's algorithm hash is " + recorded.get<std::string>() + ", the typed IR lowers to " +
                       alg->hash + ": the artifact was compiled from a different algorithm";
    return r;
  }
  r.evidence.push_back("algorithm sha256 " + alg->hash + " (recorded and recomputed)");
  r.evidence.push_back("ir_hash " + ir_hash);
  const json profile = man.value("profile", json::object());
  const std::string target = profile.is_object() ? profile.value("halide_target", "") : "";
  const bool strict = target.find("strict_float") != std::string::npos;
  std::vector<std::string> re = reassociating(man.value("schedule", json()));
  if (c.isolate) {  // a signed report quotes none of the manifest's words (its writer chose them)
    r.evidence.push_back(std::string("strict_float ") + (strict ? "on" : "off (LLVM may contract a*b+c into FMA)") +
                         " per the manifest's target");
    r.evidence.push_back(re.empty() ? "no directive of the manifest's schedule reassociates a reduction"
                                    : std::to_string(re.size()) + " directives of the manifest's schedule may "
                                      "reassociate a reduction (run without --sign to see them)");
  } else {
    r.evidence.push_back(std::string("strict_float ") + (strict ? "on" : "off (LLVM may contract a*b+c into FMA)") +
                         " in target " + target);
    if (re.empty()) r.evidence.push_back("no directive reassociates a reduction");
    for (const auto& d : re) r.evidence.push_back("may reassociate: " + d);
  }
  r.pass = true;
  return r;
}

}  // namespace mlk::verify
