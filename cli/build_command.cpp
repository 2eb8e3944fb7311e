// `mlk build`: one function, one target profile -> an artifact directory.
#include <cstdio>
#include <fstream>

#include <sstream>

#include <filesystem>

#include "autotune/cached_tune.h"
#include "cache/paths.h"
#include "cli/args.h"
#include "cli/command.h"
#include "cli/dump_after.h"
#include "lang/frontend.h"
#include "lang/ir_printer.h"
#include "runtime/resolve.h"
#include "client/cli_cache.h"
#include "targets/artifact.h"
#include "targets/detect.h"

namespace mlk::cli {

namespace {

int fail(const Status& s) {
  std::fprintf(stderr, "mlk build: %s\n", s.message().c_str());
  return s.exit_code();
}

}  // namespace

int run_build(const std::vector<std::string>& args) {
  const Command& self = command("build");
  std::string file, fn, target, schedule_path, out_dir, cache_flag, ns = cache::kDefaultNamespace;
  bool no_cache = false;
  DumpStage dump_after = DumpStage::kNone;
  std::map<std::string, int64_t> dims;
  ArgReader r(args);
  while (!r.done()) {
    std::string a = r.next();
    if (a == "--no-cache") {
      no_cache = true;
    } else if (a == "--fn" || a == "--target" || a == "--schedule" || a == "-o" || a == "--out" || a == "--dims" ||
               a == "--cache" || a == "--namespace" || a == "--dump-after") {
      auto v = r.value();
      if (!v.ok()) return usage_error(self, v.status().message());
      if (a == "--dump-after") {
        auto d = parse_dump_stage(*v);
        if (!d.ok()) return usage_error(self, d.status().message());
        dump_after = *d;
      } else if (a == "--fn") fn = *v;
      else if (a == "--target") target = *v;
      else if (a == "--schedule") schedule_path = *v;
      else if (a == "--cache") cache_flag = *v;
      else if (a == "--namespace") ns = *v;
      else if (a == "--dims") {
        auto d = parse_dims(*v);
        if (!d.ok()) return usage_error(self, d.status().message());
        dims = *d;
      } else out_dir = *v;
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
  if (out_dir.empty()) return usage_error(self, "-o DIR is required");
  auto profile = resolve_profile(target);
  if (!profile.ok()) return fail(profile.status());
  auto fe = compile_file(file);
  if (!fe.ok()) return fail(fe.status());
  if (!fe->ok()) {
    std::fputs(fe->rendered().c_str(), stderr);
    return 1;
  }
  if (fn.empty()) {
    std::vector<std::string> pub;
    for (const auto& f : fe->module.functions)
      if (f.is_public) pub.push_back(f.name);
    if (pub.size() != 1) return usage_error(self, "--fn NAME is required: " + file + " has " + std::to_string(pub.size()) + " public fns");
    fn = pub[0];
  }
  if (dims.empty())
    for (const auto& b : fe->module.tunes)
      if (b.function == fn) {
        dims = b.dims;  // the first tuning bucket as the shape estimate
        break;
      }
  // A tuned artifact for this fn, shape and profile in the cache is the build.
  const ir::Function* target_fn = fe->module.find(fn);
  bool all_dims = target_fn != nullptr;
  if (target_fn)
    for (const auto& d : target_fn->dim_vars) all_dims = all_dims && dims.count(d);
  // (--cache may name a `mlk serve`: then a hit there is pulled into the local mirror.)
  std::unique_ptr<client::CliCache> cc;
  if (!no_cache && schedule_path.empty() && all_dims) {
    auto c = client::CliCache::Open(cache_flag, ns, "mlk build", /*create_if_missing=*/false);
    if (!c.ok()) return fail(c.status());
    cc = std::move(c).value();
  }
  if (cc) {
    // The shared resolver (runtime/resolve.h), strict: only an artifact tuned
    // at exactly this shape is the build; anything else is built anew.
    auto found = rt::find_tuned(cc.get(), ns, fe->module, fn, ir::function_hash(fe->module, *target_fn), *profile, dims,
                                rt::Require::kExact, detect_cpu());
    if (found.ok()) {
      const std::string& key = found->key;
      const cache::Artifact* hit = &found->entry;
      std::error_code ec;
      std::filesystem::create_directories(out_dir, ec);
      for (const auto& [name, bytes] : hit->files) {
        std::ofstream out(std::filesystem::path(out_dir) / name, std::ios::binary);
        out << bytes;
        if (!out) return fail(Status::IOError("cannot write " + out_dir + "/" + name));
      }
      // --dump-after: the stages of the stored artifact's schedule.
      if (Status d = dump_stored(fe->module, fn, *profile, dims, hit->files, dump_after, stdout); !d.ok()) return fail(d);
      std::printf("cached: tuned on %s (key %s); artifact written to %s\n",
                  hit->info.manifest.provenance.host.c_str(), key.substr(0, 16).c_str(), out_dir.c_str());
      return 0;
    }
    if (found.status().code() != Status::Code::kNotFound) return fail(found.status());
  }
  BuildRequest req;
  req.module = &fe->module;
  req.fn = fn;
  req.source_path = file;
  req.profile = *profile;
  req.dims = dims;
  req.out_dir = out_dir;
  req.dump_after = dump_after;
  req.dump = dump_to(stdout);
  if (!schedule_path.empty()) {
    std::ifstream in(schedule_path);
    if (!in) return fail(Status::IOError("cannot read " + schedule_path));
    std::stringstream ss;
    ss << in.rdbuf();
    auto s = Schedule::from_json(ss.str());
    if (!s.ok()) return fail(Status::InvalidArgument(schedule_path + ": " + s.status().message()));
    req.schedule = *s;
  }
  auto res = build_artifact(req);
  if (!res.ok()) return fail(res.status());
  std::printf("built %s for %s: %s", res->dir.c_str(), profile->name.c_str(), res->library.c_str());
  if (!res->ptxas_status.empty()) std::printf(" (ptxas: %s)", res->ptxas_status.c_str());
  std::printf("\n");
  return 0;
}

int run_targets(const std::vector<std::string>& args) {
  if (!args.empty()) return usage_error(command("targets"), "takes no arguments");
  CpuInfo cpu = detect_cpu();
  CudaInfo cuda = detect_cuda();
  std::printf("%-16s %-5s %-4s %s\n", "PROFILE", "KIND", "RUNS", "DETAILS");
  for (const Profile& p : all_profiles()) {
    Profile shown = p.name == "host" ? host_profile() : p;
    Runnable rn = can_run(shown, cpu, cuda);
    std::string detail = shown.is_gpu() ? "sm_" + std::to_string(shown.compute_capability) + ", " +
                                              std::to_string(shown.sm_count) + " SMs, " + shown.halide_target
                                        : std::to_string(shown.vector_bits) + "-bit vectors, " + shown.halide_target;
    std::printf("%-16s %-5s %-4s %s%s\n", shown.name.c_str(), shown.kind.c_str(), rn.ok ? "yes" : "no",
                detail.c_str(), rn.reason.empty() ? "" : ("; " + rn.reason).c_str());
  }
  std::string feats;
  for (const auto& f : cpu.features) feats += (feats.empty() ? "" : " ") + f;
  std::printf("\nthis machine: %d cores; CPU features: %s\n", cpu.cores, feats.c_str());
  if (cuda.devices.empty()) std::printf("CUDA: %s\n", cuda.why_not.c_str());
  for (const auto& d : cuda.devices)
    std::printf("CUDA device: %s, compute capability %d.%d, %d SMs\n", d.name.c_str(), d.compute_capability / 10,
                d.compute_capability % 10, d.sm_count);
  return 0;
}

}  // namespace mlk::cli
