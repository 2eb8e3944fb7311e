// `mlk serve`: the Api (api.h) on cpp-httplib. HTTP/1.1 with keep-alive, a
// fixed pool of worker threads (each with its own Store), a maximum body
// size, socket read/write timeouts, and a graceful stop that lets requests in
// flight finish (docs/api.md, "Limits").
#pragma once

#include <memory>
#include <string>

#include "service/api.h"

namespace mlk::service {

struct ServeOptions {
  std::string store_path;  // an SQLite store, or postgresql://... (the shared backend, docs/deploy.md)
  std::string blobs;       // the shared backend's bucket: s3://BUCKET?endpoint=...
  std::string blob_cache_dir;                   // the shared backend's local blob cache
  int64_t blob_cache_bytes = int64_t{1} << 30;  // its limit; 0: no local cache
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (Server::port() says which)
  int threads = 8;  // worker threads = concurrent connections served; more wait
  int read_timeout_s = 30;        // per socket read: a stalled client is dropped
  int write_timeout_s = 30;       // per socket write
  int keep_alive_timeout_s = 5;   // an idle keep-alive connection is closed after this
  int keep_alive_max = 1000;      // requests per connection
  ApiOptions api;
  bool access_log = false;  // one line per request to the log sink (base/log.h)
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
// Call before starting other threads (it blocks those signals in the threads
// it starts).
Status serve_until_signal(const ServeOptions& options);

}  // namespace mlk::service
