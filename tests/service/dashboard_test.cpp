// The dashboard of `mlk serve` (service/dashboard.h) through Api::handle: no
// page shows data without a valid token (cookie or header), the sign-in form
// sets the cookie, namespaces and grants are the API's, everything from the
// store is escaped, and a kernel's history is plotted from its results.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

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
    api = std::make_unique<Api>(o, *pool, metrics);
    auto lease = pool->acquire();
    auto mk = [&](const std::string& team, Scopes s) { return lease.tables().create_token(team, s, "")->token; };
    alpha = mk("alpha", kScopeRead | kScopeWriteBlobs | kScopeWriteEntries);
    blobs_only = mk("alpha", kScopeWriteBlobs);
    beta = mk("beta", kScopeRead);
    gamma = mk("gamma", kScopeRead);
    admin = mk("ops", kScopeAdmin);
    revoked = mk("alpha", kScopeRead);
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

  ApiResponse call(const std::string& method, const std::string& path, std::map<std::string, std::string> query = {},
                   const std::string& cookie_token = "", const std::string& header_token = "",
                   const std::string& body = "") {
    ApiRequest r{method, path, std::move(query), header_token.empty() ? "" : "Bearer " + header_token,
                 cookie_token.empty() ? "" : "theme=dark; mlk_token=" + cookie_token};
    StringBody b(body);
    return api->handle(r, b);
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
  std::string alpha, blobs_only, beta, gamma, admin, revoked;
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

TEST_F(DashboardTest, AnUnknownOrRevokedCookieTokenIsRefusedWithTheReason) {
  for (const std::string& t : {std::string("mlk_nosuchtoken"), revoked}) {
    ApiResponse r = call("GET", "/ui", {}, t);
    EXPECT_EQ(r.status, 401);
    EXPECT_NE(r.body.find("<p class=\"error\" id=\"login-error\">unknown or revoked token (see `mlk token list`)</p>"),
              std::string::npos)
        << r.body;
    EXPECT_EQ(r.body.find("alert"), std::string::npos);
  }
  // A cookie with characters no token has is no token at all.
  ApiResponse r = call("GET", "/ui", {}, "mlk_x\"<b>");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.body.find("<b>"), std::string::npos);
}

TEST_F(DashboardTest, TheIndexListsTheEntriesOfTheNamespaceEscaped) {
  for (const ApiResponse& r : {call("GET", "/ui", {}, alpha), call("GET", "/ui", {}, "", alpha)}) {
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
    EXPECT_NE(r.body.find("token " + alpha.substr(0, 12) + " (team alpha)"), std::string::npos);
  }
}

TEST_F(DashboardTest, NamespacesAreTheApis) {
  ApiResponse r = call("GET", "/ui", {{"namespace", "beta"}}, alpha);
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(r.body.find("token " + alpha.substr(0, 12) + " belongs to team `alpha` and may not use namespace `beta`"),
            std::string::npos)
      << r.body;
  EXPECT_EQ(r.body.find("beta_secret_fn"), std::string::npos);
  r = call("GET", "/ui", {}, beta);  // its own namespace
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("beta_secret_fn"), std::string::npos);
  EXPECT_EQ(r.body.find("alert"), std::string::npos);
  r = call("GET", "/ui", {{"namespace", "alpha"}}, gamma);  // alpha granted gamma read access
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("&lt;script&gt;alert(1)"), std::string::npos);
  EXPECT_NE(r.body.find("href=\"/ui?namespace=alpha\">alpha</a>"), std::string::npos) << "the granted one is listed";
  r = call("GET", "/ui", {}, admin);
  ASSERT_EQ(r.status, 200);
  for (const char* ns : {"alpha", "beta", "ops"})
    EXPECT_NE(r.body.find(std::string("href=\"/ui?namespace=") + ns + "\">"), std::string::npos) << ns;
  r = call("GET", "/ui", {}, blobs_only);
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(r.body.find("lacks the scope `read`"), std::string::npos) << r.body;
}

TEST_F(DashboardTest, TheKernelPagePlotsItsHistory) {
  ApiResponse r = call("GET", "/ui/kernel", {{"id", kEvilKernel}, {"target", "host"}}, alpha);
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

  r = call("GET", "/ui/kernel", {{"id", "nope"}}, alpha);
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("no results for this kernel in alpha"), std::string::npos);
  EXPECT_NE(r.body.find(">no results</text>"), std::string::npos);
  r = call("GET", "/ui/kernel", {}, alpha);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("/ui/kernel needs ?id=KERNEL (a kernel of /ui)"), std::string::npos);
  r = call("GET", "/ui/kernel", {{"id", kEvilKernel}}, beta);  // the history is per namespace too
  EXPECT_NE(r.body.find("no results for this kernel in beta"), std::string::npos);
}

TEST_F(DashboardTest, SigningInSetsTheCookieSigningOutClearsIt) {
  ApiResponse r = call("POST", "/ui/login", {}, "", "", "token=" + alpha + "&next=%2Fui%2Fkernel%3Fid%3Dx");
  EXPECT_EQ(r.status, 303) << r.body;
  EXPECT_EQ(header(r, "Location"), "/ui/kernel?id=x");
  EXPECT_EQ(header(r, "Set-Cookie"), "mlk_token=" + alpha + "; Path=/ui; Max-Age=2592000; HttpOnly; SameSite=Strict");
  // Only dashboard pages are places to go back to.
  for (const char* next : {"%2F%2Fevil.example%2Fui", "https%3A%2F%2Fevil.example", "%2Fv1%2Fstatus"}) {
    r = call("POST", "/ui/login", {}, "", "", "token=" + alpha + "&next=" + next);
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
  r = call("POST", "/ui/logout", {}, alpha);
  EXPECT_EQ(r.status, 303);
  EXPECT_EQ(header(r, "Location"), "/ui/login");
  EXPECT_EQ(header(r, "Set-Cookie"), "mlk_token=; Path=/ui; Max-Age=0; HttpOnly; SameSite=Strict");
}

TEST_F(DashboardTest, UnknownPagesAndMethodsSaySo) {
  ApiResponse r = call("GET", "/ui/nope", {}, alpha);
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body.find("no dashboard page /ui/nope (pages: /ui, /ui/kernel?id=ID)"), std::string::npos);
  r = call("GET", "/ui/logout", {}, alpha);
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(header(r, "Allow"), "POST");
  EXPECT_NE(r.body.find("GET is not allowed on /ui/logout (allowed: POST)"), std::string::npos);
  r = call("POST", "/ui/kernel", {}, alpha);
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(header(r, "Allow"), "GET, HEAD");
  r = call("POST", "/ui", {}, alpha);  // the API's router: JSON
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
