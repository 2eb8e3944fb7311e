// ccache's HTTP remote-storage protocol under /ccache/ (ccache_layout.h): one
// object per ccache key, stored as an entry with one file in the namespace of
// the token. ccache treats every non-2xx GET as a miss, so what the server
// says loudly here (401/403 bodies, rejects in /metrics) is for people.
#include <ctime>
#include <nlohmann/json.hpp>

#include "cache/manifest.h"
#include "service/api_internal.h"
#include "service/ccache_layout.h"

namespace mlk::service::detail {

using nlohmann::json;

ApiResponse ccache_get(Ctx& c, const std::string& rest) {
  auto key = ccache_store_key(rest);
  if (!key.ok()) return reject(c, 400, "bad_request", key.status().message());
  if (auto r = authorize(c, kScopeRead)) return *r;
  if (auto shown = c.store().show_entry(c.ns, *key); shown.ok())  // bounded before it is read (--answer-memory)
    if (auto busy = answer_memory_busy(c, shown->size)) return *busy;
  auto a = c.store().get_entry(c.ns, *key);
  if (a.status().code() == Status::Code::kCorruption) {
    c.api.metrics().verification_failure(c.ns, "ccache");
    c.api.metrics().miss(c.ns, "ccache");
    return error_response(404, "stored object failed verification and was quarantined; treat as a miss");
  }
  auto miss = [&] {
    c.api.metrics().miss(c.ns, "ccache");
    return error_response(404, "no ccache object `" + rest + "` in namespace `" + c.ns + "`");
  };
  if (a.status().code() == Status::Code::kNotFound) return miss();
  if (!a.ok()) return reject(c, http_status(a.status()), "store_error", a.status().message());
  auto file = a->files.find(kCcacheFile);
  if (file == a->files.end()) return miss();
  c.api.metrics().hit(c.ns, "ccache");
  ApiResponse r;
  r.content_type = "application/octet-stream";
  r.body = std::move(file->second);
  if (c.req.method == "GET") c.api.metrics().bytes_sent(c.ns, static_cast<int64_t>(r.body.size()));
  return r;
}

ApiResponse ccache_put(Ctx& c, const std::string& rest) {
  auto key = ccache_store_key(rest);
  if (!key.ok()) return reject(c, 400, "bad_request", key.status().message());
  if (auto r = authorize(c, kScopeWriteBlobs | kScopeWriteEntries)) return *r;
  // A ccache object carries no signature or report: it would bypass the
  // gates of a signed or release namespace.
  if (c.api.options().trusted_signers.count(c.ns) || c.api.options().require_verified.count(c.ns))
    return reject(c, 403, "unsigned",
                  "namespace `" + c.ns + "` accepts only signed or verified entries, which a ccache object cannot be; "
                  "use another namespace for ccache");
  Body b = c.body.read(c.api.options().max_body_bytes);
  if (b.outcome != Body::kOk) return body_rejection(c, b);
  int64_t size = static_cast<int64_t>(b.bytes.size());
  NamespaceGuard guard;
  if (auto r = lock_namespace(c, guard)) return *r;
  cache::Manifest m;  // as the store will record it, so that its manifest is charged exactly
  m.files[kCcacheFile] = cache::BlobRef{b.sha256, size};
  m.meta_json = json{{"ccache_path", rest}}.dump();
  m.provenance.producer = "ccache";
  m.provenance.host = "mlk serve";
  m.provenance.time = static_cast<int64_t>(std::time(nullptr));
  const int64_t record = static_cast<int64_t>(cache::manifest_to_json(m).size());
  if (auto r = check_quota(c, size + record, *key, {})) return *r;
  auto before = c.store().show_entry(c.ns, *key);  // what the put replaces, if anything
  // The blob and the entry: one transaction on SQLite; on PostgreSQL + S3
  // the blob is stored first, so a failed put may leave it, charged below.
  Status s = c.store().put_entry(c.ns, *key, m.meta_json, m.provenance, {{kCcacheFile, b.bytes}});
  if (!s.ok()) {
    restage_dropped(c, m, {});
    return reject(c, http_status(s), "store_error", s.message());
  }
  if (before.ok()) restage_dropped(c, before->manifest, {b.sha256});
  c.api.metrics().bytes_received(c.ns, size);
  return json_text(201, json{{"namespace", c.ns}, {"key", *key}, {"size", size}}.dump());
}

ApiResponse ccache_delete(Ctx& c, const std::string& rest) {
  auto key = ccache_store_key(rest);
  if (!key.ok()) return reject(c, 400, "bad_request", key.status().message());
  if (auto r = authorize(c, kScopeWriteEntries)) return *r;
  NamespaceGuard guard;
  if (auto r = lock_namespace(c, guard)) return *r;
  auto before = c.store().show_entry(c.ns, *key);
  Status s = c.store().rm(c.ns, *key);
  if (s.code() == Status::Code::kNotFound) return error_response(404, "no ccache object `" + rest + "` in namespace `" + c.ns + "`");
  if (!s.ok()) return reject(c, http_status(s), "store_error", s.message());
  if (before.ok()) restage_dropped(c, before->manifest, {});
  return json_text(200, json{{"deleted", *key}, {"namespace", c.ns}}.dump());
}

}  // namespace mlk::service::detail
