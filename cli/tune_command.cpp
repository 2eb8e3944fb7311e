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

}  // namespace

int run_tune(const std::vector<std::string>& args) {
  const Command& self = command("tune");
  std::string file, fn, target, out_dir, cache_flag, ns = cache::kDefaultNamespace, log;
  std::map<std::string, int64_t> dims;
  tune::TuneOptions opts;
  bool json_out = false, require_measured = false, no_cache = false;
  DumpStage dump_after = DumpStage::kNone;
  ArgReader r(args);
  while (!r.done()) {
    std::string a = r.next();
    if (a == "--json") json_out = true;
    else if (a == "--require-measured") require_measured = true;
    else if (a == "--no-autoschedulers") opts.autoschedulers = false;
    else if (a == "--no-cache") no_cache = true;
    else if (a == "--quiet" || a == "-q") opts.progress = false;
    else if (a == "--fn" || a == "--target" || a == "--dims" || a == "--trials" || a == "--time" || a == "--seed" ||
             a == "-o" || a == "--cache" || a == "--namespace" || a == "--log" || a == "--timeout" ||
             a == "--compile-timeout" || a == "--dump-after") {
      auto v = r.value();
      if (!v.ok()) return usage_error(self, v.status().message());
      if (a == "--dump-after") {
        auto d = parse_dump_stage(*v);
        if (!d.ok()) return usage_error(self, d.status().message());
        dump_after = *d;
      } else if (a == "--fn") fn = *v;
      else if (a == "--target") target = *v;
      else if (a == "-o") out_dir = *v;
      else if (a == "--cache") cache_flag = *v;
      else if (a == "--namespace") ns = *v;
      else if (a == "--log") log = *v;
      else if (a == "--dims") {
        auto d = parse_dims(*v);
        if (!d.ok()) return usage_error(self, d.status().message());
        dims = *d;
      } else {
        auto n = parse_count(a, *v);
        if (!n.ok()) return usage_error(self, n.status().message());
        if (a == "--trials") opts.trials = static_cast<int>(*n);
        if (a == "--time") opts.time_s = static_cast<double>(*n);
        if (a == "--seed") opts.seed = static_cast<uint64_t>(*n);
        if (a == "--timeout") opts.run_timeout_s = static_cast<double>(*n);
        if (a == "--compile-timeout") opts.compile_timeout_s = static_cast<double>(*n);
      }
    } else if (!a.empty() && a[0] == '-') {
      return usage_error(self, "unknown option `" + a + "`");
    } else if (file.empty()) {
      file = a;
    } else {
      return usage_error(self, "unexpected argument `" + a + "`");
    }
  }
  if (file.empty()) return usage_error(self, "no input file");
  if (target.empty()) return usage_error(self, "--target PROFILE is required (see `mlk targets`)");
  auto profile = resolve_profile(target);
  if (!profile.ok()) return fail(profile.status());
  if (profile->is_gpu()) {
    Runnable rn = can_run(*profile, detect_cpu(), detect_cuda());
    if (require_measured)
      return fail(Status::Unsupported(profile->name + " cannot be measured here (" +
                                      (rn.ok ? "mlk measures GPU candidates only through ptxas and its cost model"
                                             : rn.reason) +
                                      "), and --require-measured refuses estimated results"));
  }
  auto fe = compile_file(file);
  if (!fe.ok()) return fail(fe.status());
  if (!fe->ok()) {
    std::fputs(fe->rendered().c_str(), stderr);
    return 1;
  }
  // What to tune: --fn or every public fn; shapes from --dims or `tune` buckets.
  std::vector<std::pair<std::string, DimEnv>> jobs;
  for (const auto& f : fe->module.functions) {
    if (!fn.empty() ? f.name != fn : !f.is_public) continue;
    if (!dims.empty()) {
      jobs.push_back({f.name, dims});
      continue;
    }
    bool any = false;
    for (const auto& b : fe->module.tunes)
      if (b.function == f.name) {
        jobs.push_back({f.name, b.dims});
        any = true;
      }
    if (!any && !fn.empty())
      return fail(Status::InvalidArgument("`" + f.name + "` has no `tune` declaration; give its shape with --dims"));
    if (!any) std::fprintf(stderr, "mlk tune: skipping `%s`: no `tune` declaration (give --fn and --dims)\n", f.name.c_str());
  }
  if (jobs.empty())
    return fail(Status::InvalidArgument(fn.empty() ? file + " has no public fn with a `tune` declaration"
                                                   : file + " has no fn `" + fn + "`"));
  // Every shape must fit in memory (inputs, outputs and the tuner's copies)
  // before anything is allocated or tuned. GPU profiles allocate no inputs here.
  if (!profile->is_gpu())
    for (const auto& [name, shape] : jobs) {
      std::string label = dims.empty() ? "the `tune` shape " + dims_label(shape) : "--dims " + dims_label(shape);
      if (Status s = check_tuning_memory(*fe->module.find(name), shape, label); !s.ok()) return fail(s);
    }
  // --cache may name a `mlk serve`: then each key is pulled into the local
  // mirror before tuning (a hit there is a hit here) and pushed after.
  std::unique_ptr<client::CliCache> cc;
  cache::Store* store = nullptr;
  std::string store_path;
  if (!no_cache) {
    auto c = client::CliCache::Open(cache_flag, ns, "mlk tune", /*create_if_missing=*/true);
    if (!c.ok()) return fail(c.status());
    cc = std::move(c).value();
    store = cc->store();
    store_path = cc->store_path();
  }
  std::string work = store ? store_path + ".work"
                           : (std::filesystem::temp_directory_path() / "mlk-tune-work").string();
  std::string all_json = "[";
  int status = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const auto& [name, shape] = jobs[i];
    std::string dir = out_dir.empty() ? "" : jobs.size() == 1 ? out_dir : out_dir + "/" + name + "-" + std::to_string(i);
    tune::TuneOptions o = opts;
    o.log_path = log.empty() || jobs.size() == 1 ? log : log + "." + name + "-" + std::to_string(i);
    if (cc) cc->pull(cache::cache_key(tune::key_inputs(fe->module, name, shape, *profile)));
    auto res = tune::tune_cached(fe->module, name, file, *profile, shape, o, store, ns, dir, work);
    if (res.ok() && cc && !res->cached) (void)cc->push(res->key);
    if (!res.ok()) {
      std::fprintf(stderr, "mlk tune: %s: %s\n", name.c_str(), res.status().message().c_str());
      status = 1;
      continue;
    }
    // With --json, stdout carries the JSON document alone.
    std::fprintf(json_out ? stderr : stdout, "%s\n", res->summary_line.c_str());
    // --dump-after: the winner's stages, after its final build.
    if (dump_after != DumpStage::kNone) {
      auto winner = Schedule::from_json(res->schedule_json);
      Status d = winner.ok() ? dump_for_schedule(fe->module, name, *profile, shape, *winner, dump_after,
                                                 json_out ? stderr : stdout)
                             : Status::Corruption("the winner's schedule of `" + name + "` is not readable: " +
                                                  winner.status().message());
      if (!d.ok()) {
        std::fprintf(stderr, "mlk tune: %s: --dump-after: %s\n", name.c_str(), d.message().c_str());
        status = 1;
      }
    }
    all_json += (all_json.size() > 1 ? "," : "") + res->json;
  }
  if (json_out) std::printf("%s]\n", all_json.c_str());
  if (store) std::fprintf(stderr, "cache: %s\n", store_path.c_str());
  return status;
}

}  // namespace mlk::cli
