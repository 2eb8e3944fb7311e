// `mlk tune`: autotune public functions for a target profile, through the
// artifact cache.
#include <cstdio>
#include <filesystem>

#include "autotune/cached_tune.h"
#include "cache/paths.h"
#include "cli/args.h"
#include "cli/command.h"
#include "cli/dump_after.h"
#include "lang/frontend.h"
#include "lang/memory_budget.h"
#include "client/cli_cache.h"
#include "targets/detect.h"

namespace mlk::cli {

namespace {

int fail(const Status& s) {
  std::fprintf(stderr, "mlk tune: %s\n", s.message().c_str());
  return s.exit_code();
}

struct TuneArgs {
  std::string file, fn, target, out_dir, cache_flag, ns = cache::kDefaultNamespace, log;
  std::map<std::string, int64_t> dims;
  tune::TuneOptions opts;
  bool json_out = false, require_measured = false, no_cache = false;
  DumpStage dump_after = DumpStage::kNone;
};

// The command line; every error is a usage error.
Expected<TuneArgs> parse(const std::vector<std::string>& args) {
  TuneArgs t;
  ArgReader r(args);
  while (!r.done()) {
    std::string a = r.next();
    if (a == "--json") t.json_out = true;
    else if (a == "--require-measured") t.require_measured = true;
    else if (a == "--no-autoschedulers") t.opts.autoschedulers = false;
    else if (a == "--no-cache") t.no_cache = true;
    else if (a == "--quiet" || a == "-q") t.opts.progress = false;
    else if (a == "--fn" || a == "--target" || a == "--dims" || a == "--trials" || a == "--time" || a == "--seed" ||
             a == "-o" || a == "--cache" || a == "--namespace" || a == "--log" || a == "--timeout" ||
             a == "--compile-timeout" || a == "--dump-after") {
      auto v = r.value();
      if (!v.ok()) return v.status();
      if (a == "--dump-after") {
        auto d = parse_dump_stage(*v);
        if (!d.ok()) return d.status();
        t.dump_after = *d;
      } else if (a == "--fn") t.fn = *v;
      else if (a == "--target") t.target = *v;
      else if (a == "-o") t.out_dir = *v;
      else if (a == "--cache") t.cache_flag = *v;
      else if (a == "--namespace") t.ns = *v;
      else if (a == "--log") t.log = *v;
      else if (a == "--dims") {
        auto d = parse_dims(*v);
        if (!d.ok()) return d.status();
        t.dims = *d;
      } else {
        auto n = parse_count(a, *v);
        if (!n.ok()) return n.status();
        if (a == "--trials") t.opts.trials = static_cast<int>(*n);
        if (a == "--time") t.opts.time_s = static_cast<double>(*n);
        if (a == "--seed") t.opts.seed = static_cast<uint64_t>(*n);
        if (a == "--timeout") t.opts.run_timeout_s = static_cast<double>(*n);
        if (a == "--compile-timeout") t.opts.compile_timeout_s = static_cast<double>(*n);
      }
    } else if (!a.empty() && a[0] == '-') {
      return Status::Usage("unknown option `" + a + "`");
    } else if (t.file.empty()) {
      t.file = a;
    } else {
      return Status::Usage("unexpected argument `" + a + "`");
    }
  }
  if (t.file.empty()) return Status::Usage("no input file");
  if (t.target.empty()) return Status::Usage("--target PROFILE is required (see `mlk targets`)");
  return t;
}

// --require-measured refuses a GPU profile: its candidates are estimated.
Status check_measurable(const Profile& profile, bool require_measured) {
  if (!profile.is_gpu()) return Status::Ok();
  Runnable rn = can_run(profile, detect_cpu(), detect_cuda());
  if (require_measured)
    return Status::Unsupported(profile.name + " cannot be measured here (" +
                               (rn.ok ? "mlk measures GPU candidates only through ptxas and its cost model" : rn.reason) +
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
};

Expected<TuneCache> open_cache(const TuneArgs& t) {
  TuneCache c;
  if (!t.no_cache) {
    auto opened = client::CliCache::Open(t.cache_flag, t.ns, "mlk tune", /*create_if_missing=*/true);
    if (!opened.ok()) return opened.status();
    c.cc = std::move(opened).value();
    c.store = c.cc->store();
    c.store_path = c.cc->store_path();
  }
  c.work = c.store ? c.store_path + ".work" : (std::filesystem::temp_directory_path() / "mlk-tune-work").string();
  return c;
}

// Tunes jobs[i]: prints its summary line (on stderr with --json, whose
// document stdout carries alone), its --dump-after stages, and appends its
// JSON to `all_json`. False when it failed (said on stderr).
bool tune_job(const TuneArgs& t, const ir::Module& m, const Profile& profile, TuneCache& c,
              const std::vector<Job>& jobs, size_t i, std::string& all_json) {
  const auto& [name, shape] = jobs[i];
  std::string dir = t.out_dir.empty() ? "" : jobs.size() == 1 ? t.out_dir : t.out_dir + "/" + name + "-" + std::to_string(i);
  tune::TuneOptions o = t.opts;
  o.log_path = t.log.empty() || jobs.size() == 1 ? t.log : t.log + "." + name + "-" + std::to_string(i);
  if (c.cc) c.cc->pull(cache::cache_key(tune::key_inputs(m, name, shape, profile)));
  auto res = tune::tune_cached(m, name, t.file, profile, shape, o, c.store, t.ns, dir, c.work);
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
    Status d = winner.ok() ? dump_for_schedule(m, name, profile, shape, *winner, t.dump_after, t.json_out ? stderr : stdout)
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

}  // namespace

int run_tune(const std::vector<std::string>& args) {
  auto parsed = parse(args);
  if (!parsed.ok()) return usage_error(command("tune"), parsed.status().message());
  const TuneArgs& t = *parsed;
  auto profile = resolve_profile(t.target);
  if (!profile.ok()) return fail(profile.status());
  if (Status s = check_measurable(*profile, t.require_measured); !s.ok()) return fail(s);
  auto fe = compile_file(t.file);
  if (!fe.ok()) return fail(fe.status());
  if (!fe->ok()) {
    std::fputs(fe->rendered().c_str(), stderr);
    return 1;
  }
  auto jobs = plan_jobs(t, fe->module);
  if (!jobs.ok()) return fail(jobs.status());
  if (Status s = check_jobs_memory(t, fe->module, *profile, *jobs); !s.ok()) return fail(s);
  auto c = open_cache(t);
  if (!c.ok()) return fail(c.status());
  std::string all_json = "[";
  int status = 0;
  for (size_t i = 0; i < jobs->size(); ++i)
    if (!tune_job(t, fe->module, *profile, *c, *jobs, i, all_json)) status = 1;
  if (t.json_out) std::printf("%s]\n", all_json.c_str());
  if (c->store) std::fprintf(stderr, "cache: %s\n", c->store_path.c_str());
  return status;
}

}  // namespace mlk::cli
