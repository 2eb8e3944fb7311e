// `mlk tune`: autotune public functions for a target profile, through the
// artifact cache.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "autotune/cached_tune.h"
#include "autotune/candidate_export.h"
#include "autotune/program_tune.h"
#include "cache/paths.h"
#include "cli/args.h"
#include "cli/command.h"
#include "cli/dump_after.h"
#include "lang/frontend.h"
#include "lang/memory_budget.h"
#include "client/cli_cache.h"
#include "targets/detect.h"
#include "verify/verify.h"
#include "base/files.h"
#include "base/signing.h"
#include "cache/entry_meta.h"
#include "cache/signatures.h"
#include "autotune/remote_measure.h"

namespace mlk::cli {

using tune::RemoteMeasureOptions;
using tune::use_workers;

namespace {

int fail(const Status& s) {
  std::fprintf(stderr, "mlk tune: %s\n", s.message().c_str());
  return s.exit_code();
}

struct TuneArgs {
  std::string file, fn, target, out_dir, cache_flag, ns = cache::kDefaultNamespace, namespaces, log;
  std::map<std::string, int64_t> dims;
  tune::TuneOptions opts;
  bool json_out = false, require_measured = false, no_cache = false;
  double budget_s = 0;  // --budget: one search budget for every job, split by expected gain
  DumpStage dump_after = DumpStage::kNone;
  std::string verify_levels = "cheap", require_verified;  // `mlk verify` levels run on each winner; a gate
  std::string workers, server;  // --workers KEY: measured by `mlk worker`s through --server (autotune/remote_measure.h)
  double worker_wait_s = 60;
  Precision precision = Precision::kF32;  // --precision
  std::string sign_path;                 // --sign KEYFILE
  std::optional<SigningKey> sign_key;    // loaded from it before anything is tuned
  std::string sign_packs_path;           // --sign-packs
  std::optional<SigningKey> pack_key;    // loaded from it before anything is tuned
  std::string export_dir, import_file;   // --export-candidates DIR, --import-measurements FILE
  int64_t candidates = 8;                // --candidates N
  bool workers_run_artifacts = false;    // --workers-run-artifacts
};

const char* kTuneDescription =
    "Searches schedules for every public fn of FILE.tl (or --fn NAME) at each shape of\n"
    "its `tune` declarations (or --dims), verifies every candidate against the reference\n"
    "interpreter (two random input sets at each of two shapes, one with ragged tails),\n"
    "measures it in an isolated worker process, and keeps the fastest. The winner's\n"
    "stored artifact is called through its C ABI and checked the same way.\n"
    "The winner's artifact (as `mlk build` makes it), schedule, tuning log and timings\n"
    "go into the artifact cache under a key of everything that determines them; a\n"
    "cache hit returns at once and says so.\n";

const char* kTuneEpilogue =
    "GPU profiles are measured on this machine's GPU when it has one of the profile's\n"
    "compute capability (timed with CUDA events, verified like CPU candidates); without\n"
    "one they are ranked by the GPU cost model (occupancy from the ptxas resource report,\n"
    "bytes by dtype, tiling), and their results are marked measured: false; or they\n"
    "are exported (--export-candidates), measured where the GPU is (mlk-measure), and\n"
    "imported (--import-measurements): docs/tuning.md, \"Measuring elsewhere\".\n"
    "Progress goes to stderr: trials done, best time, speedup over the default, ETA.\n"
    "\n"
    "Exit status: 0 success; 1 a bad program or input (including a shape whose\n"
    "inputs and outputs would not fit in this machine's memory, refused before\n"
    "anything is allocated); 2 bad usage; 3 an internal error (a bug in mlk).\n";

CommandSpec spec(TuneArgs& t) {
  std::vector<Flag> flags = {
      {.name = "--target", .metavar = "PROFILE", .help = "the profile to tune for (see `mlk targets`)",
       .set = store(t.target), .required = true, .required_note = " (see `mlk targets`)"},
      precision_flag(t.precision),
      {.name = "--fn", .metavar = "NAME", .help = "tune this fn only (public or not) instead of every public fn",
       .set = store(t.fn)},
      {.name = "--dims", .metavar = "N=V,...", .help = "the one shape to tune at instead of the `tune` declarations'",
       .set = store_dims(t.dims)},
      {.name = "--trials", .metavar = "N", .help = "candidates to measure, at most", .default_value = "40",
       .set = store_count(t.opts.trials)},
      {.name = "--time", .metavar = "SECONDS", .help = "search budget per shape, from the first trial (computing the references is not counted)", .default_value = "150",
       .set = store_count(t.opts.time_s)},
      {.name = "--budget", .metavar = "SECONDS",
       .help = "tune every selected fn and shape under one search budget of SECONDS in all, split across them by "
               "expected gain as Ansor's task scheduler does: each gets a first slice, then each slice goes to the one "
               "whose best time is falling fastest; one progress line per slice with the program's ETA; --time is "
               "not used (--trials still caps each); an interrupted run resumes every unfinished one from its log",
       .set = store_count(t.budget_s)},
      {.name = "--seed", .metavar = "K", .help = "the search's random seed; the same seed replays the same search",
       .default_value = "1", .set = store_count(t.opts.seed)},
      {.name = "--timeout", .metavar = "SECONDS",
       .help = "per candidate, the limit on its run (verification and timing); a hung or crashed candidate costs "
               "one trial",
       .default_value = "60", .set = store_count(t.opts.run_timeout_s)},
      {.name = "--compile-timeout", .metavar = "SECONDS",
       .help = "per candidate, the limit on its compilation (Halide's JIT and any autoscheduler)",
       .default_value = "max(60, 10 x the naive schedule's compile time); an autoscheduler max(15, 8 x the slowest compile before it)", .set = store_count(t.opts.compile_timeout_s)},
      {.name = "--no-autoschedulers", .help = "do not try Halide's autoschedulers as extra candidates",
       .set = set_bool(t.opts.autoschedulers, false)},
      {.name = "--json",
       .help = "print only a JSON array on stdout (the summary lines go to stderr) with, per tuned fn and shape: "
               "fn, target, dims, best_ms, default_ms, speedup, trials, key, measured, cached",
       .set = set_bool(t.json_out)},
      {.name = "-o", .metavar = "DIR", .help = "also write the artifact files to DIR", .set = store(t.out_dir)},
      cache_flag(t.cache_flag, CacheFlag::kStoreOrServer),
      {.name = "--namespace", .metavar = "NAME", .help = "the cache namespace", .default_value = "default",
       .set = store(t.ns)},
      namespaces_flag(t.namespaces),
      {.name = "--log", .metavar = "FILE",
       .help = "the tuning log (JSON lines, appended after every trial); an interrupted run resumes from it",
       .default_value = "next to the store", .set = store(t.log)},
      {.name = "--require-measured", .help = "refuse results that are estimates (GPU profiles with no GPU)",
       .set = set_bool(t.require_measured)},
      {.name = "--no-cache", .help = "neither look in nor write to the cache", .set = set_bool(t.no_cache)},
      {.name = "--verify", .metavar = "LEVELS",
       .help = "the `mlk verify` levels run on each tuned winner before it is stored, each one's time printed; the "
               "report is stored with it (docs/verification.md); `none` runs none",
       .default_value = "cheap (types, identity)", .set = store(t.verify_levels)},
      {.name = "--require-verified", .metavar = "LEVELS",
       .help = "store (and publish) a winner only if these levels pass (they are run too); a cache hit must carry a "
               "report that passes them",
       .set = store(t.require_verified)},
      {.name = "--dump-after", .metavar = "STAGE",
       .help = "after each winner's final build, print its compile stage STAGE (on stdout; on stderr with --json): "
               "ir, stages, schedule or loops",
       .set = store_dump_stage(t.dump_after)},
      {.name = "--workers", .metavar = "KEY",
       .help = "measure the candidates on `mlk worker`s of device key KEY through the server instead of here, "
               "as many at once as the key has live workers when the tune starts (here: one at a time); "
               "results are compared within one worker fingerprint, which the entry records",
       .set = store(t.workers)},
      {.name = "--workers-run-artifacts",
       .help = "with --workers, build each candidate here and send it as a built artifact that the worker only "
               "loads, checks and times (mlk-measure's runner), as GPU profiles always do, instead of the "
               "source the worker compiles",
       .set = set_bool(t.workers_run_artifacts)},
      {.name = "--sign-packs", .metavar = "KEYFILE",
       .help = "with --workers, sign each built candidate sent to the workers with this Ed25519 key, for the "
               "namespace: a signed namespace takes only signed packs, and workers with --trusted-signers run only "
               "those (docs/signing.md)",
       .set = store(t.sign_packs_path)},
      {.name = "--server", .metavar = "URL", .help = "the server whose workers measure (--workers)",
       .default_value = "--cache when a URL, else $MLK_SERVERS", .set = store(t.server)},
      {.name = "--worker-wait", .metavar = "SECONDS",
       .help = "with --workers, the longest a candidate may wait for a worker before the tuning fails",
       .default_value = "60", .set = store_count(t.worker_wait_s)},
      {.name = "--sign", .metavar = "KEYFILE",
       .help = "sign each stored winner (and its verification report) with this Ed25519 key (`mlk key create`; "
               "docs/signing.md)",
       .set = store(t.sign_path)},
      {.name = "--export-candidates", .metavar = "DIR",
       .help = "search here, then write the search's best candidates (ranked by measurement here, or by the cost "
               "model where nothing runs them) to DIR as built artifacts with the verification cases, for "
               "`mlk-measure DIR` on the machine with the device; nothing is stored. With "
               "--import-measurements: the set the measurements are of",
       .set = store(t.export_dir)},
      {.name = "--candidates", .metavar = "N", .help = "with --export-candidates, how many (the naive schedule among them)",
       .default_value = "8", .set = store_count(t.candidates)},
      {.name = "--import-measurements", .metavar = "FILE",
       .help = "search no more: take mlk-measure's FILE as the measured trials of the exported candidates (the set "
               "beside FILE, or --export-candidates DIR), and store the fastest that passed, measured: true, with "
               "the device it ran on; the winner built here must be the very library that was measured",
       .set = store(t.import_file)},
      {.name = "-q", .help = "no progress lines", .set = set_bool(t.opts.progress, false), .aliases = {"--quiet"}},
  };
  return {
      .name = "tune",
      .summary = "autotune fns for a target profile into the artifact cache",
      .positionals = "FILE.tl",
      .description = kTuneDescription,
      .flags = std::move(flags),
      .epilogue = kTuneEpilogue,
      .positional = one_positional(t.file),
      .no_positional = "no input file",
  };
}

// --require-measured refuses a GPU profile: its candidates are estimated.
Status check_measurable(const Profile& profile, bool require_measured) {
  if (!profile.is_gpu()) return Status::Ok();
  Runnable rn = can_run(profile, detect_cpu(), detect_cuda());
  if (require_measured && !rn.ok)
    return Status::Unsupported(profile.name + " cannot be measured here (" + rn.reason +
                               "), and --require-measured refuses estimated results");
  return Status::Ok();
}

using Job = std::pair<std::string, DimEnv>;  // a fn and a shape to tune it at

// What to tune: --fn or every public fn; shapes from --dims or `tune`
// declarations. A public fn without one is skipped, with a line on stderr.
Expected<std::vector<Job>> plan_jobs(const TuneArgs& t, const ir::Module& m) {
  std::vector<Job> jobs;
  for (const auto& f : m.functions) {
    if (!t.fn.empty() ? f.name != t.fn : !f.is_public) continue;
    if (!t.dims.empty()) {
      jobs.push_back({f.name, t.dims});
      continue;
    }
    bool any = false;
    for (const auto& b : m.tunes)
      if (b.function == f.name) {
        jobs.push_back({f.name, b.dims});
        any = true;
      }
    if (!any && !t.fn.empty())
      return Status::InvalidArgument("`" + f.name + "` has no `tune` declaration; give its shape with --dims");
    if (!any) std::fprintf(stderr, "mlk tune: skipping `%s`: no `tune` declaration (give --fn and --dims)\n", f.name.c_str());
  }
  if (jobs.empty())
    return Status::InvalidArgument(t.fn.empty() ? t.file + " has no public fn with a `tune` declaration"
                                                : t.file + " has no fn `" + t.fn + "`");
  return jobs;
}

// Every shape must fit in memory (inputs, outputs and the tuner's copies)
// before anything is allocated or tuned. GPU profiles allocate no inputs here.
Status check_jobs_memory(const TuneArgs& t, const ir::Module& m, const Profile& profile, const std::vector<Job>& jobs) {
  if (profile.is_gpu()) return Status::Ok();
  for (const auto& [name, shape] : jobs) {
    std::string label = t.dims.empty() ? "the `tune` shape " + dims_label(shape) : "--dims " + dims_label(shape);
    if (Status s = check_tuning_memory(*m.find(name), shape, label); !s.ok()) return s;
  }
  return Status::Ok();
}

// The artifact cache the jobs go through (none with --no-cache). --cache may
// name a `mlk serve`: then each key is pulled into the local mirror before
// tuning (a hit there is a hit here) and pushed after.
struct TuneCache {
  std::unique_ptr<client::CliCache> cc;
  cache::Store* store = nullptr;
  std::string store_path;
  std::string work;  // the tuner's scratch directory
  // Without a store: `work` is a private folder made for this run (mkdtemp,
  // mode 0700), removed when the last copy of this goes. A fixed shared
  // path let another local user plant the objects this process then links,
  // loads and signs (review 8 of issue 49).
  std::shared_ptr<const std::string> owned_work;
};

Expected<TuneCache> open_cache(const TuneArgs& t) {
  TuneCache c;
  if (!t.no_cache) {
    auto opened = client::CliCache::Open(t.cache_flag, t.ns, "mlk tune", /*create_if_missing=*/true, "", t.namespaces);
    if (!opened.ok()) return opened.status();
    c.cc = std::move(opened).value();
    c.store = c.cc->store();
    c.store_path = c.cc->store_path();
  }
  if (c.store) {
    // Beside the store, which may lie in a shared folder: made private, and
    // refused when another user made it first (review 9 of issue 49).
    c.work = c.store_path + ".work";
    if (Status s = ensure_private_dir(c.work); !s.ok()) return s;
    return c;
  }
  auto dir = make_private_temp_dir("mlk-tune-work-");
  if (!dir.ok()) return dir.status();
  c.work = *dir;
  c.owned_work = std::shared_ptr<const std::string>(new std::string(*dir), [](const std::string* d) {
    std::error_code ec;
    std::filesystem::remove_all(*d, ec);
    delete d;
  });
  return c;
}

// The levels a winner is verified at: --verify and --require-verified.
Expected<std::vector<verify::Level>> winner_levels(const TuneArgs& t) {
  std::string list = t.verify_levels == "none" ? "" : t.verify_levels;
  if (!t.require_verified.empty()) list += (list.empty() ? "" : ",") + t.require_verified;
  if (list.empty()) return std::vector<verify::Level>{};
  return verify::parse_levels(list);
}

// The hook tune_cached calls before storing a winner: runs the levels, says
// how long each took, attaches the report, and refuses (nothing is stored)
// when a level --require-verified names did not pass.
std::function<Status(std::map<std::string, std::string>&, std::string&)> verify_hook(
    const TuneArgs& t, const ir::Module& m, const Profile& profile, const std::string& fn, const DimEnv& shape) {
  return [&t, &m, profile, fn, shape](std::map<std::string, std::string>& files, std::string& meta) -> Status {
    auto levels = winner_levels(t);
    if (!levels.ok()) return levels.status();
    if (levels->empty()) return Status::Ok();
    auto rep = verify::verify_artifact({.module = &m, .fn = fn, .profile = profile, .dims = shape, .files = files,
                                        .levels = *levels});
    if (!rep.ok()) return rep.status();
    FILE* out = t.json_out ? stderr : stdout;
    for (const auto& l : rep->levels)
      std::fprintf(out, "  verify %s: %s (%.3f s)%s\n", verify::level_name(l.level), verify::result_word(l), l.seconds,
                   verify::result_detail(l).c_str());
    auto man = verify::attach_report(files.at("manifest.json"), *rep, 2);
    auto mj = verify::attach_report(meta, *rep);
    if (!man.ok()) return man.status();
    if (!mj.ok()) return mj.status();
    auto required = cache::parse_required_levels(t.require_verified.empty() ? "types" : t.require_verified);
    if (!required.ok()) return required.status();
    if (!t.require_verified.empty()) {
      auto v = cache::parse_verified(*mj);
      if (!v.ok()) return v.status();
      Status gate = cache::require_verified("the winner of `" + fn + "`", *v, *required);
      if (!gate.ok()) return Status::InvalidArgument("refused: " + gate.message() + "; nothing was stored");
    }
    files["manifest.json"] = *man;
    meta = *mj;
    return Status::Ok();
  };
}

// --sign: after `inner` (the verify hook), the winner's report and the entry
// `key` are signed with the --sign key for namespace `sign_ns`
// (cache/signatures.h).
std::function<Status(std::map<std::string, std::string>&, std::string&)> sign_hook(
    const TuneArgs& t, std::function<Status(std::map<std::string, std::string>&, std::string&)> inner,
    const std::string& key, const std::string& sign_ns) {
  return [&t, inner, key, sign_ns](std::map<std::string, std::string>& files, std::string& meta) -> Status {
    MLK_RETURN_IF_ERROR(inner(files, meta));
    if (!t.sign_key) return Status::Ok();
    auto st = cache::statement_of_files(key, files, meta);
    if (!st.ok()) return st.status();
    std::string m = meta;
    if (auto v = cache::parse_verified(m); v.ok() && v->present) {
      auto r = cache::sign_report(m, *st, *t.sign_key);
      if (!r.ok()) return r.status();
      m = *r;
    }
    auto s = cache::add_signature(m, *st, *t.sign_key, cache::SignatureScope{sign_ns});
    if (!s.ok()) return s.status();
    meta = *s;
    return Status::Ok();
  };
}

// A cache hit under --require-verified must carry a report that passes,
// made by a tune on this machine: a report that came with an entry from a
// server or a file is its writer's word (issue 49, finding 11).
Status check_hit(const TuneArgs& t, const std::string& fn, const tune::Outcome& hit) {
  if (t.require_verified.empty()) return Status::Ok();
  auto required = cache::parse_required_levels(t.require_verified);
  if (!required.ok()) return required.status();
  if (hit.origin != cache::kOriginLocal)
    return Status::InvalidArgument(
        "the cached entry of `" + fn + "` was not stored by a tune on this machine (origin `" +
        (hit.origin.empty() ? std::string("unrecorded") : hit.origin) +
        "`): the verification report it carries is its writer's word, not evidence; `mlk tune --no-cache` tunes and "
        "verifies a winner here, `mlk verify KEY --sign` with a key others trust vouches for this one");
  auto v = cache::parse_verified(hit.json);
  if (!v.ok()) return v.status();
  return cache::require_verified("the cached entry of `" + fn + "`", *v, *required);
}

// --workers: where and how the candidates are measured (autotune/remote_measure.h).
RemoteMeasureOptions worker_options(const TuneArgs& t) {
  const char* servers = std::getenv("MLK_SERVERS");
  const char* token = std::getenv("MLK_TOKEN");
  return {.servers = !t.server.empty()                  ? t.server
                     : client::is_remote_url(t.cache_flag) ? t.cache_flag
                                                          : (servers ? servers : ""),
          .token = token ? token : "",
          .ns = t.ns == cache::kDefaultNamespace ? "" : t.ns,
          .device_key = t.workers,
          .wait_s = t.worker_wait_s,
          .progress = t.opts.progress,
          .source_path = t.file,
          .precision = precision_name(t.precision),
          .artifacts_for = t.workers_run_artifacts ? std::optional<Profile>(Profile{}) : std::nullopt,
          .pack_key = t.pack_key};
}

// The remote measurers of --workers, one per request (use_workers).
using WorkerMeasurers = std::vector<std::shared_ptr<tune::RemoteMeasurer>>;

// The first error of remote measurement, if any: what ends the tuning.
Status workers_failure(const WorkerMeasurers& workers) {
  for (const auto& w : workers)
    if (Status s = w->failure(); !s.ok()) return s;
  return Status::Ok();
}

// Remote measurement that cannot go on (--workers), said on stderr: exit status 1.
int workers_failed(const TuneArgs& t, const Status& s) {
  std::fprintf(stderr, "mlk tune: --workers %s: %s\n", t.workers.c_str(), s.message().c_str());
  return 1;
}

// The request of jobs[i], with its key pulled from a server --cache names;
// with --workers, measured by a RemoteMeasurer added to `workers`. An error
// when remote measurement cannot start.
Expected<tune::TuneRequest> job_request(const TuneArgs& t, const ir::Module& m, const Profile& profile, TuneCache& c,
                                        const std::vector<Job>& jobs, size_t i, WorkerMeasurers& workers) {
  const auto& [name, shape] = jobs[i];
  std::string dir = t.out_dir.empty() ? "" : jobs.size() == 1 ? t.out_dir : t.out_dir + "/" + name + "-" + std::to_string(i);
  tune::TuneOptions o = t.opts;
  o.log_path = t.log.empty() || jobs.size() == 1 ? t.log : t.log + "." + name + "-" + std::to_string(i);
  if (c.cc) c.cc->pull(cache::cache_key(tune::key_inputs(m, name, shape, profile)));
  std::string sign_ns = t.ns;  // a signature is for the namespace the entry is stored in (the server's name of it)
  if (t.sign_key && c.cc) {
    auto own = c.cc->own_namespace();
    if (!own.ok())
      return Status::InvalidArgument("--sign: cannot tell which namespace to sign for (" + own.status().message() +
                                     "); give --namespace NAME");
    sign_ns = *own;
  }
  tune::TuneRequest r{.module = &m,
                      .fn = name,
                      .source = t.file,
                      .profile = profile,
                      .dims = shape,
                      .opts = o,
                      .store = c.store,
                      .ns = t.ns,
                      .out_dir = dir,
                      .work_dir = c.work,
                      .before_store = sign_hook(t, verify_hook(t, m, profile, name, shape),
                                                cache::cache_key(tune::key_inputs(m, name, shape, profile)), sign_ns)};
  if (!t.workers.empty()) {
    auto w = use_workers(r, worker_options(t));
    if (!w.ok()) return w.status();
    workers.push_back(*w);
  }
  return r;
}

// Reports jobs[i]'s outcome: its summary line (on stderr with --json, whose
// document stdout carries alone), its --dump-after stages, and its JSON
// appended to `all_json`; pushes a new result to the server. False when it
// failed (said on stderr).
bool report_job(const TuneArgs& t, const ir::Module& m, const Profile& profile, TuneCache& c,
                const std::vector<Job>& jobs, size_t i, Expected<tune::Outcome> res, std::string& all_json) {
  const auto& [name, shape] = jobs[i];
  if (res.ok() && res->cached)
    if (Status s = check_hit(t, name, *res); !s.ok()) res = s;
  if (res.ok() && c.cc && !res->cached) (void)c.cc->push(res->key);
  if (!res.ok()) {
    std::fprintf(stderr, "mlk tune: %s: %s\n", name.c_str(), res.status().message().c_str());
    return false;
  }
  std::fprintf(t.json_out ? stderr : stdout, "%s\n", res->summary_line.c_str());
  bool ok = true;
  // --dump-after: the winner's stages, after its final build.
  if (t.dump_after != DumpStage::kNone) {
    auto winner = Schedule::from_json(res->schedule_json);
    const DumpRequest dump{.module = &m,
                           .fn = name,
                           .profile = profile,
                           .dims = shape,
                           .stage = t.dump_after,
                           .out = t.json_out ? stderr : stdout};
    Status d = winner.ok() ? dump_for_schedule(dump, *winner)
                           : Status::Corruption("the winner's schedule of `" + name + "` is not readable: " +
                                                winner.status().message());
    if (!d.ok()) {
      std::fprintf(stderr, "mlk tune: %s: --dump-after: %s\n", name.c_str(), d.message().c_str());
      ok = false;
    }
  }
  all_json += (all_json.size() > 1 ? "," : "") + res->json;
  return ok;
}

// Tunes every job: one after the other with --time each, or with --budget
// under one budget split by expected gain (autotune/program_tune.h). Remote
// measurement that cannot go on (--workers) ends it at once, its jobs not
// reported (workers_failed).
// --export-candidates without --import-measurements: search, then export.
// --import-measurements: no search; the measured candidates' winner stored.
Expected<tune::Outcome> tune_elsewhere(const TuneArgs& t, const tune::TuneRequest& r, size_t jobs) {
  if (!t.import_file.empty()) {
    std::string set_dir = !t.export_dir.empty() ? t.export_dir
                                                : std::filesystem::path(t.import_file).parent_path().string();
    auto res = tune::import_measurements(r, t.import_file, set_dir.empty() ? "." : set_dir);
    if (!res.ok()) return res.status();
    return tune::store_tuned(r, *res);
  }
  std::string dir = jobs == 1 ? t.export_dir : t.export_dir + "/" + r.fn + "-" + dims_label(r.dims);
  std::error_code ec;
  std::filesystem::create_directories(r.work_dir, ec);
  tune::TuneOptions o = r.opts;
  o.log_path = tune::tuning_log_path(r);
  o.cases_for_export = true;
  auto res = tune::tune_function(*r.module, r.fn, r.profile, r.dims, o);
  if (!res.ok()) return res.status();
  auto line = tune::export_candidates(r, *res, dir, static_cast<int>(t.candidates));
  if (!line.ok()) return line.status();
  tune::Outcome out;
  out.summary_line = *line;
  out.json = nlohmann::json{{"fn", r.fn}, {"target", r.profile.name}, {"dims", r.dims}, {"exported_to", dir}}.dump();
  return out;
}

int tune_jobs(const TuneArgs& t, const ir::Module& m, const Profile& profile, TuneCache& c,
              const std::vector<Job>& jobs, std::string& all_json) {
  int status = 0;
  WorkerMeasurers workers;
  if (!t.export_dir.empty() || !t.import_file.empty()) {
    if (!t.import_file.empty() && jobs.size() != 1)
      return fail(Status::InvalidArgument("--import-measurements imports one fn at one shape; give --fn and --dims"));
    for (size_t i = 0; i < jobs.size(); ++i) {
      auto r = job_request(t, m, profile, c, jobs, i, workers);
      if (!r.ok()) return fail(r.status());
      auto res = tune_elsewhere(t, *r, jobs.size());
      if (res.ok() && !t.import_file.empty() && c.cc) (void)c.cc->push(res->key);
      if (!res.ok()) {
        std::fprintf(stderr, "mlk tune: %s: %s\n", jobs[i].first.c_str(), res.status().message().c_str());
        status = 1;
        continue;
      }
      std::fprintf(t.json_out ? stderr : stdout, "%s\n", res->summary_line.c_str());
      all_json += (all_json.size() > 1 ? "," : "") + res->json;
    }
    return status;
  }
  if (t.budget_s <= 0) {
    for (size_t i = 0; i < jobs.size(); ++i) {
      auto r = job_request(t, m, profile, c, jobs, i, workers);
      if (!r.ok()) return workers_failed(t, r.status());
      auto res = tune::tune_cached(*r);
      if (Status w = workers_failure(workers); !w.ok()) return workers_failed(t, w);
      if (!report_job(t, m, profile, c, jobs, i, std::move(res), all_json)) status = 1;
    }
    return status;
  }
  std::vector<tune::TuneRequest> requests;
  for (size_t i = 0; i < jobs.size(); ++i) {
    auto r = job_request(t, m, profile, c, jobs, i, workers);
    if (!r.ok()) return workers_failed(t, r.status());
    requests.push_back(std::move(*r));
  }
  auto results = tune::tune_program(requests, {.budget_s = t.budget_s, .progress = t.opts.progress});
  if (Status w = workers_failure(workers); !w.ok()) return workers_failed(t, w);
  for (size_t i = 0; i < jobs.size(); ++i) {
    auto& r = results[i];
    Expected<tune::Outcome> res = r.status.ok() ? Expected<tune::Outcome>(std::move(r.outcome)) : r.status;
    if (!report_job(t, m, profile, c, jobs, i, std::move(res), all_json)) status = 1;
  }
  return status;
}

}  // namespace

CommandSpec tune_spec() {
  static TuneArgs scratch;
  return spec(scratch);
}

int run_tune(const std::vector<std::string>& args) {
  TuneArgs t;
  if (int bad = parse_or_usage_error(spec(t), args)) return bad;
  auto profile = resolve_profile(t.target);
  if (!profile.ok()) return fail(profile.status());
  if (!t.export_dir.empty() || !t.import_file.empty()) {
    if (t.budget_s > 0 || !t.workers.empty())
      return usage_error("tune", "--export-candidates and --import-measurements take neither --budget nor --workers");
    if (t.candidates < 1 || t.candidates > 256) return usage_error("tune", "--candidates must be 1 to 256");
  }
  if (Status s = check_measurable(*profile, t.require_measured && t.import_file.empty() && t.workers.empty()); !s.ok()) return fail(s);
  auto fe = compile_file(t.file);
  if (!fe.ok()) return fail(fe.status());
  if (!fe->ok()) {
    std::fputs(fe->rendered().c_str(), stderr);
    return 1;
  }
  fe->module = with_precision(fe->module, t.precision);
  auto jobs = plan_jobs(t, fe->module);
  if (!jobs.ok()) return fail(jobs.status());
  if (Status s = check_jobs_memory(t, fe->module, *profile, *jobs); !s.ok()) return fail(s);
  if (auto lv = winner_levels(t); !lv.ok()) return usage_error("tune", "--verify/--require-verified: " + lv.status().message());
  // A winner that only remote workers measured rests on their word: the
  // signing key does not vouch for it (docs/signing.md).
  if (!t.sign_path.empty() && !t.workers.empty())
    if (Runnable here = can_run(*profile, detect_cpu(), CudaInfo{}); !here.ok)
      return usage_error("tune", "--sign with --workers on `" + profile->name + "`, which does not run here (" +
                                     here.reason + "): the winner would rest on the workers' measurements alone, so "
                                     "it is not signed; tune without --sign, then sign after an independent check "
                                     "(`mlk verify --sign` on a machine that runs it)");
  // An imported winner is the measured folder's library, not one built here
  // (review 7 of issue 49): the key does not vouch for it.
  if (!t.sign_path.empty() && !t.import_file.empty())
    return usage_error("tune", "--sign with --import-measurements: the winner is the library of the measured "
                               "folder, not one this process built, so it is not signed; import without --sign, then "
                               "`mlk build --sign` (which rebuilds it from its schedule) or `mlk verify --sign`");
  if (!t.sign_packs_path.empty()) {
    if (t.workers.empty()) return usage_error("tune", "--sign-packs signs what is sent to --workers; give --workers KEY");
    auto k = load_signing_key(t.sign_packs_path);
    if (!k.ok()) return fail(Status::InvalidArgument("--sign-packs: " + k.status().message()));
    t.pack_key = *k;
  }
  if (!t.sign_path.empty()) {
    auto k = load_signing_key(t.sign_path);
    if (!k.ok()) return fail(Status::InvalidArgument("--sign: " + k.status().message()));
    t.sign_key = *k;
  }
  auto c = open_cache(t);
  if (!c.ok()) return fail(c.status());
  std::string all_json = "[";
  const int status = tune_jobs(t, fe->module, *profile, *c, *jobs, all_json);
  if (t.json_out) std::printf("%s]\n", all_json.c_str());
  if (c->store) std::fprintf(stderr, "cache: %s\n", c->store_path.c_str());
  return status;
}

}  // namespace mlk::cli
