// libFuzzer target: requests through the server's request handling
// (service::Api::handle, service/api.h), the layer every transport hands its
// requests to, against an SQLite store in a temporary directory (the
// SessionPool as tests/service/api_test.cpp builds it) with real tokens.
//
// The input is one to six HTTP-like requests separated by a line "%%":
//
//   METHOD SP TARGET LF          TARGET = PATH[?QUERY], percent-decoded like a transport
//   (NAME: VALUE LF)*            Authorization, Cookie, Origin, Sec-Fetch-Site, Host,
//                                Range, If-Range (applied to a GET's answer as the
//                                transport does, service/http_range.h)
//   LF
//   BODY                         the rest, up to the next "\n%%\n"
//
// and these are replaced before the request is made, so that mutations reach
// past authentication and digest checks:
//   $RW $RO $WB $WK $ADM $BETA  the tokens of alpha (read,write-blobs,write-entries),
//                            alpha (read), alpha (write-blobs), alpha (worker),
//                            ops (admin), beta (read,write-blobs,write-entries)
//   $WORKER $SECRET $JOB     (target and body) the worker id and secret of the
//                            last worker registered by this input, the id of
//                            its last job submitted or leased
//   $BODYSHA $BODYSIZE       (target and body) the sha256 and size of this request's body
//   $PREVSHA $PREVSIZE       (body) the same of the previous request's body
//   @NEST:N@                 (body) N '[' then N ']' (N <= 200000): deep nesting
//                            beyond the fuzzer's input length limit
//
// Invariants (a violation aborts, and libFuzzer keeps the input):
//   - Api::handle returns (no crash, no exception, no sanitizer report);
//   - the status is one the API documents (docs/api.md), and never 500: an
//     internal error on a request is a bug;
//   - response header names and values hold no CR, LF or NUL;
//   - an error (>= 400) body is JSON {"error": "..."} but for HTML pages under /ui;
//     a 2xx application/json body is JSON;
//   - a rejected request (>= 400) changes nothing in the store (its stats and
//     the staged bytes of every namespace);
//   - a Range never makes an answer larger than the whole body: one range is
//     206 with Content-Range and at most the body's bytes, several are 416.
//
// MLK_FUZZ_API_TRACE=1 prints each request's method, path and status (to see
// how far a seed gets: fuzz_api -runs=0 SEED).
#include <unistd.h>

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "base/sha256.h"
#include "service/api.h"
#include "service/http_range.h"
#include "service/metrics.h"
#include "service/session_pool.h"

namespace {

using namespace mlk::service;

struct World {
  std::string dir;
  Metrics metrics;
  std::unique_ptr<SessionPool> pool;
  std::unique_ptr<Api> api;
  std::vector<std::pair<std::string, std::string>> tokens;  // placeholder -> token
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "fuzz_api: %s\n", what.c_str());
  std::abort();
}

World& world() {
  static World* w = [] {
    auto* w = new World;
    const char* shm = "/dev/shm";
    std::string base = std::filesystem::is_directory(shm) && access(shm, W_OK) == 0 ? shm : "/tmp";
    std::string tmpl = base + "/mlk_fuzz_api.XXXXXX";
    if (!mkdtemp(tmpl.data())) die("mkdtemp failed");
    w->dir = tmpl;
    std::atexit([] { std::error_code ec; std::filesystem::remove_all(world().dir, ec); });
    BackendOptions backend;
    backend.store = w->dir + "/serve.db";
    auto pool = SessionPool::Open(backend, 1);
    if (!pool.ok()) die("cannot open the store: " + pool.status().message());
    w->pool = std::move(*pool);
    ApiOptions o;
    o.max_body_bytes = int64_t{1} << 20;
    o.quotas.limits["quota"] = 4096;  // a namespace to reach 507 in
    o.require_verified["release"] = {"types", "identity"};
    o.bench_history_path = w->dir + "/serve.db.bench-history";
    w->api = std::make_unique<Api>(o, *w->pool, w->metrics);
    auto lease = w->pool->acquire();
    auto mk = [&](const char* name, const std::string& team, Scopes s) {
      auto t = lease.tables().create_token(team, s, "fuzz");
      if (!t.ok()) die("cannot create a token: " + t.status().message());
      w->tokens.push_back({name, t->token});
    };
    mk("$RW", "alpha", kScopeRead | kScopeWriteBlobs | kScopeWriteEntries);
    mk("$RO", "alpha", kScopeRead);
    mk("$WB", "alpha", kScopeWriteBlobs);
    mk("$WK", "alpha", kScopeWorker);
    mk("$ADM", "ops", kScopeAdmin);
    mk("$BETA", "beta", kScopeRead | kScopeWriteBlobs | kScopeWriteEntries);
    if (!lease.tables().grant("alpha", "beta", 1).ok()) die("cannot grant");
    return w;
  }();
  return *w;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
}

// @NEST:N@ -> N '[' and N ']'.
void expand_nesting(std::string& body) {
  size_t at = body.find("@NEST:");
  if (at == std::string::npos) return;
  size_t end = body.find('@', at + 6);
  if (end == std::string::npos || end - at - 6 > 6) return;
  size_t n = 0;
  for (size_t i = at + 6; i < end; ++i) {
    if (body[i] < '0' || body[i] > '9') return;
    n = n * 10 + static_cast<size_t>(body[i] - '0');
  }
  n = std::min<size_t>(n, 200000);
  body.replace(at, end + 1 - at, std::string(n, '[') + std::string(n, ']'));
}

int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX decoded (and '+' as a space when `plus`); broken escapes kept.
std::string url_decode(const std::string& s, bool plus) {
  std::string o;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
      o += static_cast<char>(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
      i += 2;
    } else {
      o += plus && s[i] == '+' ? ' ' : s[i];
    }
  }
  return o;
}

// What earlier answers of this input handed out, for $WORKER, $SECRET, $JOB.
struct Handed {
  std::string worker = "0", secret = "none", job = "0";
  void take(const ApiResponse& r) {
    auto j = nlohmann::json::parse(r.body, nullptr, false);
    if (!j.is_object()) return;
    auto id_of = [](const nlohmann::json& o) {
      return o.is_object() && o.contains("id") && o["id"].is_number_integer() ? std::to_string(o["id"].get<int64_t>())
                                                                              : std::string();
    };
    if (auto id = id_of(j); !id.empty()) job = id;
    if (j.contains("job")) {
      if (auto id = id_of(j["job"]); !id.empty()) job = id;
    }
    if (j.contains("worker") && j["worker"].is_object()) {
      if (auto id = id_of(j["worker"]); !id.empty()) worker = id;
      if (j["worker"].contains("secret") && j["worker"]["secret"].is_string()) secret = j["worker"]["secret"];
    }
  }
  void apply(std::string& s) const {
    replace_all(s, "$WORKER", worker);
    replace_all(s, "$SECRET", secret);
    replace_all(s, "$JOB", job);
  }
};

struct Parsed {
  ApiRequest req;
  std::string body;
  std::string range, if_range;
};

Parsed parse_one(const std::string& text, const std::string& prev_body, const Handed& handed) {
  Parsed p;
  size_t head_end = text.find("\n\n");
  std::string head = text.substr(0, head_end);
  p.body = head_end == std::string::npos ? "" : text.substr(head_end + 2);
  expand_nesting(p.body);
  const World& w = world();
  for (const auto& [k, v] : w.tokens) replace_all(p.body, k, v);
  replace_all(p.body, "$PREVSHA", mlk::sha256_hex(prev_body));
  replace_all(p.body, "$PREVSIZE", std::to_string(prev_body.size()));
  handed.apply(p.body);
  std::string body_sha = mlk::sha256_hex(p.body);
  replace_all(p.body, "$BODYSIZE", std::to_string(p.body.size()));

  size_t nl = head.find('\n');
  std::string line = head.substr(0, nl);
  size_t sp = line.find(' ');
  p.req.method = line.substr(0, sp);
  std::string target = sp == std::string::npos ? "/" : line.substr(sp + 1);
  if (size_t sp2 = target.find(' '); sp2 != std::string::npos) target.resize(sp2);  // " HTTP/1.1"
  for (const auto& [k, v] : w.tokens) replace_all(target, k, v);
  replace_all(target, "$BODYSHA", body_sha);
  replace_all(target, "$BODYSIZE", std::to_string(p.body.size()));
  handed.apply(target);
  size_t q = target.find('?');
  p.req.path = url_decode(target.substr(0, q), false);
  if (q != std::string::npos) {
    std::string query = target.substr(q + 1);
    size_t start = 0;
    while (start <= query.size()) {
      size_t amp = query.find('&', start);
      std::string pair = query.substr(start, amp == std::string::npos ? std::string::npos : amp - start);
      size_t eq = pair.find('=');
      std::string k = url_decode(pair.substr(0, eq), true);
      std::string v = eq == std::string::npos ? "" : url_decode(pair.substr(eq + 1), true);
      if (!k.empty()) p.req.query.emplace(k, v);  // the first of repeated parameters, like the transport
      if (amp == std::string::npos) break;
      start = amp + 1;
    }
  }
  size_t at = nl == std::string::npos ? head.size() : nl + 1;
  while (at < head.size()) {
    size_t e = head.find('\n', at);
    std::string h = head.substr(at, e == std::string::npos ? std::string::npos : e - at);
    at = e == std::string::npos ? head.size() : e + 1;
    size_t colon = h.find(':');
    if (colon == std::string::npos) continue;
    std::string name = h.substr(0, colon), value = h.substr(colon + 1);
    while (!value.empty() && value[0] == ' ') value.erase(0, 1);
    for (const auto& [k, v] : w.tokens) replace_all(value, k, v);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (name == "authorization") p.req.authorization = value;
    else if (name == "cookie") p.req.cookie = value;
    else if (name == "origin") p.req.origin = value;
    else if (name == "sec-fetch-site") p.req.sec_fetch_site = value;
    else if (name == "host") p.req.host = value;
    else if (name == "range") p.range = value;
    else if (name == "if-range") p.if_range = value;
  }
  return p;
}

// What a rejected request must leave as it was.
std::string snapshot() {
  auto lease = world().pool->acquire();
  auto st = lease.store().stats();
  auto staged = lease.tables().staged_by_namespace();
  auto usage = lease.store().usage();
  if (!st.ok() || !staged.ok() || !usage.ok()) die("cannot read the store's stats");
  std::string s = std::to_string(st->entries) + "/" + std::to_string(st->blobs) + "/" + std::to_string(st->blob_bytes) +
                  "/" + std::to_string(st->quarantined);
  for (const auto& [ns, n] : *staged) s += " " + ns + "=" + std::to_string(n);
  for (const auto& u : *usage) s += " " + u.ns + ":" + std::to_string(u.entries) + ":" + std::to_string(u.bytes);
  return s;
}

void check(const Parsed& p, const ApiResponse& r, const std::string& before) {
  static const std::set<int> documented = {200, 201, 204, 206, 303, 304, 400, 401, 403, 404,
                                           405, 409, 413, 416, 422, 429, 503, 507};
  auto where = [&] { return p.req.method + " " + p.req.path.substr(0, 200) + " -> " + std::to_string(r.status) + ": " +
                            r.body.substr(0, 300); };
  if (!documented.count(r.status)) die("undocumented status: " + where());
  for (const auto& [k, v] : r.headers)
    if (k.empty() || (k + v).find_first_of(std::string("\r\n\0", 3)) != std::string::npos)
      die("a response header with CR, LF or NUL: " + where());
  bool ui = p.req.path == "/ui" || p.req.path.rfind("/ui/", 0) == 0;
  bool html = r.content_type.rfind("text/html", 0) == 0;
  if (r.status >= 400 && !(ui && html)) {
    auto j = nlohmann::json::parse(r.body, nullptr, false);
    if (p.req.method != "HEAD" && (!j.is_object() || !j.contains("error") || !j["error"].is_string()))
      die("an error body that is not {\"error\": ...}: " + where());
  }
  if (r.status < 300 && r.content_type == "application/json" && p.req.method != "HEAD") {
    if (nlohmann::json::parse(r.body, nullptr, false).is_discarded()) die("a 2xx JSON body that is not JSON: " + where());
  }
  if (r.status >= 400 && snapshot() != before) die("a rejected request changed the store: " + where());
}

void check_range(const Parsed& p, ApiResponse r) {
  const ApiResponse whole = r;
  RangeOutcome o = apply_range(p.range, p.if_range, r);
  auto where = [&] { return "Range `" + p.range.substr(0, 100) + "` on " + p.req.path.substr(0, 100) + " -> " +
                            std::to_string(r.status); };
  bool has_content_range = false;
  for (const auto& [k, v] : r.headers) has_content_range = has_content_range || k == "Content-Range";
  switch (o) {
    case RangeOutcome::kWhole:
      if (r.status != whole.status || r.body != whole.body) die("an unused Range changed the answer: " + where());
      break;
    case RangeOutcome::kPartial:
      if (whole.status != 200 || r.status != 206 || !has_content_range || r.body.size() > whole.body.size() ||
          whole.body.find(r.body) == std::string::npos)
        die("a partial answer that is not one piece of the body: " + where());
      break;
    case RangeOutcome::kUnsatisfiable:
    case RangeOutcome::kMultiple:
      if (r.status != 416 || r.body.size() > 4096) die("a refused Range that is not a small 416: " + where());
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string input(reinterpret_cast<const char*>(data), size);
  World& w = world();
  std::string prev_body;
  Handed handed;
  size_t start = 0;
  for (int n = 0; n < 6 && start <= input.size(); ++n) {
    size_t sep = input.find("\n%%\n", start);
    std::string one = input.substr(start, sep == std::string::npos ? std::string::npos : sep - start);
    start = sep == std::string::npos ? input.size() + 1 : sep + 4;
    Parsed p = parse_one(one, prev_body, handed);
    if (p.req.method.empty() || p.req.method.size() > 16) continue;
    std::string before = snapshot();
    StringBody body(p.body);
    ApiResponse r = w.api->handle(p.req, body);
    static const bool trace = std::getenv("MLK_FUZZ_API_TRACE") != nullptr;
    if (trace)
      std::fprintf(stderr, "fuzz_api: %s %s -> %d %s\n", p.req.method.c_str(), p.req.path.substr(0, 80).c_str(), r.status,
                   r.body.substr(0, 120).c_str());
    check(p, r, before);
    handed.take(r);
    if (p.req.method == "GET" && !p.range.empty()) check_range(p, r);
    prev_body = p.body;
  }
  return 0;
}
