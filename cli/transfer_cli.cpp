#include "cli/transfer_cli.h"

#include <cstdlib>

#include <nlohmann/json.hpp>

#include "base/json.h"
#include "base/signing.h"
#include "cache/entry_meta.h"
#include "cache/signatures.h"
#include "cache/paths.h"
#include "cache/sizes.h"
#include "cache/store.h"
#include "client/remote_store.h"

namespace mlk::cli {

namespace {

using client::is_remote_url;
using client::RemoteOptions;
using client::RemoteStore;

// An exact key, or a unique prefix (at least 8 characters) of a local key.
Expected<std::string> resolve(cache::Store& store, const std::string& ns, const std::string& key) {
  auto keys = store.keys_with_prefix(ns, key, 2);
  if (!keys.ok()) return keys.status();
  for (const auto& k : *keys)
    if (k == key) return k;
  if (keys->size() == 1 && key.size() >= 8) return (*keys)[0];
  if (keys->size() > 1 && key.size() >= 8) return Status::InvalidArgument("`" + key + "` is ambiguous in namespace `" + ns + "`");
  return Status::NotFound("no entry `" + key + "` in namespace `" + ns + "` of " + store.path());
}

// Whether --sign may vouch for this local entry: a tune on this machine
// stored it (origin kOriginLocal), or a key of --trusted-signers signed it
// (rotation re-signs only what verifies under the old key). An entry
// pulled from a server or imported holds bytes a writer there chose; one of
// unknown origin (stored before origins were recorded) is refused the same.
// Whether --sign may sign entry (ns, key) for namespace `target_ns`; `seq`
// gets the sequence to sign at: now for an entry made here, the old
// signature's for a re-signed one (1 for a version-1 signature), so that
// re-signing never makes an old build newer than what replaced it.
Status may_sign(const std::string& ns, const std::string& key, const cache::Artifact& e, const std::string& trusted_flag,
                const std::string& remote_url, const std::string& target_ns, int64_t* seq) {
  const std::string& origin = e.info.manifest.provenance.origin;
  const std::string what = "entry " + ns + "/" + key.substr(0, 16);
  // A winner only remote workers timed rests on their word (mlk tune --sign refuses it too).
  const nlohmann::json meta = parse_json(e.info.manifest.meta_json);
  if (meta.is_object() && meta.contains("measured_by") && meta["measured_by"].is_object() &&
      meta["measured_by"].value("winner_checked_here", true) == false)
    return Status::InvalidArgument("refused: " + what + " was picked by the measurements of workers of key `" +
                                   meta["measured_by"].value("device_key", std::string("?")) +
                                   "` alone, which --sign does not vouch for; nothing was signed or pushed");
  *seq = 0;
  if (origin == cache::kOriginLocal) return Status::Ok();
  if (trusted_flag.empty())
    return Status::InvalidArgument(
        "refused: " + what +
        (origin.empty() ? std::string(" has no recorded origin (it was stored before mlk recorded where entries come "
                                      "from), so it may hold bytes a writer elsewhere chose")
                        : " came from " + origin + ", so --sign would vouch for bytes a writer there chose") +
        "; re-sign it only with --trusted-signers KEYS naming a key that signed it, or tune it again here "
        "(docs/signing.md); nothing was signed or pushed");
  auto keys = parse_trusted_keys(trusted_flag);
  if (!keys.ok()) return Status::Usage("--trusted-signers: " + keys.status().message());
  auto st = cache::statement_of_files(key, e.files, e.info.manifest.meta_json);
  if (!st.ok()) return st.status();
  // Re-signing carries a trusted key's word for the namespace it was given
  // for to a new key, never to another namespace.
  // A version-1 signature names no namespace: it is carried over only for an
  // entry pulled from the very namespace it is pushed to (its origin).
  cache::SignatureCheck want{{target_ns}, origin == client::origin_of_pull(remote_url, target_ns)};
  cache::SignedBy by;
  Status s = cache::check_signed(what, *st, e.info.manifest.meta_json, *keys, want, &by);
  if (!s.ok()) return Status::InvalidArgument("refused: " + s.message() + "; nothing was signed or pushed");
  *seq = by.v1 ? 1 : by.seq;
  return Status::Ok();
}

// Whether the --require-verified gate may read this entry's report: a
// tune on this machine wrote it (origin kOriginLocal), or a key of
// --trusted-signers signed it for this very entry. A report that came with
// an entry from a server or a file is its writer's word (issue 49, finding 11).
Status report_is_evidence(const std::string& ns, const std::string& key, cache::Store& store,
                          const cache::EntryInfo& e, const std::string& trusted_flag) {
  const std::string what = "entry " + ns + "/" + key.substr(0, 16);
  const std::string& origin = e.manifest.provenance.origin;
  if (origin == cache::kOriginLocal) return Status::Ok();
  if (trusted_flag.empty()) {
    return Status::InvalidArgument(
        what + " was not tuned on this machine (origin `" + (origin.empty() ? std::string("unrecorded") : origin) +
        "`), so its verification report is its writer's word; give --trusted-signers KEYS (the verifiers' keys) to "
        "accept a report one of them signed");
  }
  auto keys = parse_trusted_keys(trusted_flag);
  if (!keys.ok()) return Status::Usage("--trusted-signers: " + keys.status().message());
  auto art = store.get_entry(ns, key);  // every blob re-hashed
  if (!art.ok()) return art.status();
  auto st = cache::statement_of_files(key, art->files, art->info.manifest.meta_json);
  if (!st.ok()) return st.status();
  return cache::check_report_signed(what, *st, art->info.manifest.meta_json, *keys);
}

}  // namespace

int run_cache_transfer(const CacheArgs& a, std::ostream& out, std::ostream& err) {
  const std::string& key_arg = a.positional.at(0);
  const std::string ns = a.ns.value_or(cache::kDefaultNamespace);
  auto fail = [&](const Status& s) {
    err << "mlk cache " << a.command << ": " << s.message() << "\n";
    return s.exit_code();
  };
  RemoteOptions ro;
  ro.url = a.remote;
  const char* token = std::getenv("MLK_TOKEN");
  ro.token = token ? token : "";
  ro.ns = ns == cache::kDefaultNamespace ? "" : ns;
  auto remote = RemoteStore::Open(ro);
  if (!remote.ok()) return fail(remote.status());
  std::string path = cache::default_store_path(a.cache);
  if (is_remote_url(path)) return fail(Status::Usage("--cache (or $MLK_CACHE) must be a store path here, the server is --remote"));
  cache::StoreOptions so;
  so.create_if_missing = a.command == "pull";
  auto store = cache::Store::Open(path, so);
  if (!store.ok()) return fail(store.status());
  if (a.command == "push") {
    if (!a.trusted_signers.empty() && a.sign.empty() && a.require_verified.empty())
      return fail(Status::Usage("--trusted-signers goes with --sign (it says which entries not made here may be "
                                "re-signed) or --require-verified (whose signed reports are evidence)"));
    auto key = resolve(**store, ns, key_arg);
    if (!key.ok()) return fail(key.status());
    if (!a.require_verified.empty()) {  // the gate: nothing leaves unless its report passes
      auto levels = cache::parse_required_levels(a.require_verified);
      if (!levels.ok()) return fail(Status::Usage("--require-verified: " + levels.status().message()));
      auto e = (*store)->show_entry(ns, *key);
      if (!e.ok()) return fail(e.status());
      if (Status own = report_is_evidence(ns, *key, **store, *e, a.trusted_signers); !own.ok())
        return fail(Status::InvalidArgument("refused: " + own.message() + "; nothing was pushed"));
      auto v = cache::parse_verified(e->manifest.meta_json.empty() ? "{}" : e->manifest.meta_json);
      if (!v.ok()) return fail(v.status());
      Status gate = cache::require_verified("entry " + ns + "/" + key->substr(0, 16), *v, *levels);
      if (!gate.ok()) return fail(Status::InvalidArgument("refused: " + gate.message() + "; nothing was pushed"));
    }
    // Where it lands: the namespace of that name, or for `default` the token's
    // team (asked before anything is sent, so a failure here pushes nothing).
    auto landed = (*remote)->server_namespace();
    if (!landed.ok()) return fail(landed.status());
    if (!a.sign.empty()) {  // signed here, stored signed, then pushed (cache/signatures.h)
      auto k = load_signing_key(a.sign);
      if (!k.ok()) return fail(Status::InvalidArgument("--sign: " + k.status().message()));
      auto e = (*store)->get_entry(ns, *key);  // every blob re-hashed
      if (!e.ok()) return fail(e.status());
      // The signature is for the server's namespace it goes to.
      int64_t seq = 0;
      if (Status may = may_sign(ns, *key, *e, a.trusted_signers, (*remote)->url(), *landed, &seq); !may.ok()) return fail(may);
      auto meta = cache::sign_entry(*key, e->files, e->info.manifest.meta_json, *k, cache::SignatureScope{*landed, seq});
      if (!meta.ok()) return fail(meta.status());
      Status put = (*store)->put_entry(ns, *key, *meta, e->info.manifest.provenance, e->files);
      if (!put.ok()) return fail(put);
      out << "signed " << ns << "/" << *key << " with key " << k->key_id << " for namespace " << *landed << "\n";
    }
    auto rep = (*remote)->push(**store, ns, *key);
    if (!rep.ok()) return fail(rep.status());
    out << "pushed " << ns << "/" << *key << " to " << a.remote << ", namespace " << *landed
        << (ns == cache::kDefaultNamespace ? " (your team's namespace)" : "") << ": " << rep->files << " files, "
        << rep->blobs_sent << " blobs sent (" << cache::human_bytes(rep->bytes) << "), " << rep->blobs_skipped
        << " already there\n";
    return 0;
  }
  auto rep = (*remote)->pull(**store, ns, key_arg);
  if (!rep.ok()) return fail(rep.status());
  out << "pulled " << key_arg << " from " << a.remote << " into " << path << " (namespace " << ns << "): " << rep->files
      << " files, " << cache::human_bytes(rep->bytes) << ", verified\n";
  return 0;
}

}  // namespace mlk::cli
