// The routes of measurement jobs and workers (service/jobs.h, docs/api.md,
// "Jobs"), with the same tokens and namespaces (?namespace=NS) as the rest:
//   POST /v1/jobs/setups          a measurement setup (body: its bytes) -> {"setup": sha256}   write-entries
//   POST /v1/jobs/submit          {"device_key", "setup", "payload": {...}, "fingerprint"?} -> {"id"}   write-entries
//   GET  /v1/jobs/ID              the job, its state and result                            read
//   POST /v1/jobs/ID/cancel       {"why"}: a job not finished is failed                    write-entries
//   GET  /v1/jobs/workers?device_key=K&seen_s=N   workers seen in the last N s (default 60)   read
//   POST /v1/jobs/workers         {"device_key", "name", "fingerprint"} -> {"worker": {..., "secret"}}   worker
//   POST /v1/jobs/lease           {"worker", "secret", "lease_s"} -> {"job": {...} or null}   worker
//   POST /v1/jobs/ID/heartbeat    {"worker", "secret", "lease_s"}: 409 when the lease is not held   worker
//   POST /v1/jobs/ID/result       {"worker", "secret", "ok", "result": {...}}: 409 likewise   worker
//   GET  /v1/jobs/ID/setup        the setup blob of the job                                read
//
// A setup is a blob of the submitter's namespace: stored, staged and charged
// to its quota like PUT /v1/blobs, and a job may name only a setup its
// namespace can read. A worker's secret is handed out once, at registration;
// lease, heartbeat and result must present it, with the token that
// registered the worker.
#include <algorithm>
#include <openssl/crypto.h>

#include <cctype>
#include <chrono>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>

#include "base/sha256.h"
#include "cache/signatures.h"
#include "base/escape.h"
#include "service/api_internal.h"
#include "base/json.h"

namespace mlk::service::detail {

namespace {

using nlohmann::json;

constexpr size_t kMaxPayload = size_t{64} << 10;  // a schedule and its limits
constexpr size_t kMaxResult = size_t{1} << 20;   // a measurement
constexpr std::string_view kSetupMagic = "mlk-measure-setup ";
// A GPU job's blob: one candidate built by the tuner (artifact/candidate_set.h).
constexpr std::string_view kPackMagic = "mlk-candidate-pack ";

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool name_chars(const std::string& s, size_t max, const char* extra) {
  if (s.empty() || s.size() > max) return false;
  for (char ch : s)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || std::strchr(extra, ch))) return false;
  return true;
}

bool is_digest(const std::string& s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

json job_json(const JobInfo& j) {
  json payload = parse_json(j.spec.payload);
  json result = j.result.empty() ? json(nullptr) : parse_json(j.result);
  return {{"id", j.id},
          {"device_key", j.spec.device_key},
          {"fingerprint", j.spec.fingerprint},
          {"setup", j.spec.setup},
          {"payload", payload},
          {"state", j.state},
          {"worker", j.worker},
          {"worker_name", j.worker_name},
          {"worker_fingerprint", j.worker_fingerprint},
          {"lease_until_ms", j.lease_until_ms},
          {"attempts", j.attempts},
          {"result", result},
          {"created_ms", j.created_ms},
          {"finished_ms", j.finished_ms}};
}

json worker_json(const WorkerInfo& w) {
  return {{"id", w.id},           {"device_key", w.device_key},       {"name", w.name},
          {"fingerprint", w.fingerprint}, {"registered_ms", w.registered_ms}, {"heartbeat_ms", w.heartbeat_ms}};
}

ApiResponse store_error(Ctx& c, const Status& s) { return reject(c, http_status(s), "store_error", s.message()); }

// The request body as a JSON object, or the rejection.
std::optional<ApiResponse> json_body(Ctx& c, json& out) {
  Body b = c.body.read(static_cast<int64_t>(kMaxResult) * 2);
  if (b.outcome != Body::kOk) return body_rejection(c, b);
  std::string why;
  out = parse_json(b.bytes, &why, kMaxJsonDepth, kMaxBodyValues);  // bounded parse (review 7 of issue 49)
  if (out.is_discarded())
    return reject(c, 400, "bad_job", "the body of " + c.req.method + " " + c.req.path + " is not valid JSON (" + why + ")");
  if (!out.is_object())
    return reject(c, 400, "bad_job", "the body of " + c.req.method + " " + c.req.path + " must be a JSON object");
  return std::nullopt;
}

// A field of a JSON body: the rejection when it is missing or of another type.
template <typename T>
std::optional<ApiResponse> field(Ctx& c, const json& body, const char* name, T& out, bool required = true) {
  if (!body.contains(name)) {
    if (!required) return std::nullopt;
    return reject(c, 400, "bad_job", std::string("the body lacks the field `") + name + "`");
  }
  try {
    out = body[name].get<T>();
  } catch (const json::exception&) {
    return reject(c, 400, "bad_job", std::string("the field `") + name + "` has the wrong type");
  }
  return std::nullopt;
}

std::optional<ApiResponse> check_key(Ctx& c, const std::string& key) {
  if (name_chars(key, 64, "._-")) return std::nullopt;
  return reject(c, 400, "bad_job", "device key `" + key.substr(0, 80) + "` is not 1-64 of [A-Za-z0-9._-]");
}

std::optional<ApiResponse> lease_ms_of(Ctx& c, const json& body, int64_t& ms) {
  double s = 30;
  if (auto r = field(c, body, "lease_s", s, false)) return r;
  if (!(s >= 0.2 && s <= 3600)) return reject(c, 400, "bad_job", "lease_s " + std::to_string(s) + " is not 0.2-3600");
  ms = static_cast<int64_t>(s * 1000);
  return std::nullopt;
}

// Equality of two digests in constant time (OpenSSL's CRYPTO_memcmp); an
// empty one (a worker row of an older server) matches nothing.
bool same_digest(const std::string& a, const std::string& b) {
  return !a.empty() && a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

// The worker of body["worker"], which must be one of this namespace,
// registered by this token, and named with its secret (body["secret"]).
std::optional<ApiResponse> worker_of(Ctx& c, const json& body, WorkerInfo& w) {
  int64_t id = 0;
  if (auto r = field(c, body, "worker", id)) return r;
  std::string secret;
  if (auto r = field(c, body, "secret", secret)) return r;
  auto found = c.jobs().find_worker(c.ns, id);
  if (!found.ok()) return reject(c, http_status(found.status()), "bad_job", found.status().message());
  if (found->token_id != c.token.id)
    return reject(c, 403, "worker_token",
                  "worker " + std::to_string(id) + " was registered by another token; only that token may act for it");
  if (!same_digest(sha256_hex(secret), found->secret_sha256))
    return reject(c, 403, "worker_secret",
                  "the secret does not match worker " + std::to_string(id) +
                      "'s (the one POST /v1/jobs/workers answered; a restarted worker registers anew)");
  w = *found;
  return std::nullopt;
}

ApiResponse put_setup(Ctx& c) {
  if (auto r = authorize(c, kScopeWriteEntries)) return *r;
  Body b = c.body.read(c.api.options().max_body_bytes);
  if (b.outcome != Body::kOk) return body_rejection(c, b);
  if (b.bytes.compare(0, kSetupMagic.size(), kSetupMagic) != 0 && b.bytes.compare(0, kPackMagic.size(), kPackMagic) != 0)
    return reject(c, 400, "bad_job",
                  "the body is not a measurement setup (it does not start with `mlk-measure-setup` or, for built "
                  "candidates, `mlk-candidate-pack`)");
  bool fresh = false;
  if (auto r = store_for_namespace(c, b, fresh)) return *r;
  return json_text(fresh ? 201 : 200, json{{"setup", b.sha256}}.dump());
}

Status pack_gate(Ctx& c, const std::string& setup, const std::string& payload);  // below
constexpr int kMaxWorkersListed = 1000;  // GET /v1/jobs/workers

ApiResponse submit(Ctx& c) {
  if (auto r = authorize(c, kScopeWriteEntries)) return *r;
  json body;
  if (auto r = json_body(c, body)) return *r;
  JobSpec j;
  j.ns = c.ns;
  if (auto r = field(c, body, "device_key", j.device_key)) return *r;
  if (auto r = check_key(c, j.device_key)) return *r;
  if (auto r = field(c, body, "setup", j.setup)) return *r;
  if (!is_digest(j.setup)) return reject(c, 400, "bad_job", "setup `" + j.setup.substr(0, 80) + "` is not a sha256 (64 hex digits)");
  if (auto r = field(c, body, "fingerprint", j.fingerprint, false)) return *r;
  if (j.fingerprint.size() > 4096) return reject(c, 400, "bad_job", "the fingerprint is longer than 4096 characters");
  if (!body.contains("payload") || !body["payload"].is_object())
    return reject(c, 400, "bad_job", "the body lacks the object `payload` (the candidate to measure)");
  j.payload = body["payload"].dump();
  if (j.payload.size() > kMaxPayload) return reject(c, 413, "too_large", "the payload is larger than 64 KiB");
  // A signed namespace's workers run only native code its signers vouched
  // for (issue 49, finding 5): a candidate pack must carry a signature by one
  // of them for this namespace over the setup's digest.
  // (A worker runs a pack only for "kind": "candidates" and refuses kinds it does not know.)
  if (Status s = pack_gate(c, j.setup, j.payload); !s.ok()) return reject(c, 403, "unsigned", s.message());
  // Only a setup this namespace may read: a digest alone does not make
  // another team's blob readable through GET /v1/jobs/ID/setup.
  auto visible = c.tables().blob_visible(c.ns, j.setup);
  if (!visible.ok()) return store_error(c, visible.status());
  if (!*visible)
    return reject(c, 400, "bad_job",
                  "setup " + j.setup.substr(0, 16) + " is not in namespace `" + c.ns +
                      "` (POST it to /v1/jobs/setups first)");
  // The setup is staged, so charged to this namespace, while the job holds
  // it (review 7 of issue 49: a setup an entry referenced stayed stored,
  // charged to no one, once the entry was deleted under a queued job).
  NamespaceGuard guard;
  if (auto r = lock_namespace(c, guard)) return *r;
  auto staged = c.tables().blob_staged(c.ns, j.setup);
  if (!staged.ok()) return store_error(c, staged.status());
  if (!*staged) {
    auto size = c.store().blob_size(j.setup);
    if (!size.ok()) return store_error(c, size.status());
    if (auto r = check_quota(c, *size, "", {})) return *r;
    if (Status s = c.tables().stage_blob(c.ns, j.setup, *size, static_cast<int64_t>(std::time(nullptr))); !s.ok()) return store_error(c, s);
  }
  auto open = c.jobs().open_jobs(c.ns);
  if (!open.ok()) return store_error(c, open.status());
  if (*open >= c.api.options().max_open_jobs)
    return reject(c, 507, "quota",
                  "namespace `" + c.ns + "` has " + std::to_string(*open) + " unfinished jobs, as many as this server takes (" +
                      std::to_string(c.api.options().max_open_jobs) + "); wait for some, or cancel them");
  // What a namespace's jobs hold stays bounded (the fourth review): its
  // oldest finished jobs go as new ones come.
  if (Status f = c.jobs().forget_finished(c.ns, c.api.options().max_finished_jobs - 1); !f.ok()) return store_error(c, f);
  auto id = c.jobs().submit(j, now_ms());
  if (!id.ok()) return store_error(c, id.status());
  return json_text(201, json{{"id", *id}}.dump());
}

ApiResponse workers_route(Ctx& c) {
  if (c.req.method != "POST") {
    if (auto r = authorize(c, kScopeRead)) return *r;
    auto it = c.req.query.find("device_key");
    std::string key = it == c.req.query.end() ? "" : it->second;
    if (!key.empty())
      if (auto r = check_key(c, key)) return *r;
    int64_t seen_s = 60;
    if (auto s = c.req.query.find("seen_s"); s != c.req.query.end()) {
      char* end = nullptr;
      seen_s = std::strtoll(s->second.c_str(), &end, 10);
      if (*end || seen_s < 1 || seen_s > 86400 * 365) return reject(c, 400, "bad_query", "seen_s `" + s->second + "` is not 1-31536000");
    }
    // At most kMaxWorkersListed, the ones registered last (review 5 of
    // issue 49: registrations are not capped, and the whole list was held).
    auto ws = c.jobs().workers(c.ns, key, now_ms() - seen_s * 1000, kMaxWorkersListed + 1);
    if (!ws.ok()) return store_error(c, ws.status());
    const bool truncated = ws->size() > static_cast<size_t>(kMaxWorkersListed);
    json out = json::array();
    for (size_t i = truncated ? 1 : 0; i < ws->size(); ++i) out.push_back(worker_json((*ws)[i]));
    return json_text(200, json{{"workers", std::move(out)}, {"truncated", truncated}}.dump());
  }
  if (auto r = authorize(c, kScopeWorker)) return *r;
  json body;
  if (auto r = json_body(c, body)) return *r;
  std::string key, name, fp;
  if (auto r = field(c, body, "device_key", key)) return *r;
  if (auto r = check_key(c, key)) return *r;
  if (auto r = field(c, body, "name", name)) return *r;
  if (!name_chars(name, 128, "._:@-")) return reject(c, 400, "bad_job", "worker name `" + name.substr(0, 80) + "` is not 1-128 of [A-Za-z0-9._:@-]");
  if (auto r = field(c, body, "fingerprint", fp)) return *r;
  if (fp.empty() || fp.size() > 4096 || has_control_char(fp))
    return reject(c, 400, "bad_job", "the fingerprint must be 1-4096 characters, none a control character");
  auto secret = random_secret();
  if (!secret.ok()) return store_error(c, secret.status());
  WorkerInfo info;
  info.ns = c.ns;
  info.device_key = key;
  info.name = name;
  info.fingerprint = fp;
  info.token_id = c.token.id;
  info.secret_sha256 = sha256_hex(*secret);
  auto w = c.jobs().register_worker(info, now_ms());
  if (!w.ok()) return store_error(c, w.status());
  json out = worker_json(*w);
  out["secret"] = *secret;  // shown once; the server keeps its sha256
  return json_text(201, json{{"worker", out}}.dump());
}

// A signed namespace's gate on a job of built artifacts (a payload of
// "kind": "candidates"): a pack signature by one of its signers, for it,
// over the setup. OK for other jobs and unsigned namespaces.
Status pack_gate(Ctx& c, const std::string& setup, const std::string& payload) {
  auto signers = c.api.options().trusted_signers.find(c.ns);
  if (signers == c.api.options().trusted_signers.end()) return Status::Ok();
  const json p = parse_json(payload);
  if (!p.is_object() || p.value("kind", json()) != json("candidates")) return Status::Ok();
  Status s = cache::check_pack_signed(setup, payload, signers->second, {c.ns});
  return s.ok() ? s
                : Status::InvalidArgument("namespace `" + c.ns +
                                          "` runs only candidate packs signed by its trusted signers: " + s.message());
}

ApiResponse lease(Ctx& c) {
  if (auto r = authorize(c, kScopeWorker)) return *r;
  json body;
  if (auto r = json_body(c, body)) return *r;
  WorkerInfo w;
  if (auto r = worker_of(c, body, w)) return *r;
  int64_t ms = 0;
  if (auto r = lease_ms_of(c, body, ms)) return *r;
  // The pack gate again (review 5 of issue 49): a job queued before the
  // namespace was signed, or signed by a key since removed, fails here.
  for (int tries = 0; tries < 16; ++tries) {
    auto j = c.jobs().lease(c.ns, w, ms, now_ms());
    if (!j.ok()) return store_error(c, j.status());
    if (!*j) break;
    if (Status s = pack_gate(c, (**j).spec.setup, (**j).spec.payload); !s.ok()) {
      auto failed = c.jobs().cancel(c.ns, (**j).id, dump_json(json{{"error", s.message().substr(0, 1000)}}), now_ms());
      if (!failed.ok()) return store_error(c, failed.status());
      if (Status f = c.jobs().forget_finished(c.ns, c.api.options().max_finished_jobs); !f.ok()) return store_error(c, f);
      continue;
    }
    return json_text(200, json{{"job", job_json(**j)}}.dump());
  }
  return json_text(200, json{{"job", nullptr}}.dump());
}

// /v1/jobs/ID[/heartbeat|/result|/setup|/cancel].
ApiResponse one_job(Ctx& c, int64_t id, const std::string& what) {
  const bool read = c.req.method != "POST";
  if ((what.empty() || what == "setup") != read) return method_not_allowed(c, read ? "POST" : "GET, HEAD");
  if (what != "" && what != "setup" && what != "heartbeat" && what != "result" && what != "cancel")
    return reject(c, 404, "no_route", "no route " + c.req.path.substr(0, 100) + " (ID, ID/heartbeat, ID/result, ID/setup, ID/cancel)");
  Scopes need = read ? kScopeRead : what == "cancel" ? kScopeWriteEntries : kScopeWorker;
  if (auto r = authorize(c, need)) return *r;
  if (read) {
    auto j = c.jobs().get(c.ns, id, now_ms());
    if (!j.ok()) return store_error(c, j.status());
    if (what.empty()) return json_text(200, job_json(*j).dump());
    auto size = c.store().blob_size(j->spec.setup);  // bounded before it is read (--answer-memory)
    if (!size.ok()) return store_error(c, size.status());
    if (auto busy = answer_memory_busy(c, *size)) return *busy;
    auto bytes = c.store().get_blob(j->spec.setup);
    if (!bytes.ok()) return store_error(c, bytes.status());
    ApiResponse r;
    r.body = std::move(*bytes);
    r.content_type = "application/octet-stream";
    return r;
  }
  json body;
  if (auto r = json_body(c, body)) return *r;
  if (auto j = c.jobs().get(c.ns, id, now_ms()); !j.ok()) return store_error(c, j.status());  // 404: not a job of c.ns
  if (what == "cancel") {
    std::string why = "cancelled";
    if (auto r = field(c, body, "why", why, false)) return *r;
    auto done = c.jobs().cancel(c.ns, id, dump_json(json{{"error", why.substr(0, 1000)}}), now_ms());
    if (!done.ok()) return store_error(c, done.status());
    if (Status f = c.jobs().forget_finished(c.ns, c.api.options().max_finished_jobs); !f.ok()) return store_error(c, f);
    return json_text(200, json{{"cancelled", *done}}.dump());
  }
  WorkerInfo w;
  if (auto r = worker_of(c, body, w)) return *r;
  Expected<bool> held = false;
  if (what == "heartbeat") {
    int64_t ms = 0;
    if (auto r = lease_ms_of(c, body, ms)) return *r;
    held = c.jobs().extend(c.ns, id, w.id, ms, now_ms());
  } else {
    bool ok = false;
    if (auto r = field(c, body, "ok", ok)) return *r;
    if (!body.contains("result") || !body["result"].is_object())
      return reject(c, 400, "bad_job", "the body lacks the object `result` (the measurement)");
    std::string result = body["result"].dump();
    if (result.size() > kMaxResult) return reject(c, 413, "too_large", "the result is larger than 1 MiB");
    held = c.jobs().finish(c.ns, id, w.id, ok, result, now_ms());
    // A finished job's result may be 1 MiB: the namespace keeps only its
    // newest max_finished_jobs finished jobs, trimmed as each one finishes
    // (at submit alone, 10,000 open jobs could all finish and stay).
    if (held.ok() && *held)
      if (Status f = c.jobs().forget_finished(c.ns, c.api.options().max_finished_jobs); !f.ok()) return store_error(c, f);
  }
  if (!held.ok()) return store_error(c, held.status());
  if (!*held)
    return reject(c, 409, "lease_lost",
                  "worker " + std::to_string(w.id) + " does not hold the lease of job " + std::to_string(id) +
                      " (it expired and the job went back to the queue, or the job finished)");
  return json_text(200, R"({"ok":true})");
}

}  // namespace

ApiResponse jobs_route(Ctx& c, const std::string& arg) {
  const bool post = c.req.method == "POST";
  if (arg == "setups" || arg == "submit" || arg == "lease") {
    if (!post) return method_not_allowed(c, "POST");
    return arg == "setups" ? put_setup(c) : arg == "submit" ? submit(c) : lease(c);
  }
  if (arg == "workers") return workers_route(c);
  size_t slash = arg.find('/');
  std::string id_text = arg.substr(0, slash);
  std::string what = slash == std::string::npos ? "" : arg.substr(slash + 1);
  if (id_text.empty() || id_text.size() > 18 || id_text.find_first_not_of("0123456789") != std::string::npos)
    return reject(c, 404, "no_route",
                  "no route " + c.req.method + " " + c.req.path.substr(0, 100) +
                      " (setups, submit, lease, workers, ID, ID/heartbeat, ID/result, ID/setup, ID/cancel; docs/api.md)");
  return one_job(c, std::stoll(id_text), what);
}

}  // namespace mlk::service::detail
