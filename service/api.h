// The HTTP API of `mlk serve` (docs/api.md), independent of the HTTP library:
// the transport (server.cpp) turns a request into an ApiRequest and a
// BodySource, and writes back the ApiResponse. Tests call Api::handle
// directly.
//
// Order of checks, for every request: route (404 unknown path, 405 wrong
// method), the syntax of the path's key or digest and of the query (400),
// the token (401 missing or unknown), the namespace and scopes (403), the
// body (413 too large, 400 broken or malformed, 422 not matching its
// digest), the blobs an entry references (409), an entry's signatures in a
// signed or release namespace (403: they cover manifest.json's content, so
// its blob must be there), the quota (507), then the store. A rejected request changes nothing in the store. Every error body is
// {"error": "..."}, but for the dashboard's HTML pages under /ui
// (service/dashboard.h).
//
// Thread-safe: one Api serves all worker threads; each request borrows its
// own Store from the SessionPool.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "service/metrics.h"
#include "service/session_pool.h"
#include "service/staging.h"
#include "service/tokens.h"

namespace mlk::service {

struct ApiOptions {
  int64_t max_body_bytes = int64_t{64} << 20;  // larger bodies get 413
  // An entry's manifest (its file names and digests, metadata and
  // provenance) is stored and charged to its namespace besides its blobs; a
  // larger one gets 413. Lists parse manifests, so this bounds what one
  // listed entry costs the server.
  int64_t max_manifest_bytes = int64_t{1} << 20;
  // GET /v1/entries stops adding entries once its answer holds this many
  // bytes (`truncated`, with `next` to go on from).
  int64_t max_answer_bytes = int64_t{8} << 20;
  QuotaPolicy quotas;
  int64_t staged_ttl_s = 3600;  // unbound uploads stop being charged (and readable) after this
  // Release namespaces: namespace -> the `mlk verify` levels an entry's
  // report (its metadata's verify_report) must pass to be stored there; other
  // entries get 403 (docs/verification.md).
  std::map<std::string, std::vector<std::string>> require_verified = {};
  // Signed namespaces: namespace -> Ed25519 public keys (64 hex,
  // base/signing.h). An entry written there must carry a signature by one of
  // them (cache/signatures.h); unsigned or foreign-signed entries get 403.
  std::map<std::string, std::vector<std::string>> trusted_signers = {};
  // The keys whose verification reports a release namespace
  // (require_verified) accepts; a namespace without its own list accepts
  // reports signed by its trusted_signers. A report signed by no such key,
  // or unsigned, is not evidence: 403 (docs/signing.md).
  std::map<std::string, std::vector<std::string>> trusted_verifiers = {};
  // The benchmark history's database (service/bench_history.h); empty: none.
  std::string bench_history_path = {};
  // Unfinished (queued or running) measurement jobs one namespace may have;
  // a submit beyond it is 507. Their payloads are up to 64 KiB each.
  int64_t max_open_jobs = 10000;
  // Finished jobs one namespace keeps (results up to 1 MiB each): a submit
  // deletes the older ones.
  int64_t max_finished_jobs = 1000;
  // The dashboard's sign-in sessions (service/dashboard_session.h) last this
  // long; signing in again starts a new one.
  int64_t ui_session_s = int64_t{8} * 3600;
  bool tls = false;  // served over TLS: the dashboard's cookie gets `Secure`
};

struct ApiRequest {
  std::string method;  // GET, HEAD, PUT, DELETE, ...
  std::string path;    // URL-decoded, without the query
  std::map<std::string, std::string> query;
  std::string authorization;  // the Authorization header, or empty
  std::string cookie;         // the Cookie header, or empty (the dashboard's session, service/dashboard.cpp)
  // For the dashboard's check that a POST comes from its own pages
  // (service/dashboard_session.h): the Origin, Sec-Fetch-Site and Host
  // headers, each empty when absent.
  std::string origin = {};
  std::string sec_fetch_site = {};
  std::string host = {};
  // The Range and If-Range headers, empty when absent: a blob read serves
  // one range from the store itself (service/http_range.h), other answers
  // are cut by the transport.
  std::string range = {};
  std::string if_range = {};
  // Whether an answer of this many bytes may be held in memory now for the
  // token's team (the transport's --answer-memory, a share per team); asked
  // before a whole blob is read, so that a refused read costs no read.
  // Empty: always.
  std::function<bool(const std::string& team, int64_t bytes)> answer_fits = {};
};

// The body of a request, read only once the request is authorised, and
// hashed while it is read.
struct Body {
  enum Outcome { kOk, kTooLarge, kBroken } outcome = kOk;
  std::string bytes;
  std::string sha256;  // of bytes (kOk only)
  std::string why;     // kBroken: what went wrong (ended early, timed out)
};
class BodySource {
 public:
  virtual ~BodySource() = default;
  // Reads the whole body, at most `max_bytes` of it (more is kTooLarge).
  // Called at most once per request.
  virtual Body read(int64_t max_bytes) = 0;
};

struct ApiResponse {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string team;  // the token's team once it is known, for the access log; "" before
  // A HEAD answer's Content-Length when `body` does not hold the bytes (a
  // blob's size, read from its row); -1: body.size().
  int64_t head_length = -1;
};

// A body of a string (tests, and requests that carry none).
class StringBody : public BodySource {
 public:
  explicit StringBody(std::string bytes) : bytes_(std::move(bytes)) {}
  Body read(int64_t max_bytes) override;

 private:
  std::string bytes_;
};

class Api {
 public:
  Api(ApiOptions options, SessionPool& pool, Metrics& metrics);
  // Answers one request. Never throws.
  ApiResponse handle(const ApiRequest& req, BodySource& body);
  // Whether the transport may buffer this request's body, asked once its
  // head is in: nullopt when the route takes one, the token is known, may
  // use the namespace and holds a scope that a body on this route needs
  // (`holder` gets the token's id, the key of its share of the upload
  // memory); otherwise the answer, made without running the route's
  // handler: 404 or 405 for the route, 401 for the token, 403 for the
  // namespace or its scopes, 413 when `too_large` (over twice --max-body),
  // 503 when the store cannot be read. So a read-only token's upload holds
  // no memory while it trickles in. One token lookup (and a grant's, for
  // another team's namespace). Never throws.
  std::optional<ApiResponse> admit_body(const ApiRequest& req, bool too_large, std::string* holder);
  // A request whose body never arrived whole (the client left, or was cut
  // off at a deadline): counted as a broken body of its token's namespace.
  // Runs on the transport's event loop, so no route's work is done: only
  // the token is read (review 14: a route that ignores its body, such as
  // /ui/logout, wrote to the store there).
  void body_broken(const ApiRequest& req);
  Metrics& metrics() { return metrics_; }
  const ApiOptions& options() const { return opt_; }
  SessionPool& pool() { return pool_; }
  // The lock that serialises quota-checked writes of one namespace in this
  // process, so that a check and the write it allows are not interleaved with
  // another write of the namespace. Other processes: one server per SQLite
  // store; on the shared backend the tables' advisory lock (tables.h) covers
  // every replica (docs/deploy.md).
  std::mutex& namespace_lock(const std::string& ns);

 private:
  ApiOptions opt_;
  SessionPool& pool_;
  Metrics& metrics_;
  std::mutex locks_mu_;
  std::map<std::string, std::unique_ptr<std::mutex>> ns_locks_;
};

// One route of the Api: an exact path, or a prefix ending in `/` whose rest
// its handler dispatches; `name` is its metrics label; `methods` those it
// accepts (others get 405 with Allow).
struct RouteInfo {
  std::string prefix, name;
  std::vector<std::string> methods;
};

// Every route of the Api, in routing order (the first prefix that matches
// wins): what `mlk serve --routes` prints and docs/openapi.yaml is checked
// against, and what a test of all routes iterates over.
std::vector<RouteInfo> route_table();
std::vector<std::string> route_prefixes();

// The error body: {"error": message}.
ApiResponse error_response(int status, const std::string& message);
// The HTTP status for a Status from cache/: NotFound 404, InvalidArgument 400,
// IOError 503 (507 when the disk or database is full), others 500. Read
// handlers answer a Corruption of what they read with 404 themselves: the
// damaged item was quarantined and is a miss from now on.
int http_status(const Status& s);

}  // namespace mlk::service
