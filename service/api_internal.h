// What api.cpp (routing, authentication) shares with the handlers in
// api_objects.cpp (blobs, entries, queries) and api_ccache.cpp. Internal to
// service/.
#pragma once

#include <optional>
#include <set>
#include <string>

#include "cache/manifest.h"
#include "service/api.h"

namespace mlk::service::detail {

// Values a JSON request body (a job request, an entry's manifest) may hold:
// its parse costs about 80 bytes a value (base/json.h), so about 16 MB.
inline constexpr int64_t kMaxBodyValues = 200000;

// One request on its way through the Api.
struct Ctx {
  Api& api;
  const ApiRequest& req;
  BodySource& body;
  std::string route = "unknown";  // the metrics label
  std::string ns;                 // the namespace, once authorised
  TokenInfo token;
  std::optional<SessionPool::Lease> lease;  // borrowed when the token is checked

  bool granted = false;           // reading another team's namespace through a grant
  cache::ArtifactStore& store() { return lease->store(); }
  ServiceTables& tables() { return lease->tables(); }
  JobTables& jobs() { return lease->jobs(); }
};

// The write lock of c.ns: this process's mutex (Api::namespace_lock), then
// the backend's (across replicas). Held until destroyed.
struct NamespaceGuard {
  std::unique_lock<std::mutex> local;
  std::unique_ptr<ServiceTables::Lock> shared;
};
// Takes it; the rejection (503) when the backend cannot, else nullopt.
std::optional<ApiResponse> lock_namespace(Ctx& c, NamespaceGuard& guard);

// 503 (reason answer_memory, Retry-After 1) when an answer of `bytes` read
// into memory would not fit the server's answer memory for this client
// (`mlk serve --answer-memory`); nullopt when it fits, or outside a server.
std::optional<ApiResponse> answer_memory_busy(Ctx& c, int64_t bytes);

// Checks the token, picks the namespace (?namespace=NAME, else the token's
// team) and checks that the token may use it with every scope in `need`:
// its own team's namespace, any with admin, or for reads only (need is
// kScopeRead) a namespace whose owner granted the token's team read access
// (403 naming the grant when it was revoked).
// Returns the rejection, or nullopt with c.token, c.ns and c.lease set.
std::optional<ApiResponse> authorize(Ctx& c, Scopes need);
// The same for a token already known (c.token, a valid one, and c.lease
// set): the dashboard's session (service/dashboard_session.h).
std::optional<ApiResponse> authorize_token(Ctx& c, Scopes need);
// The token of an Authorization header ("Bearer TOKEN", or "Basic" with the
// token as password); "" when it holds none.
std::string token_of(const std::string& header);

// A rejection: counts it under `reason` and returns the error response.
ApiResponse reject(Ctx& c, int status, const std::string& reason, const std::string& message);
// 405 for a method the request's route does not allow, with `Allow: ALLOW`
// (every 405 carries it, RFC 9110) and the same list in the message.
ApiResponse method_not_allowed(Ctx& c, const std::string& allow);
// The rejection for a body that did not arrive whole (413 or 400).
ApiResponse body_rejection(Ctx& c, const Body& b);
// A JSON (object) response.
ApiResponse json_text(int status, std::string text);
// /v1/bench/...: the benchmark history (service/api_bench.cpp).
ApiResponse bench_route(Ctx& c, const std::string& arg);
// /v1/jobs/...: measurement jobs and workers (service/api_jobs.cpp).
ApiResponse jobs_route(Ctx& c, const std::string& arg);

// Bytes of manifests one listing (a query, a dashboard page) reads at most,
// per byte of its answer bound (--max-answer): reading an entry hashes and
// parses its manifest (up to --max-manifest each), so a count alone let
// 10,000 entries of 1 MiB cost one request minutes of parsing (review 12).
constexpr int64_t kScannedPerAnswerByte = 4;

// The charged bytes of c.ns if `delta_charge` bytes were added and the
// entry `replacing_key` (when not empty) removed, with the staged rows for
// `unstaging` no longer counted: a 507 response when that is over the
// namespace's quota, nullopt when it fits. Call with the namespace lock held.
std::optional<ApiResponse> check_quota(Ctx& c, int64_t delta_charge, const std::string& replacing_key,
                                       const std::set<std::string>& unstaging);

// The blobs `old` (an entry's manifest before it was replaced or deleted)
// held and holds no more (but those in `kept`): on a backend that keeps
// unreferenced blobs until a collection past its grace (PostgreSQL and S3),
// each one still stored and charged by no entry or upload of c.ns and held
// by no other namespace is staged again, so charged until --staged-ttl;
// otherwise a writer could replace an entry in a loop and store far past its
// quota, uncharged (review 15; /ccache/ too, review 17). Where the store
// dropped them at once (SQLite), nothing is left to charge. Call under the
// namespace lock, after the write; every path that replaces or removes an
// entry calls it.
void restage_dropped(Ctx& c, const cache::Manifest& old, const std::set<std::string>& kept);

// Stores the blob of `b` (read whole; its sha256 is its digest) for c.ns, as
// PUT /v1/blobs does: charged to the namespace's quota unless it already is,
// and staged (readable by c.ns) unless an entry of c.ns references it. Takes
// the namespace lock. The rejection (507 over quota, 503 store), or nullopt
// with `fresh` true when the namespace was not charged for it before.
std::optional<ApiResponse> store_for_namespace(Ctx& c, const Body& b, bool& fresh);

// Keys of /v1/entries/{key}: 1-256 characters of [A-Za-z0-9._-], not
// starting with `.`: no `/`, so no path traversal.
Status validate_entry_key(const std::string& key);

// The handlers. `arg` is the path below the route's prefix.
ApiResponse get_blob(Ctx& c, const std::string& arg);
ApiResponse put_blob(Ctx& c, const std::string& arg);
ApiResponse get_entry(Ctx& c, const std::string& arg);
ApiResponse put_entry(Ctx& c, const std::string& arg);
ApiResponse delete_entry(Ctx& c, const std::string& arg);
ApiResponse query_entries(Ctx& c);
ApiResponse ccache_get(Ctx& c, const std::string& arg);
ApiResponse ccache_put(Ctx& c, const std::string& arg);
ApiResponse ccache_delete(Ctx& c, const std::string& arg);

}  // namespace mlk::service::detail
