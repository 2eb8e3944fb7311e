#include "service/server.h"

#include <httplib.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/log.h"
#include "service/sha256_stream.h"

namespace mlk::service {

namespace {

// The body of an httplib request, streamed through a hash as it arrives.
class HttplibBody : public BodySource {
 public:
  HttplibBody(const httplib::ContentReader* reader, httplib::Response& res) : reader_(reader), res_(res) {}

  Body read(int64_t max_bytes) override {
    Body out;
    consumed_ = true;
    if (!reader_) {
      out.sha256 = Sha256Stream().final_hex();
      return out;
    }
    Sha256Stream hash;
    bool too_large = false;
    int64_t total = 0;
    bool ok = (*reader_)([&](const char* data, size_t n) {
      total += static_cast<int64_t>(n);
      if (total > max_bytes) {
        too_large = true;
        return false;
      }
      out.bytes.append(data, n);
      hash.update(std::string_view(data, n));
      return true;
    });
    // httplib sets 413 itself when Content-Length exceeds its payload limit
    // (the same limit), after reading and discarding the body.
    if (too_large || (!ok && res_.status == 413)) {
      out.outcome = Body::kTooLarge;
      out.bytes.clear();
    } else if (!ok) {
      out.outcome = Body::kBroken;
      out.bytes.clear();
      out.why = "the connection closed or timed out before the whole body arrived";
    } else {
      out.sha256 = hash.final_hex();
    }
    return out;
  }

  // Reads and discards a body nobody read (a rejected request), so that the
  // next request on the connection starts where it should. Bounded by `max`.
  void drain(int64_t max_bytes) {
    if (!reader_ || consumed_) return;
    consumed_ = true;
    int64_t total = 0;
    (void)(*reader_)([&](const char*, size_t n) {
      total += static_cast<int64_t>(n);
      return total <= max_bytes;
    });
  }

 private:
  const httplib::ContentReader* reader_;
  httplib::Response& res_;
  bool consumed_ = false;
};

std::string default_reason(int status) {
  switch (status) {
    case 400: return "malformed HTTP request";
    case 404: return "not found";
    case 413: return "the request body is larger than this server accepts (`mlk serve --max-body`)";
    case 414: return "the request URI is too long";
    case 416: return "bad Range header";
    default: return "HTTP " + std::to_string(status);
  }
}

}  // namespace

struct Server::Impl {
  ServeOptions opt;
  std::unique_ptr<SessionPool> pool;
  Metrics metrics;
  std::unique_ptr<Api> api;
  httplib::Server http;
  std::thread listener;
  int port = 0;
  std::atomic<bool> stopped{false};
  std::atomic<bool> listener_done{false};

  void serve(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader* reader) {
    ApiRequest ar;
    ar.method = req.method;
    ar.path = req.path;
    for (const auto& [k, v] : req.params) ar.query.emplace(k, v);  // the first of repeated parameters
    ar.authorization = req.get_header_value("Authorization");
    ar.cookie = req.get_header_value("Cookie");
    HttplibBody body(reader, res);
    ApiResponse r = api->handle(ar, body);
    body.drain(opt.api.max_body_bytes);
    res.status = r.status;
    for (const auto& [k, v] : r.headers) res.set_header(k.c_str(), v);
    res.set_content(std::move(r.body), r.content_type.c_str());
  }
};

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { stop(); }

int Server::port() const { return impl_->port; }
Metrics& Server::metrics() { return impl_->metrics; }

void Server::stop() {
  if (impl_->stopped.exchange(true)) return;
  impl_->http.stop();
  if (impl_->listener.joinable()) impl_->listener.join();
}

Expected<std::unique_ptr<Server>> Server::Start(const ServeOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->opt = options;
  const ServeOptions& o = impl->opt;
  if (o.threads < 1 || o.threads > 1024) return Status::InvalidArgument("--threads must be 1-1024");
  BackendOptions backend{o.store_path, o.blobs, o.blob_cache_dir, o.blob_cache_bytes};
  auto pool = SessionPool::Open(backend, o.threads);
  if (!pool.ok()) return pool.status();
  impl->pool = std::move(*pool);
  impl->api = std::make_unique<Api>(o.api, *impl->pool, impl->metrics);

  httplib::Server& h = impl->http;
  int threads = o.threads;
  h.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  h.set_payload_max_length(static_cast<size_t>(o.api.max_body_bytes));
  h.set_read_timeout(o.read_timeout_s, 0);
  h.set_write_timeout(o.write_timeout_s, 0);
  h.set_keep_alive_timeout(o.keep_alive_timeout_s);
  h.set_keep_alive_max_count(static_cast<size_t>(std::max(1, o.keep_alive_max)));
  // Headers and body go out in separate writes: without TCP_NODELAY a small
  // response waits for the client's delayed ACK (~40 ms).
  h.set_tcp_nodelay(true);
  Impl* self = impl.get();
  auto plain = [self](const httplib::Request& req, httplib::Response& res) { self->serve(req, res, nullptr); };
  auto with_body = [self](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
    self->serve(req, res, &reader);
  };
  // Every path goes to the Api, which routes it; bodies are read only by the
  // handlers that want them, after the token is checked.
  h.Get(".*", plain);
  h.Options(".*", plain);
  h.Put(".*", with_body);
  h.Post(".*", with_body);
  h.Patch(".*", with_body);
  h.Delete(".*", with_body);
  // Errors httplib answers itself (a malformed request line, an unknown
  // method, a too long URI) get a JSON body like the Api's.
  h.set_error_handler(httplib::Server::HandlerWithResponse([self](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    static const char* known[] = {"GET", "HEAD", "PUT", "POST", "PATCH", "DELETE", "OPTIONS"};
    bool known_method = false;
    for (const char* m : known) known_method = known_method || req.method == m;
    std::string why = default_reason(res.status);
    if (!known_method && res.status == 400) {
      res.status = 405;
      why = "method `" + req.method.substr(0, 20) + "` is not supported (docs/api.md)";
    }
    self->metrics.reject("", res.status == 413 ? "too_large" : res.status == 405 ? "method" : "bad_request");
    res.set_content(nlohmann::json{{"error", why}}.dump() + "\n", "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
  h.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    res.status = 500;
    res.set_content(R"({"error":"internal error"})" "\n", "application/json");
  });
  if (o.access_log)
    h.set_logger([](const httplib::Request& req, const httplib::Response& res) {
      log_linef(LogLevel::kNote, "%s %s %s -> %d (%zu bytes)", req.remote_addr.c_str(), req.method.c_str(),
                req.path.c_str(), res.status, res.body.size());
    });

  int port = o.port == 0 ? h.bind_to_any_port(o.host) : (h.bind_to_port(o.host, o.port) ? o.port : -1);
  if (port < 0)
    return Status::IOError("cannot listen on " + o.host + ":" + std::to_string(o.port) + ": " + std::strerror(errno) +
                           " (is another server there? is the address this machine's?)");
  impl->port = port;
  impl->listener = std::thread([self] {
    self->http.listen_after_bind();
    self->listener_done = true;
  });
  // Wait until the accept loop runs: httplib's stop() does nothing before it
  // does, and stop() must not miss it.
  while (!h.is_running() && !self->listener_done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

namespace {

// The store for people: a URL without its user and password.
std::string shown_store(const std::string& spec) {
  size_t scheme = spec.find("://"), at = spec.find('@');
  if (scheme == std::string::npos || at == std::string::npos || at < scheme) return spec;
  return spec.substr(0, scheme + 3) + spec.substr(at + 1);
}

}  // namespace

Status serve_until_signal(const ServeOptions& options) {
  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, &old);  // inherited by every thread started below
  auto server = Server::Start(options);
  if (!server.ok()) {
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return server.status();
  }
  std::printf("mlk serve: listening on http://%s:%d (store %s, %d worker threads)\n", options.host.c_str(),
              (*server)->port(), shown_store(options.store_path).c_str(), options.threads);
  std::fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  log_linef(LogLevel::kNote, "mlk serve: %s: no new connections; finishing the requests in flight",
            sig == SIGTERM ? "SIGTERM" : "SIGINT");
  (*server)->stop();
  log_line(LogLevel::kNote, "mlk serve: stopped");
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return Status::Ok();
}

}  // namespace mlk::service
