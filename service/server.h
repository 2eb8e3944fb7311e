// `mlk serve`: the Api (api.h) on libmicrohttpd (decisions/
// server-transport-libmicrohttpd.md). HTTP/1.1 with keep-alive, optionally
// over TLS; a fixed pool of event-driven worker threads (each with its own
// Store) behind a few event loops, so a connection holds a thread only while
// its request is handled, never while it idles, trickles bytes in or reads
// its answer slowly; the workers are shared fairly between clients. Bounded input: the number of
// connections, overall and per client address; the size and number of the
// request's headers; a deadline for the head and one for the body;
// Content-Length required on writes (411); bodies up to `max_body_bytes`
// (413), buffered whole within a server-wide memory budget (503 when spent);
// one range at most per request. A graceful stop lets the requests in flight
// finish (docs/api.md, "Limits").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "service/api.h"

namespace mlk::service {

struct ServeOptions {
  std::string store_path;  // an SQLite store, or postgresql://... (the shared backend, docs/deploy.md)
  std::string blobs;       // the shared backend's bucket: s3://BUCKET?endpoint=...
  std::string blob_cache_dir;                   // the shared backend's local blob cache
  int64_t blob_cache_bytes = int64_t{1} << 30;  // its limit; 0: no local cache
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (Server::port() says which)
  // Worker threads: requests handled at once (connections are not bound to
  // them; a quarter as many event loops, 1-4, read and write). One client
  // (token, session, or address without either) has at most half of them.
  int threads = 8;
  int read_timeout_s = 30;        // a connection with no bytes moving for this long is dropped
  int write_timeout_s = 30;       // (the same limit, for responses: the larger of the two applies)
  int keep_alive_timeout_s = 5;   // an idle keep-alive connection is closed after this
  int keep_alive_max = 1000;      // requests per connection
  // Limits against hostile or broken clients (docs/api.md, "Limits").
  int max_connections = 1000;             // open connections; more are refused at accept
  int max_connections_per_address = 64;   // open connections of one client address
  int64_t max_header_bytes = 32 << 10;    // the request line and headers together; more: 431
  int max_headers = 100;                  // header fields of one request; more: 431
  int header_timeout_s = 10;              // the whole head must arrive within this (of the connection's
                                          // start, or of the request line on a kept-alive connection)
  int body_timeout_s = 120;               // the whole body must arrive within this of the head
  int64_t upload_memory_bytes = int64_t{256} << 20;  // bodies buffered at once, all connections; more: 503
  // What one token's bodies may hold of it at once; more: 503 for that token
  // only. 0: a quarter of upload_memory_bytes. Never less than max_body_bytes.
  int64_t upload_memory_per_token_bytes = 0;
  // Answers over 64 KiB held in memory while they are sent, all connections;
  // a client holds at most a quarter of it. More: 503. Never less than
  // the largest body (--max-body).
  int64_t answer_memory_bytes = int64_t{1} << 30;
  int64_t answer_memory_per_client_bytes = 0;  // set by Server::Start
  // Peers that are proxies in front of the server (`--trusted-proxies`):
  // for their requests the client's address, for the per-address limits
  // and the access log, is the last of X-Forwarded-For. Empty: none.
  std::vector<std::string> trusted_proxies;
  // The URL clients use (`--public-url`), when a TLS proxy in front of the
  // server speaks HTTPS for it: https://... makes the dashboard's cookie
  // Secure as --tls-cert does. Empty: none.
  std::string public_url;
  // TLS: PEM files of the server's certificate (chain) and private key; both or neither.
  std::string tls_cert_path;
  std::string tls_key_path;
  // The shared backend's collection of unreferenced blobs (service/collector.h).
  int collect_interval_s = 600;  // how often
  int collect_grace_s = 3600;    // blobs uploaded more recently are kept
  ApiOptions api;
  bool access_log = false;       // one line per request to the log sink (base/log.h)
  bool access_log_json = false;  // ... as a JSON object (time, client, method, target, status, bytes, ms, team, ended)
};

class Server {
 public:
  // Opens the store (creating it and the service tables when missing), binds
  // the socket and serves on background threads. IOError when the address
  // cannot be bound.
  static Expected<std::unique_ptr<Server>> Start(const ServeOptions& options);
  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const;
  Metrics& metrics();
  // Stops accepting connections, lets every request already received finish
  // and be answered, and returns when the workers are done. Idempotent.
  void stop();

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Starts a Server, prints "mlk serve: listening on http://HOST:PORT" to
// stdout, and runs until SIGTERM or SIGINT; then stops gracefully and returns.
// SIGHUP is logged as reloading nothing (tokens are read per request).
// Call before starting other threads (it blocks those signals in the threads
// it starts).
Status serve_until_signal(const ServeOptions& options);

}  // namespace mlk::service
