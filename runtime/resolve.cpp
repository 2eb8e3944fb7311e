#include "runtime/resolve.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "cache/entry_meta.h"
#include "cache/key.h"
#include "cache/signatures.h"
#include "client/cli_cache.h"
#include "artifact/key_inputs.h"
#include "base/json.h"

namespace mlk::rt {

using nlohmann::json;

Expected<Require> parse_require(const std::string& text) {
  if (text.empty() || text == "any") return Require::kAny;
  if (text == "tuned") return Require::kTuned;
  if (text == "exact") return Require::kExact;
  return Status::InvalidArgument("require `" + text + "`: expected `any`, `tuned` (a tuned artifact at any shape) or "
                                 "`exact` (tuned at exactly this shape)");
}

const char* require_name(Require r) {
  switch (r) {
    case Require::kAny: return "any";
    case Require::kTuned: return "tuned";
    case Require::kExact: return "exact";
  }
  return "?";
}

std::optional<double> shape_distance(const DimEnv& tuned, const DimEnv& want) {
  if (tuned.size() != want.size()) return std::nullopt;
  double d = 0;
  for (const auto& [k, v] : want) {
    auto it = tuned.find(k);
    if (it == tuned.end() || it->second < 1 || v < 1) return std::nullopt;
    d += std::fabs(std::log2(static_cast<double>(it->second) / static_cast<double>(v)));
  }
  return d;
}

namespace {

// An entry of another shape that may serve the call.
struct Candidate {
  std::string key;
  DimEnv dims;
  double distance = 0;
  bool remote = false;  // known only from the server's query
};

// The shape an entry's meta says it was tuned at, when the meta names this
// fn, profile and program; nullopt for any other entry (or unreadable meta,
// which the store's own checks report elsewhere: it only disqualifies here).
std::optional<DimEnv> tuned_shape(const cache::EntryInfo& e, const std::string& fn, const std::string& target,
                                  const std::string& fhash) {
  auto meta = cache::parse_entry_meta(e.manifest.meta_json);
  if (!meta.ok() || meta->fn != fn || meta->target != target || meta->program_hash != fhash) return std::nullopt;
  return DimEnv(meta->dims.begin(), meta->dims.end());
}

// The CPU features an artifact's manifest.json requires that `cpu` lacks
// ("" when it has them all). Corruption when the manifest is unreadable.
Expected<std::string> missing_features(const cache::Artifact& a, const CpuInfo& cpu) {
  auto it = a.files.find("manifest.json");
  if (it == a.files.end()) return Status::Corruption("entry " + a.info.key.substr(0, 16) + " has no manifest.json");
  json m = parse_json(it->second);
  if (!m.is_object() || !m.contains("requires") || !m["requires"].is_object() ||
      !m["requires"].contains("cpu_features") || !m["requires"]["cpu_features"].is_array())
    return Status::Corruption("entry " + a.info.key.substr(0, 16) + ": manifest.json: `requires.cpu_features` is not a list");
  std::string missing;
  for (const auto& f : m["requires"]["cpu_features"]) {
    if (!f.is_string())
      return Status::Corruption("entry " + a.info.key.substr(0, 16) + ": manifest.json: `requires.cpu_features` holds a non-string");
    if (!cpu.has(f.get<std::string>())) missing += (missing.empty() ? "" : ", ") + f.get<std::string>();
  }
  return missing;
}

// The statement an entry signature covers (cache/signatures.h).
Expected<std::string> statement_of(const cache::Artifact& a) {
  auto digests = cache::statement_digests(a.files);
  if (!digests.ok()) return digests.status();
  return cache::entry_statement(a.info.key, *digests, a.info.manifest.meta_json);
}

// "" when the entry's `mlk verify` report passes every level of `required`,
// else why not (cache/entry_meta.h).
std::string unverified(const cache::Artifact& a, const std::vector<std::string>& required,
                       const std::vector<std::string>& trusted) {
  if (required.empty()) return "";
  if (!trusted.empty()) {  // only a report a trusted key signed for this very entry counts
    auto st = statement_of(a);
    if (!st.ok()) return "entry " + a.info.key.substr(0, 16) + ": " + st.status().message();
    Status s = cache::check_report_signed("entry " + a.info.key.substr(0, 16), *st, a.info.manifest.meta_json, trusted);
    if (!s.ok()) return s.message();
  } else if (const std::string& origin = a.info.manifest.provenance.origin; origin != cache::kOriginLocal) {
    // Without keys, only a report a tune on this machine wrote is evidence
    // (issue 49, finding 11): one pulled from a server or imported is its writer's word.
    return "entry " + a.info.key.substr(0, 16) + " was not tuned on this machine (origin `" +
           (origin.empty() ? std::string("unrecorded") : origin) +
           "`), so its verification report is its writer's word; add signed:KEYS (the keys of the verifiers you "
           "trust) to accept a report they signed";
  }
  auto v = cache::parse_verified(a.info.manifest.meta_json.empty() ? "{}" : a.info.manifest.meta_json);
  if (!v.ok()) return v.status().message();
  Status s = cache::require_verified(a.info.key.substr(0, 16), *v, required);
  return s.ok() ? "" : s.message();
}

}  // namespace

// "" when the policy trusts no keys or a trusted key signed the entry for
// the namespace it came from (CliCache::signature_namespaces), else why not,
// naming the entry and its signer (if any).
std::string unsigned_reason(const cache::Artifact& a, const std::vector<std::string>& trusted,
                            client::CliCache& cc, std::string* signer) {
  if (trusted.empty()) return "";
  const cache::SignatureCheck want{cc.signature_namespaces(a.info)};
  const std::string what = "entry " + a.info.key.substr(0, 16);
  auto st = statement_of(a);
  if (!st.ok()) return what + ": " + st.status().message();
  cache::SignedBy by;
  Status s = cache::check_signed(what, *st, a.info.manifest.meta_json, trusted, want, &by);
  if (s.ok() && signer) *signer = by.key_id;
  return s.ok() ? "" : s.message();
}

Expected<Tuned> find_tuned(const FindTunedRequest& r) {
  client::CliCache* cache = r.cache;
  const std::string& ns = r.ns;
  const ir::Module& m = *r.module;
  const std::string& fn = r.fn;
  const std::string& fhash = r.fhash;
  const Profile& p = r.profile;
  const DimEnv& dims = r.dims;
  const Require require = r.require;
  const CpuInfo& cpu = r.cpu;
  if (!cache) return Status::NotFound("no artifact cache (--no-cache)");
  Tuned t;
  t.key = cache::cache_key(key_inputs(m, fn, dims, p));
  t.pulled = cache->pull(t.key);
  cache::Store* store = cache->store();
  if (!store) return Status::NotFound("no artifact cache at " + cache->store_path());
  auto hit = store->get_entry(ns, t.key);
  std::string skipped;
  if (hit.ok()) {
    std::string why = unsigned_reason(*hit, r.trusted, *cache, &t.signer);  // refused before anything is loaded
    if (why.empty()) why = unverified(*hit, r.verified, r.trusted);
    if (!why.empty()) {
      skipped = "; " + why;
      hit = Status::NotFound("");
    }
  }
  if (hit.ok()) {
    t.entry = std::move(*hit);
    t.tuned_dims = dims;
    t.exact = true;
    return t;
  }
  if (hit.status().code() != Status::Code::kNotFound) return hit.status();
  const std::string where = "namespace " + ns + " of " + cache->store_path() + (cache->remote() ? " or its server" : "");
  if (require == Require::kExact)
    return Status::NotFound("no artifact of `" + fn + "` tuned for " + p.name + " at exactly " + dims_str(dims) + " in " +
                            where + skipped);

  // Every entry of this fn and profile at another shape, local and remote.
  std::vector<Candidate> cands;
  std::set<std::string> seen;
  auto consider = [&](const cache::EntryInfo& e, bool remote) {
    if (e.damaged || seen.count(e.key)) return;
    auto td = tuned_shape(e, fn, p.name, fhash);
    if (!td) return;
    auto d = shape_distance(*td, dims);
    if (!d) return;
    seen.insert(e.key);
    cands.push_back({e.key, *td, *d, remote});
  };
  auto local = store->list(ns);
  if (!local.ok()) return local.status();
  for (const auto& e : *local) consider(e, false);
  for (const auto& e : cache->query(fn, p.name, fhash)) consider(e, true);
  std::sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
    return a.distance != b.distance ? a.distance < b.distance : a.key < b.key;
  });
  for (const Candidate& c : cands) {
    bool pulled = c.remote && cache->pull(c.key);
    auto e = store->get_entry(ns, c.key);
    if (!e.ok()) {
      if (e.status().code() == Status::Code::kNotFound) continue;  // the server lost it meanwhile
      return e.status();
    }
    // Under a signed policy the metadata the shape was chosen by counts only once signed.
    std::string signer;
    if (std::string why = unsigned_reason(*e, r.trusted, *cache, &signer); !why.empty()) {
      skipped += "; " + why;
      continue;
    }
    // The listing chose it by metadata a server answered; the entry read
    // (and, under a signed policy, checked) must say the same: this fn,
    // profile and program at that shape. Otherwise a writer could list a
    // signed kernel of another fn or of an older program under this one.
    if (auto own = tuned_shape(e->info, fn, p.name, fhash); !own || *own != c.dims) {
      skipped += "; " + c.key.substr(0, 16) + ": its stored metadata is not that of `" + fn + "` at " + dims_str(c.dims) +
                 " as listed";
      continue;
    }
    auto missing = missing_features(*e, cpu);
    if (!missing.ok()) return missing.status();
    if (!missing->empty()) {
      skipped += "; " + c.key.substr(0, 16) + " (tuned at " + dims_str(c.dims) + ") needs " + *missing;
      continue;
    }
    if (std::string why = unverified(*e, r.verified, r.trusted); !why.empty()) {
      skipped += "; " + why;
      continue;
    }
    t.key = c.key;
    t.signer = signer;
    t.entry = std::move(*e);
    t.tuned_dims = c.dims;
    t.pulled = pulled;
    return t;
  }
  return Status::NotFound("no artifact of `" + fn + "` tuned for " + p.name + " in " + where + skipped);
}

Expected<Resolution> resolve_executable(const ResolveRequest& r) {
  Resolution out;
  std::optional<Profile> cpu_profile;  // the first CPU profile that runs here
  for (const Profile& p : r.profiles) {
    Runnable rn = can_run(p, r.lookup.cpu, r.cuda);
    if (!rn.ok) {
      out.rejected.push_back(p.name + ": cannot run here: " + rn.reason);
      continue;
    }
    if (!p.is_gpu() && !cpu_profile) cpu_profile = p;
    FindTunedRequest lookup = r.lookup;
    lookup.profile = p;
    auto found = find_tuned(lookup);
    if (found.ok()) {
      out.tuned = std::move(found).value();
      out.profile = p;
      return out;
    }
    if (found.status().code() != Status::Code::kNotFound) return found.status();
    out.rejected.push_back(p.name + ": " + found.status().message());
  }
  out.no_cpu_profile = !cpu_profile;
  if (r.jit_fallback && cpu_profile) {
    out.jit = true;
    out.profile = *cpu_profile;
  }
  return out;
}

}  // namespace mlk::rt
