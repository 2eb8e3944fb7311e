// The content-addressed half of the API: PUT/GET/HEAD /v1/blobs/{sha256},
// PUT/GET/HEAD/DELETE /v1/entries/{key}, and the query GET /v1/entries.
#include <algorithm>
#include <set>
#include <ctime>
#include <nlohmann/json.hpp>

#include "base/log.h"
#include "cache/entry_meta.h"
#include "cache/manifest.h"
#include "cache/signatures.h"
#include "service/api_internal.h"
#include "service/http_range.h"
#include "base/json.h"

namespace mlk::service::detail {

using nlohmann::json;

namespace {

Status check_digest(const std::string& d) {
  if (cache::is_sha256_hex(d)) return Status::Ok();
  return Status::InvalidArgument("`" + d.substr(0, 80) + "` is not a sha256 digest (64 lower-case hex characters)");
}

int64_t now_unix() { return static_cast<int64_t>(std::time(nullptr)); }

// A read that found damaged data: it has been quarantined by the store, so
// it is a miss from now on; never serve the bytes.
ApiResponse damaged(Ctx& c, const std::string& kind, const Status& s) {
  c.api.metrics().verification_failure(c.ns, kind);
  c.api.metrics().miss(c.ns, kind);
  return error_response(404, "stored data failed verification and was quarantined (" + s.message() + "); treat as a miss");
}

json entry_json(const cache::EntryInfo& e) {
  return json{{"namespace", e.ns},
              {"key", e.key},
              {"size", e.size},
              {"pinned", e.pinned},
              {"created", e.created},
              {"last_used", e.last_used},
              {"manifest", json::parse(cache::manifest_to_json(e.manifest))}};
}

// The statement an entry signature covers (cache/signatures.h): the key, the
// manifest's file digests (manifest.json's without its attachments, read
// from its blob, which the caller has found visible) and the metadata.
Expected<std::string> entry_statement_of(Ctx& c, const std::string& key, const cache::Manifest& m) {
  std::map<std::string, std::string> digests;
  for (const auto& [name, ref] : m.files) {
    if (name != "manifest.json") {
      digests[name] = ref.digest;
      continue;
    }
    // The blob's own size, not the one the writer declared (review 7 of
    // issue 49: a manifest saying 1 byte had a 64 MiB blob read and parsed).
    auto size = c.store().blob_size(ref.digest);
    if (!size.ok()) return size.status();
    if (*size > (int64_t{4} << 20))
      return Status::InvalidArgument("its manifest.json (" + std::to_string(*size) +
                                     " bytes) is larger than a signature is checked over (4 MiB)");
    auto bytes = c.store().get_blob(ref.digest);
    if (!bytes.ok()) return bytes.status();
    auto d = cache::signed_manifest_digest(*bytes);
    if (!d.ok()) return Status::InvalidArgument("its manifest.json: " + d.status().message());
    digests[name] = *d;
  }
  return cache::entry_statement(key, digests, m.meta_json);
}

// How far ahead of the server's clock a signature's sequence (its signing
// time in ms) may be: a day, for clocks that disagree.
// Files one entry may list (an artifact has about ten): every read of the
// entry re-hashes each distinct blob of them.
constexpr size_t kMaxEntryFiles = 1024;
constexpr int64_t kSequenceAhead = int64_t{86400} * 1000;

// A signature's sequence against the floor of `key` and this server's
// clock: nullopt when it may be stored. `signed_by` says whose word it is
// ("signed by key K", "verified by key K").
std::optional<ApiResponse> sequence_gate(Ctx& c, const std::string& key, const std::string& signed_by, int64_t seq) {
  const std::string what = "entry " + key.substr(0, 16);
  auto floor = c.tables().signature_floor(c.ns, key);
  if (!floor.ok()) return reject(c, http_status(floor.status()), "store_error", floor.status().message());
  if (seq < *floor)
    return reject(c, 403, "stale_signature",
                  "namespace `" + c.ns + "`: " + what + " is " + signed_by + " at sequence " + std::to_string(seq) +
                      ", older than this key's entry here has been (sequence " + std::to_string(*floor) +
                      "): a replaced or withdrawn signed build is not stored again; sign it anew to store it");
  if (seq > cache::now_sequence() + kSequenceAhead)
    return reject(c, 403, "unsigned",
                  "namespace `" + c.ns + "`: " + what + " is " + signed_by + " at sequence " + std::to_string(seq) +
                      ", more than a day ahead of this server's clock (a sequence is the signing time in ms)");
  return std::nullopt;
}

// The signature gates of a signed namespace (trusted_signers: a signature
// for this namespace, no older than the floor of `key`) and of a release
// namespace (require_verified: the report must be signed by a trusted
// verifier for exactly this entry). nullopt when they pass; `seq` gets the
// sequence of the signature that counted (0 in an unsigned namespace).
std::optional<ApiResponse> signature_gates(Ctx& c, const std::string& key, const cache::Manifest& m, int64_t* seq) {
  const ApiOptions& o = c.api.options();
  auto signers = o.trusted_signers.find(c.ns);
  const bool release = o.require_verified.count(c.ns) > 0;
  if (signers == o.trusted_signers.end() && !release) return std::nullopt;
  const std::string what = "entry " + key.substr(0, 16);
  auto st = entry_statement_of(c, key, m);
  if (!st.ok()) {
    if (st.status().code() != Status::Code::kInvalidArgument)
      return reject(c, http_status(st.status()), "store_error", st.status().message());
    return reject(c, 403, "unsigned", what + ": " + st.status().message());
  }
  if (signers != o.trusted_signers.end()) {
    cache::SignedBy by;
    Status s = cache::check_signed(what, *st, m.meta_json, signers->second, cache::SignatureCheck{{c.ns}}, &by);
    if (!s.ok())
      return reject(c, 403, "unsigned",
                    "namespace `" + c.ns + "` accepts only entries signed by its trusted signers: " + s.message());
    if (auto r = sequence_gate(c, key, "signed by key " + by.key_id, by.seq)) return r;
    *seq = by.seq;
  }
  if (release) {
    auto v = o.trusted_verifiers.find(c.ns);
    const std::vector<std::string> none;
    const std::vector<std::string>& keys =
        v != o.trusted_verifiers.end() ? v->second : signers != o.trusted_signers.end() ? signers->second : none;
    std::string verifier;
    int64_t report_seq = 0;
    Status s = keys.empty() ? Status::InvalidArgument("no verifier key is trusted here (mlk serve --trusted-verifiers " +
                                                      c.ns + "=KEYS), so no report is evidence")
                            : cache::check_report_signed(what, *st, m.meta_json, keys, &verifier, &report_seq);
    if (!s.ok())
      return reject(c, 403, "unverified", "namespace `" + c.ns + "` accepts only verified entries: " + s.message());
    if (signers == o.trusted_signers.end()) {  // no entry signature: the report's sequence keeps the floor
      if (auto r = sequence_gate(c, key, "verified by key " + verifier, report_seq)) return r;
      *seq = report_seq;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiResponse> answer_memory_busy(Ctx& c, int64_t bytes) {
  if (!c.req.answer_fits || c.req.answer_fits(c.token.team, bytes)) return std::nullopt;
  ApiResponse busy = reject(c, 503, "answer_memory",
                            "the server holds as many answers in memory as it sends at once, or as many of this "
                            "client's as one client may have (`mlk serve --answer-memory`); try again shortly");
  busy.headers.push_back({"Retry-After", "1"});
  return busy;
}

ApiResponse get_blob(Ctx& c, const std::string& digest) {
  Status valid = check_digest(digest);
  if (!valid.ok()) return reject(c, 400, "bad_request", valid.message());
  if (auto r = authorize(c, kScopeRead)) return *r;
  auto visible = c.tables().blob_visible(c.ns, digest);
  if (!visible.ok()) return reject(c, http_status(visible.status()), "store_error", visible.status().message());
  if (!*visible) {
    c.api.metrics().miss(c.ns, "blob");
    return error_response(404, "no blob " + digest + " in namespace `" + c.ns + "`");
  }
  ApiResponse r;
  r.content_type = "application/octet-stream";
  const std::string etag = "\"" + digest + "\"";
  r.headers.push_back({"ETag", etag});
  auto miss = [&] {
    c.api.metrics().miss(c.ns, "blob");
    return error_response(404, "no blob " + digest + " in namespace `" + c.ns + "`");
  };
  // HEAD and a one-range GET read the blob's row and the range's bytes, not
  // the whole blob (issue 49, finding 8); a whole GET reads and re-hashes it.
  auto size = c.store().blob_size(digest);
  if (size.status().code() == Status::Code::kNotFound) return miss();
  if (!size.ok()) return reject(c, http_status(size.status()), "store_error", size.status().message());
  if (c.req.method == "HEAD") {
    c.api.metrics().hit(c.ns, "blob");
    r.head_length = *size;
    return r;
  }
  if (!c.req.range.empty()) {
    c.api.metrics().hit(c.ns, "blob");
    ByteRange range = parse_range(c.req.range, c.req.if_range, etag, static_cast<uint64_t>(*size));
    if (range.outcome == RangeOutcome::kMultiple) c.api.metrics().reject(c.ns, "ranges");
    if (range.outcome != RangeOutcome::kWhole) {
      std::string part;
      if (range.outcome == RangeOutcome::kPartial) {
        if (auto busy = answer_memory_busy(c, static_cast<int64_t>(range.end - range.start + 1))) return *busy;
        auto bytes = c.store().read_blob_range(digest, static_cast<int64_t>(range.start),
                                               static_cast<int64_t>(range.end - range.start + 1));
        if (bytes.status().code() == Status::Code::kNotFound) return miss();
        if (!bytes.ok()) return reject(c, http_status(bytes.status()), "store_error", bytes.status().message());
        part = std::move(*bytes);
        c.api.metrics().bytes_sent(c.ns, static_cast<int64_t>(part.size()));
      }
      answer_range(range, static_cast<uint64_t>(*size), std::move(part), r);
      return r;
    }
  }
  if (auto busy = answer_memory_busy(c, *size)) return *busy;
  auto bytes = c.store().get_blob(digest);
  if (bytes.status().code() == Status::Code::kCorruption) return damaged(c, "blob", bytes.status());
  if (bytes.status().code() == Status::Code::kNotFound) return miss();
  if (!bytes.ok()) return reject(c, http_status(bytes.status()), "store_error", bytes.status().message());
  if (c.req.range.empty()) c.api.metrics().hit(c.ns, "blob");
  c.api.metrics().bytes_sent(c.ns, static_cast<int64_t>(bytes->size()));
  r.body = std::move(*bytes);
  return r;
}

ApiResponse put_blob(Ctx& c, const std::string& digest) {
  Status valid = check_digest(digest);
  if (!valid.ok()) return reject(c, 400, "bad_request", valid.message());
  if (auto r = authorize(c, kScopeWriteBlobs)) return *r;
  Body b = c.body.read(c.api.options().max_body_bytes);
  if (b.outcome != Body::kOk) return body_rejection(c, b);
  if (b.sha256 != digest) {
    c.api.metrics().verification_failure(c.ns, "upload");
    return reject(c, 422, "hash_mismatch",
                  "the body (" + std::to_string(b.bytes.size()) + " bytes) hashes to " + b.sha256 + ", not to " + digest +
                      "; nothing was stored");
  }
  bool fresh = false;
  if (auto r = store_for_namespace(c, b, fresh)) return *r;
  int64_t size = static_cast<int64_t>(b.bytes.size());
  return json_text(fresh ? 201 : 200, json{{"digest", digest}, {"size", size}, {"new", fresh}}.dump());
}

std::optional<ApiResponse> store_for_namespace(Ctx& c, const Body& b, bool& fresh) {
  const std::string& digest = b.sha256;
  int64_t size = static_cast<int64_t>(b.bytes.size());
  NamespaceGuard guard;
  if (auto r = lock_namespace(c, guard)) return *r;
  int64_t now = now_unix();
  Status expired = c.tables().expire_staged(c.ns, now - c.api.options().staged_ttl_s);
  if (!expired.ok()) return reject(c, http_status(expired), "store_error", expired.message());
  auto referenced = c.tables().blob_referenced(c.ns, digest);
  if (!referenced.ok()) return reject(c, http_status(referenced.status()), "store_error", referenced.status().message());
  auto staged = c.tables().blob_staged(c.ns, digest);
  if (!staged.ok()) return reject(c, http_status(staged.status()), "store_error", staged.status().message());
  // Already charged to this namespace (by an entry or an earlier upload): no new charge.
  if (!*referenced && !*staged)
    if (auto r = check_quota(c, size, "", {})) return *r;
  auto put = c.store().put_blob(b.bytes);  // stores once per digest; heals a damaged copy
  if (!put.ok()) return reject(c, http_status(put.status()), "store_error", put.status().message());
  if (!*referenced) {
    Status s = c.tables().stage_blob(c.ns, digest, size, now);
    if (!s.ok()) return reject(c, http_status(s), "store_error", s.message());
  }
  c.api.metrics().bytes_received(c.ns, size);
  fresh = !*referenced && !*staged;
  return std::nullopt;
}

ApiResponse get_entry(Ctx& c, const std::string& key) {
  Status valid = validate_entry_key(key);
  if (!valid.ok()) return reject(c, 400, "bad_request", valid.message());
  if (auto r = authorize(c, kScopeRead)) return *r;
  auto a = c.store().show_entry(c.ns, key);  // re-hashes the record
  if (a.status().code() == Status::Code::kCorruption) return damaged(c, "entry", a.status());
  if (a.status().code() == Status::Code::kNotFound) {
    c.api.metrics().miss(c.ns, "entry");
    return error_response(404, "no entry `" + key + "` in namespace `" + c.ns + "`");
  }
  if (!a.ok()) return reject(c, http_status(a.status()), "store_error", a.status().message());
  // Every blob it names re-hashed, one at a time and each once (issue 49,
  // review 5: the store's get_entry held every file at once, and a manifest
  // may name one large blob many times), within the answer memory.
  std::set<std::string> hashed;
  for (const auto& [name, ref] : a->manifest.files) {
    if (!hashed.insert(ref.digest).second) continue;
    if (auto busy = answer_memory_busy(c, ref.size)) return *busy;
    auto blob = c.store().get_blob(ref.digest);
    Status bad = blob.ok() ? (static_cast<int64_t>(blob->size()) == ref.size
                                  ? Status::Ok()
                                  : Status::Corruption("entry " + key + ": file `" + name + "`: blob " + ref.digest +
                                                       " has another size than the manifest says"))
                           : blob.status();
    if (bad.code() == Status::Code::kCorruption || bad.code() == Status::Code::kNotFound) {
      (void)c.store().get_entry(c.ns, key);  // damaged: the store's full read quarantines the entry
      return damaged(c, "entry", Status::Corruption(bad.message()));
    }
    if (!bad.ok()) return reject(c, http_status(bad), "store_error", bad.message());
  }
  (void)c.store().touch_entry(c.ns, key);  // recency is best effort
  c.api.metrics().hit(c.ns, "entry");
  std::string text = entry_json(*a).dump();
  if (c.req.method == "GET") c.api.metrics().bytes_sent(c.ns, static_cast<int64_t>(text.size()));
  return json_text(200, std::move(text));
}

// Declared in api_internal.h.
void restage_dropped(Ctx& c, const cache::Manifest& old, const std::set<std::string>& kept) {
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  for (const auto& [name, ref] : old.files) {
    if (kept.count(ref.digest)) continue;
    auto size = c.store().blob_size(ref.digest);
    if (!size.ok()) continue;  // gone with its entry
    auto charged = c.tables().blob_visible(c.ns, ref.digest);
    if (charged.ok() && *charged) continue;  // another entry or an upload of the namespace holds it
    auto held = c.tables().blob_held(ref.digest);
    if (!held.ok() || *held) continue;  // an entry of another namespace holds (and is charged for) it
    if (Status st = c.tables().stage_blob(c.ns, ref.digest, *size, now); !st.ok())
      log_linef(LogLevel::kWarning, "mlk serve: %s (a dropped blob of namespace %s is not charged until collected)",
                st.message().c_str(), c.ns.c_str());
  }
}


ApiResponse put_entry(Ctx& c, const std::string& key) {
  Status valid = validate_entry_key(key);
  if (!valid.ok()) return reject(c, 400, "bad_request", valid.message());
  if (auto r = authorize(c, kScopeWriteEntries)) return *r;
  Body b = c.body.read(c.api.options().max_body_bytes);
  if (b.outcome != Body::kOk) return body_rejection(c, b);
  if (const int64_t cap = c.api.options().max_manifest_bytes; static_cast<int64_t>(b.bytes.size()) > cap)
    return reject(c, 413, "too_large",
                  "the manifest is " + std::to_string(b.bytes.size()) + " bytes; an entry's manifest (files, meta, "
                  "provenance) is at most " + std::to_string(cap) + " bytes here (`mlk serve --max-manifest`): keep "
                  "large data in files; nothing was stored");
  auto m = cache::manifest_from_json(b.bytes, kMaxBodyValues);  // bounded parse (review 7 of issue 49)
  if (!m.ok()) return reject(c, 400, "bad_request", "malformed manifest: " + m.status().message());
  Status ok = cache::validate_manifest(*m);
  if (!ok.ok()) return reject(c, 400, "bad_request", "invalid manifest: " + ok.message());
  if (m->files.size() > kMaxEntryFiles)
    return reject(c, 413, "too_large",
                  "the manifest lists " + std::to_string(m->files.size()) + " files; an entry has at most " +
                      std::to_string(kMaxEntryFiles) + " here; nothing was stored");
  if (auto gate = c.api.options().require_verified.find(c.ns); gate != c.api.options().require_verified.end()) {
    auto v = cache::parse_verified(m->meta_json.empty() ? "{}" : m->meta_json);
    Status pass = v.ok() ? cache::require_verified("entry " + key.substr(0, 16), *v, gate->second) : v.status();
    if (!pass.ok())
      return reject(c, 403, "unverified", "namespace `" + c.ns + "` accepts only verified entries: " + pass.message());
  }
  NamespaceGuard guard;
  if (auto r = lock_namespace(c, guard)) return *r;
  json missing = json::array();
  std::set<std::string> digests;
  int64_t size = 0;
  for (const auto& [name, ref] : m->files) {
    digests.insert(ref.digest);
    size += ref.size;
    auto visible = c.tables().blob_visible(c.ns, ref.digest);
    if (!visible.ok()) return reject(c, http_status(visible.status()), "store_error", visible.status().message());
    if (!*visible) missing.push_back(ref.digest);
  }
  if (!missing.empty()) {
    c.api.metrics().reject(c.ns, "missing_blobs");
    ApiResponse r = json_text(409, json{{"error", std::to_string(missing.size()) + " of the manifest's blobs are not in namespace `" +
                                                      c.ns + "`; PUT /v1/blobs/{sha256} them first"},
                                        {"missing", missing}}
                                       .dump());
    return r;
  }
  // After the blobs are known (a signature covers manifest.json's content).
  int64_t seq = 0;
  if (auto r = signature_gates(c, key, *m, &seq)) return *r;
  // A writer's word on where an entry came from is not kept (an origin of
  // kOriginLocal would let a signing tool on this store take it as made here).
  m->provenance.origin.clear();
  // The stored record is the canonical manifest: charged with the blobs.
  const int64_t record = static_cast<int64_t>(cache::manifest_to_json(*m).size());
  if (auto r = check_quota(c, size + record, key, digests)) return *r;
  if (seq > 0)  // the key's floor, raised first: no older signed build of it is stored again
    if (Status f = c.tables().raise_signature_floor(c.ns, key, seq); !f.ok())
      return reject(c, http_status(f), "store_error", f.message());
  auto before = c.store().show_entry(c.ns, key);  // what the put replaces, if anything
  Status put = c.store().put_entry(c.ns, key, *m);
  if (put.code() == Status::Code::kNotFound) return reject(c, 409, "missing_blobs", put.message());
  if (!put.ok()) return reject(c, http_status(put), put.code() == Status::Code::kInvalidArgument ? "bad_request" : "store_error", put.message());
  if (before.ok()) restage_dropped(c, before->manifest, digests);
  Status un = c.tables().unstage(c.ns, digests);
  if (!un.ok()) log_linef(LogLevel::kNote, "mlk serve: note: %s (the namespace stays charged for them until they expire)", un.message().c_str());
  c.api.metrics().bytes_received(c.ns, static_cast<int64_t>(b.bytes.size()));
  return json_text(201, json{{"namespace", c.ns}, {"key", key}, {"size", size}}.dump());
}

namespace {

// Before entry `key` of a signed (or release) namespace is deleted: its
// key's floor rises to now, or past both the floor and the sequence of the
// signature that counts for it now when that is later (the entry's, or in a release namespace with no
// signers its report's; verified, so no signature its writer added can
// move the floor), so the withdrawn build is not stored again, even should
// its signer's key be trusted again later. nullopt when done (or not signed).
std::optional<ApiResponse> withdraw_signed(Ctx& c, const std::string& key) {
  const ApiOptions& o = c.api.options();
  auto signers = o.trusted_signers.find(c.ns);
  auto verifiers = o.trusted_verifiers.find(c.ns);
  const bool release_only = signers == o.trusted_signers.end() && o.require_verified.count(c.ns) > 0;
  if (signers == o.trusted_signers.end() && !release_only) return std::nullopt;
  auto e = c.store().show_entry(c.ns, key);
  if (!e.ok()) return std::nullopt;  // nothing to withdraw: rm says so
  auto floor = c.tables().signature_floor(c.ns, key);
  if (!floor.ok()) return reject(c, http_status(floor.status()), "store_error", floor.status().message());
  int64_t seq = *floor;
  if (auto st = entry_statement_of(c, key, e->manifest); st.ok()) {
    cache::SignedBy by;
    int64_t report_seq = 0;
    // A version-1 signature (re-signed, it is sequence 1) counts as 1 here;
    // in a release namespace without signers, the trusted report's sequence.
    if (!release_only && cache::check_signed("entry", *st, e->manifest.meta_json, signers->second,
                                             cache::SignatureCheck{{c.ns}, true}, &by).ok())
      seq = std::max(seq, by.v1 ? int64_t{1} : by.seq);
    if (release_only && verifiers != o.trusted_verifiers.end() &&
        cache::check_report_signed("entry", *st, e->manifest.meta_json, verifiers->second, nullptr, &report_seq).ok())
      seq = std::max(seq, report_seq);
  }
  // And past now: a spare signature of the same build, made before the
  // withdrawal but after the stored one, does not bring it back either.
  if (Status f = c.tables().raise_signature_floor(c.ns, key, std::max(seq + 1, cache::now_sequence())); !f.ok())
    return reject(c, http_status(f), "store_error", f.message());
  return std::nullopt;
}

}  // namespace

ApiResponse delete_entry(Ctx& c, const std::string& key) {
  Status valid = validate_entry_key(key);
  if (!valid.ok()) return reject(c, 400, "bad_request", valid.message());
  if (auto r = authorize(c, kScopeWriteEntries)) return *r;
  NamespaceGuard guard;
  if (auto r = lock_namespace(c, guard)) return *r;
  // A signed namespace remembers a withdrawn build (before it goes: a failure keeps the entry).
  if (auto r = withdraw_signed(c, key)) return *r;
  auto before = c.store().show_entry(c.ns, key);
  Status s = c.store().rm(c.ns, key);
  if (s.code() == Status::Code::kNotFound) return error_response(404, "no entry `" + key + "` in namespace `" + c.ns + "`");
  if (!s.ok()) return reject(c, http_status(s), "store_error", s.message());
  if (before.ok()) restage_dropped(c, before->manifest, {});
  return json_text(200, json{{"deleted", key}, {"namespace", c.ns}}.dump());
}

namespace {

// The `next` of a truncated query: where list_page goes on (a row id).
std::string cursor_text(const cache::ListCursor& k) { return std::to_string(k.id); }

std::optional<cache::ListCursor> parse_cursor(const std::string& text) {
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return cache::ListCursor{std::stoll(text)};
}

// Entries one query reads at most, matching or not: past it the answer is
// `truncated`, so that a filter nothing matches costs a bounded amount of work.
constexpr int64_t kMaxScanned = 10000;
// ... and bytes of metadata: kScannedPerAnswerByte (api_internal.h).

}  // namespace

// The namespace is read a page at a time and the answer stops at `limit`
// entries, max_answer_bytes, kMaxScanned entries read or
// kScannedPerAnswerByte * max_answer_bytes of metadata read, whichever comes
// first: a namespace of any size costs one page of manifests at a time, a
// bounded answer and a bounded amount of work.
ApiResponse query_entries(Ctx& c) {
  static const std::set<std::string> kParams = {"namespace", "fn", "target", "profile", "program_hash", "producer", "limit", "after"};
  for (const auto& [k, v] : c.req.query)
    if (!kParams.count(k))
      return reject(c, 400, "bad_request",
                    "unknown query parameter `" + k.substr(0, 40) + "`; accepted: fn, target (or profile), program_hash, producer, limit, after, namespace");
  if (c.req.query.count("target") && c.req.query.count("profile"))
    return reject(c, 400, "bad_request", "give `target` or `profile` (the same thing), not both");
  int64_t limit = 100;
  if (auto it = c.req.query.find("limit"); it != c.req.query.end()) {
    const std::string& v = it->second;
    bool digits = !v.empty() && v.size() <= 6 && v.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || std::stoll(v) < 1 || std::stoll(v) > 1000)
      return reject(c, 400, "bad_request", "limit must be a whole number from 1 to 1000, got `" + v.substr(0, 20) + "`");
    limit = std::stoll(v);
  }
  std::optional<cache::ListCursor> after;
  if (auto it = c.req.query.find("after"); it != c.req.query.end()) {
    after = parse_cursor(it->second);
    if (!after) return reject(c, 400, "bad_request", "after `" + it->second.substr(0, 40) + "` is not a `next` this server gave");
  }
  if (auto r = authorize(c, kScopeRead)) return *r;
  auto want = [&](const char* name) -> const std::string* {
    auto it = c.req.query.find(name);
    return it == c.req.query.end() ? nullptr : &it->second;
  };
  const std::string* target = want("target") ? want("target") : want("profile");
  std::string rows = "[";
  int64_t count = 0, scanned = 0, scanned_bytes = 0;
  bool truncated = false;
  std::optional<cache::ListCursor> next, last_held;
  const int64_t cap = c.api.options().max_answer_bytes;
  while (!truncated) {
    auto page = c.store().list_page(c.ns, after, 16);
    if (!page.ok()) return reject(c, http_status(page.status()), "store_error", page.status().message());
    for (size_t i = 0; i < page->entries.size() && !truncated; ++i) {
      const cache::EntryInfo& e = page->entries[i];
      if (++scanned > kMaxScanned || (scanned > 1 && scanned_bytes > kScannedPerAnswerByte * cap)) {
        truncated = true;
        break;
      }
      // The whole stored manifest is hashed and parsed, not just its meta
      // (provenance strings and maps, file names: review 13).
      scanned_bytes += std::max<int64_t>({e.record_bytes, static_cast<int64_t>(e.manifest.meta_json.size()), 64});
      next = e.at;  // read: a truncated answer goes on after it
      if (e.damaged) continue;
      json meta = parse_json(e.manifest.meta_json);
      if (!meta.is_object()) continue;
      auto field = [&](const char* f) { return meta.contains(f) && meta[f].is_string() ? meta[f].get<std::string>() : std::string(); };
      if (const std::string* fn = want("fn"); fn && field("fn") != *fn) continue;
      if (target && field("target") != *target) continue;
      if (const std::string* h = want("program_hash"); h && field("program_hash") != *h) continue;
      if (const std::string* p = want("producer"); p && e.manifest.provenance.producer != *p) continue;
      std::string row = entry_json(e).dump();
      if (count == limit || (count > 0 && static_cast<int64_t>(rows.size() + row.size()) > cap)) {
        truncated = true;
        next = last_held;  // this one is not in the answer: go on after the one before it
        break;
      }
      rows += (count++ ? "," : "") + row;
      last_held = e.at;
    }
    if (truncated || !page->next) break;
    after = page->next;
  }
  rows += "]";
  json out = {{"namespace", c.ns}, {"truncated", truncated}};
  std::string text = out.dump();
  text.pop_back();  // the closing brace: the entries are spliced in as already-serialised text
  text += ",\"entries\":" + rows;
  if (truncated && next) text += ",\"next\":" + json(cursor_text(*next)).dump();
  return json_text(200, text + "}");
}

}  // namespace mlk::service::detail
