#include "autotune/candidate_export.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "artifact/build.h"
#include "artifact/candidate_set.h"
#include "base/files.h"
#include "base/json.h"
#include "lang/ir_printer.h"

namespace mlk::tune {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// The naive schedule's trial (trial 0); "default" in logs and sets written
// before the default schedule became the rules' first seed.
bool naive_origin(const std::string& origin) { return origin == "naive" || origin == "default"; }

std::string problem_label(const std::string& fn, const std::string& profile, const DimEnv& dims) {
  std::string d;
  for (const auto& [k, v] : dims) d += (d.empty() ? "" : ",") + k + "=" + std::to_string(v);
  return "`" + fn + "` for " + profile + " at " + (d.empty() ? "its only shape" : d);
}

// The trials to export: passing, distinct, best first by the search's
// score, at most `count`, the naive schedule among them.
std::vector<const Trial*> pick(const TuneResult& result, int count) {
  std::vector<const Trial*> ok;
  std::set<std::string> seen;
  for (const Trial& t : result.log)
    if (t.m.ok() && seen.insert(t.schedule.hash()).second) ok.push_back(&t);
  std::stable_sort(ok.begin(), ok.end(), [](const Trial* a, const Trial* b) { return a->score_ms < b->score_ms; });
  std::vector<const Trial*> out(ok.begin(), ok.begin() + std::min<size_t>(ok.size(), std::max(1, count)));
  auto is_default = [](const Trial* t) { return naive_origin(t->origin); };
  if (std::none_of(out.begin(), out.end(), is_default)) {
    auto d = std::find_if(ok.begin(), ok.end(), is_default);
    if (d != ok.end()) out.back() = *d;
  }
  return out;
}

Expected<TensorSpec> spec_at(const ir::Type& t, const DimEnv& dims) {
  auto shape = concrete_shape(t.shape, dims);
  if (!shape.ok()) return shape.status();
  return TensorSpec{t.dtype, *shape};
}

// The problem's part of the set: fn, shape, timing specs and cases.
Expected<CandidateSet> problem_of(const ir::Module& m, const std::string& fn, const Profile& p, const DimEnv& dims,
                                  const std::vector<VerifyCase>& cases, const std::string& cases_json) {
  const ir::Function& f = *m.find(fn);
  if (f.results().size() != 1)
    return Status::Unsupported("`" + fn + "` has several results; candidates are exported for fns with one");
  CandidateSet s;
  s.fn = fn;
  s.profile = p.name;
  s.ir_hash = ir::function_hash(m, f);
  s.dims = dims;
  for (const ir::Param& prm : f.params) {
    auto spec = spec_at(prm.type, dims);
    if (!spec.ok()) return spec.status();
    s.timing_inputs.push_back(*spec);
  }
  auto out = spec_at(f.result_type, dims);
  if (!out.ok()) return out.status();
  s.timing_output = *out;
  for (const VerifyCase& c : cases) s.cases.push_back({c.name, c.dims, c.inputs, c.references.at(0), c.tols.at(0)});
  if (s.cases.empty()) return Status::Internal("the search produced no verification cases to export");
  s.cases_record = cases_json;
  return s;
}

// Builds `t`'s schedule into DIR/ID and adds it to the set.
Status add_candidate(CandidateSet& set, const ir::Module& m, const std::string& source, const Profile& p,
                     const std::string& dir, const Schedule& schedule, const std::string& origin, double score_ms) {
  char id[16];
  std::snprintf(id, sizeof id, "c%02zu", set.candidates.size());
  BuildRequest req{&m, set.fn, source, p, set.dims, schedule, (fs::path(dir) / id).string(), set.cases_record};
  auto built = build_artifact(req);
  if (!built.ok()) return Status::Internal(std::string("candidate ") + id + " did not build: " + built.status().message());
  json manifest = json::parse(built->manifest_json);
  set.candidates.push_back({id, origin, schedule.to_json(), schedule.hash(), score_ms,
                            manifest.at("files").at(manifest.at("library").get<std::string>()).get<std::string>()});
  return Status::Ok();
}

double dir_mib(const std::string& dir) {
  uintmax_t bytes = 0;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec))
    if (e.is_regular_file(ec)) bytes += e.file_size(ec);
  return static_cast<double>(bytes) / (1 << 20);
}

}  // namespace

Expected<std::string> export_candidates(const TuneRequest& r, const TuneResult& result, const std::string& dir,
                                        int count) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_empty(dir, ec))
    return Status::InvalidArgument("--export-candidates " + dir + ": the folder is not empty");
  auto set = problem_of(*r.module, r.fn, r.profile, r.dims, result.verify_cases, result.cases_json);
  if (!set.ok()) return set.status();
  for (const Trial* t : pick(result, count))
    MLK_RETURN_IF_ERROR(add_candidate(*set, *r.module, r.source, r.profile, dir, t->schedule, t->origin, t->score_ms));
  MLK_RETURN_IF_ERROR(write_candidate_set(*set, dir));
  char line[512];
  std::snprintf(line, sizeof line, "%s: exported %zu candidates (%s) to %s, %.1f MiB; measure them with `mlk-measure %s`",
                problem_label(r.fn, r.profile.name, r.dims).c_str(), set->candidates.size(),
                result.measured ? "ranked by measurement here" : "ranked by the cost model", dir.c_str(), dir_mib(dir),
                dir.c_str());
  return std::string(line);
}

Status export_one(const MeasureSetup& setup, const Profile& p, const std::string& source, const Schedule& schedule,
                  const std::string& dir) {
  auto set = problem_of(*setup.module, setup.fn, p, setup.dims, setup.verify, "{}");
  if (!set.ok()) return set.status();
  set->min_reps = setup.min_reps;
  set->max_reps = setup.max_reps;
  set->min_time_s = setup.min_time_s;
  MLK_RETURN_IF_ERROR(add_candidate(*set, *setup.module, source, p, dir, schedule, "remote", 0));
  return write_candidate_set(*set, dir);
}

Measurement measurement_of(const CandidateResult& r) {
  Measurement m;
  m.verdict = r.verdict == "ok" ? Measurement::Verdict::kOk
              : r.verdict == "wrong" ? Measurement::Verdict::kWrong : Measurement::Verdict::kError;
  m.detail = r.detail;
  m.median_ms = r.median_ms;
  m.times_ms = r.times_ms;
  m.max_abs_error = r.max_abs_error;
  m.max_rel_error = r.max_rel_error;
  return m;
}

Expected<TuneResult> import_measurements(const TuneRequest& r, const std::string& file, const std::string& set_dir) {
  auto set = read_candidate_set(set_dir);
  if (!set.ok()) return set.status();
  const std::string want = problem_label(r.fn, r.profile.name, r.dims);
  const std::string have = problem_label(set->fn, set->profile, set->dims);
  if (want != have) return Status::InvalidArgument(set_dir + " holds candidates of " + have + ", not of " + want);
  if (set->ir_hash != ir::function_hash(*r.module, *r.module->find(r.fn)))
    return Status::InvalidArgument(set_dir + " was exported from another version of `" + r.fn + "` (its IR hash differs)");
  auto text = read_file(file);
  if (!text.ok()) return text.status();
  auto m = parse_measurements(*text, file);
  if (!m.ok()) return m.status();
  auto digest = candidate_set_digest(set_dir);
  if (!digest.ok()) return digest.status();
  if (m->set_sha256 != *digest)
    return Status::InvalidArgument(file + " measured another candidate set than " + set_dir +
                                   " (its candidates.json sha256 differs)");
  TuneResult res;
  res.fn = r.fn;
  res.dims = r.dims;
  res.measured = true;
  res.measured_on = m->device;
  res.reference = "the reference interpreter, here; its outputs compared by " + m->runner + " on " + m->device;
  const Trial* best = nullptr;
  const CandidateResult* best_r = nullptr;
  std::string failures;
  for (const CandidateResult& cr : m->results) {
    auto c = std::find_if(set->candidates.begin(), set->candidates.end(), [&](const Candidate& k) { return k.id == cr.id; });
    if (c == set->candidates.end()) return Status::InvalidArgument(file + ": no candidate `" + cr.id + "` in " + set_dir);
    if (cr.schedule_hash != c->schedule_hash || (cr.verdict == "ok" && cr.library_sha256 != c->library_sha256))
      return Status::InvalidArgument(file + ": `" + cr.id + "` is not the candidate of that id in " + set_dir);
    auto sched = Schedule::from_json(c->schedule_json);
    if (!sched.ok()) return Status::InvalidArgument(set_dir + ": `" + c->id + "`: " + sched.status().message());
    Trial t;
    t.index = static_cast<int>(res.log.size());
    t.origin = c->origin;
    t.schedule = *sched;
    t.predicted_ms = c->estimate_ms;
    t.m = measurement_of(cr);
    t.score_ms = cr.median_ms;
    res.log.push_back(t);
    if (!t.m.ok()) failures += "; " + cr.id + " " + cr.verdict + ": " + cr.detail;
    if (t.m.ok() && naive_origin(t.origin)) res.default_ms = t.m.median_ms;
    if (t.m.ok() && (!best_r || cr.median_ms < best_r->median_ms)) best_r = &cr;
  }
  if (!best_r)
    return Status::NotFound("no candidate of " + want + " passed on " + m->device + failures);
  for (const Trial& t : res.log)  // res.log no longer moves
    if (t.schedule.hash() == best_r->schedule_hash) best = &t;
  res.best = best->schedule;
  res.best_origin = best->origin;
  res.best_ms = best_r->median_ms;
  res.best_times_ms = best_r->times_ms;
  res.measured_library_sha256 = best_r->library_sha256;
  res.measured_artifact_dir = (fs::path(set_dir) / best_r->id).string();
  res.trials = static_cast<int>(res.log.size());
  for (const CandidateCase& c : set->cases) {
    VerifyCase v;
    v.name = c.name;
    v.dims = c.dims;
    v.inputs = c.inputs;
    v.references = {c.expected};
    v.tols = {c.tol};
    res.verify_cases.push_back(std::move(v));
  }
  json record = parse_json(set->cases_record);
  if (!record.is_object()) record = json::object();
  record["winner_measured"] = {{"on", m->device}, {"by", m->runner},
                               {"max_abs_error", best_r->max_abs_error}, {"max_rel_error", best_r->max_rel_error}};
  res.cases_json = set->cases_record;
  res.verification_json = record.dump();
  return res;
}

}  // namespace mlk::tune
