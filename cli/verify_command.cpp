// `mlk verify`: an artifact of one fn checked level by level (verify/verify.h);
// the report goes to stdout and travels with the artifact.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/child.h"
#include "base/files.h"
#include "base/json.h"
#include "base/signing.h"
#include "cache/signatures.h"
#include "cache/paths.h"
#include "cli/args.h"
#include "cli/command.h"
#include "client/cli_cache.h"
#include "lang/frontend.h"
#include "lang/ir_printer.h"
#include "runtime/resolve.h"
#include "scheduler/kernel.h"
#include "artifact/build.h"
#include "targets/detect.h"
#include "verify/verify.h"

namespace mlk::cli {

namespace {

namespace fs = std::filesystem;

// The exit status when no level failed but one could not run here.
constexpr int kExitNotRun = 4;

int fail(const Status& s) {
  std::fprintf(stderr, "mlk verify: %s\n", s.message().c_str());
  return s.exit_code();
}

struct VerifyArgs {
  std::string file, fn, target, artifact_dir, schedule_path, cache_flag, ns = cache::kDefaultNamespace, namespaces;
  std::string levels = "all";
  std::map<std::string, int64_t> dims;
  Precision precision = Precision::kF32;  // --precision
  bool json_out = false, no_cache = false, no_store = false;
  int64_t seed = 1;
  std::string sign_path;               // --sign KEYFILE: the verifier's key
  std::string trusted_flag;            // --trusted-signers KEYS: what it takes from the cache
  std::vector<std::string> trusted;
  std::optional<SigningKey> sign_key;  // loaded from it after the levels ran, in another process
};

const char* kVerifyDescription =
    "Checks the artifact of fn NAME for PROFILE at the shape --dims, level by level:\n"
    "  types        the typed IR re-verified; the artifact's signature and the Halide\n"
    "               pipeline's buffers and extents against the fn's signature\n"
    "  identity     the artifact's recorded algorithm hash against the algorithm the\n"
    "               typed IR lowers to; directives that may reassociate sums; strict_float\n"
    "  envelope     results against the F64 reference interpreter on random and\n"
    "               adversarial inputs, within an order-independent bound where one exists\n"
    "  memory       the kernel on buffers behind guard pages and canaries, asserts kept\n"
    "  equivalence  the typed IR and the lowered algorithm at a small shape, every\n"
    "               output element proved equal with z3\n"
    "The artifact is --artifact DIR, else the cache's entry tuned at exactly these dims,\n"
    "else one built now with the default schedule (or --schedule). The report (text, or\n"
    "JSON with --json) says per level what was checked, the guarantee, the evidence and\n"
    "the time; a failed level gives a counterexample. It is stored with the artifact:\n"
    "in the cache entry (metadata and manifest.json, key verify_report) or in DIR's\n"
    "manifest.json. See docs/verification.md.\n";

const char* kVerifyEpilogue =
    "Exit status: 0 every level passed; 1 a level failed (or a bad program or input);\n"
    "2 bad usage; 3 an internal error (a bug in mlk); 4 no level failed but one could\n"
    "not run on this machine (the envelope and memory levels of a CUDA artifact\n"
    "without a GPU): such a level is reported as not run and is not stored.\n";

CommandSpec spec(VerifyArgs& v) {
  return {
      .name = "verify",
      .summary = "check an artifact level by level and attach the report",
      .positionals = "FILE.tl",
      .description = kVerifyDescription,
      .flags =
          {
              {.name = "--fn", .metavar = "NAME", .help = "the fn; may be omitted when the file has one public fn",
               .set = store(v.fn)},
              {.name = "--target", .metavar = "PROFILE", .help = "the profile the artifact is for (see `mlk targets`)",
               .set = store(v.target), .required = true, .required_note = " (see `mlk targets`)"},
              precision_flag(v.precision),
              {.name = "--dims", .metavar = "N=V,...",
               .help = "the shape the running levels use, and the cache entry's shape; keep it small",
               .default_value = "the fn's first `tune` bucket", .set = store_dims(v.dims)},
              {.name = "--level", .metavar = "LIST",
               .help = "comma-separated levels: types, identity, envelope, memory, equivalence; all; cheap (types, "
                       "identity)",
               .default_value = "all", .set = store(v.levels)},
              {.name = "--json", .help = "print the report as one JSON object", .set = set_bool(v.json_out)},
              {.name = "--artifact", .metavar = "DIR", .help = "verify this artifact directory (from `mlk build`)",
               .set = store(v.artifact_dir)},
              {.name = "--schedule", .metavar = "S.json|naive",
               .help = "with no artifact in the cache: build with this schedule instead of the default, or `naive`: "
                       "every knob at its default",
               .set = store(v.schedule_path)},
              {.name = "--seed", .metavar = "N", .help = "seed of the random inputs", .default_value = "1",
               .set = store_count(v.seed)},
              cache_flag(v.cache_flag, CacheFlag::kStoreOrServer),
              {.name = "--namespace", .metavar = "NAME", .help = "the cache namespace", .default_value = "default",
               .set = store(v.ns)},
              namespaces_flag(v.namespaces),
              {.name = "--no-cache", .help = "never consult the cache (build the artifact now)", .set = set_bool(v.no_cache)},
              {.name = "--no-store", .help = "do not attach the report to the artifact", .set = set_bool(v.no_store)},
              {.name = "--sign", .metavar = "KEYFILE",
               .help = "sign the attached report with this verifier key (`mlk key create`), bound to the entry it is "
                       "about; a release namespace accepts only reports a trusted verifier signed (docs/signing.md)",
               .set = store(v.sign_path)},
              {.name = "--trusted-signers", .metavar = "KEYS",
               .help = "take a cache entry only when one of these keys (64 hex or KEY.pub files, comma-separated) "
                       "signed it; others are passed over before they are loaded (default: $MLK_TRUSTED_SIGNERS)",
               .set = store(v.trusted_flag)},
          },
      .epilogue = kVerifyEpilogue,
      .positional = one_positional(v.file),
      .no_positional = "no input file",
  };
}

// Where the artifact came from, and its files.
struct Source {
  std::string what;  // for the report's first line
  std::string cache_key;  // set when it is a cache entry
  std::map<std::string, std::string> files;
  cache::Provenance provenance;
  std::string meta_json;
};

Expected<Source> built_now(const VerifyArgs& v, const ir::Module& m, const Profile& p, const std::string& scratch) {
  BuildRequest req;
  req.module = &m;
  req.fn = v.fn;
  req.source_path = v.file;
  req.profile = p;
  req.dims = v.dims;
  req.out_dir = scratch;
  if (v.schedule_path == "naive") {
    auto s = naive_schedule_for(m, v.fn, p, v.dims);
    if (!s.ok()) return s.status();
    req.schedule = *s;
  } else if (!v.schedule_path.empty()) {
    auto text = read_file(v.schedule_path);
    if (!text.ok()) return text.status();
    auto s = Schedule::from_json(*text);
    if (!s.ok()) return Status::InvalidArgument(v.schedule_path + ": " + s.status().message());
    req.schedule = *s;
  }
  auto res = build_artifact(req);
  if (!res.ok()) return res.status();
  auto files = verify::read_artifact_dir(scratch);
  if (!files.ok()) return files.status();
  const std::string with = v.schedule_path.empty()    ? std::string("the default schedule")
                           : v.schedule_path == "naive" ? std::string("the naive schedule")
                                                        : v.schedule_path;
  return Source{.what = "built now with " + with,
                .files = std::move(files).value()};
}

// An artifact built under another precision policy than --precision is a
// different program: said plainly, not left to the identity level to fail.
Status same_precision(const VerifyArgs& v, const Source& src) {
  auto it = src.files.find("manifest.json");
  if (it == src.files.end()) return Status::Ok();
  const nlohmann::json m = parse_json(it->second);
  if (!m.is_object() || !m.contains("precision") || !m["precision"].is_string()) return Status::Ok();
  const std::string built = m["precision"].get<std::string>();
  if (built == precision_name(v.precision)) return Status::Ok();
  return Status::InvalidArgument(src.what + " was built under precision " + built + ", not " +
                                 precision_name(v.precision) + ": verify it with --precision " + built);
}

Expected<Source> find_artifact(const VerifyArgs& v, const ir::Module& m, const Profile& p, client::CliCache* cc,
                               const std::string& scratch) {
  if (!v.artifact_dir.empty()) {
    auto files = verify::read_artifact_dir(v.artifact_dir);
    if (!files.ok()) return files.status();
    // Under a trust list a directory runs in this process (without --sign)
    // only when a trusted key signed it: it may hold a cache writer's hit
    // (`mlk build -o`). With --sign its code runs only in the sandbox.
    if (!v.trusted.empty() && v.sign_path.empty()) {
      auto st = cache::directory_statement(*files);
      if (!st.ok()) return st.status();
      if (Status s = cache::check_signed("the artifact directory " + v.artifact_dir, *st, files->at("manifest.json"),
                                         v.trusted, cache::SignatureCheck{.namespaces = {""}});
          !s.ok())
        return Status::InvalidArgument(s.message() + "; under the trust list (--trusted-signers, $MLK_TRUSTED_SIGNERS) "
                                       "it is not run here: sign it (`mlk build --sign`), or verify with --sign, "
                                       "which runs it in a sandbox");
    }
    return Source{.what = "the artifact directory " + v.artifact_dir, .files = std::move(files).value()};
  }
  if (cc && v.schedule_path.empty()) {
    auto found = rt::find_tuned({.cache = cc, .ns = v.ns, .module = &m, .fn = v.fn,
                                 .fhash = ir::function_hash(m, *m.find(v.fn)), .profile = p, .dims = v.dims,
                                 .require = rt::Require::kExact, .trusted = v.trusted, .cpu = detect_cpu()});
    if (found.ok())
      return Source{.what = "the cache entry " + found->key.substr(0, 16), .cache_key = found->key,
                    .files = found->entry.files, .provenance = found->entry.info.manifest.provenance,
                    .meta_json = found->entry.info.manifest.meta_json};
    if (found.status().code() != Status::Code::kNotFound) return found.status();
  }
  return built_now(v, m, p, scratch);
}

// The report attached where the artifact lives: the cache entry (its
// metadata and manifest.json, re-stored under the same key and pushed when
// the cache is a server) or the directory's manifest.json.
Status attach(const VerifyArgs& v, const Source& src, const verify::Report& rep, client::CliCache* cc) {
  const bool dir = !v.artifact_dir.empty();
  std::string old_man = src.files.at("manifest.json"), old_meta = src.meta_json.empty() ? "{}" : src.meta_json;
  const std::string key = dir ? "" : src.cache_key;
  if (v.sign_key) {
    // attach_report keeps the levels of an earlier report that this run did
    // not repeat; signed, they would become this verifier's word. So an
    // earlier report counts only when this key signed it for this entry.
    auto st = dir ? cache::directory_statement(src.files) : cache::statement_of_files(key, src.files, old_meta);
    if (!st.ok()) return st.status();
    if (!cache::check_report_signed("it", *st, dir ? old_man : old_meta, {v.sign_key->public_key}).ok()) {
      auto m = cache::drop_report(old_man, 2);
      auto mm = cache::drop_report(old_meta);
      if (!m.ok()) return m.status();
      if (!mm.ok()) return mm.status();
      old_man = *m, old_meta = *mm;
    } else if (!dir) {
      // The entry's manifest.json carries a copy of the report that the
      // check above did not read (its writer's to fill): both copies start
      // from the one that was checked (review 5 of issue 49).
      nlohmann::json man_j = parse_json(old_man), meta_j = parse_json(old_meta);
      if (!man_j.is_object() || !meta_j.is_object()) return Status::InvalidArgument("the entry's manifest is not an object");
      man_j["verify_report"] = meta_j["verify_report"];
      old_man = man_j.dump(2);
    }
  }
  auto man = verify::attach_report(old_man, rep, 2);
  if (!man.ok()) return man.status();
  std::map<std::string, std::string> files = src.files;
  files["manifest.json"] = *man;
  // --sign: the report, bound to the entry's statement (cache/signatures.h).
  auto sign = [&](const std::string& text, int indent) -> Expected<std::string> {
    if (!v.sign_key) return text;
    auto st = dir ? cache::directory_statement(files) : cache::statement_of_files(key, files, old_meta);
    if (!st.ok()) return st.status();
    return cache::sign_report(text, *st, *v.sign_key, indent);
  };
  if (dir) {
    auto signed_man = sign(*man, 2);
    if (!signed_man.ok()) return signed_man.status();
    // Renamed over it, never written through a link planted there while
    // the levels ran (review 8 of issue 49).
    return replace_file_in_dir(v.artifact_dir, "manifest.json", *signed_man + "\n");
  }
  if (src.cache_key.empty() || !cc || !cc->store()) return Status::Ok();
  auto meta = verify::attach_report(old_meta, rep);
  if (!meta.ok()) return meta.status();
  meta = sign(*meta, -1);
  if (!meta.ok()) return meta.status();
  auto signed_man = sign(*man, 2);
  if (!signed_man.ok()) return signed_man.status();
  files["manifest.json"] = *signed_man;
  MLK_RETURN_IF_ERROR(cc->store()->put_entry(v.ns, src.cache_key, *meta, src.provenance, files));
  if (cc->remote()) return cc->push(src.cache_key);
  return Status::Ok();
}

// --fn from the only public fn; --dims from the fn's first `tune` bucket.
Status complete_args(VerifyArgs& v, const ir::Module& m) {
  if (v.fn.empty()) {
    std::vector<std::string> pub;
    for (const auto& f : m.functions)
      if (f.is_public) pub.push_back(f.name);
    if (pub.size() != 1)
      return Status::Usage("--fn NAME is required: " + v.file + " has " + std::to_string(pub.size()) + " public fns");
    v.fn = pub[0];
  }
  if (!m.find(v.fn)) return Status::Usage("no fn `" + v.fn + "` in " + v.file);
  if (v.dims.empty())
    for (const auto& t : m.tunes)
      if (t.function == v.fn) {
        v.dims = t.dims;
        break;
      }
  return Status::Ok();
}

}  // namespace

CommandSpec verify_spec() {
  static VerifyArgs scratch;
  return spec(scratch);
}

// What the sandboxes hide: the key's folder as written and as it really is
// (a link's target), the user's home and $TMPDIR.
std::vector<std::string> key_folders(const std::string& key_path) {
  std::vector<std::string> out = {fs::absolute(key_path).parent_path().string()};
  std::error_code ec;
  if (auto real = fs::canonical(key_path, ec); !ec && real.parent_path().string() != out[0])
    out.push_back(real.parent_path().string());
  for (const std::string& h : home_folders()) out.push_back(h);  // $HOME and the user's own, set or not
  // $TMPDIR too, unless it is /tmp (the sandbox has its own): a CI job's
  // folder holds its files there (review 8 of issue 49).
  if (const char* t = std::getenv("TMPDIR"); t && t[0] == '/' && std::string(t) != "/" && std::string(t) != "/tmp") {
    auto real = fs::weakly_canonical(t, ec);
    out.push_back(ec ? std::string(t) : real.string());
  }
  return out;
}

// Keeping the verifier's key away from the code it verifies: the running
// levels dlopen the artifact, whose constructors run where it is loaded.
// With --sign, this process never loads it: the key file is checked in a
// short-lived child, the artifact runs only in sandboxes (no network, no
// view of this process, the key file hidden, no environment) that send back
// numbers, every word of the report is this process's, and only then does
// it read the key and sign.
int run_verify(const std::vector<std::string>& args) {
  VerifyArgs v;
  if (int bad = parse_or_usage_error(spec(v), args)) return bad;
  auto levels = verify::parse_levels(v.levels);
  if (!levels.ok()) return usage_error("verify", "--level: " + levels.status().message());
  if (!v.sign_path.empty()) {
    if (v.no_store) return usage_error("verify", "--sign signs the attached report; it cannot go with --no-store");
    auto k = text_from_child([&]() -> Expected<std::string> {  // a bad key fails before any work; this process holds none
      auto key = load_signing_key(v.sign_path);
      return key.ok() ? Expected<std::string>(key->key_id) : Expected<std::string>(key.status());
    }, "checking the --sign key");
    if (!k.ok()) return fail(Status::InvalidArgument("--sign: " + k.status().message()));
    for (const std::string& folder : key_folders(v.sign_path))
      if (folder == "/")  // a mask over / does not hide it from the sandbox
        return usage_error("verify", "--sign: keep the key in a folder of its own, not in /");
  }
  if (!v.trusted_flag.empty()) {
    auto keys = parse_trusted_keys(v.trusted_flag);
    if (!keys.ok()) return usage_error("verify", "--trusted-signers: " + keys.status().message());
    v.trusted = *keys;
  } else {  // the machine's trust list ($MLK_TRUSTED_SIGNERS), as every loader's
    auto keys = default_trusted_signers();
    if (!keys.ok()) return fail(keys.status());
    v.trusted = *keys;
  }
  auto profile = resolve_profile(v.target);
  if (!profile.ok()) return fail(profile.status());
  auto fe = compile_file(v.file);
  if (!fe.ok()) return fail(fe.status());
  if (!fe->ok()) {
    std::fputs(fe->rendered().c_str(), stderr);
    return 1;
  }
  fe->module = with_precision(fe->module, v.precision);
  if (Status s = complete_args(v, fe->module); !s.ok()) return usage_error("verify", s.message());
  std::unique_ptr<client::CliCache> cc;
  if (!v.no_cache && v.artifact_dir.empty()) {
    auto c = client::CliCache::Open(v.cache_flag, v.ns, "mlk verify", /*create_if_missing=*/false, "", v.namespaces);
    if (!c.ok()) return fail(c.status());
    cc = std::move(c).value();
  }
  auto scratch_dir = make_private_temp_dir("mlk_verify_");  // 0700, unpredictable: nothing can be planted in it
  if (!scratch_dir.ok()) return fail(scratch_dir.status());
  const std::string scratch = *scratch_dir + "/artifact";
  auto src = find_artifact(v, fe->module, *profile, cc.get(), scratch);
  if (!src.ok()) return fail(src.status());
  if (Status s = same_precision(v, *src); !s.ok()) return fail(s);
  verify::VerifyRequest vreq{.module = &fe->module, .fn = v.fn, .profile = *profile, .dims = v.dims,
                             .files = src->files, .levels = *levels, .seed = static_cast<uint64_t>(v.seed)};
  if (!v.sign_path.empty())  // the artifact's code runs only in sandboxes that cannot see the key file
    vreq.isolate = SandboxSpec{.hidden = key_folders(v.sign_path),
                               .keep_env = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "TMPDIR=/tmp"}};
  auto rep = verify::verify_artifact(vreq);
  if (rep.ok() && !v.sign_path.empty()) {  // now, and only here, the key: after everything that ran the artifact
    auto k = load_signing_key(v.sign_path);
    if (!k.ok()) return fail(Status::InvalidArgument("--sign: " + k.status().message()));
    v.sign_key = *k;
  }
  std::error_code ec;
  fs::remove_all(*scratch_dir, ec);
  if (!rep.ok()) return rep.status().code() == Status::Code::kUsage ? usage_error("verify", rep.status().message()) : fail(rep.status());
  if (v.json_out) {
    nlohmann::json j = nlohmann::json::parse(rep->to_json());
    j["artifact"] = src->what;
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("artifact: %s\n%s", src->what.c_str(), rep->to_text().c_str());
  }
  const bool ran_any = std::any_of(rep->levels.begin(), rep->levels.end(),
                                   [](const verify::LevelReport& l) { return l.not_run.empty(); });
  if (!v.no_store && ran_any)  // levels that could not run here are not stored (nothing to say of them)
    if (Status s = attach(v, *src, *rep, cc.get()); !s.ok())
      std::fprintf(stderr, "mlk verify: the report could not be stored with the artifact: %s\n", s.message().c_str());
  return rep->failed() ? 1 : rep->pass() ? 0 : kExitNotRun;
}

}  // namespace mlk::cli
