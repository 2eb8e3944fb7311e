// The client side of `mlk serve`: blobs and entries of one namespace on a
// server, and push/pull of an entry between a local Store and the server.
//
// Every download is re-hashed before it is returned or stored. Transient
// failures (no connection, timeouts, HTTP 429 and 5xx other than 507) are
// retried with exponential backoff and jitter; the rest are not. Results:
// NotFound for a miss (404), IOError when the server cannot be reached or
// keeps failing, InvalidArgument for a refusal (401, 403, 400, 409, 413, 422,
// 507), Corruption when what arrived does not match its digest. Messages name
// the server and carry its error text.
//
// Several server URLs (comma-separated, e.g. $MLK_SERVERS) are replicas of
// one backend: a try that gets no answer or a transient status moves to the
// next server, which stays in use; each server gets at least one try.
//
// Not thread-safe (one HTTP connection, kept alive between requests).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/store.h"
#include "base/status.h"

namespace mlk::client {

struct RemoteOptions {
  std::string url;             // http://HOST:PORT (https:// too; an optional path prefix), or several
                               // comma-separated (replicas of one backend): a failed try moves to the next
  std::string token;           // sent as `Authorization: Bearer TOKEN`; empty: none
  std::string ns;              // the server namespace; empty: the token's team
  int attempts = 4;            // tries per request when the failure is transient
  int backoff_ms = 100;        // first wait between tries; doubles, +-50% jitter
  // https://: the PEM file of the CA (or the self-signed certificate) that
  // the server's certificate must verify against; empty: $MLK_CACERT, else
  // the system's CAs. The server's name or address must match the
  // certificate. An http:// URL ignores it.
  std::string ca_cert;
  int connect_timeout_ms = 2000;
  int timeout_s = 60;          // per socket read or write
  // Keep the connection open between requests. An idle connection holds no
  // server thread but counts toward the server's connection caps
  // (`mlk serve --max-connections-per-address`), so clients that poll
  // (workers, a tuner waiting for jobs) close theirs after each request.
  bool keep_alive = true;
};

// Whether `spec` names a server rather than a store file: http:// or https://.
bool is_remote_url(const std::string& spec);

struct TransferReport {
  int64_t files = 0;
  int64_t blobs_sent = 0;     // push: uploaded; pull: downloaded
  int64_t blobs_skipped = 0;  // push: the server had them already
  int64_t bytes = 0;          // bytes moved over the network
};

class RemoteStore {
 public:
  // Checks the URL (InvalidArgument when it is not http(s)://HOST[:PORT][/PREFIX]); connects lazily.
  static Expected<std::unique_ptr<RemoteStore>> Open(RemoteOptions options);
  ~RemoteStore();
  const std::string& url() const;

  Expected<bool> has_blob(const std::string& digest);
  Status put_blob(std::string_view bytes);
  Expected<std::string> get_blob(const std::string& digest);
  // The entry's manifest and bookkeeping (no blob bytes).
  Expected<cache::EntryInfo> get_entry(const std::string& key);
  // Entries whose meta has fn `fn`, target `target` and program_hash
  // `program_hash` (GET /v1/entries?..., most recently used first, at most
  // `limit`): manifests and bookkeeping only, no blob bytes. Corruption when
  // the answer is not a list of entries.
  Expected<std::vector<cache::EntryInfo>> query(const std::string& fn, const std::string& target,
                                                const std::string& program_hash, int limit = 100);
  // Binds `key` to `m`; its blobs must have been put.
  Status put_entry(const std::string& key, const cache::Manifest& m);
  // The team of the token (GET /v1/whoami): a cheap check of URL and token.
  Expected<std::string> whoami();
  // The server's name of the namespace this store reads and writes: the
  // options' namespace, else the token's team (whoami, asked once).
  Expected<std::string> server_namespace();

  // Any other route: METHOD (GET or POST) PATH (below the URL's prefix; the
  // namespace is added to the query) with the retries and failover above.
  // The response whatever its status; IOError when none came. A non-2xx
  // response as a Status like the other calls: failure().
  struct Response {
    int status = 0;
    std::string body;
  };
  Expected<Response> request(const std::string& method, const std::string& path, std::string_view body = {},
                             const std::string& content_type = "application/json");
  Status failure(const std::string& what, const Response& r) const;

  // Uploads the entry (local_ns, key) of `local` and the blobs the server
  // lacks, then binds the key on the server.
  Expected<TransferReport> push(cache::Store& local, const std::string& local_ns, const std::string& key);
  // Downloads entry `key` and its blobs, verifies them, and stores them as
  // (local_ns, key) in `local` (replacing what is there), provenance kept
  // but its origin, which becomes origin_of_pull(url(), server_namespace()).
  Expected<TransferReport> pull(cache::Store& local, const std::string& local_ns, const std::string& key);

  struct Impl;

 private:
  explicit RemoteStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The provenance origin of an entry pulled from namespace `ns` of the server
// at `url`: "URL#NS". A signature counts for such an entry only when it was
// made for NS (runtime/resolve.cpp).
std::string origin_of_pull(const std::string& url, const std::string& ns);
// The NS of such an origin; nullopt for any other origin (local, import:FILE,
// export, or one recorded before the namespace was).
std::optional<std::string> pulled_namespace(const std::string& origin);

}  // namespace mlk::client
