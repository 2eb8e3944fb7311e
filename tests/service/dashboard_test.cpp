// The dashboard of `mlk serve` (service/dashboard.h) through Api::handle: no
// page shows data without a valid session or token header, the sign-in form
// starts a server-side session for a read-only token (finding 9 of issue 28:
// no cross-site sign-in or sign-out, the cookie is a session id and not the
// token, sessions expire and end at sign-out), namespaces and grants are the
// API's, everything from the store is escaped, and a kernel's history is
// plotted from its results.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <thread>

#include "../cache/test_util.h"
#include "service/api.h"
#include "service/bench_history.h"
#include "service/dashboard_html.h"
#include "service/tables.h"

namespace mlk::service {
namespace {

using cache::testing::IsOk;
using cache::testing::TempDir;
using nlohmann::json;

const char* kEvilFn = "<script>alert(1)</script>";
const char* kEvilKernel = "<b>k</b> [N=8] host";
const std::string kKeyA(64, 'a'), kKeyB(64, 'b');

class DashboardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BackendOptions backend;
    backend.store = dir.file("serve.db");
    auto pool_or = SessionPool::Open(backend, 2);
    ASSERT_TRUE(IsOk(pool_or));
    pool = std::move(*pool_or);
    ApiOptions o;
    o.bench_history_path = dir.file("serve.db.bench-history");
    options = o;
    api = std::make_unique<Api>(o, *pool, metrics);
    auto lease = pool->acquire();
    auto mk = [&](const std::string& team, Scopes s) { return lease.tables().create_token(team, s, "")->token; };
    alpha = mk("alpha", kScopeRead | kScopeWriteBlobs | kScopeWriteEntries);
    blobs_only = mk("alpha", kScopeWriteBlobs);
    beta = mk("beta", kScopeRead);
    gamma = mk("gamma", kScopeRead);
    admin = mk("ops", kScopeAdmin);
    revoked = mk("alpha", kScopeRead);
    reader = mk("alpha", kScopeRead);
    ASSERT_TRUE(IsOk(lease.tables().revoke_token(revoked.substr(0, 12))));
    ASSERT_TRUE(IsOk(lease.tables().grant("alpha", "gamma", 1)));
    json meta = {{"fn", kEvilFn}, {"target", "host"}, {"dims", {{"B", 8}, {"D", 512}}}, {"measured", true},
                 {"verify_report", {{"passed", {"types", "identity"}}}}};
    ASSERT_TRUE(IsOk(lease.store().put_entry("alpha", kKeyA, meta.dump(), {"test", "", 0, {}, true},
                                             {{"kernel.so", "bytes of a"}})));
    ASSERT_TRUE(IsOk(lease.store().put_entry("beta", kKeyB, json{{"fn", "beta_secret_fn"}}.dump(),
                                             {"test", "", 0, {}, false}, {{"kernel.so", "bytes of b"}})));
    auto h = bench_history_at(o.bench_history_path);
    ASSERT_TRUE(IsOk(h));
    // Three results, oldest first: 2 ms and 3 ms on artifact a, 1 ms on artifact b.
    for (auto [created, median, key] : {std::tuple{"2026-11-01T10:00:00Z", 2.0, kKeyA},
                                        {"2026-11-02T10:00:00Z", 3.0, kKeyA},
                                        {"2026-11-03T10:00:00Z", 1.0, kKeyB}}) {
      json report = {{"format", "mlk-bench"}, {"created", created}, {"machine", {{"cpu", "<i>cpu</i>"}}},
                     {"versions", {{"mlk", "0.1.0"}}},
                     {"kernels", {{{"id", kEvilKernel}, {"target", "host"}, {"cache_key", key}, {"variant", "tuned"},
                                   {"mlk", {{"median_ms", median}, {"samples_ms", {median * 0.9, median, median * 1.2}}}}}}}};
      ASSERT_TRUE(IsOk((*h)->add("alpha", report.dump(), "")));
    }
  }

  // `cookie`: the NAME=VALUE a sign-in set (session()), or empty.
  ApiResponse call(const std::string& method, const std::string& path, std::map<std::string, std::string> query = {},
                   const std::string& cookie = "", const std::string& header_token = "",
                   const std::string& body = "", Api* through = nullptr) {
    ApiRequest r{method, path, std::move(query), header_token.empty() ? "" : "Bearer " + header_token,
                 cookie.empty() ? "" : "theme=dark; " + cookie};
    StringBody b(body);
    return (through ? through : api.get())->handle(r, b);
  }
  // A POST of the sign-in form, with the headers a browser sends along.
  ApiResponse post_form(const std::string& path, const std::string& body, const std::string& origin,
                        const std::string& fetch_site, const std::string& cookie = "", Api* through = nullptr) {
    ApiRequest r;
    r.method = "POST";
    r.path = path;
    r.cookie = cookie;
    r.origin = origin;
    r.sec_fetch_site = fetch_site;
    r.host = "127.0.0.1:8080";
    StringBody b(body);
    return (through ? through : api.get())->handle(r, b);
  }
  // Signs `token` in through the form (as a same-origin browser would) and
  // returns the cookie it set, NAME=VALUE, for call(); fails the test when
  // none was set.
  std::string session(const std::string& token, Api* through = nullptr) {
    ApiResponse r = post_form("/ui/login", "token=" + token + "&next=%2Fui", "http://127.0.0.1:8080", "same-origin", "",
                              through);
    EXPECT_EQ(r.status, 303) << r.body;
    std::string c = header(r, "Set-Cookie");
    EXPECT_FALSE(c.empty()) << r.body;
    return c.substr(0, c.find(';'));
  }
  static std::string header(const ApiResponse& r, const std::string& name) {
    for (const auto& [k, v] : r.headers)
      if (k == name) return v;
    return "";
  }
  // No page may carry a script, whatever the store holds.
  static void expect_no_script(const ApiResponse& r) {
    EXPECT_EQ(r.body.find("<script"), std::string::npos) << r.body;
    EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
    EXPECT_NE(header(r, "Content-Security-Policy").find("default-src 'none'"), std::string::npos);
  }

  TempDir dir;
  Metrics metrics;
  std::unique_ptr<SessionPool> pool;
  std::unique_ptr<Api> api;
  ApiOptions options;
  std::string alpha, blobs_only, beta, gamma, admin, revoked, reader;
};

TEST_F(DashboardTest, WithoutATokenEveryPageIsTheSignInFormAndNoData) {
  for (const auto& [path, query] : std::vector<std::pair<std::string, std::map<std::string, std::string>>>{
           {"/ui", {}}, {"/ui", {{"namespace", "alpha"}}}, {"/ui/kernel", {{"id", kEvilKernel}}}}) {
    ApiResponse r = call("GET", path, query);
    EXPECT_EQ(r.status, 401) << path;
    EXPECT_NE(r.body.find("<form class=\"login\" method=\"post\" action=\"/ui/login\">"), std::string::npos);
    EXPECT_EQ(r.body.find("alert"), std::string::npos) << "no entry data without a token";
    EXPECT_EQ(r.body.find("B=8"), std::string::npos);
    EXPECT_EQ(r.body.find("aaaaaaaaaaaa"), std::string::npos);
    EXPECT_EQ(r.body.find("2026-11-0"), std::string::npos) << "no history without a token";
    EXPECT_EQ(r.body.find("<svg"), std::string::npos);
    EXPECT_EQ(header(r, "WWW-Authenticate"), "Bearer realm=\"mlk\"");
    expect_no_script(r);
  }
  // The form returns to the page asked for.
  ApiResponse r = call("GET", "/ui/kernel", {{"id", "x y"}});
  EXPECT_NE(r.body.find("name=\"next\" value=\"/ui/kernel?id=x%20y\""), std::string::npos) << r.body;
}

TEST_F(DashboardTest, AnUnknownSessionOrARevokedTokenIsRefusedWithTheReason) {
  for (const std::string& t : {std::string("mlk_nosuchtoken"), revoked}) {
    ApiResponse r = call("GET", "/ui", {}, "", t);
    EXPECT_EQ(r.status, 401);
    EXPECT_NE(r.body.find("<p class=\"error\" id=\"login-error\">unknown or revoked token (see `mlk token list`)</p>"),
              std::string::npos)
        << r.body;
    EXPECT_EQ(r.body.find("alert"), std::string::npos);
  }
  ApiResponse r = call("GET", "/ui", {}, "mlk_session=" + std::string(43, 'A'));
  EXPECT_EQ(r.status, 401);
  EXPECT_NE(r.body.find("no such session"), std::string::npos) << r.body;
  // A cookie with characters no session id has is no session at all.
  r = call("GET", "/ui", {}, "mlk_session=mlk_x\"<b>");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.body.find("<b>"), std::string::npos);
  // Revoking the token ends its sessions at once.
  std::string c = session(reader);
  ASSERT_EQ(call("GET", "/ui", {}, c).status, 200);
  ASSERT_TRUE(IsOk(pool->acquire().tables().revoke_token(reader.substr(0, 12))));
  r = call("GET", "/ui", {}, c);
  EXPECT_EQ(r.status, 401);
  EXPECT_NE(r.body.find("unknown or revoked token"), std::string::npos) << r.body;
}

TEST_F(DashboardTest, TheIndexListsTheEntriesOfTheNamespaceEscaped) {
  for (const auto& [r, who] : {std::pair{call("GET", "/ui", {}, session(reader)), reader},
                                std::pair{call("GET", "/ui", {}, "", alpha), alpha}}) {
    ASSERT_EQ(r.status, 200) << r.body;
    expect_no_script(r);
    EXPECT_NE(r.body.find("<td>&lt;script&gt;alert(1)&lt;/script&gt;</td><td>host</td><td>B=8, D=512</td>"
                          "<td class=\"yes\">yes</td><td class=\"yes\">types,identity</td>"),
              std::string::npos)
        << r.body;
    // The entry was timed (an older result of the kernel): its row links to the plot.
    EXPECT_NE(r.body.find("title=\"" + kKeyA + "\">aaaaaaaaaaaa</td><td><a href=\"/ui/kernel?namespace=alpha&amp;id=%3Cb%3E"),
              std::string::npos);
    EXPECT_EQ(r.body.find("beta_secret_fn"), std::string::npos) << "another team's entries";
    // Its benchmarked kernel, linked (the query escaped for the URL, then for HTML).
    EXPECT_NE(r.body.find("<a href=\"/ui/kernel?namespace=alpha&amp;id=%3Cb%3Ek%3C%2Fb%3E%20%5BN%3D8%5D%20host&amp;"
                          "target=host\">&lt;b&gt;k&lt;/b&gt; [N=8] host</a></td><td>host</td><td class=\"num\">3</td>"
                          "<td class=\"num\">1 ms</td><td>2026-11-03T10:00:00Z</td>"),
              std::string::npos)
        << r.body;
    EXPECT_NE(r.body.find("token " + who.substr(0, 12) + " (team alpha)"), std::string::npos);
  }
}

// Review 17 M2: the entries table read (hashed and parsed) every manifest of
// the namespace on each load, so a team's many large manifests cost every
// page load work in proportion to the namespace's size. A page reads at most
// 4x --max-answer bytes of manifests (and 500 rows), and says there is more.
TEST_F(DashboardTest, Review17_M2_APageReadsABoundedPartOfTheNamespace) {
  ApiOptions o = options;
  o.max_answer_bytes = 4096;
  Api small(o, *pool, metrics);
  {
    auto lease = pool->acquire();
    const std::string pad(2000, 'x');
    for (int i = 0; i < 30; ++i)
      ASSERT_TRUE(IsOk(lease.store().put_entry("alpha", "big" + std::to_string(100 + i),
                                               json{{"fn", "f"}, {"pad", pad}}.dump(), {"test", "", 0, {}, false},
                                               {{"kernel.so", "bytes " + std::to_string(i)}})));
  }
  ApiResponse r = call("GET", "/ui", {}, "", alpha, "", &small);
  ASSERT_EQ(r.status, 200) << r.body;
  size_t rows = 0;
  for (size_t at = r.body.find("<tr class=\"entry\">"); at != std::string::npos; at = r.body.find("<tr class=\"entry\">", at + 1))
    ++rows;
  EXPECT_GE(rows, 1u);
  EXPECT_LE(rows, 10u) << "31 entries of about 2 KB: a 16 KiB read bound shows about 8";
  EXPECT_NE(r.body.find("id=\"more-entries\""), std::string::npos) << r.body;
  r = call("GET", "/ui", {}, "", alpha);  // the default bound: every entry, no note
  EXPECT_EQ(r.body.find("id=\"more-entries\""), std::string::npos);
}

TEST_F(DashboardTest, NamespacesAreTheApis) {
  ApiResponse r = call("GET", "/ui", {{"namespace", "beta"}}, "", alpha);
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(r.body.find("token " + alpha.substr(0, 12) + " belongs to team `alpha` and may not use namespace `beta`"),
            std::string::npos)
      << r.body;
  EXPECT_EQ(r.body.find("beta_secret_fn"), std::string::npos);
  r = call("GET", "/ui", {}, session(beta));  // its own namespace
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("beta_secret_fn"), std::string::npos);
  EXPECT_EQ(r.body.find("alert"), std::string::npos);
  r = call("GET", "/ui", {{"namespace", "alpha"}}, session(gamma));  // alpha granted gamma read access
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("&lt;script&gt;alert(1)"), std::string::npos);
  EXPECT_NE(r.body.find("href=\"/ui?namespace=alpha\">alpha</a>"), std::string::npos) << "the granted one is listed";
  r = call("GET", "/ui", {}, "", admin);
  ASSERT_EQ(r.status, 200);
  for (const char* ns : {"alpha", "beta", "ops"})
    EXPECT_NE(r.body.find(std::string("href=\"/ui?namespace=") + ns + "\">"), std::string::npos) << ns;
  r = call("GET", "/ui", {}, "", blobs_only);
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(r.body.find("lacks the scope `read`"), std::string::npos) << r.body;
}

TEST_F(DashboardTest, TheKernelPagePlotsItsHistory) {
  std::string c = session(reader);
  ApiResponse r = call("GET", "/ui/kernel", {{"id", kEvilKernel}, {"target", "host"}}, c);
  ASSERT_EQ(r.status, 200) << r.body;
  expect_no_script(r);
  EXPECT_NE(r.body.find("<h1 id=\"kernel\">&lt;b&gt;k&lt;/b&gt; [N=8] host on host</h1>"), std::string::npos);
  size_t svg = r.body.find("<svg class=\"history\"");
  ASSERT_NE(svg, std::string::npos);
  // One point per result, oldest left: medians 2, 3, 1 ms, so the middle point is highest (smallest y).
  std::vector<double> cy;
  for (size_t at = r.body.find("<circle class=\"result\"", svg); at != std::string::npos;
       at = r.body.find("<circle class=\"result\"", at + 1))
    cy.push_back(std::stod(r.body.substr(r.body.find("cy=\"", at) + 4)));
  ASSERT_EQ(cy.size(), 3u);
  EXPECT_LT(cy[1], cy[0]);
  EXPECT_LT(cy[0], cy[2]);
  EXPECT_NE(r.body.find("<title>2026-11-02T10:00:00Z: 3 ms (2.7-3.6), artifact aaaaaaaaaaaa</title>"), std::string::npos);
  // The artifact changed once (a, a, b).
  size_t changes = 0;
  for (size_t at = r.body.find("class=\"artifact-change\""); at != std::string::npos;
       at = r.body.find("class=\"artifact-change\"", at + 1))
    ++changes;
  EXPECT_EQ(changes, 1u);
  // The table, newest first, with the machine's name escaped.
  size_t third = r.body.find("<tr class=\"result\"><td>2026-11-03"), first = r.body.find("<tr class=\"result\"><td>2026-11-01");
  EXPECT_NE(third, std::string::npos);
  EXPECT_LT(third, first);
  EXPECT_NE(r.body.find("<td>&lt;i&gt;cpu&lt;/i&gt;</td>"), std::string::npos);

  r = call("GET", "/ui/kernel", {{"id", "nope"}}, c);
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("no results for this kernel in alpha"), std::string::npos);
  EXPECT_NE(r.body.find(">no results</text>"), std::string::npos);
  r = call("GET", "/ui/kernel", {}, c);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("/ui/kernel needs ?id=KERNEL (a kernel of /ui)"), std::string::npos);
  r = call("GET", "/ui/kernel", {{"id", kEvilKernel}}, "", beta);  // the history is per namespace too
  EXPECT_NE(r.body.find("no results for this kernel in beta"), std::string::npos);
}

TEST_F(DashboardTest, SigningInStartsASessionSigningOutEndsIt) {
  ApiResponse r = call("POST", "/ui/login", {}, "", "", "token=" + reader + "&next=%2Fui%2Fkernel%3Fid%3Dx");
  EXPECT_EQ(r.status, 303) << r.body;
  EXPECT_EQ(header(r, "Location"), "/ui/kernel?id=x");
  std::string set = header(r, "Set-Cookie");
  EXPECT_EQ(set.rfind("mlk_session=", 0), 0u) << set;
  EXPECT_NE(set.find("; Path=/ui; Max-Age=28800; HttpOnly; SameSite=Strict"), std::string::npos) << set;
  EXPECT_EQ(set.find("Secure"), std::string::npos) << "plain HTTP: a Secure cookie would never come back";
  // Only dashboard pages are places to go back to.
  for (const char* next : {"%2F%2Fevil.example%2Fui", "https%3A%2F%2Fevil.example", "%2Fv1%2Fstatus"}) {
    r = call("POST", "/ui/login", {}, "", "", "token=" + reader + "&next=" + next);
    EXPECT_EQ(header(r, "Location"), "/ui") << next;
  }
  r = call("POST", "/ui/login", {}, "", "", "token=mlk_wrong&next=%2Fui");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(header(r, "Set-Cookie"), "");
  EXPECT_NE(r.body.find("unknown or revoked token (see `mlk token list`)"), std::string::npos) << r.body;
  r = call("POST", "/ui/login", {}, "", "", "next=%2Fui");
  EXPECT_EQ(r.status, 401);
  EXPECT_NE(r.body.find("give a token (from `mlk token create`)"), std::string::npos);
  r = call("POST", "/ui/login", {}, "", "", "token=" + blobs_only);
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(header(r, "Set-Cookie"), "");
  EXPECT_NE(r.body.find("lacks the scope `read`"), std::string::npos);
  r = call("GET", "/ui/login", {{"next", "/ui/kernel?id=y"}});
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("name=\"next\" value=\"/ui/kernel?id=y\""), std::string::npos);
  r = call("POST", "/ui/logout", {}, session(reader));
  EXPECT_EQ(r.status, 303);
  EXPECT_EQ(header(r, "Location"), "/ui/login");
  EXPECT_EQ(header(r, "Set-Cookie"), "mlk_session=; Path=/ui; Max-Age=0; HttpOnly; SameSite=Strict");
  // Signing out without a session (or with an ended one) is no error.
  EXPECT_EQ(call("POST", "/ui/logout", {}, "").status, 303);
  EXPECT_EQ(call("POST", "/ui/logout", {}, "mlk_session=" + std::string(43, 'B')).status, 303);
}

// Finding 9: a page of another site made the browser POST the sign-in (or
// sign-out) form, and the server answered 303 with the cookie.
TEST_F(DashboardTest, Finding9_CrossSiteLoginIsRefused) {
  const std::string form = "token=" + reader + "&next=%2Fui";
  for (const auto& [origin, site] : std::vector<std::pair<std::string, std::string>>{
           {"http://evil.example", "cross-site"},
           {"http://evil.example", ""},           // an older browser: Origin only
           {"", "cross-site"},                    // Sec-Fetch-Site only
           {"", "same-site"},                     // a sibling host is another origin
           {"null", ""},                          // a sandboxed frame or a data: page
           {"http://127.0.0.1:8080.evil.example", ""},
           {"http://127.0.0.1:8081", ""},         // another port is another origin
           {"http://127.0.0.1:8080", "cross-site"}}) {
    ApiResponse r = post_form("/ui/login", form, origin, site);
    EXPECT_EQ(r.status, 403) << origin << " " << site << ": " << r.body;
    EXPECT_EQ(header(r, "Set-Cookie"), "") << origin << " " << site;
    EXPECT_NE(r.body.find("cross-site"), std::string::npos) << r.body;
    EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
  }
  // The server's own form: same origin, whichever header the browser sends.
  for (const auto& [origin, site] : std::vector<std::pair<std::string, std::string>>{
           {"http://127.0.0.1:8080", "same-origin"}, {"http://127.0.0.1:8080", ""}, {"", "same-origin"}, {"", ""},
           {"null", "same-origin"}}) {  // Chromium's Origin under Referrer-Policy: no-referrer
    ApiResponse r = post_form("/ui/login", form, origin, site);
    EXPECT_EQ(r.status, 303) << origin << " " << site << ": " << r.body;
  }
  // Sign-out too: a cross-site POST neither ends the session nor clears the cookie.
  std::string c = session(reader);
  ApiResponse r = post_form("/ui/logout", "", "http://evil.example", "cross-site", c);
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(header(r, "Set-Cookie"), "");
  EXPECT_EQ(call("GET", "/ui", {}, c).status, 200) << "the session outlives a forged sign-out";
}

// Finding 9: the cookie held the bearer token itself.
TEST_F(DashboardTest, Finding9_TheCookieIsASessionNotTheToken) {
  ApiResponse r = post_form("/ui/login", "token=" + reader, "http://127.0.0.1:8080", "same-origin");
  ASSERT_EQ(r.status, 303) << r.body;
  std::string set = header(r, "Set-Cookie");
  EXPECT_EQ(set.find(reader), std::string::npos) << set;
  EXPECT_EQ(set.find(reader.substr(4, 16)), std::string::npos) << set;
  ASSERT_EQ(set.rfind("mlk_session=", 0), 0u) << set;
  std::string id = set.substr(std::strlen("mlk_session="), set.find(';') - std::strlen("mlk_session="));
  EXPECT_EQ(id.size(), 43u) << "256 random bits, base64url: " << id;
  EXPECT_NE(set.find("HttpOnly"), std::string::npos);
  EXPECT_NE(set.find("SameSite=Strict"), std::string::npos);
  EXPECT_EQ(call("GET", "/ui", {}, "mlk_session=" + id).status, 200);
  // The token as a cookie is no way in.
  r = call("GET", "/ui", {}, "mlk_token=" + reader);
  EXPECT_EQ(r.status, 401) << r.body;
  EXPECT_EQ(call("GET", "/ui", {}, "mlk_session=" + reader).status, 401);
  // Each sign-in is a new session.
  EXPECT_NE(session(reader), "mlk_session=" + id);
  // The store keeps a hash of the session id, never the id.
  for (const char* f : {"serve.db", "serve.db-wal"}) {
    std::ifstream in(dir.file(f), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(bytes.find(id), std::string::npos) << f;
  }
}

// Finding 9: the form accepted admin and write tokens, whose cookie then
// stood for them for 30 days.
TEST_F(DashboardTest, Finding9_WriteTokensCannotSignIn) {
  for (const std::string& t : {alpha, admin}) {
    ApiResponse r = post_form("/ui/login", "token=" + t, "http://127.0.0.1:8080", "same-origin");
    EXPECT_EQ(r.status, 403) << r.body;
    EXPECT_EQ(header(r, "Set-Cookie"), "");
    EXPECT_NE(r.body.find("the dashboard accepts only read-only tokens"), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("mlk token create --team"), std::string::npos) << r.body;
    EXPECT_EQ(r.body.find(t), std::string::npos) << "the token is not echoed";
  }
  // The API's own tokens still read the pages with the header (no cookie, no CSRF).
  EXPECT_EQ(call("GET", "/ui", {}, "", alpha).status, 200);
}

// Finding 9: the cookie lasted 30 days; sessions last ApiOptions::ui_session_s
// (8 hours by default).
TEST_F(DashboardTest, Finding9_SessionsExpire) {
  ApiResponse r = post_form("/ui/login", "token=" + reader, "http://127.0.0.1:8080", "same-origin");
  ASSERT_EQ(r.status, 303) << r.body;
  EXPECT_NE(header(r, "Set-Cookie").find("; Max-Age=28800;"), std::string::npos) << header(r, "Set-Cookie");
  ApiOptions o = options;
  o.ui_session_s = 1;
  Api short_lived(o, *pool, metrics);
  std::string c = session(reader, &short_lived);
  EXPECT_EQ(call("GET", "/ui", {}, c, "", "", &short_lived).status, 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  r = call("GET", "/ui", {}, c, "", "", &short_lived);
  EXPECT_EQ(r.status, 401) << r.body;
  EXPECT_NE(r.body.find("no such session"), std::string::npos) << r.body;
  EXPECT_EQ(r.body.find("B=8"), std::string::npos);
}

// Finding 9: signing out only asked the browser to forget the cookie; a copy
// of it kept working.
TEST_F(DashboardTest, Finding9_LogoutEndsTheSessionServerSide) {
  std::string c = session(reader), other = session(reader);
  ASSERT_EQ(call("GET", "/ui", {}, c).status, 200);
  ApiResponse r = post_form("/ui/logout", "", "http://127.0.0.1:8080", "same-origin", "theme=dark; " + c);
  EXPECT_EQ(r.status, 303) << r.body;
  EXPECT_EQ(call("GET", "/ui", {}, c).status, 401) << "a kept copy of the cookie is no way back in";
  EXPECT_EQ(call("GET", "/ui", {}, other).status, 200) << "other sessions of the token go on";
}

// Signing in again and again keeps no more than 16 sessions of a token.
TEST_F(DashboardTest, ATokenKeepsAtMostSixteenSessions) {
  std::vector<std::string> cookies;
  for (int i = 0; i < 20; ++i) cookies.push_back(session(reader));
  int live = 0;
  for (const auto& c : cookies) live += call("GET", "/ui", {}, c).status == 200;
  EXPECT_EQ(live, 16);
  EXPECT_EQ(call("GET", "/ui", {}, cookies.back()).status, 200) << "the newest always lives";
  EXPECT_EQ(call("GET", "/ui", {}, session(beta)).status, 200) << "another token's sessions are its own";
}

// Under TLS the cookie is Secure: a browser never sends it over plain HTTP.
TEST_F(DashboardTest, Finding9_TheCookieIsSecureUnderTls) {
  ApiOptions o = options;
  o.tls = true;
  Api over_tls(o, *pool, metrics);
  ApiRequest req;
  req.method = "POST";
  req.path = "/ui/login";
  req.origin = "https://127.0.0.1:8080";
  req.host = "127.0.0.1:8080";
  StringBody b("token=" + reader);
  ApiResponse r = over_tls.handle(req, b);
  ASSERT_EQ(r.status, 303) << r.body;
  EXPECT_NE(header(r, "Set-Cookie").find("; HttpOnly; SameSite=Strict; Secure"), std::string::npos)
      << header(r, "Set-Cookie");
}

TEST_F(DashboardTest, UnknownPagesAndMethodsSaySo) {
  ApiResponse r = call("GET", "/ui/nope", {}, "", alpha);
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body.find("no dashboard page /ui/nope (pages: /ui, /ui/kernel?id=ID)"), std::string::npos);
  r = call("GET", "/ui/logout", {}, "", alpha);
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(header(r, "Allow"), "POST");
  EXPECT_NE(r.body.find("GET is not allowed on /ui/logout (allowed: POST)"), std::string::npos);
  r = call("POST", "/ui/kernel", {}, "", alpha);
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(header(r, "Allow"), "GET, HEAD");
  r = call("POST", "/ui", {}, "", alpha);  // the API's router: JSON
  EXPECT_EQ(r.status, 405);
}

TEST(DashboardHtml, EscapesAndEncodes) {
  EXPECT_EQ(dashboard::html_escape("<a href=\"x\">'&'</a>"), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  EXPECT_EQ(dashboard::url_component("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
  EXPECT_EQ(dashboard::format_bytes(12), "12 B");
  EXPECT_EQ(dashboard::format_bytes(1536), "1.5 KiB");
  EXPECT_NE(dashboard::history_svg({}).find(">no results</text>"), std::string::npos);
}

}  // namespace
}  // namespace mlk::service
