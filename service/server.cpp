#include "service/server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/escape.h"
#include "base/files.h"
#include "base/json.h"
#include "base/log.h"
#include "base/time.h"
#include "service/api_internal.h"
#include "service/collector.h"
#include "service/dashboard_session.h"
#include "service/http_range.h"
#include "service/work_queue.h"

// The transport: libmicrohttpd (decisions/server-transport-libmicrohttpd.md)
// in its internal epoll mode with a few event-loop threads, each over many
// connections. They read requests and write answers and never wait on the
// store: once a request's head and body have arrived whole, its connection is
// suspended and the Api's work goes to a WorkQueue (work_queue.h) of
// `threads` workers, fair between clients; the worker resumes the
// connection with the answer. One acceptor thread accepts and hands each
// socket to MHD_add_connection, which spreads them over the event loops.
// What runs on an event loop: the transport's own checks, /healthz, and the
// token lookup that decides whether a body is buffered (an indexed read).
//
// The life of a request, and what bounds each step:
//   connect          --max-connections, --max-connections-per-address (MHD refuses more)
//   head             --header-timeout (the watchdog), --max-header-bytes and
//                    --max-headers (431), MHD's memory pool per connection (the hard bound)
//   head complete    on_head(): method, Content-Length (411, 413), the upload budget (503)
//   body             --body-timeout (the watchdog, and each chunk as it arrives);
//                    buffered, at most Content-Length bytes
//   queued           the WorkQueue: one client's share of the workers and of the queue (503)
//   answer           Api::handle over the buffered body; one Range at most (416); answers
//                    over 64 KiB held within --answer-memory, a client's share of it (503)
//   kept alive       --keep-alive idle time (the watchdog), --timeout without progress (MHD)

namespace mlk::service {

namespace {

using Clock = std::chrono::steady_clock;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch()).count();
}
int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch()).count();
}

// What a connection waits for; it decides the deadline the watchdog holds
// it to (Server::Impl::sweep).
enum Phase : int {
  kFresh,  // a new connection, waiting for its first request's head: --header-timeout from accept
  kIdle,   // kept alive after an answer, waiting for the next request line: --keep-alive
  kHead,   // a kept-alive connection's request line came, the rest of the head not yet: --header-timeout
  kBody,   // the head is in, the body is arriving: --body-timeout from the head
  kBusy,   // handled by the Api or answering: no deadline but MHD's (--timeout without progress)
};

// One client connection from accept to close (MHD's socket context).
// `phase` and `since_ms` are written by the connection's MHD thread and read
// by the watchdog: since_ms is always stored before phase.
struct Conn {
  int fd = -1;
  std::string peer;    // the socket's far end (a client, or a trusted proxy); fixed for the connection
  std::string remote;  // the client of the request at hand (behind a proxy, its forwarded address), for the log
  std::atomic<int> phase{kFresh};
  std::atomic<int64_t> since_ms{0};
  int requests = 0;  // answered so far; its MHD thread only
  bool cut = false;  // shut down by the watchdog; under Impl::conns_mu
  void enter(Phase p) {
    since_ms = now_ms();
    phase = p;
  }
};

// One request from its request line to its completion (MHD's request context).
struct Request {
  Conn* conn = nullptr;
  int64_t start_us = 0;
  size_t target_bytes = 0;  // the request target as sent
  std::string target;       // its first 200 bytes, for the access log
  bool nul_in_path = false;
  bool started = false;       // on_head() ran
  bool expects_body = false;  // a body is being received
  bool discard = false;       // ... and dropped: it is too large (413 once it is in)
  bool handled = false;       // an answer was made (by the Api or the transport)
  int64_t reserved = 0;       // bytes of the upload budget held
  std::string holder;         // ... on behalf of this token (its id)
  std::string body;
  std::string range, if_range;
  ApiRequest api;
  std::string client;  // whose share of the workers and of the answer memory it uses (client_of)
  std::string group;   // ... and its address's share
  int64_t answer_held = 0;  // bytes of the answer memory held for `response`, until send() passes them on
  std::string answer_holder;  // ... on behalf of: the token's team (answer_key), else `client`
  // The answer a worker made while the connection was suspended; `ready` is
  // set before the worker resumes the connection.
  ApiResponse response;
  bool close_after = false;
  std::atomic<bool> ready{false};
  int status = 0;  // of the answer; 0: none was sent
  size_t bytes_out = 0;
  std::string team;  // the token's, once the Api knew it
};

// The body of a request that did not arrive (too large, or broken off).
class FailedBody : public BodySource {
 public:
  FailedBody(Body::Outcome outcome, std::string why) : outcome_(outcome), why_(std::move(why)) {}
  Body read(int64_t) override {
    Body b;
    b.outcome = outcome_;
    b.why = why_;
    return b;
  }

 private:
  Body::Outcome outcome_;
  std::string why_;
};

bool known_method(const std::string& m) {
  static const char* known[] = {"GET", "HEAD", "PUT", "POST", "PATCH", "DELETE", "OPTIONS"};
  return std::any_of(std::begin(known), std::end(known), [&](const char* k) { return m == k; });
}

bool is_write(const std::string& m) { return m == "PUT" || m == "POST" || m == "PATCH"; }

// An IPv4 client of a dual-stack listener arrives as ::ffff:a.b.c.d: it is
// written a.b.c.d, so that it is its own address (not, grouped by /64, one
// with every other IPv4 client: review 8 of issue 49) and matches
// --trusted-proxies as written.
std::string address_text(const sockaddr* a) {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (a && a->sa_family == AF_INET) inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a)->sin_addr, buf, sizeof buf);
  if (a && a->sa_family == AF_INET6) {
    const in6_addr& a6 = reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&a6)) inet_ntop(AF_INET, a6.s6_addr + 12, buf, sizeof buf);
    else inet_ntop(AF_INET6, &a6, buf, sizeof buf);
  }
  return buf;
}

// `text` (an address) with an IPv4-mapped IPv6 address written as IPv4.
std::string plain_address(const std::string& text) {
  in6_addr a6{};
  if (text.find(':') == std::string::npos || inet_pton(AF_INET6, text.c_str(), &a6) != 1 || !IN6_IS_ADDR_V4MAPPED(&a6))
    return text;
  char buf[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, a6.s6_addr + 12, buf, sizeof buf);
  return buf;
}

// The path part of a request target holds %00, which MHD would decode into
// a NUL that ends the path early.
bool encoded_nul(const char* target) {
  for (const char* p = target; *p && *p != '?'; ++p)
    if (p[0] == '%' && p[1] == '0' && p[2] == '0') return true;
  return false;
}

struct HeadSize {
  int count = 0;
  int64_t bytes = 0;
  std::string repeated;  // the first of Content-Length, Host, Authorization, Transfer-Encoding sent twice
  int seen[4] = {0, 0, 0, 0};
};

MHD_Result count_header(void* cls, MHD_ValueKind, const char* key, const char* value) {
  auto* h = static_cast<HeadSize*>(cls);
  h->count++;
  h->bytes += static_cast<int64_t>(std::strlen(key) + (value ? std::strlen(value) : 0) + 4);  // "K: V\r\n"
  // Headers that decide how the request is read or whose it is: two of one
  // would let the server and a proxy in front of it disagree (smuggling).
  static const char* kOnce[4] = {"Content-Length", "Host", "Authorization", "Transfer-Encoding"};
  for (int i = 0; i < 4; ++i)
    if (strcasecmp(key, kOnce[i]) == 0 && ++h->seen[i] == 2 && h->repeated.empty()) h->repeated = kOnce[i];
  return MHD_YES;
}

// The value of the last X-Forwarded-For header line into *cls.
MHD_Result last_forwarded_for(void* cls, MHD_ValueKind, const char* key, const char* value) {
  if (strcasecmp(key, "X-Forwarded-For") == 0) *static_cast<std::string*>(cls) = value ? value : "";
  return MHD_YES;
}

MHD_Result add_query(void* cls, MHD_ValueKind, const char* key, const char* value) {
  static_cast<std::map<std::string, std::string>*>(cls)->emplace(key, value ? value : "");  // the first of repeated ones
  return MHD_YES;
}

// Who a request counts against for fairness (work_queue.h): its token or
// dashboard session (by a hash of the token or session id itself, however
// the header spells it), else its address; and its group, its address.
std::string client_of(const ApiRequest& a, const std::string& remote) {
  std::string who = detail::token_of(a.authorization), kind = "token ";
  if (who.empty()) who = detail::session_of_cookie(a.cookie), kind = "session ";
  if (who.empty()) return "address " + remote;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016zx", std::hash<std::string>{}(who));
  return kind + hex;
}

// The group of an address for the per-address limits: an IPv4 address, or
// the /64 of an IPv6 one (a host is given a /64 and may use any of it).
std::string address_group(const std::string& text) {
  const std::string address = plain_address(text);
  in6_addr a6{};
  if (address.find(':') == std::string::npos || inet_pton(AF_INET6, address.c_str(), &a6) != 1) return address;
  char buf[INET6_ADDRSTRLEN];
  std::memset(a6.s6_addr + 8, 0, 8);
  inet_ntop(AF_INET6, &a6, buf, sizeof buf);
  return std::string(buf) + "/64";
}

// Answers below this size are not counted against the answer memory.
constexpr int64_t kSmallAnswer = 64 * 1024;

std::string header_value(MHD_Connection* c, const char* name) {
  const char* v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
  return v ? v : "";
}

// A listening TCP socket on host:port (port 0: any free one), non-blocking
// as MHD's worker pool needs it; -1 and errno when it cannot be made.
int listen_on(const std::string& host, int port, int& bound_port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  std::string service = std::to_string(port);
  if (int e = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found); e != 0) {
    errno = e == EAI_SYSTEM ? errno : EADDRNOTAVAIL;
    return -1;
  }
  int fd = -1, err = EADDRNOTAVAIL;
  for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
      err = errno;
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) {
    errno = err;
    return -1;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  bound_port = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                              : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return fd;
}

// The open connections one peer address may hold in MHD's count:
// --max-connections-per-address, but with trusted proxies, whose
// connections carry every client behind them (review 5 of issue 49: one
// client behind the proxy filled its share and every other was closed at
// accept), only --max-connections: Impl::accept_loop then keeps the cap of
// every other address, and the clients behind a proxy are bounded by the
// workers' queue, which knows the forwarded address.
int per_peer_connections(const ServeOptions& o) {
  return o.trusted_proxies.empty() ? o.max_connections_per_address : o.max_connections;
}

}  // namespace

struct Server::Impl {
  ServeOptions opt;
  std::unique_ptr<SessionPool> pool;
  Metrics metrics;
  std::unique_ptr<Api> api;
  std::unique_ptr<BlobCollector> collector;  // stops before the pool goes
  std::unique_ptr<WorkQueue> work;           // the Api's workers; stopped before the daemon
  MHD_Daemon* daemon = nullptr;
  int port = 0;
  int listen_fd = -1;
  int wake_fd = -1;  // an eventfd: tells the acceptor to stop
  std::thread acceptor;
  std::string tls_cert, tls_key;  // PEM text, read by MHD for the daemon's life
  std::atomic<bool> starting{true};
  std::string start_messages;  // what MHD said while starting (its errors)
  std::atomic<bool> stopping{false};
  std::atomic<bool> stopped{false};
  std::atomic<int> in_flight{0};          // requests between request line and completion
  std::atomic<int64_t> upload_bytes{0};   // the upload budget in use
  std::mutex upload_mu;
  std::map<std::string, int64_t> upload_by_token;  // token id -> bytes of the budget it holds; under upload_mu
  std::mutex answer_mu;
  int64_t answer_bytes = 0;                          // answers over kSmallAnswer not yet sent; under answer_mu
  std::map<std::string, int64_t> answer_by_client;  // client_of -> its part of answer_bytes; under answer_mu

  // The watchdog: holds every connection to its phase's deadline.
  std::mutex conns_mu;
  // Behind trusted proxies MHD's per-address cap is lifted (it would count
  // the proxy); the cap of every other peer address is kept here instead.
  std::mutex peers_mu;
  std::map<std::string, int> peers;  // open connections of each capped peer address
  bool capped_here(const std::string& peer) const {
    return !opt.trusted_proxies.empty() &&
           std::find(opt.trusted_proxies.begin(), opt.trusted_proxies.end(), peer) == opt.trusted_proxies.end();
  }
  void release_peer(const std::string& peer) {
    std::lock_guard<std::mutex> g(peers_mu);
    if (auto it = peers.find(peer); it != peers.end() && --it->second <= 0) peers.erase(it);
  }
  std::set<Conn*> conns;
  std::mutex watch_mu;
  std::condition_variable watch_cv;
  bool watch_stop = false;
  std::thread watchdog;

  // --- MHD's callbacks (static trampolines below) ---------------------------

  void connection_event(MHD_Connection* c, void** socket_context, MHD_ConnectionNotificationCode code) {
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
      auto* conn = new Conn;
      if (auto* i = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD)) conn->fd = i->connect_fd;
      if (auto* i = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS))
        conn->peer = conn->remote = address_text(i->client_addr);
      conn->enter(kFresh);
      std::lock_guard<std::mutex> g(conns_mu);
      conns.insert(conn);
      *socket_context = conn;
      return;
    }
    auto* conn = static_cast<Conn*>(*socket_context);
    if (!conn) return;
    if (capped_here(conn->peer)) release_peer(conn->peer);  // what accept_loop counted: the socket's peer
    {
      // Before MHD closes the descriptor: the watchdog never shuts down a reused one.
      std::lock_guard<std::mutex> g(conns_mu);
      conns.erase(conn);
    }
    delete conn;
    *socket_context = nullptr;
  }

  void* request_line(const char* target, MHD_Connection* c) {
    auto* rq = new Request;
    if (auto* i = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT)) rq->conn = static_cast<Conn*>(i->socket_context);
    rq->start_us = now_us();
    rq->target_bytes = std::strlen(target);
    rq->target = std::string(target, std::min<size_t>(rq->target_bytes, 200));
    rq->nul_in_path = encoded_nul(target);
    in_flight++;
    if (rq->conn && rq->conn->phase == kIdle) rq->conn->enter(kHead);
    return rq;
  }

  MHD_Result access(MHD_Connection* c, const char* url, const char* method, const char* upload, size_t* upload_size,
                    void** req_cls) {
    auto* rq = static_cast<Request*>(*req_cls);
    if (!rq) *req_cls = rq = static_cast<Request*>(request_line(url, c));
    if (!rq->started) return on_head(c, *rq, url, method);
    if (*upload_size > 0) {
      if (rq->conn && now_ms() - rq->conn->since_ms > opt.body_timeout_s * int64_t{1000}) {
        metrics.reject("", "body_timeout");
        return MHD_NO;  // closes the connection; on_completed shows the Api a broken body
      }
      if (!rq->discard) rq->body.append(upload, *upload_size);  // MHD delivers at most Content-Length bytes
      *upload_size = 0;
      return MHD_YES;
    }
    if (rq->ready.exchange(false)) return send(c, *rq, std::move(rq->response), rq->close_after);
    if (rq->handled) return MHD_YES;
    return hand_over(c, *rq, rq->discard ? Body::kTooLarge : Body::kOk);
  }

  // The head is in: checks what the transport checks. A refusal is queued at
  // once, and MHD closes the connection after it (nothing more is read from
  // a client the server refused); otherwise the request goes on, its body
  // (if any) buffered, and access() answers when it is complete.
  MHD_Result on_head(MHD_Connection* c, Request& rq, const char* url, const char* method) {
    rq.started = true;
    if (rq.conn) rq.conn->enter(kBusy);
    std::string m = method;
    rq.api.method = m;
    if (!known_method(m))
      return refuse(c, rq, 501, "method", "method `" + m.substr(0, 20) + "` is not supported (docs/api.md)");
    if (rq.nul_in_path) return refuse(c, rq, 400, "bad_request", "the path holds an encoded NUL byte (%00)");
    HeadSize head;
    MHD_get_connection_values(c, MHD_HEADER_KIND, &count_header, &head);
    head.bytes += static_cast<int64_t>(m.size() + rq.target_bytes + 11);  // "M T HTTP/1.1\r\n"
    if (head.count > opt.max_headers)
      return refuse(c, rq, 431, "headers_too_large",
                    "the request has " + std::to_string(head.count) + " header fields; at most " +
                        std::to_string(opt.max_headers) + " are accepted (`mlk serve --max-headers`)");
    if (head.bytes > opt.max_header_bytes)
      return refuse(c, rq, 431, "headers_too_large",
                    "the request's head is " + std::to_string(head.bytes) + " bytes; at most " +
                        std::to_string(opt.max_header_bytes) + " are accepted (`mlk serve --max-header-bytes`)");
    if (!head.repeated.empty())
      return refuse(c, rq, 400, "bad_request", "the request has more than one `" + head.repeated + "` header");
    ApiRequest& a = rq.api;
    a.path = url;
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, &add_query, &a.query);
    a.authorization = header_value(c, "Authorization");
    a.cookie = header_value(c, "Cookie");
    a.origin = header_value(c, "Origin");
    a.sec_fetch_site = header_value(c, "Sec-Fetch-Site");
    a.host = header_value(c, "Host");
    const std::string from = client_address(c, rq);
    rq.group = "address " + address_group(from);
    rq.client = client_of(a, from);
    rq.range = a.range = header_value(c, "Range");
    rq.if_range = a.if_range = header_value(c, "If-Range");
    std::string length = header_value(c, "Content-Length");
    if (!header_value(c, "Transfer-Encoding").empty() || (is_write(m) && length.empty()))
      return refuse(c, rq, 411, "length_required",
                    "a " + m + " must give its body's size in a Content-Length header (chunked uploads are not "
                    "accepted; docs/api.md, \"Limits\")");
    int64_t n = 0;
    if (!length.empty()) {
      char* end = nullptr;
      errno = 0;
      long long v = std::strtoll(length.c_str(), &end, 10);
      if (errno != 0 || *end != '\0' || v < 0 || length.find_first_not_of("0123456789") != std::string::npos)
        return refuse(c, rq, 400, "bad_request", "Content-Length `" + length.substr(0, 30) + "` is not a size in bytes");
      n = v;
    }
    // Too large: the Api answers (its order of checks: route, token, then
    // 413). Up to twice --max-body, once the body has been read and
    // discarded, so that the client, which is still sending, reads the
    // answer and the connection stays usable; larger claims at once, and MHD
    // drops the rest of the upload with the connection.
    // A body on a method that takes none is refused here: otherwise a GET
    // with a body would be run (and read a blob) on the event loop.
    if (n > 0 && !is_write(m))
      return refuse(c, rq, 400, "bad_request", "a " + m + " request carries no body (Content-Length " + length + ")");
    if (n > opt.api.max_body_bytes) {
      if (n > 2 * opt.api.max_body_bytes) {
        auto refused = api->admit_body(a, /*too_large=*/true, nullptr);  // always an answer when too large
        return refuse_body(c, rq, refused ? std::move(*refused) : error_response(413, "the body is too large"));
      }
      rq.discard = rq.expects_body = true;
      if (rq.conn) rq.conn->enter(kBody);
      return MHD_YES;
    }
    // Accepted: answered on MHD's next call, once the request is complete
    // (an answer queued now would make MHD close the connection after it).
    if (n == 0) return MHD_YES;
    // Only a client whose token may send this body has it buffered (the
    // sign-in form carries its token in its body, and is small): the Api
    // answers the others at once (401, 403, or what it checks before the
    // token), without reading the body. One token holds at most its share
    // of the budget, so that no one token can make every team's upload 503;
    // sign-in forms, sent before any token is known, are shared per address.
    std::string holder = "ui " + rq.group;  // sign-in forms: each address (group) its own share
    if (a.path == "/ui/login" && n > 16384)
      return refuse(c, rq, 413, "too_large", "the sign-in form is at most 16 KiB");
    if (a.path != "/ui/login")
      if (auto refused = api->admit_body(a, false, &holder)) return refuse_body(c, rq, std::move(*refused));
    if (!reserve(holder, n))
      return refuse(c, rq, 503, "busy",
                    "the server is receiving as many request bodies as it buffers at once, or as many of this "
                    "token's as one token may send at once (`mlk serve --upload-memory`, "
                    "`--upload-memory-per-token`); try again shortly",
                    {{"Retry-After", "1"}});
    rq.holder = holder;
    rq.reserved = n;
    rq.body.reserve(static_cast<size_t>(n));
    rq.expects_body = true;
    if (rq.conn) rq.conn->enter(kBody);
    return MHD_YES;
  }

  // The client's address: the peer's, or, when the peer is a trusted proxy
  // (--trusted-proxies), the last address of its X-Forwarded-For (the one
  // that proxy saw; earlier ones are the client's to invent). Also what
  // the access log shows.
  // The peer is the connection's, whatever an earlier request on it said
  // (review 7 of issue 49: a forwarded address replaced it, so the next
  // request over a reused proxy connection was counted as that client), and
  // the last address is the last of every X-Forwarded-For line (a proxy may
  // add a line of its own after the client's).
  std::string client_address(MHD_Connection* c, Request& rq) {
    std::string peer = rq.conn ? rq.conn->peer : "-";
    if (rq.conn) rq.conn->remote = peer;
    if (std::find(opt.trusted_proxies.begin(), opt.trusted_proxies.end(), peer) == opt.trusted_proxies.end()) return peer;
    std::string xff;
    MHD_get_connection_values(c, MHD_HEADER_KIND, &last_forwarded_for, &xff);
    size_t comma = xff.rfind(',');
    std::string last = xff.substr(comma == std::string::npos ? 0 : comma + 1);
    last.erase(0, last.find_first_not_of(" \t"));
    last.erase(last.find_last_not_of(" \t") + 1);
    unsigned char buf[sizeof(in6_addr)];
    if (inet_pton(AF_INET, last.c_str(), buf) != 1 && inet_pton(AF_INET6, last.c_str(), buf) != 1) return peer;
    last = plain_address(last);
    if (rq.conn) rq.conn->remote = last;
    return last;
  }

  // Takes n bytes of the upload budget for `holder`, or nothing when the
  // whole budget or the holder's share would be exceeded.
  bool reserve(const std::string& holder, int64_t n) {
    std::lock_guard<std::mutex> g(upload_mu);
    int64_t& mine = upload_by_token[holder];
    if (upload_bytes + n > opt.upload_memory_bytes || mine + n > opt.upload_memory_per_token_bytes) {
      if (mine == 0) upload_by_token.erase(holder);
      return false;
    }
    upload_bytes += n;
    mine += n;
    return true;
  }

  void release(Request& rq) {
    if (rq.reserved) {
      std::lock_guard<std::mutex> g(upload_mu);
      upload_bytes -= rq.reserved;
      auto it = upload_by_token.find(rq.holder);
      if (it != upload_by_token.end() && (it->second -= rq.reserved) <= 0) upload_by_token.erase(it);
    }
    rq.reserved = 0;
    std::string().swap(rq.body);
  }

  // The request is complete: its connection waits, suspended, while a
  // worker makes the answer; the worker resumes it, and MHD's next call of
  // access() sends the answer. /healthz is answered here (it reads nothing).
  MHD_Result hand_over(MHD_Connection* c, Request& rq, Body::Outcome outcome) {
    if (rq.api.path == "/healthz") return answer(c, rq, outcome);
    rq.handled = true;
    if (rq.conn) rq.conn->enter(kBusy);
    MHD_suspend_connection(c);
    Request* r = &rq;
    auto finish = [c, r](ApiResponse resp, bool close) {
      r->response = std::move(resp);
      r->close_after = close;
      r->ready = true;
      MHD_resume_connection(c);
    };
    r->api.answer_fits = [this, r](const std::string& team, int64_t n) {
      return n <= kSmallAnswer || answer_room(answer_key(team, r->client), r->group, n);
    };
    auto run = [this, r, outcome, finish] {
      ApiResponse resp = handle(*r, outcome);
      // The answer's memory is held from here, while the connection waits
      // to be resumed, until MHD has sent it (Outgoing::free).
      int64_t n = static_cast<int64_t>(resp.body.size());
      r->answer_holder = answer_key(resp.team, r->client);
      if (n > kSmallAnswer && !hold_answer(r->answer_holder, r->group, n)) {
        metrics.reject("", "answer_memory");
        resp = busy("the server holds as many answers in memory as it sends at once, or as many of this client's "
                    "as one client may have (`mlk serve --answer-memory`)");
      } else if (n > kSmallAnswer) {
        r->answer_held = n;
      }
      finish(std::move(resp), outcome == Body::kBroken);
    };
    auto drop = [this, r, finish] {
      release(*r);
      metrics.reject("", "busy");
      finish(busy("the server's workers did not reach this request in time (`mlk serve --timeout`)"), true);
    };
    WorkQueue::Admit admit = work->submit(rq.client, rq.group, run, drop);
    if (admit == WorkQueue::Admit::kQueued) return MHD_YES;
    release(rq);
    metrics.reject("", "busy");
    finish(busy(admit == WorkQueue::Admit::kClientFull
                    ? "this client (token, session or address) has as many requests in the server's queue as one "
                      "client may have; wait for their answers"
                : admit == WorkQueue::Admit::kStopping ? "the server is stopping"
                                                       : "the server's queue of requests is full"),
           false);
    return MHD_YES;
  }

  static ApiResponse busy(const std::string& why) {
    ApiResponse r = error_response(503, why + "; try again shortly");
    r.headers.push_back({"Retry-After", "1"});
    return r;
  }

  // The Api's answer to a complete request (or one whose body did not arrive).
  ApiResponse handle(Request& rq, Body::Outcome outcome) {
    ApiResponse r;
    if (outcome == Body::kOk) {
      StringBody body(std::move(rq.body));
      r = api->handle(rq.api, body);
    } else {
      FailedBody body(outcome, "");
      r = api->handle(rq.api, body);
    }
    release(rq);
    if (rq.api.method == "GET" && apply_range(rq.range, rq.if_range, r) == RangeOutcome::kMultiple)
      metrics.reject("", "ranges");
    return r;
  }

  // The same on this thread: what the transport answers before a body is read, and /healthz.
  MHD_Result answer(MHD_Connection* c, Request& rq, Body::Outcome outcome) {
    rq.handled = true;
    if (rq.conn) rq.conn->enter(kBusy);
    return send(c, rq, handle(rq, outcome), outcome == Body::kBroken);
  }

  // The Api's refusal of a body it will not buffer (Api::admit_body: a
  // token lookup, no handler); the connection is closed after it.
  MHD_Result refuse_body(MHD_Connection* c, Request& rq, ApiResponse refusal) {
    rq.handled = true;
    return send(c, rq, std::move(refusal), /*close=*/true);
  }

  // An answer of the transport's own (the Api never sees the request).
  MHD_Result refuse(MHD_Connection* c, Request& rq, int status, const std::string& reason, const std::string& message,
                    std::vector<std::pair<std::string, std::string>> headers = {}) {
    rq.handled = true;
    release(rq);
    metrics.reject("", reason);
    ApiResponse r = error_response(status, message);
    for (auto& h : headers) r.headers.push_back(std::move(h));
    return send(c, rq, std::move(r), /*close=*/true);
  }

  // An answer's bytes while MHD sends them; the answer memory they hold is
  // given back when MHD frees the response.
  struct Outgoing {
    Impl* server;
    std::string client, group, bytes;
    int64_t held = 0;
    static void free(void* cls) {
      auto* o = static_cast<Outgoing*>(cls);
      if (o->held) o->server->give_back_answer(o->client, o->group, o->held);
      delete o;
    }
  };

  // Whose share of the answer memory an answer takes: its token's team (all
  // of a team's tokens and sessions together), else the client's.
  static std::string answer_key(const std::string& team, const std::string& client) {
    return team.empty() ? client : "team " + team;
  }

  // Whether n more bytes of the answer memory fit for `client` of `group`:
  // within the whole, the client's share and its group's share.
  bool answer_fits_locked(const std::string& client, const std::string& group, int64_t n) {
    auto held = [&](const std::string& k) {
      auto it = answer_by_client.find(k);
      return it == answer_by_client.end() ? int64_t{0} : it->second;
    };
    return answer_bytes + n <= opt.answer_memory_bytes && held(client) + n <= opt.answer_memory_per_client_bytes &&
           held(group) + n <= opt.answer_memory_per_client_bytes;
  }
  bool answer_room(const std::string& client, const std::string& group, int64_t n) {
    std::lock_guard<std::mutex> g(answer_mu);
    return answer_fits_locked(client, group, n);
  }
  // Takes n bytes of the answer memory for `client` of `group`, or nothing
  // when they do not fit.
  bool hold_answer(const std::string& client, const std::string& group, int64_t n) {
    std::lock_guard<std::mutex> g(answer_mu);
    if (!answer_fits_locked(client, group, n)) return false;
    answer_bytes += n;
    answer_by_client[client] += n;
    if (group != client) answer_by_client[group] += n;
    return true;
  }
  void give_back_answer(const std::string& client, const std::string& group, int64_t n) {
    std::lock_guard<std::mutex> g(answer_mu);
    answer_bytes -= n;
    for (const std::string* k : {&client, &group}) {
      if (k == &group && group == client) break;
      auto it = answer_by_client.find(*k);
      if (it != answer_by_client.end() && (it->second -= n) <= 0) answer_by_client.erase(it);
    }
  }

  // A HEAD answer's Content-Length without its bytes (ApiResponse::head_length): MHD never reads it.
  static ssize_t no_bytes(void*, uint64_t, char*, size_t) { return MHD_CONTENT_READER_END_WITH_ERROR; }

  MHD_Result send(MHD_Connection* c, Request& rq, ApiResponse r, bool close) {
    const size_t size = r.body.size();
    MHD_Response* resp = nullptr;
    if (r.head_length >= 0 && rq.api.method == "HEAD") {
      resp = MHD_create_response_from_callback(static_cast<uint64_t>(r.head_length), 4096, &no_bytes, nullptr, nullptr);
      if (!resp) return MHD_NO;
    } else {
      auto* out = new Outgoing{this, rq.answer_holder, rq.group, std::move(r.body), rq.answer_held};
      rq.answer_held = 0;
      resp = MHD_create_response_from_buffer_with_free_callback_cls(out->bytes.size(), out->bytes.data(),
                                                                     &Outgoing::free, out);
      if (!resp) {
        Outgoing::free(out);
        return MHD_NO;
      }
    }
    if (!r.content_type.empty()) MHD_add_response_header(resp, "Content-Type", r.content_type.c_str());
    for (const auto& [k, v] : r.headers) MHD_add_response_header(resp, k.c_str(), v.c_str());
    // The last answer on this connection: a refusal (what follows in the
    // stream is not trusted), the keep-alive request limit, or a stop.
    if (close || stopping || (rq.conn && rq.conn->requests + 1 >= opt.keep_alive_max))
      MHD_add_response_header(resp, "Connection", "close");
    rq.status = r.status;
    rq.bytes_out = size;
    rq.team = r.team;
    MHD_Result ok = MHD_queue_response(c, static_cast<unsigned>(r.status), resp);
    MHD_destroy_response(resp);
    return ok;
  }

  void completed(void** req_cls, MHD_RequestTerminationCode why) {
    auto* rq = static_cast<Request*>(*req_cls);
    if (!rq) return;
    *req_cls = nullptr;
    if (rq->expects_body && !rq->handled && why != MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN) {
      // The client went away, or was cut off at a deadline, before its body
      // arrived whole: counted like any other refusal, and no route runs (an
      // answer would have nowhere to go).
      api->body_broken(rq->api);
    }
    release(*rq);
    if (rq->answer_held) give_back_answer(rq->answer_holder, rq->group, rq->answer_held);  // made, never sent
    if (opt.access_log) log_access(*rq, why);
    if (rq->conn) {
      rq->conn->requests++;
      rq->conn->enter(kIdle);
    }
    in_flight--;
    delete rq;
  }

  void log_access(const Request& rq, MHD_RequestTerminationCode why) {
    double ms = static_cast<double>(now_us() - rq.start_us) / 1000;
    std::string method = rq.api.method.empty() ? "-" : rq.api.method;
    const char* ended = why == MHD_REQUEST_TERMINATED_COMPLETED_OK         ? "complete"
                        : why == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED    ? "timed out"
                        : why == MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN    ? "server stopping"
                                                                           : "connection closed";
    if (opt.access_log_json) {  // one JSON object per line, for log shippers
      nlohmann::json j = {{"time", now_iso()},  {"client", rq.conn ? rq.conn->remote : "-"}, {"method", method},
                          {"target", rq.target}, {"status", rq.status}, {"bytes", rq.bytes_out},
                          {"ms", ms},            {"team", rq.team},     {"ended", ended}};
      log_line(LogLevel::kNote, dump_json(j));
      return;
    }
    std::string outcome = rq.status && why == MHD_REQUEST_TERMINATED_COMPLETED_OK
                              ? std::to_string(rq.status) + " (" + std::to_string(rq.bytes_out) + " bytes"
                              : (rq.status ? std::to_string(rq.status) + " not sent whole (" : "no answer (") +
                                    std::string(why == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED ? "timed out"
                                                : why == MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN ? "server stopping"
                                                                                                : "connection closed");
    log_linef(LogLevel::kNote, "%s %s %s %s -> %s, %.2f ms) team %s", now_iso().c_str(),
              rq.conn ? rq.conn->remote.c_str() : "-", ascii_printable(method).c_str(),
              ascii_printable(rq.target).c_str(), outcome.c_str(), ms,  // a client's bytes: no control sequence
              rq.team.empty() ? "-" : rq.team.c_str());
  }

  // --- The acceptor ----------------------------------------------------------

  // Accepts until stopped; MHD takes each socket (and closes it when a
  // connection cap refuses it).
  void accept_loop() {
    pollfd fds[2] = {{listen_fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
    while (true) {
      if (poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[1].revents) return;
      for (int burst = 0; burst < 64; ++burst) {
        sockaddr_storage addr{};
        socklen_t len = sizeof addr;
        int fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
          // EMFILE and the like: let the workers close some before trying again.
          if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          break;
        }
        const std::string peer = address_text(reinterpret_cast<sockaddr*>(&addr));
        if (capped_here(peer)) {
          std::lock_guard<std::mutex> g(peers_mu);
          if (peers[peer] >= opt.max_connections_per_address) {
            ::close(fd);  // as MHD's own cap does: accepted and closed at once
            continue;
          }
          ++peers[peer];
        }
        if (MHD_add_connection(daemon, fd, reinterpret_cast<sockaddr*>(&addr), len) != MHD_YES && capped_here(peer))
          release_peer(peer);
      }
    }
  }

  // --- The watchdog ----------------------------------------------------------

  // Shuts down each connection past its phase's deadline; MHD then sees the
  // connection end and closes it (completed() runs for a request in it).
  void sweep() {
    const int64_t now = now_ms();
    std::lock_guard<std::mutex> g(conns_mu);
    for (Conn* c : conns) {
      if (c->cut) continue;
      int phase = c->phase;
      int64_t since = c->since_ms;
      int64_t limit_s = 0;
      const char* reason = nullptr;
      switch (phase) {
        case kFresh:
        case kHead: limit_s = opt.header_timeout_s, reason = "header_timeout"; break;
        case kIdle: limit_s = opt.keep_alive_timeout_s; break;
        case kBody: limit_s = opt.body_timeout_s, reason = "body_timeout"; break;
        default: continue;
      }
      if (now - since <= limit_s * 1000) continue;
      ::shutdown(c->fd, SHUT_RDWR);
      c->cut = true;
      if (reason) metrics.reject("", reason);
    }
  }

  void watch() {
    int shortest = std::min({opt.header_timeout_s, opt.body_timeout_s, std::max(1, opt.keep_alive_timeout_s)});
    auto tick = std::chrono::milliseconds(std::clamp(shortest * 100, 20, 250));
    std::unique_lock<std::mutex> lk(watch_mu);
    while (!watch_stop) {
      watch_cv.wait_for(lk, tick);
      sweep();
      if (work) work->expire();  // requests that waited too long for a worker: 503
    }
  }

  void mhd_message(const char* fmt, va_list ap) {
    if (!starting) return;  // afterwards: about one client's connection, which the client sees itself
    char buf[512];
    vsnprintf(buf, sizeof buf, fmt, ap);
    start_messages += buf;
  }

  // --- Trampolines ------------------------------------------------------------

  static void on_message(void* cls, const char* fmt, va_list ap) { static_cast<Impl*>(cls)->mhd_message(fmt, ap); }
  static void on_connection(void* cls, MHD_Connection* c, void** socket_context, MHD_ConnectionNotificationCode code) {
    static_cast<Impl*>(cls)->connection_event(c, socket_context, code);
  }
  static void* on_request_line(void* cls, const char* target, MHD_Connection* c) {
    return static_cast<Impl*>(cls)->request_line(target, c);
  }
  static MHD_Result on_access(void* cls, MHD_Connection* c, const char* url, const char* method, const char*,
                              const char* upload, size_t* upload_size, void** req_cls) {
    return static_cast<Impl*>(cls)->access(c, url, method, upload, upload_size, req_cls);
  }
  static void on_completed(void* cls, MHD_Connection*, void** req_cls, MHD_RequestTerminationCode why) {
    static_cast<Impl*>(cls)->completed(req_cls, why);
  }
};

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { stop(); }

int Server::port() const { return impl_->port; }
Metrics& Server::metrics() { return impl_->metrics; }

void Server::stop() {
  Impl& s = *impl_;
  if (s.stopped.exchange(true)) return;
  s.stopping = true;
  if (s.acceptor.joinable()) {
    uint64_t one = 1;
    (void)!::write(s.wake_fd, &one, sizeof one);
    s.acceptor.join();
  }
  if (s.listen_fd >= 0) ::close(s.listen_fd);  // new connections are refused from here on
  s.listen_fd = -1;
  if (s.wake_fd >= 0) ::close(s.wake_fd);
  s.wake_fd = -1;
  if (s.daemon) {
    // Requests already begun (their request line in) finish and are
    // answered, each within its deadlines; then the rest, idle keep-alive
    // connections, are closed.
    const auto& o = s.opt;
    auto limit = std::chrono::seconds(std::max(o.header_timeout_s, o.body_timeout_s) +
                                      std::max(o.read_timeout_s, o.write_timeout_s) + 1);
    auto until = Clock::now() + limit;
    while (s.in_flight > 0 && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    // What still waits for a worker is answered 503 and what runs finishes;
    // every suspended connection is resumed (MHD must not stop with one).
    s.work->stop();
    until = Clock::now() + std::chrono::seconds(2);
    while (s.in_flight > 0 && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    MHD_stop_daemon(s.daemon);
    s.daemon = nullptr;
  }
  {
    std::lock_guard<std::mutex> g(s.watch_mu);
    s.watch_stop = true;
  }
  s.watch_cv.notify_all();
  if (s.watchdog.joinable()) s.watchdog.join();
}

namespace {

Status check_limits(const ServeOptions& o) {
  auto positive = [](int64_t v, const char* flag) {
    return v >= 1 ? Status::Ok() : Status::InvalidArgument(std::string(flag) + " must be at least 1");
  };
  if (o.threads < 1 || o.threads > 1024) return Status::InvalidArgument("--threads must be 1-1024");
  for (Status s : {positive(o.max_connections, "--max-connections"),
                   positive(o.max_connections_per_address, "--max-connections-per-address"),
                   positive(o.max_headers, "--max-headers"), positive(o.header_timeout_s, "--header-timeout"),
                   positive(o.body_timeout_s, "--body-timeout"), positive(o.read_timeout_s, "--timeout"),
                   positive(o.write_timeout_s, "--timeout"), positive(o.upload_memory_bytes, "--upload-memory"),
                   positive(o.collect_interval_s, "--collect-interval"),
                   positive(o.answer_memory_bytes, "--answer-memory")})
    if (!s.ok()) return s;
  if (o.max_header_bytes < 1024) return Status::InvalidArgument("--max-header-bytes must be at least 1K");
  if (o.api.max_manifest_bytes < 1024) return Status::InvalidArgument("--max-manifest must be at least 1K");
  if (o.api.max_answer_bytes < 65536) return Status::InvalidArgument("--max-answer must be at least 64K");
  if (o.upload_memory_per_token_bytes < 0) return Status::InvalidArgument("--upload-memory-per-token must be positive");
  if (o.collect_grace_s < 60) return Status::InvalidArgument("--collect-grace must be at least 60 seconds");
  if (!o.public_url.empty() && o.public_url.rfind("https://", 0) != 0 && o.public_url.rfind("http://", 0) != 0)
    return Status::InvalidArgument("--public-url `" + o.public_url.substr(0, 80) + "` is not an http:// or https:// URL");
  if (o.tls_cert_path.empty() != o.tls_key_path.empty())
    return Status::InvalidArgument("--tls-cert and --tls-key go together: give both, or neither for plain HTTP");
  return Status::Ok();
}

}  // namespace

Expected<std::unique_ptr<Server>> Server::Start(const ServeOptions& options) {
  MLK_RETURN_IF_ERROR(check_limits(options));
  auto impl = std::make_unique<Impl>();
  impl->opt = options;
  ServeOptions& o = impl->opt;
  // One body of the largest size always fits in the budget.
  o.upload_memory_bytes = std::max(o.upload_memory_bytes, o.api.max_body_bytes);
  if (o.upload_memory_per_token_bytes <= 0) o.upload_memory_per_token_bytes = o.upload_memory_bytes / 4;
  o.upload_memory_per_token_bytes =
      std::clamp(o.upload_memory_per_token_bytes, o.api.max_body_bytes, o.upload_memory_bytes);
  // The largest answer (a blob of --max-body) always fits; a client holds a quarter.
  o.answer_memory_bytes = std::max(o.answer_memory_bytes, o.api.max_body_bytes);
  o.answer_memory_per_client_bytes = std::max(o.answer_memory_bytes / 4, o.api.max_body_bytes);
  const bool tls = !o.tls_cert_path.empty();
  o.api.tls = tls || o.public_url.rfind("https://", 0) == 0;  // the cookie is Secure where clients speak HTTPS
  if (tls) {
    if (!MHD_is_feature_supported(MHD_FEATURE_TLS))
      return Status::InvalidArgument("--tls-cert: this libmicrohttpd was built without TLS");
    auto cert = read_file(o.tls_cert_path);
    if (!cert.ok()) return Status::IOError("--tls-cert " + o.tls_cert_path + ": " + cert.status().message());
    auto key = read_file(o.tls_key_path);
    if (!key.ok()) return Status::IOError("--tls-key " + o.tls_key_path + ": " + key.status().message());
    impl->tls_cert = std::move(*cert);
    impl->tls_key = std::move(*key);
  }
  BackendOptions backend{o.store_path, o.blobs, o.blob_cache_dir, o.blob_cache_bytes};
  // A session for each worker, each event loop (the token lookup before a
  // body is buffered) and the collector: no one waits for another's.
  const int loops = std::clamp(o.threads / 4, 1, 4);
  auto pool = SessionPool::Open(backend, o.threads + loops + 1);
  if (!pool.ok()) return pool.status();
  impl->pool = std::move(*pool);
  impl->api = std::make_unique<Api>(o.api, *impl->pool, impl->metrics);
  impl->collector = std::make_unique<BlobCollector>(*impl->pool, o.collect_interval_s, o.collect_grace_s);
  WorkQueue::Limits limits;
  limits.threads = o.threads;
  limits.max_queued = o.max_connections;  // one request per connection at a time
  limits.max_running_per_client = std::max(1, o.threads / 2);
  limits.max_per_client = std::max(limits.max_running_per_client, o.max_connections_per_address);
  limits.max_wait_ms = int64_t{1000} * std::max(o.read_timeout_s, o.write_timeout_s);
  impl->work = std::make_unique<WorkQueue>(limits);

  int fd = impl->listen_fd = listen_on(o.host, o.port, impl->port);
  if (fd < 0)
    return Status::IOError("cannot listen on " + o.host + ":" + std::to_string(o.port) + ": " + std::strerror(errno) +
                           " (is another server there? is the address this machine's?)");
  impl->wake_fd = eventfd(0, EFD_CLOEXEC);
  if (impl->wake_fd < 0) {
    ::close(fd);
    return Status::IOError(std::string("cannot make an eventfd: ") + std::strerror(errno));
  }
  Impl* self = impl.get();
  MHD_OptionItem tls_items[] = {{MHD_OPTION_HTTPS_MEM_CERT, 0, const_cast<char*>(impl->tls_cert.c_str())},
                                {MHD_OPTION_HTTPS_MEM_KEY, 0, const_cast<char*>(impl->tls_key.c_str())},
                                {MHD_OPTION_END, 0, nullptr}};
  MHD_OptionItem no_items[] = {{MHD_OPTION_END, 0, nullptr}};
  // The connection's memory pool holds its head (request line and header
  // fields, and MHD's record of each), then the answer's headers: twice the
  // head limit and some, so that the limits below are ours to say, in JSON.
  size_t pool_bytes = static_cast<size_t>(2 * o.max_header_bytes + 16 * 1024);
  unsigned flags = MHD_USE_AUTO | MHD_USE_INTERNAL_POLLING_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_NO_LISTEN_SOCKET |
                   MHD_USE_ERROR_LOG | (tls ? MHD_USE_TLS : 0);
  impl->daemon = MHD_start_daemon(
      flags, 0, nullptr, nullptr, &Impl::on_access, self,
      MHD_OPTION_EXTERNAL_LOGGER, &Impl::on_message, self,
      MHD_OPTION_THREAD_POOL_SIZE, static_cast<unsigned>(loops > 1 ? loops : 0),
      MHD_OPTION_CONNECTION_LIMIT, static_cast<unsigned>(o.max_connections),
      MHD_OPTION_PER_IP_CONNECTION_LIMIT, static_cast<unsigned>(per_peer_connections(o)),
      MHD_OPTION_CONNECTION_TIMEOUT, static_cast<unsigned>(std::max(o.read_timeout_s, o.write_timeout_s)),
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, pool_bytes,
      MHD_OPTION_NOTIFY_CONNECTION, &Impl::on_connection, self,
      MHD_OPTION_URI_LOG_CALLBACK, &Impl::on_request_line, self,
      MHD_OPTION_NOTIFY_COMPLETED, &Impl::on_completed, self,
      MHD_OPTION_ARRAY, tls ? tls_items : no_items,
      MHD_OPTION_END);
  impl->starting = false;
  if (!impl->daemon) {
    ::close(fd);
    ::close(impl->wake_fd);
    std::string said = impl->start_messages;
    while (!said.empty() && (said.back() == '\n' || said.back() == ' ')) said.pop_back();
    if (tls)
      return Status::InvalidArgument("cannot serve TLS with --tls-cert " + o.tls_cert_path + " and --tls-key " +
                                     o.tls_key_path + " (PEM files of a certificate and its private key?)" +
                                     (said.empty() ? "" : ": " + said));
    return Status::IOError("cannot start the HTTP server" + (said.empty() ? "" : ": " + said));
  }
  impl->watchdog = std::thread([self] { self->watch(); });
  impl->acceptor = std::thread([self] { self->accept_loop(); });
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

namespace {

// The store for people: a URL without its user and password.
std::string shown_store(const std::string& spec) {
  size_t scheme = spec.find("://"), at = spec.find('@');
  if (scheme == std::string::npos || at == std::string::npos || at < scheme) return spec;
  return spec.substr(0, scheme + 3) + spec.substr(at + 1);
}

// Each connection is a descriptor: let --max-connections of them be open.
void raise_descriptor_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
  }
}

}  // namespace

Status serve_until_signal(const ServeOptions& options) {
  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, &old);  // inherited by every thread started below
  signal(SIGPIPE, SIG_IGN);                // a client gone mid-answer is its own problem
  raise_descriptor_limit();
  auto server = Server::Start(options);
  if (!server.ok()) {
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return server.status();
  }
  std::printf("mlk serve: listening on %s://%s:%d (store %s, %d worker threads)\n",
              options.tls_cert_path.empty() ? "http" : "https", options.host.c_str(), (*server)->port(),
              shown_store(options.store_path).c_str(), options.threads);
  std::fflush(stdout);
  int sig = 0;
  // SIGHUP (what a service manager's "reload" sends) reloads nothing: tokens
  // are read from the store on every request, and options need a restart.
  while (sigwait(&set, &sig) == 0 && sig == SIGHUP)
    log_line(LogLevel::kNote,
             "mlk serve: SIGHUP: nothing to reload: tokens are read from the store on every request (created or "
             "revoked ones count at once); flags and --config take effect on a restart");
  log_linef(LogLevel::kNote, "mlk serve: %s: no new connections; finishing the requests in flight",
            sig == SIGTERM ? "SIGTERM" : "SIGINT");
  (*server)->stop();
  log_line(LogLevel::kNote, "mlk serve: stopped");
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return Status::Ok();
}

}  // namespace mlk::service
