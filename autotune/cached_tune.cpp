#include "autotune/cached_tune.h"
#include "base/files.h"
#include "base/sha256.h"
#include "base/log.h"

#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/signing.h"
#include "cache/entry_meta.h"
#include "cache/hit_dir.h"
#include "cache/signatures.h"
#include "lang/bind.h"
#include "lang/ir_printer.h"
#include "lang/source.h"
#include "artifact/build.h"
#include "artifact/loaded.h"
#include "autotune/measure_cuda.h"
#include "targets/toolchain.h"
#include "base/json.h"

namespace mlk::tune {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

std::string when(int64_t t) {
  std::time_t tt = static_cast<std::time_t>(t);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%d %H:%M UTC", std::gmtime(&tt));
  return b;
}


// The stored artifact itself, loaded from the very bytes that go into the
// cache and called through its C ABI on every verification case (the ragged
// shape and the verification shape, both input sets), compared with the
// reference. What it checked, for the verification record; an error when
// the artifact cannot be loaded or called, or computes something else.
Expected<json> check_artifact(const ir::Module& m, const std::string& fn, const Profile& p,
                              const std::map<std::string, std::string>& files, const TuneResult& r,
                              const TuneOptions& opts) {
  if (!r.measured)
    return json{{"checked", false}, {"why", "not run: no GPU here that can run this CUDA artifact (measured: false)"}};
  if (!r.measured_on.empty()) {  // imported: the runner loaded these very bytes (store_tuned compared them)
    json cases = json::array();
    for (const VerifyCase& c : r.verify_cases) cases.push_back(c.name);
    return json{{"checked", true},
                {"how", "the same library, run by mlk-measure on " + r.measured_on + " through its C ABI"},
                {"cases", cases}};
  }
  if (p.is_gpu() && !cuda_measurable(p).ok)  // measured by GPU workers (`mlk tune --workers`)
    return json{{"checked", false},
                {"why", "not run here (" + cuda_measurable(p).reason + "); the workers verified the candidate, built "
                        "by this mlk from the same schedule, on every case before timing it"}};
  if (r.verify_cases.empty()) return Status::Internal("tuning `" + fn + "` produced no verification cases to check its artifact on");
  auto art = LoadedArtifact::LoadFiles(files);
  if (!art.ok()) return Status::Internal("the built artifact of `" + fn + "` cannot be loaded: " + art.status().message());
  const ir::Function& f = *m.find(fn);
  ErrorStats worst;
  json cases = json::array();
  for (const VerifyCase& c : r.verify_cases) {
    std::vector<HostTensor> outs(f.results().size());
    Status ran = (*art)->RunAllInto(f, c.inputs, c.dims, outs);
    if (!ran.ok())
      return Status::Internal("the built artifact of `" + fn + "` failed at the " + c.name + ": " + ran.message() +
                              "; nothing was cached");
    if (opts.aot_fault) opts.aot_fault(c, outs[0]);
    Status cmp = compare_case(c, outs);
    if (!cmp.ok())
      return Status::Internal("the built artifact of `" + fn + "` differs from the reference at the " + c.name + ": " +
                              cmp.message() + "; the winning schedule passed under the JIT, so the AOT build is at fault; "
                              "nothing was cached");
    ErrorStats e = error_stats(c, outs);
    worst.max_abs = std::max(worst.max_abs, e.max_abs);
    worst.max_rel = std::max(worst.max_rel, e.max_rel);
    cases.push_back(c.name);
  }
  return json{{"checked", true},
              {"how", "the stored library loaded with dlopen and called through its C ABI"},
              {"cases", cases},
              {"max_abs_error", worst.max_abs},
              {"max_rel_error", worst.max_rel}};
}

// The winner's artifact files, manifest.json among them: built as `mlk
// build` would; or, measured elsewhere, the very files that were measured
// (their library must be the one the measurements name).
Expected<std::map<std::string, std::string>> winner_files(const TuneRequest& request, const TuneResult& r,
                                                          const std::string& key) {
  std::map<std::string, std::string> files;
  std::string manifest_text;
  std::vector<std::string> names;
  fs::path art = fs::path(request.work_dir) / (key + ".artifact");
  std::error_code ec;
  if (!r.measured_artifact_dir.empty()) {
    art = r.measured_artifact_dir;
    auto text = read_file((art / "manifest.json").string());
    if (!text.ok()) return text.status();
    manifest_text = *text;
    json mj = parse_json(manifest_text);
    if (!mj.is_object() || !mj.contains("files") || !mj["files"].is_object())
      return Status::Corruption((art / "manifest.json").string() + ": no `files`");
    for (const auto& [name, digest] : mj["files"].items()) names.push_back(name);
    if (mj.value("library", "") == "" || mj["files"].value(mj.value("library", ""), "") != r.measured_library_sha256)
      return Status::InvalidArgument(art.string() + " is not the library that was measured on " + r.measured_on +
                                     " (its sha256 differs); nothing was cached");
  } else {
    fs::remove_all(art, ec);
    BuildRequest req{request.module, request.fn, request.source, request.profile, request.dims, r.best, art.string(),
                     r.verification_json};
    auto built = build_artifact(req);
    if (!built.ok()) return Status::Internal("the winning schedule did not build: " + built.status().message());
    manifest_text = built->manifest_json;
    names = built->files;
  }
  for (const auto& f : names) {
    auto bytes = read_file((art / f).string());
    if (!bytes.ok()) return bytes.status();
    files[f] = *bytes;
  }
  files["manifest.json"] = manifest_text;
  if (r.measured_artifact_dir.empty()) fs::remove_all(art, ec);
  return files;
}

// "" when `a` may be copied to an -o directory as it is: no trust list is
// set, it was tuned on this machine, or a trusted key signed it for `ns`;
// else why not.
std::string untrusted_for_out(const cache::Artifact& a, const std::string& ns) {
  auto trusted = default_trusted_signers();
  if (!trusted.ok()) return trusted.status().message();
  if (trusted->empty() || a.info.manifest.provenance.origin == cache::kOriginLocal) return "";
  auto digests = cache::statement_digests(a.files);
  if (!digests.ok()) return digests.status().message();
  auto st = cache::entry_statement(a.info.key, *digests, a.info.manifest.meta_json);
  if (!st.ok()) return st.status().message();
  Status s = cache::check_signed("cache entry " + a.info.key.substr(0, 16), *st, a.info.manifest.meta_json, *trusted,
                                 cache::SignatureCheck{.namespaces = {ns}});
  return s.ok() ? "" : s.message() + " ($MLK_TRUSTED_SIGNERS), so it is not copied to -o as it is";
}

}  // namespace

std::string tuning_key(const TuneRequest& r) { return cache::cache_key(key_inputs(*r.module, r.fn, r.dims, r.profile)); }

std::string tuning_log_path(const TuneRequest& r) {
  if (!r.opts.log_path.empty()) return r.opts.log_path;
  return (fs::path(r.work_dir) / (tuning_key(r) + ".tuning.jsonl")).string();
}

Expected<std::optional<Outcome>> lookup_tuned(const TuneRequest& request) {
  const std::string& fn = request.fn;
  const Profile& p = request.profile;
  const DimEnv& dims = request.dims;
  cache::Store* store = request.store;
  const std::string& ns = request.ns;
  const std::string& out_dir = request.out_dir;
  Outcome o;
  o.key = tuning_key(request);
  const std::string label = fn + " [" + dims_str(dims) + "] " + p.name;
  if (store) {
    auto hit = store->get_entry(ns, o.key);
    // A hit copied to -o DIR is code a runtime trusting DIR loads: under a
    // trust list ($MLK_TRUSTED_SIGNERS) it must have been tuned here or
    // signed by a trusted key (issue 49, review 12).
    const std::string why_not_out = hit.ok() && !out_dir.empty() ? untrusted_for_out(*hit, ns) : "";
    if (hit.ok() && why_not_out.empty()) {
      auto em = cache::parse_entry_meta(hit->info.manifest.meta_json);
      if (!em.ok())
        return Status::Corruption("cache entry " + o.key.substr(0, 16) + ": " + em.status().message() +
                                  "; remove it with `mlk cache rm " + o.key.substr(0, 16) + "` and tune again");
      json meta = json::parse(em->canonical);  // a valid JSON object: parse_entry_meta made it
      o.cached = true;
      o.origin = hit->info.manifest.provenance.origin;
      meta["cached"] = true;
      o.json = meta.dump();
      if (auto sj = hit->files.find("schedule.json"); sj != hit->files.end()) o.schedule_json = sj->second;
      const double best = em->best_ms.value_or(0), dflt = em->default_ms.value_or(0);
      double speedup = dflt > 0 && best > 0 ? dflt / best : 0;
      o.summary_line = label + ": cached: tuned on " + hit->info.manifest.provenance.host + " at " +
                       when(hit->info.manifest.provenance.time) + ", " + fmt(speedup) + "x over the naive schedule (" +
                       fmt(best) + " ms" + (em->measured ? "" : ", estimated") + "), key " + o.key.substr(0, 16);
      if (!out_dir.empty()) MLK_RETURN_IF_ERROR(cache::write_hit_dir(hit->files, out_dir));
      return std::optional<Outcome>(std::move(o));
    }
    if (hit.ok()) {
      log_linef(LogLevel::kWarning, "mlk tune: %s; tuning anew", why_not_out.c_str());
      return std::optional<Outcome>{};
    }
    if (hit.status().code() != Status::Code::kNotFound)
      log_linef(LogLevel::kWarning, "mlk tune: cache read failed (%s); tuning anew", hit.status().message().c_str());
  }
  return std::optional<Outcome>{};
}

Expected<Outcome> store_tuned(const TuneRequest& request, const TuneResult& result) {
  const ir::Module& m = *request.module;
  const std::string& fn = request.fn;
  const std::string& source = request.source;
  const Profile& p = request.profile;
  const DimEnv& dims = request.dims;
  const TuneOptions& opts = request.opts;
  cache::Store* store = request.store;
  const std::string& ns = request.ns;
  const std::string& out_dir = request.out_dir;
  const TuneResult* r = &result;
  Outcome o;
  o.key = tuning_key(request);
  const std::string label = fn + " [" + dims_str(dims) + "] " + p.name;
  std::error_code ec;
  auto winner = winner_files(request, *r, o.key);
  if (!winner.ok()) return winner.status();
  std::map<std::string, std::string>& files = *winner;
  // The artifact as stored must compute what the reference does before it is
  // stored; the manifest then records that it did.
  auto aot = check_artifact(m, fn, p, files, *r, opts);
  if (!aot.ok()) return aot.status();
  json verification = parse_json(r->verification_json);
  if (!verification.is_object()) verification = json::object();
  verification["aot_artifact"] = *aot;
  json manifest = json::parse(files["manifest.json"]);
  manifest["verification"] = verification;
  files["manifest.json"] = manifest.dump(2);
  files["schedule.json"] = r->best.to_json();
  o.schedule_json = files["schedule.json"];
  auto log = read_file(tuning_log_path(request));
  if (log.ok()) files["tuning_log.jsonl"] = *log;
  json timings = {{"best_times_ms", r->best_times_ms}, {"best_ms", r->best_ms}, {"default_ms", r->default_ms}};
  files["timings.json"] = timings.dump(2);
  // The program itself, so that a runtime can find and check the kernel by its
  // program hash alone (runtime/, GetKernelByHash).
  if (auto text = read_file(source); text.ok()) files["program.tl"] = *text;
  json summary = {{"fn", fn},
                  {"program_hash", ir::function_hash(m, *m.find(fn))},
                  {"target", p.name},
                  {"dims", dims},
                  {"best_ms", r->best_ms},
                  {"default_ms", r->default_ms},
                  {"speedup", r->default_ms > 0 && r->best_ms > 0 ? r->default_ms / r->best_ms : 0},
                  {"best_origin", r->best_origin},
                  {"trials", r->trials},
                  {"key", o.key},
                  {"measured", r->measured},
                  {"verified_against", r->reference},
                  {"verification", verification},
                  {"cached", false},
                  {"schedule_hash", r->best.hash()}};
  if (!r->measured_on.empty()) summary["measured_on"] = r->measured_on;
  o.json = summary.dump();
  if (request.before_store) MLK_RETURN_IF_ERROR(request.before_store(files, o.json));
  if (store) {
    cache::Provenance prov;
    prov.producer = "mlk tune";
    // Made here: `mlk cache push --sign` may sign it. A winner imported from
    // measurements made elsewhere is that folder's bytes, not this
    // process's build (review 7 of issue 49): its origin says so, and
    // signing tools refuse it as they refuse an imported entry.
    prov.origin = r->measured_artifact_dir.empty() ? std::string(cache::kOriginLocal)
                                                   : "import:" + r->measured_artifact_dir;
    prov.measured = r->measured;
    prov.toolchain = {{"mlk", mlk_version()}, {"halide", halide_version()}, {"llvm", llvm_version()}};
    Status s = store->put_entry(ns, o.key, o.json, prov, files);
    if (!s.ok()) return Status::IOError("tuned, but could not store the result in the cache: " + s.message());
  }
  if (!out_dir.empty()) MLK_RETURN_IF_ERROR(cache::write_hit_dir(files, out_dir));
  o.summary_line = label + ": " + (r->measured ? "" : "estimated ") + fmt(r->best_ms) + " ms (" + r->best_origin +
                   "), naive schedule " + fmt(r->default_ms) + " ms, " +
                   fmt(r->default_ms > 0 && r->best_ms > 0 ? r->default_ms / r->best_ms : 0) + "x, " +
                   (r->untuned_ms > 0 && r->best_ms > 0
                        ? "default schedule " + fmt(r->untuned_ms) + " ms, " + fmt(r->untuned_ms / r->best_ms) + "x, "
                        : std::string()) +
                   std::to_string(r->trials) + " trials, " + (r->measured ? (r->measured_on.empty() ? std::string("measured") : "measured on " + r->measured_on) : std::string("NOT measured (GPU candidates are ranked by the cost model and ptxas)")) +
                   ", key " + o.key.substr(0, 16);
  return o;
}

Expected<Outcome> tune_cached(const TuneRequest& request) {
  auto hit = lookup_tuned(request);
  if (!hit.ok()) return hit.status();
  if (*hit) return std::move(**hit);
  // Resumable: the log of an interrupted run of the same key is picked up.
  std::error_code ec;
  fs::create_directories(request.work_dir, ec);
  TuneOptions opts = request.opts;
  opts.log_path = tuning_log_path(request);
  auto r = tune_function(*request.module, request.fn, request.profile, request.dims, opts);
  if (!r.ok()) return r.status();
  return store_tuned(request, *r);
}

}  // namespace mlk::tune
