#include "verify/report.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>
#include "base/json.h"

namespace mlk::verify {

using nlohmann::json;

namespace {

struct LevelName {
  Level level;
  const char* name;
};
constexpr LevelName kLevels[] = {{Level::kTypes, "types"},
                                 {Level::kIdentity, "identity"},
                                 {Level::kEnvelope, "envelope"},
                                 {Level::kMemory, "memory"},
                                 {Level::kEquivalence, "equivalence"}};

std::string seconds_str(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f s", s);
  return b;
}

}  // namespace

const char* level_name(Level l) {
  for (const auto& n : kLevels)
    if (n.level == l) return n.name;
  return "?";
}

const std::vector<Level>& all_levels() {
  static const std::vector<Level> v = {Level::kTypes, Level::kIdentity, Level::kEnvelope, Level::kMemory,
                                       Level::kEquivalence};
  return v;
}

const char* level_list() { return "types, identity, envelope, memory, equivalence"; }

Expected<std::vector<Level>> parse_levels(const std::string& text) {
  std::vector<Level> out;
  std::stringstream ss(text);
  std::string w;
  auto add = [&](Level l) {
    for (Level o : out)
      if (o == l) return;
    out.push_back(l);
  };
  while (std::getline(ss, w, ',')) {
    if (w == "all") {
      for (Level l : all_levels()) add(l);
      continue;
    }
    if (w == "cheap") {
      add(Level::kTypes), add(Level::kIdentity);
      continue;
    }
    bool found = false;
    for (const auto& n : kLevels)
      if (w == n.name) add(n.level), found = true;
    if (!found)
      return Status::Usage("unknown verification level `" + w + "` (levels: " + level_list() + "; or all, cheap)");
  }
  if (out.empty()) return Status::Usage("no verification level given (levels: " + std::string(level_list()) + ")");
  // Cheapest first, whatever the order given.
  std::vector<Level> sorted;
  for (Level l : all_levels())
    for (Level o : out)
      if (o == l) sorted.push_back(l);
  return sorted;
}

const char* result_word(const LevelReport& l) { return !l.not_run.empty() ? "not run" : l.pass ? "pass" : "FAIL"; }

std::string result_detail(const LevelReport& l) {
  if (!l.not_run.empty()) return ": " + l.not_run;
  return l.pass ? "" : ": " + l.counterexample;
}

bool Report::pass() const {
  if (levels.empty()) return false;
  for (const auto& l : levels)
    if (!l.pass || !l.not_run.empty()) return false;
  return true;
}

bool Report::failed() const {
  for (const auto& l : levels)
    if (!l.pass && l.not_run.empty()) return true;
  return false;
}

std::string Report::verdict() const {
  if (failed() || levels.empty()) return "FAIL";
  std::string skipped;
  for (const auto& l : levels)
    if (!l.not_run.empty()) skipped += (skipped.empty() ? "" : ", ") + std::string(level_name(l.level));
  return skipped.empty() ? "PASS" : "INCOMPLETE (" + skipped + " not run here)";
}

// A level's object. One that did not run has no "pass": it is "not_run",
// with the reason, and never counts as passed or failed.
static json level_json(const LevelReport& l) {
  json o = {{"level", level_name(l.level)}, {"checked", l.checked}, {"guarantee", l.guarantee},
            {"evidence", l.evidence}, {"seconds", l.seconds}};
  if (!l.not_run.empty()) o["not_run"] = l.not_run;
  else o["pass"] = l.pass;
  if (!l.pass && l.not_run.empty()) o["counterexample"] = l.counterexample;
  return o;
}

std::string Report::to_json() const {
  json lv = json::array(), passed = json::array(), not_run = json::array();
  for (const auto& l : levels) {
    lv.push_back(level_json(l));
    if (!l.not_run.empty()) not_run.push_back(level_name(l.level));
    else if (l.pass) passed.push_back(level_name(l.level));
  }
  json j = {{"format", "mlk-verify-1"}, {"fn", fn}, {"target", target}, {"dims", dims},
            {"pass", pass()}, {"passed", passed}, {"levels", lv}};
  if (!not_run.empty()) j["not_run"] = not_run;
  return j.dump();
}

std::string Report::to_text() const {
  std::string s = "verify " + fn + " [" + dims + "] " + target + ": " + verdict() + "\n";
  for (const auto& l : levels) {
    s += std::string("  ") + level_name(l.level) + ": " + result_word(l) + " (" + seconds_str(l.seconds) + ")\n";
    s += "    checked: " + l.checked + "\n";
    s += "    guarantee: " + l.guarantee + "\n";
    for (const auto& e : l.evidence) s += "    evidence: " + e + "\n";
    if (!l.not_run.empty()) s += "    not run: " + l.not_run + "\n";
    else if (!l.pass) s += "    counterexample: " + l.counterexample + "\n";
  }
  return s;
}

Expected<std::string> attach_report(std::string_view text, const Report& r, int indent) {
  json j = parse_json(text);
  if (!j.is_object()) return Status::InvalidArgument("cannot attach a verification report: not a JSON object");
  json rep = json::parse(r.to_json());
  rep.erase("not_run");
  // No level ran here: there is nothing to store (an empty report would read
  // as "verified: none", and would replace one of another shape).
  if (std::none_of(r.levels.begin(), r.levels.end(), [](const LevelReport& l) { return l.not_run.empty(); }))
    return std::string(text);
  // Staged verification: levels of an earlier report that this one did not
  // run are kept (the artifact's bytes are the same), this run's replace theirs.
  // Only a report of the same fn, target and shape counts: a pass at a small
  // shape says nothing of another. A level that could not run here is not
  // this run's: it neither replaces an earlier result nor is stored.
  auto same_run = [&](const json& o) {
    return o.value("fn", json()) == rep["fn"] && o.value("target", json()) == rep["target"] &&
           o.value("dims", json()) == rep["dims"];
  };
  auto ran_here = [](const json& l) { return l.is_object() && l.contains("pass") && l["pass"].is_boolean(); };
  json merged = json::array();
  std::set<std::string> ran;
  for (const auto& l : rep["levels"])
    if (ran_here(l)) ran.insert(l.value("level", "")), merged.push_back(l);
  if (auto old = j.find("verify_report"); old != j.end() && old->is_object() && old->contains("levels") &&
                                           (*old)["levels"].is_array() && same_run(*old))
    for (const auto& l : (*old)["levels"])
      if (ran_here(l) && l.contains("level") && l["level"].is_string() && !ran.count(l["level"].get<std::string>()))
        merged.push_back(l);
  json sorted = json::array(), passed = json::array();
  bool all = !merged.empty();
  for (Level lv : all_levels())
    for (const auto& l : merged)
      if (l["level"] == level_name(lv)) {
        sorted.push_back(l);
        if (l["pass"].get<bool>()) passed.push_back(level_name(lv));
        else all = false;
      }
  rep["levels"] = sorted;
  rep["passed"] = passed;
  rep["pass"] = all;
  j["verify_report"] = rep;
  return j.dump(indent);
}

}  // namespace mlk::verify
