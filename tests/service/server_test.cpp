// service/ over real sockets: concurrent PUT and GET of one key, a graceful
// stop that finishes an upload in flight, truncated and oversized uploads,
// and the HTTP client (push, pull, retries with backoff, refusals, its notes
// through the log sink).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>
#include <vector>

#include "../cache/test_util.h"
#include "base/log.h"
#include "base/sha256.h"
#include "client/cli_cache.h"
#include "client/remote_store.h"
#include "service/server.h"
#include "service/service_db.h"
#include "service/tables.h"

namespace mlk::service {
namespace {

using cache::testing::HasCode;
using client::is_remote_url;
using client::RemoteOptions;
using client::RemoteStore;
using cache::testing::IsOk;
using cache::testing::TempDir;
using nlohmann::json;

// A plain TCP connection, to send exactly the bytes a broken client would.
class RawConn {
 public:
  explicit RawConn(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RawConn() { close(); }
  bool ok() const { return ok_; }
  void send_all(const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;
      off += static_cast<size_t>(n);
    }
  }
  std::string read_all() {
    std::string out;
    char buf[4096];
    while (true) {
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
};

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override { start(0); }
  void start(int port) {
    ServeOptions o;
    o.store_path = dir.file("serve.db");
    o.port = port;
    o.threads = 6;
    o.read_timeout_s = 2;
    o.keep_alive_timeout_s = 1;
    o.api.max_body_bytes = 1 << 20;
    auto s = Server::Start(o);
    ASSERT_TRUE(IsOk(s));
    server = std::move(*s);
    if (token.empty()) {
      auto db = open_service_db(o.store_path, false);
      token = create_token(**db, "alpha", kScopeRead | kScopeWriteBlobs | kScopeWriteEntries, "")->token;
      read_only = create_token(**db, "alpha", kScopeRead, "")->token;
    }
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server->port()); }
  httplib::Client client() {
    httplib::Client c(url());
    c.set_bearer_token_auth(token.c_str());
    c.set_read_timeout(10, 0);
    return c;
  }
  std::unique_ptr<RemoteStore> remote(const std::string& tok, int attempts = 3, std::string at = "") {
    RemoteOptions o;
    o.url = at.empty() ? url() : at;
    o.token = tok;
    o.attempts = attempts;
    o.backoff_ms = 20;
    auto r = RemoteStore::Open(o);
    EXPECT_TRUE(IsOk(r));
    return std::move(*r);
  }
  std::string blob_count() {
    auto s = cache::testing::open_store(dir.file("serve.db"));
    auto st = s->stats();
    return std::to_string(st->blobs) + "/" + std::to_string(st->entries);
  }

  TempDir dir;
  std::unique_ptr<Server> server;
  std::string token, read_only;
};

TEST_F(ServerTest, ConcurrentPutAndGetOfOneKey) {
  // Two complete versions of entry K; readers must only ever see one of them.
  // Replacing an entry deletes the blobs only the old version used, so a
  // writer uploads its blobs before each PUT of the entry, and repeats both
  // when a concurrent replacement deleted them in between (409), as
  // RemoteStore::push does.
  std::vector<std::string> versions;
  std::vector<std::map<std::string, std::string>> blobs(2);
  for (int v = 0; v < 2; ++v) {
    blobs[v] = {{"a", "version " + std::to_string(v) + " a"}, {"b", cache::testing::bytes_of(5000 + v, v)}};
    cache::Manifest m;
    for (const auto& [n, b] : blobs[v]) m.files[n] = cache::BlobRef{sha256_hex(b), static_cast<int64_t>(b.size())};
    m.provenance.host = "h";
    m.provenance.time = 1;
    versions.push_back(cache::manifest_to_json(m));
  }
  std::atomic<int> conflicts{0};
  std::atomic<bool> done{false};
  std::atomic<int> bad{0}, reads{0}, writes{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w)
    threads.emplace_back([&, w] {
      auto cw = client();
      for (int i = 0; i < 40; ++i) {
        int v = (i + w) % 2;
        int status = 0;
        std::string body;
        for (int attempt = 0; attempt < 5; ++attempt) {
          for (const auto& [n, b] : blobs[v]) {
            auto up = cw.Put(("/v1/blobs/" + sha256_hex(b)).c_str(), b, "application/octet-stream");
            if (!up || (up->status != 200 && up->status != 201)) bad++;
          }
          auto r = cw.Put("/v1/entries/K", versions[v], "application/json");
          status = r ? r->status : -1;
          body = r ? r->body : httplib::to_string(r.error());
          if (status != 409) break;
          conflicts++;
        }
        if (status != 201) {
          bad++;
          ADD_FAILURE() << "entry PUT: " << status << " " << body;
        }
        writes++;
        auto o = cw.Put(("/ccache/" + std::string(33, 'k')).c_str(), "object " + std::to_string((i + w) % 2), "application/octet-stream");
        if (!o || o->status != 201) {
          bad++;
          ADD_FAILURE() << "ccache PUT: " << (o ? std::to_string(o->status) + " " + o->body : httplib::to_string(o.error()));
        }
      }
    });
  for (int rd = 0; rd < 3; ++rd)
    threads.emplace_back([&] {
      auto cr = client();
      while (!done) {
        auto r = cr.Get("/v1/entries/K");
        if (!r || (r->status != 200 && r->status != 404)) {
          bad++;
          ADD_FAILURE() << "entry GET: " << (r ? std::to_string(r->status) + " " + r->body : httplib::to_string(r.error()));
          continue;
        }
        if (r->status == 200) {
          std::string m = json::parse(r->body)["manifest"].dump();
          if (m != versions[0] && m != versions[1]) {
            bad++;
            ADD_FAILURE() << "entry GET: " << m;
          }
          reads++;
        }
        auto o = cr.Get(("/ccache/" + std::string(33, 'k')).c_str());
        if (o && o->status == 200 && o->body != "object 0" && o->body != "object 1") {
          bad++;
          ADD_FAILURE() << "ccache GET: " << o->body;
        }
      }
    });
  for (int i = 0; i < 2; ++i) threads[i].join();
  done = true;
  for (size_t i = 2; i < threads.size(); ++i) threads[i].join();
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(writes, 80);
  EXPECT_GT(reads, 0);
  std::printf("concurrent: %d entry reads, %d conflicts retried\n", reads.load(), conflicts.load());
  auto s = cache::testing::open_store(dir.file("serve.db"));
  EXPECT_TRUE(s->verify()->consistent());
}

TEST_F(ServerTest, StopFinishesAnUploadInFlight) {
  std::string bytes = cache::testing::bytes_of(200000, 7);
  std::string d = sha256_hex(bytes);
  RawConn conn(server->port());
  ASSERT_TRUE(conn.ok());
  conn.send_all("PUT /v1/blobs/" + d + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token +
                "\r\nContent-Type: application/octet-stream\r\nContent-Length: " + std::to_string(bytes.size()) + "\r\n\r\n");
  conn.send_all(bytes.substr(0, 100000));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the request is being read now
  int port = server->port();
  std::thread stopper([&] { server->stop(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  RawConn late(port);
  EXPECT_FALSE(late.ok()) << "a stopping server must not accept new connections";
  conn.send_all(bytes.substr(100000));
  std::string response = conn.read_all();
  stopper.join();
  EXPECT_EQ(response.rfind("HTTP/1.1 201", 0), 0u) << response.substr(0, 200);
  auto s = cache::testing::open_store(dir.file("serve.db"));
  auto got = s->get_blob(d);
  ASSERT_TRUE(IsOk(got));
  EXPECT_EQ(*got, bytes);
}

TEST_F(ServerTest, TruncatedUploadStoresNothing) {
  std::string before = blob_count();
  std::string bytes = cache::testing::bytes_of(10000, 9);
  {
    RawConn conn(server->port());
    conn.send_all("PUT /v1/blobs/" + sha256_hex(bytes) + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token +
                  "\r\nContent-Length: 10000\r\n\r\n" + bytes.substr(0, 4000));
  }  // closed mid-body
  {
    RawConn conn(server->port());
    conn.send_all("PUT /ccache/" + std::string(33, 'q') + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token +
                  "\r\nContent-Length: 10000\r\n\r\n" + bytes.substr(0, 4000));
  }
  {
    // A stalled client is dropped after the read timeout (2 s here) and answered 400.
    RawConn conn(server->port());
    conn.send_all("PUT /ccache/" + std::string(33, 'r') + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token +
                  "\r\nContent-Length: 10000\r\n\r\n" + bytes.substr(0, 4000));
    std::string r = conn.read_all();
    EXPECT_EQ(r.rfind("HTTP/1.1 400", 0), 0u) << r.substr(0, 200);
    EXPECT_NE(r.find("did not arrive whole"), std::string::npos) << r;
  }
  EXPECT_EQ(blob_count(), before);
  EXPECT_GE(server->metrics().counter("mlk_rejects", {"alpha", "broken_body"}), 1);
}

TEST_F(ServerTest, OversizedBodiesAre413WithAJsonBody) {
  auto c = client();
  std::string big(1 << 20 | 1, 'x');
  auto r = c.Put(("/v1/blobs/" + sha256_hex(big)).c_str(), big, "application/octet-stream");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_NE(r->body.find("\"error\""), std::string::npos) << r->body;
  // Chunked (no Content-Length): the server counts while it reads.
  auto chunked = c.Put(
      ("/v1/blobs/" + sha256_hex(big)).c_str(),
      [&](size_t offset, httplib::DataSink& sink) {
        size_t n = std::min<size_t>(65536, big.size() - offset);
        sink.write(big.data() + offset, n);
        if (offset + n == big.size()) sink.done();
        return true;
      },
      "application/octet-stream");
  if (chunked) {  // the server may close before the client has sent everything
    EXPECT_EQ(chunked->status, 413);
  }
  // The connection protocol is intact afterwards.
  auto after = client().Get("/v1/status");
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 200);
  EXPECT_EQ(blob_count(), "0/0");
}

TEST_F(ServerTest, RejectedBodiesDoNotDesyncKeepAlive) {
  // A 401 PUT whose body the server never wanted, then a good request on the
  // same connection: the body must have been drained, not parsed as a request.
  httplib::Client c(url());
  c.set_keep_alive(true);
  std::string body = "GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n";
  auto r1 = c.Put(("/v1/blobs/" + sha256_hex(body)).c_str(), body, "application/octet-stream");
  ASSERT_TRUE(r1);
  EXPECT_EQ(r1->status, 401);
  c.set_bearer_token_auth(token.c_str());
  auto r2 = c.Get("/v1/whoami");
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->status, 200) << r2->body;
}

TEST_F(ServerTest, PushAndPullThroughTheClient) {
  auto a = cache::testing::open_store(dir.file("a.db"));
  auto b = cache::testing::open_store(dir.file("b.db"));
  std::map<std::string, std::string> files = {{"libk.so", cache::testing::bytes_of(30000, 1)},
                                              {"manifest.json", "{\"fn\":\"f\"}"}};
  cache::Provenance p = cache::testing::test_provenance("mlk tune");
  ASSERT_TRUE(IsOk(a->put_entry("default", "key1", R"({"fn":"f","target":"host"})", p, files)));
  auto r = remote(token);
  auto pushed = r->push(*a, "default", "key1");
  ASSERT_TRUE(IsOk(pushed));
  EXPECT_EQ(pushed->blobs_sent, 2);
  auto again = r->push(*a, "default", "key1");
  ASSERT_TRUE(IsOk(again));
  EXPECT_EQ(again->blobs_skipped, 2);  // the server has them: HEAD, no upload

  auto pulled = remote(read_only)->pull(*b, "team", "key1");
  ASSERT_TRUE(IsOk(pulled));
  auto art = b->get_entry("team", "key1");
  ASSERT_TRUE(IsOk(art));
  EXPECT_EQ(art->files, files);
  auto orig = a->show_entry("default", "key1");
  EXPECT_EQ(art->info.manifest.provenance, orig->manifest.provenance);  // host and time of the producer
  EXPECT_EQ(art->info.manifest.meta_json, orig->manifest.meta_json);

  EXPECT_TRUE(HasCode(remote(token)->pull(*b, "team", "nokey"), Status::Code::kNotFound));
  auto refused = remote(read_only)->push(*a, "default", "key1");
  ASSERT_TRUE(HasCode(refused, Status::Code::kInvalidArgument));
  EXPECT_NE(refused.status().message().find("403"), std::string::npos) << refused.status().message();
  auto unknown = remote("mlk_not_a_token")->whoami();
  ASSERT_TRUE(HasCode(unknown, Status::Code::kInvalidArgument));
  EXPECT_NE(unknown.status().message().find("401"), std::string::npos);
  EXPECT_EQ(*remote(token)->whoami(), "alpha");
}

TEST_F(ServerTest, ClientRetriesWithBackoffUntilTheServerIsUp) {
  int port = server->port();
  std::string at = url();
  auto r = remote(token, 8, at);  // waits 20, 40, 80, 160, ... ms between tries
  server->stop();
  server.reset();
  auto down = remote(token, 2, at);
  auto t0 = std::chrono::steady_clock::now();
  auto failed = down->has_blob(sha256_hex("x"));
  ASSERT_TRUE(HasCode(failed, Status::Code::kIOError));
  EXPECT_NE(failed.status().message().find("after 2 attempts"), std::string::npos) << failed.status().message();
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(10));
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    start(port);
  });
  auto ok = r->has_blob(sha256_hex("x"));
  later.join();
  ASSERT_TRUE(IsOk(ok));
  EXPECT_FALSE(*ok);
}

TEST_F(ServerTest, UrlsTheClientRefuses) {
  for (std::string bad : {"ftp://x", "http://", "http://user:tok@host:1", "http://ho st:1", "/path/to/store.db"}) {
    RemoteOptions o;
    o.url = bad;
    EXPECT_TRUE(HasCode(RemoteStore::Open(o), Status::Code::kInvalidArgument)) << bad;
  }
  EXPECT_TRUE(is_remote_url("http://h:1"));
  EXPECT_FALSE(is_remote_url("cache.db"));
}

// The cache as the commands and the runtime see it (client/cli_cache.h)
// reports pushes and a refusing server through the log sink (base/log.h),
// never on stderr.
TEST_F(ServerTest, ClientNotesGoToTheLogSink) {
  std::vector<std::pair<LogLevel, std::string>> lines;
  set_log_sink([&](LogLevel level, std::string_view line) { lines.emplace_back(level, std::string(line)); });
  std::string mirror = dir.file("mirror.db");
  setenv("MLK_LOCAL_CACHE", mirror.c_str(), 1);
  ::testing::internal::CaptureStderr();
  {
    auto c = client::CliCache::Open(url(), "default", "mlk test", /*create_if_missing=*/true, token);
    ASSERT_TRUE(IsOk(c));
    ASSERT_TRUE(IsOk((*c)->store()->put_entry("default", "key1", "{}", cache::testing::test_provenance("mlk tune"),
                                              {{"k", cache::testing::bytes_of(100, 1)}})));
    EXPECT_TRUE(IsOk((*c)->push("key1")));
    auto refused = client::CliCache::Open(url(), "default", "mlk test", true, "mlk_not_a_token");
    ASSERT_TRUE(IsOk(refused));
    EXPECT_FALSE((*refused)->push("key1").ok());
  }
  std::string err = ::testing::internal::GetCapturedStderr();
  unsetenv("MLK_LOCAL_CACHE");
  set_log_sink(nullptr);
  EXPECT_EQ(err, "");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].first, LogLevel::kNote);
  EXPECT_EQ(lines[0].second.rfind("mlk test: pushed key1 to " + url() + " (1 blobs sent, 0 already there, ", 0), 0u)
      << lines[0].second;
  EXPECT_EQ(lines[1].first, LogLevel::kWarning);
  EXPECT_NE(lines[1].second.find("401"), std::string::npos) << lines[1].second;
  EXPECT_NE(lines[1].second.find("; using the local store " + mirror + " only"), std::string::npos) << lines[1].second;
}

TEST_F(ServerTest, ReadOrderReadsAGrantedNamespaceAndSaysWhenTheGrantIsRevoked) {
  std::string beta, mirror_a = dir.file("mirror-a.db"), mirror_b = dir.file("mirror-b.db");
  std::unique_ptr<ServiceTables> tables;
  {
    auto t = open_tables(dir.file("serve.db"), false);
    ASSERT_TRUE(IsOk(t));
    tables = std::move(*t);
    beta = (*tables->create_token("beta", kScopeRead | kScopeWriteBlobs | kScopeWriteEntries, "")).token;
  }
  setenv("MLK_LOCAL_CACHE", mirror_a.c_str(), 1);
  {
    auto a = client::CliCache::Open(url(), "default", "mlk test", true, token);  // team alpha
    ASSERT_TRUE(IsOk(a));
    ASSERT_TRUE(IsOk((*a)->store()->put_entry("default", "tuned", "{}", cache::testing::test_provenance("mlk tune"),
                                              {{"k", cache::testing::bytes_of(300, 7)}})));
    ASSERT_TRUE(IsOk((*a)->push("tuned")));
  }
  std::vector<std::pair<LogLevel, std::string>> lines;
  set_log_sink([&](LogLevel level, std::string_view line) { lines.emplace_back(level, std::string(line)); });
  setenv("MLK_LOCAL_CACHE", mirror_b.c_str(), 1);
  auto b = client::CliCache::Open(url(), "default", "mlk test", true, beta);
  ASSERT_TRUE(IsOk(b));
  EXPECT_EQ((*b)->set_read_order("alpha", beta).message(),
            "the read order `alpha` must name `own` (where this team writes), e.g. own,shared-release");
  EXPECT_EQ((*b)->set_read_order("own,no/slash", beta).message(),
            "read order `own,no/slash`: namespace `no/slash` must be 1-64 characters from [A-Za-z0-9._-], not starting "
            "with `.` or `-`");
  ASSERT_TRUE(IsOk((*b)->set_read_order("own,alpha", beta)));
  // No grant: a 403 that is said, not a silent miss.
  EXPECT_FALSE((*b)->pull("tuned"));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].first, LogLevel::kWarning);
  EXPECT_NE(lines[0].second.find("HTTP 403: token mlk_"), std::string::npos) << lines[0].second;
  EXPECT_NE(lines[0].second.find("may not use namespace `alpha`; skipping namespace `alpha`"), std::string::npos)
      << lines[0].second;
  ASSERT_TRUE(IsOk(tables->grant("alpha", "beta", 100)));
  EXPECT_TRUE((*b)->pull("tuned"));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1].second.rfind("mlk test: pulled tuned from " + url() + " namespace `alpha` (1 files, ", 0), 0u)
      << lines[1].second;
  auto pulled = (*b)->store()->get_entry("default", "tuned");
  ASSERT_TRUE(IsOk(pulled));
  EXPECT_EQ(pulled->files.at("k"), cache::testing::bytes_of(300, 7));
  ASSERT_TRUE(IsOk((*b)->store()->rm("default", "tuned")));
  ASSERT_TRUE(IsOk(tables->revoke_grant("alpha", "beta", 200)));
  EXPECT_FALSE((*b)->pull("tuned"));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(lines[2].second.find("its read grant to team `beta` was revoked; skipping namespace `alpha`"),
            std::string::npos)
      << lines[2].second;
  EXPECT_EQ(server->metrics().counter("mlk_grant_reads", {"alpha", "beta"}), 2);  // the entry, then its blob
  EXPECT_EQ(server->metrics().counter("mlk_rejects", {"beta", "grant_revoked"}), 1);
  EXPECT_TRUE(HasCode(tables->revoke_grant("alpha", "beta", 300), Status::Code::kNotFound));
  set_log_sink(nullptr);
  unsetenv("MLK_LOCAL_CACHE");
}

TEST_F(ServerTest, ClientFailsOverToTheNextServerOfAList) {
  // A port nothing listens on, then the live server: every request still succeeds.
  int dead = 0;
  {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
    dead = ntohs(a.sin_port);
    ::close(fd);  // bound, never listened on, closed: connections are refused
  }
  std::string list = "http://127.0.0.1:" + std::to_string(dead) + "," + url();
  auto r = remote(token, 1, list);
  EXPECT_EQ(r->url(), list);
  ASSERT_TRUE(IsOk(r->put_blob("fail over")));
  auto back = r->get_blob(sha256_hex("fail over"));
  ASSERT_TRUE(IsOk(back));
  EXPECT_EQ(*back, "fail over");
  // Both down: the error names the list and counts a try per server.
  auto none = remote(token, 1, "http://127.0.0.1:" + std::to_string(dead) + ",http://127.0.0.1:" + std::to_string(dead));
  auto miss = none->get_blob(sha256_hex("fail over"));
  EXPECT_TRUE(HasCode(miss, Status::Code::kIOError));
  EXPECT_NE(miss.status().message().find("(after 2 attempts)"), std::string::npos) << miss.status().message();
  RemoteOptions o;
  o.url = url() + "/a," + url() + "/b";
  EXPECT_EQ(RemoteStore::Open(o).status().message(),
            "cache URLs `" + o.url + "`: the servers of a list must share one path prefix");
  o.url = url() + ",ftp://x";
  EXPECT_EQ(RemoteStore::Open(o).status().message(),
            "cache URL `ftp://x`: not an http:// or https:// URL; expected http://HOST:PORT (a `mlk serve`)");
}

}  // namespace
}  // namespace mlk::service
