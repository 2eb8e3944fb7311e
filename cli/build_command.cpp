// `mlk build`: one function, one target profile -> an artifact directory.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "autotune/cached_tune.h"
#include "base/files.h"
#include "base/signing.h"
#include "cache/hit_dir.h"
#include "cache/signatures.h"
#include "artifact/manifest.h"
#include "cache/paths.h"
#include "cli/args.h"
#include "cli/flags.h"
#include "cli/command.h"
#include "cli/dump_after.h"
#include "lang/frontend.h"
#include "lang/ir_printer.h"
#include "runtime/resolve.h"
#include "client/cli_cache.h"
#include "scheduler/kernel.h"
#include "artifact/build.h"
#include "targets/detect.h"

namespace mlk::cli {

namespace {

int fail(const Status& s) {
  std::fprintf(stderr, "mlk build: %s\n", s.message().c_str());
  return s.exit_code();
}

struct BuildArgs {
  std::string file, fn, target, schedule_path, out_dir, cache_flag, ns = cache::kDefaultNamespace, namespaces;
  bool no_cache = false;
  bool profile_stages = false;  // --profile-stages: Halide's profiler built in
  DumpStage dump_after = DumpStage::kNone;
  std::map<std::string, int64_t> dims;
  Precision precision = Precision::kF32;  // --precision
  std::string sign_path;               // --sign KEYFILE
  std::optional<SigningKey> sign_key;  // loaded from it before anything is built
  std::string trusted_flag;            // --trusted-signers KEYS
  std::vector<std::string> trusted;    // parsed from it
};

const char* kBuildDescription =
    "Compiles fn NAME ahead of time for a target capability profile into DIR:\n"
    "  libNAME.so        the kernel, exporting the C ABI entry mlk_NAME (see mlk_abi.h)\n"
    "  NAME_halide.h     Halide's declaration of the inner entry point\n"
    "  mlk_abi.h         the C ABI: mlk_tensor_t, dtype codes, error codes\n"
    "  NAME.ptx          CUDA profiles: the PTX (and NAME.cubin where ptxas exists)\n"
    "  manifest.json     signature, profile and required capabilities, schedule,\n"
    "                    toolchain versions, sha256 of every file, ptxas report\n"
    "When no --schedule is given and the cache holds a tuned artifact for this fn,\n"
    "shape and profile, that artifact is the build (says `cached:`). With\n"
    "--trusted-signers (else $MLK_TRUSTED_SIGNERS), a cached artifact is copied only\n"
    "when one of those keys signed it; any other is rebuilt here from its schedule\n"
    "(says `rebuilt:`); with --sign and no keys to trust, every hit is rebuilt, so\n"
    "that a key signs no bytes a cache writer chose. With --profile-stages the cached schedule is\n"
    "rebuilt with Halide's profiler in the kernel: a process that ran it prints, at\n"
    "exit, the time spent in each stage (docs/benchmarks.md, bench/stage_profile.py).\n";

CommandSpec spec(BuildArgs& b) {
  return {
      .name = "build",
      .summary = "compile a fn for a target profile into an artifact directory",
      .positionals = "FILE.tl",
      .description = kBuildDescription,
      .flags =
          {
              {.name = "--fn", .metavar = "NAME", .help = "the fn to build; may be omitted when the file has one public fn",
               .set = store(b.fn)},
              {.name = "--target", .metavar = "PROFILE",
               .help = "one of `mlk targets` (host, cpu_avx2, cpu_avx512, cpu_avx512_spr, cuda_sm80, cuda_sm90); "
                       "CUDA profiles build without a GPU",
               .set = store(b.target), .required = true, .required_note = " (see `mlk targets`)"},
              precision_flag(b.precision),
              {.name = "--dims", .metavar = "N=V,...",
               .help = "the shape the schedule is made for; the kernel still runs on every valid shape",
               .default_value = "the fn's first `tune` bucket", .set = store_dims(b.dims)},
              {.name = "--schedule", .metavar = "S.json|naive",
               .help = "a schedule (JSON, see docs/schedules.md) instead of the default (the rules' plan for the "
                       "target), or `naive`: every knob at its default, the tuner's baseline",
               .set = store(b.schedule_path)},
              {.name = "-o", .metavar = "DIR", .help = "the artifact directory (created if missing)",
               .set = store(b.out_dir), .aliases = {"--out"}, .required = true},
              cache_flag(b.cache_flag, CacheFlag::kStoreOrServer),
              {.name = "--namespace", .metavar = "NAME", .help = "the cache namespace", .default_value = "default",
               .set = store(b.ns)},
              namespaces_flag(b.namespaces),
              {.name = "--no-cache", .help = "never consult the cache", .set = set_bool(b.no_cache)},
              {.name = "--sign", .metavar = "KEYFILE",
               .help = "sign DIR's manifest.json with this Ed25519 key (`mlk key create`; docs/signing.md)",
               .set = store(b.sign_path)},
              {.name = "--trusted-signers", .metavar = "KEYS",
               .help = "a cached artifact signed by one of these keys (64 hex or KEY.pub files, comma-separated) "
                       "is copied (and with --sign signed) as it is; any other is rebuilt here from its schedule "
                       "(default: $MLK_TRUSTED_SIGNERS)",
               .set = store(b.trusted_flag)},
              {.name = "--profile-stages",
               .help = "build with Halide's profiler (CPU profiles): a process that ran the kernel prints the "
                       "time of each stage at exit, on stdout (Halide's print); built from the cached schedule when there is one, "
                       "never stored in the cache",
               .set = set_bool(b.profile_stages)},
              {.name = "--dump-after", .metavar = "STAGE",
               .help = "print, on stdout, compile stage STAGE and go on building: ir (typed IR), stages (stage "
                       "table), schedule (applied schedule JSON), loops (Halide's loop nest)",
               .set = store_dump_stage(b.dump_after)},
          },
      .positional = one_positional(b.file),
      .no_positional = "no input file",
  };
}

// Fills in what the command line left out: --fn from the program's only
// public fn (else Status::Usage), --dims from the fn's first `tune`
// declaration (the first tuning bucket as the shape estimate).
Status complete_args(BuildArgs& b, const ir::Module& m) {
  if (b.fn.empty()) {
    std::vector<std::string> pub;
    for (const auto& f : m.functions)
      if (f.is_public) pub.push_back(f.name);
    if (pub.size() != 1)
      return Status::Usage("--fn NAME is required: " + b.file + " has " + std::to_string(pub.size()) + " public fns");
    b.fn = pub[0];
  }
  if (b.dims.empty())
    for (const auto& t : m.tunes)
      if (t.function == b.fn) {
        b.dims = t.dims;
        break;
      }
  return Status::Ok();
}

// A tuned artifact for this fn, shape and profile in the cache is the build:
// written to -o DIR. The exit status when the cache decided the command (a
// hit, or an error); nullopt when the artifact is to be built anew.
//
// With --sign or keys to trust (--trusted-signers, $MLK_TRUSTED_SIGNERS), a
// hit is the build only when one of those keys signed it: neither the
// signing key nor a runtime trusting DIR vouches for bytes that a cache
// writer chose. An
// untrusted hit's schedule (plain data, compiled by this process, whatever
// it says the kernel computes the fn) is put in `rebuild` instead.
std::optional<int> write_cached(const BuildArgs& b, const ir::Module& m, const Profile& profile,
                                std::optional<Schedule>& rebuild) {
  const ir::Function* target_fn = m.find(b.fn);
  bool all_dims = target_fn != nullptr;
  if (target_fn)
    for (const auto& d : target_fn->dim_vars) all_dims = all_dims && b.dims.count(d);
  if (b.no_cache || !b.schedule_path.empty() || !all_dims) return std::nullopt;
  // (--cache may name a `mlk serve`: then a hit there is pulled into the local mirror.)
  auto c = client::CliCache::Open(b.cache_flag, b.ns, "mlk build", /*create_if_missing=*/false, "", b.namespaces);
  if (!c.ok()) return fail(c.status());
  std::unique_ptr<client::CliCache> cc = std::move(c).value();
  if (!cc) return std::nullopt;
  // The shared resolver (runtime/resolve.h), strict: only an artifact tuned
  // at exactly this shape is the build; anything else is built anew.
  rt::FindTunedRequest lookup{.cache = cc.get(),
                              .ns = b.ns,
                              .module = &m,
                              .fn = b.fn,
                              .fhash = ir::function_hash(m, *target_fn),
                              .profile = profile,
                              .dims = b.dims,
                              .require = rt::Require::kExact,
                              .cpu = detect_cpu()};
  lookup.trusted = b.trusted;
  // A hit is copied into DIR as it is only when no trust list applies or a
  // trusted key signed it; under --sign, or with keys to trust, any other
  // hit is rebuilt here from its schedule.
  const bool gated = b.sign_key || !b.trusted.empty();
  if (b.profile_stages) {  // the cached schedule, built again with the profiler in it
    auto hit = rt::find_tuned(lookup);
    if (!hit.ok()) return hit.status().code() == Status::Code::kNotFound ? std::nullopt : std::optional(fail(hit.status()));
    auto sj = hit->entry.files.find("schedule.json");
    auto sched = sj == hit->entry.files.end() ? Expected<Schedule>(Status::NotFound("no schedule.json"))
                                               : Schedule::from_json(sj->second);
    if (sched.ok() && sched->autoscheduler.empty()) rebuild = *sched;
    std::printf("rebuilt: the cached artifact (key %s) %s, with Halide's profiler\n", hit->key.substr(0, 16).c_str(),
                rebuild ? "from its schedule" : "has no schedule of stages; the default schedule");
    return std::nullopt;
  }
  auto found = b.sign_key && b.trusted.empty() ? Expected<rt::Tuned>(Status::NotFound("no trusted signer")) : rt::find_tuned(lookup);
  if (gated && !found.ok() && found.status().code() == Status::Code::kNotFound) {
    lookup.trusted = {};
    auto untrusted = rt::find_tuned(lookup);
    if (!untrusted.ok()) return std::nullopt;
    auto sj = untrusted->entry.files.find("schedule.json");
    auto sched = sj == untrusted->entry.files.end() ? Expected<Schedule>(Status::NotFound("no schedule.json"))
                                                     : Schedule::from_json(sj->second);
    // A schedule of stages is plain data this process compiles; an
    // autoscheduler's search is not taken on a writer's word (it could run long).
    const bool usable = sched.ok() && sched->autoscheduler.empty();
    if (usable) rebuild = *sched;
    std::printf("rebuilt: the cached artifact (key %s) is signed by no trusted key; %s\n",
                untrusted->key.substr(0, 16).c_str(),
                usable ? "building its schedule here" : "its schedule is not plain stages, building the default one here");
    return std::nullopt;
  }
  if (!found.ok()) {
    if (found.status().code() != Status::Code::kNotFound) return fail(found.status());
    return std::nullopt;
  }
  const std::string& key = found->key;
  const cache::Artifact* hit = &found->entry;
  if (Status w = cache::write_hit_dir(hit->files, b.out_dir); !w.ok()) return fail(w);
  // --dump-after: the stages of the stored artifact's schedule.
  const DumpRequest dump{.module = &m, .fn = b.fn, .profile = profile, .dims = b.dims, .stage = b.dump_after};
  if (Status d = dump_stored(dump, hit->files); !d.ok()) return fail(d);
  std::printf("cached: tuned on %s (key %s); artifact written to %s\n", hit->info.manifest.provenance.host.c_str(),
              key.substr(0, 16).c_str(), b.out_dir.c_str());
  return 0;
}

// --sign: DIR's manifest.json gets a signature of the directory's statement
// (cache/signatures.h: key "", every file the manifest lists, metadata {},
// namespace "").
Status sign_directory(const std::string& dir, const SigningKey& key) {
  const std::string path = (std::filesystem::path(dir) / "manifest.json").string();
  auto text = read_file(path);
  if (!text.ok()) return text.status();
  auto m = parse_artifact_manifest(*text, path);
  if (!m.ok()) return m.status();
  std::map<std::string, std::string> files = {{"manifest.json", *text}};
  for (const auto& [name, digest] : m->files) {
    auto bytes = read_file((std::filesystem::path(dir) / name).string());
    if (!bytes.ok()) return bytes.status();
    files[name] = *bytes;
  }
  auto st = cache::directory_statement(files);
  if (!st.ok()) return st.status();
  auto signed_text = cache::add_signature(*text, *st, key, cache::SignatureScope{""}, 2);
  if (!signed_text.ok()) return signed_text.status();
  MLK_RETURN_IF_ERROR(replace_file_in_dir(dir, "manifest.json", *signed_text + "\n"));  // never through a link
  std::printf("signed %s with key %s\n", path.c_str(), key.key_id.c_str());
  return Status::Ok();
}

// The schedule of --schedule FILE (`naive` is not a file: see
// naive_schedule_for, scheduler/kernel.h); a file that cannot be read is
// read_file's IOError ("cannot read nope.json: No such file or directory").
Expected<Schedule> read_schedule(const std::string& path) {
  auto text = read_file(path);
  if (!text.ok()) return text.status();
  auto s = Schedule::from_json(*text);
  if (!s.ok()) return Status::InvalidArgument(path + ": " + s.status().message());
  return *s;
}

}  // namespace

CommandSpec build_spec() {
  static BuildArgs scratch;
  return spec(scratch);
}

int run_build(const std::vector<std::string>& args) {
  BuildArgs b;
  if (int bad = parse_or_usage_error(spec(b), args)) return bad;
  auto profile = resolve_profile(b.target);
  if (!profile.ok()) return fail(profile.status());
  auto fe = compile_file(b.file);
  if (!fe.ok()) return fail(fe.status());
  if (!fe->ok()) {
    std::fputs(fe->rendered().c_str(), stderr);
    return 1;
  }
  fe->module = with_precision(fe->module, b.precision);
  if (Status s = complete_args(b, fe->module); !s.ok()) return usage_error("build", s.message());
  if (!b.sign_path.empty()) {
    auto k = load_signing_key(b.sign_path);
    if (!k.ok()) return fail(Status::InvalidArgument("--sign: " + k.status().message()));
    b.sign_key = *k;
  }
  if (!b.trusted_flag.empty()) {
    auto keys = parse_trusted_keys(b.trusted_flag);
    if (!keys.ok()) return fail(Status::InvalidArgument("--trusted-signers: " + keys.status().message()));
    b.trusted = *keys;
  } else {  // the machine's trust list ($MLK_TRUSTED_SIGNERS), as the runtime's
    auto keys = default_trusted_signers();
    if (!keys.ok()) return fail(keys.status());
    b.trusted = *keys;
  }
  std::optional<Schedule> rebuild;
  if (std::optional<int> done = write_cached(b, fe->module, *profile, rebuild)) {
    if (*done == 0 && b.sign_key)
      if (Status s = sign_directory(b.out_dir, *b.sign_key); !s.ok()) return fail(s);
    return *done;
  }
  BuildRequest req;
  req.module = &fe->module;
  req.fn = b.fn;
  req.source_path = b.file;
  req.profile = *profile;
  if (b.profile_stages) {
    if (profile->is_gpu()) return usage_error("build", "--profile-stages profiles CPU kernels; " + profile->name + " is a GPU profile");
    req.profile.halide_target += "-profile";
  }
  req.dims = b.dims;
  req.out_dir = b.out_dir;
  req.dump_after = b.dump_after;
  req.dump = dump_to(stdout);
  if (!b.schedule_path.empty()) {
    auto s = b.schedule_path == "naive" ? naive_schedule_for(fe->module, b.fn, req.profile, b.dims)
                                        : read_schedule(b.schedule_path);
    if (!s.ok()) return fail(s.status());
    req.schedule = *s;
  } else if (rebuild) {
    req.schedule = *rebuild;
  }
  auto res = build_artifact(req);
  if (!res.ok() && rebuild && b.schedule_path.empty()) {
    std::printf("rebuilt: the cached schedule does not build here (%s); building the default one\n",
                res.status().message().c_str());
    req.schedule.reset();
    res = build_artifact(req);
  }
  if (!res.ok()) return fail(res.status());
  std::printf("built %s for %s: %s", res->dir.c_str(), profile->name.c_str(), res->library.c_str());
  if (!res->ptxas_status.empty()) std::printf(" (ptxas: %s)", res->ptxas_status.c_str());
  std::printf("\n");
  if (b.sign_key)
    if (Status s = sign_directory(b.out_dir, *b.sign_key); !s.ok()) return fail(s);
  return 0;
}

namespace {

struct TargetsOptions {
  bool json = false;
};

CommandSpec targets_spec(TargetsOptions& o) {
  return {
      .name = "targets",
      .summary = "list target profiles and what this machine can run",
      .description = "Lists the target capability profiles, whether each can run on this machine\n"
                     "(and why not), and what was detected: CPU features by cpuid, CUDA devices\n"
                     "through the driver (loaded at run time; none is needed to build).\n"
                     "With --json, one JSON object: {\"format\": \"mlk-targets-1\", \"profiles\",\n"
                     "\"machine\", \"cuda\"} (docs/cli.md).\n",
      .flags = {{.name = "--json", .help = "print the profiles and what was detected as one JSON object",
                 .set = set_bool(o.json)}},
  };
}

// A profile as `mlk targets` shows it: `host` made concrete.
Profile shown_profile(const Profile& p) { return p.name == "host" ? host_profile() : p; }

nlohmann::json profile_json(const Profile& p, const Runnable& rn) {
  nlohmann::json j = {{"name", p.name}, {"kind", p.kind}, {"runs", rn.ok},
                      {"reason", rn.reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(rn.reason)},
                      {"halide_target", p.halide_target}};
  if (p.is_gpu()) {
    j["compute_capability"] = p.compute_capability;
    j["sm_count"] = p.sm_count;
  } else {
    j["vector_bits"] = p.vector_bits;
  }
  return j;
}

// The --json document: every profile, this machine's CPU and its CUDA
// devices (an empty list and `why_not` when there is none).
void print_targets_json(const CpuInfo& cpu, const CudaInfo& cuda) {
  nlohmann::json profiles = nlohmann::json::array(), devices = nlohmann::json::array();
  for (const Profile& p : all_profiles()) {
    Profile shown = shown_profile(p);
    profiles.push_back(profile_json(shown, can_run(shown, cpu, cuda)));
  }
  for (const auto& d : cuda.devices)
    devices.push_back({{"name", d.name}, {"compute_capability", d.compute_capability}, {"sm_count", d.sm_count}});
  const nlohmann::json j = {
      {"format", "mlk-targets-1"},
      {"profiles", profiles},
      {"machine",
       {{"cores", cpu.cores},
        {"cpu_features", cpu.features},
        {"cpu_vendor", cpu.vendor},
        {"cpu_family", cpu.family},
        {"cpu_model", cpu.brand},
        {"cpu_model_number", cpu.model},
        {"family_key", cpu_family_key(cpu)}}},
      {"cuda",
       {{"driver_loaded", cuda.driver_loaded},
        {"devices", devices},
        {"why_not", cuda.devices.empty() ? nlohmann::json(cuda.why_not) : nlohmann::json(nullptr)}}}};
  std::printf("%s\n", j.dump().c_str());
}

}  // namespace

CommandSpec targets_spec() {
  static TargetsOptions scratch;
  return targets_spec(scratch);
}

int run_targets(const std::vector<std::string>& args) {
  TargetsOptions o;
  if (int bad = parse_or_usage_error(targets_spec(o), args)) return bad;
  CpuInfo cpu = detect_cpu();
  CudaInfo cuda = detect_cuda();
  if (o.json) {
    print_targets_json(cpu, cuda);
    return 0;
  }
  std::printf("%-16s %-5s %-4s %s\n", "PROFILE", "KIND", "RUNS", "DETAILS");
  for (const Profile& p : all_profiles()) {
    Profile shown = shown_profile(p);
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
  std::printf("CPU: %s (%s family %d model %d)\n", cpu.brand.empty() ? "unknown model" : cpu.brand.c_str(),
              cpu.vendor.empty() ? "unknown vendor" : cpu.vendor.c_str(), cpu.family, cpu.model);
  if (cuda.devices.empty()) std::printf("CUDA: %s\n", cuda.why_not.c_str());
  for (const auto& d : cuda.devices)
    std::printf("CUDA device: %s, compute capability %d.%d, %d SMs\n", d.name.c_str(), d.compute_capability / 10,
                d.compute_capability % 10, d.sm_count);
  return 0;
}

}  // namespace mlk::cli
