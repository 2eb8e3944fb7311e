// service/api.h without sockets: every route's statuses and bodies, tokens,
// namespaces and scopes, quotas, the blob visibility between teams, queries,
// ccache objects, and that every rejected request leaves the store as it was.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include <nlohmann/json.hpp>

#include "../cache/test_util.h"
#include "api_fixture.h"
#include "base/sha256.h"
#include "service/api.h"
#include "service/service_db.h"
#include "base/files.h"
#include "base/log.h"
#include "cache/pg.h"
#include "cache/s3_blobs.h"
#include "service/tables.h"
#include "base/signing.h"
#include "cache/entry_meta.h"
#include "cache/signatures.h"

namespace mlk::service {
namespace {

using cache::testing::IsOk;
using cache::testing::TempDir;
using nlohmann::json;

class ApiTest : public testing::ApiFixture {};

TEST_P(ApiTest, BlobRoundTrip) {
  std::string bytes = cache::testing::bytes_of(1000, 1);
  std::string d = sha256_hex(bytes);
  EXPECT_EQ(call("GET", "/v1/blobs/" + d, alpha).status, 404);
  auto put = put_blob(alpha, bytes);
  EXPECT_EQ(put.status, 201) << put.body;
  EXPECT_EQ(put_blob(alpha, bytes).status, 200);  // idempotent
  auto get = call("GET", "/v1/blobs/" + d, alpha_ro);
  EXPECT_EQ(get.status, 200);
  EXPECT_EQ(get.body, bytes);
  EXPECT_EQ(get.content_type, "application/octet-stream");
  EXPECT_EQ(call("HEAD", "/v1/blobs/" + d, alpha).status, 200);
  EXPECT_EQ(metrics.counter("mlk_cache_hits", {"alpha", "blob"}), 2);
  EXPECT_EQ(metrics.counter("mlk_cache_misses", {"alpha", "blob"}), 1);
  // The empty blob is a blob too.
  EXPECT_EQ(put_blob(alpha, "").status, 201);
  EXPECT_EQ(call("GET", "/v1/blobs/" + sha256_hex(""), alpha).status, 200);
}

TEST_P(ApiTest, WrongHashIs422AndStoresNothing) {
  std::string before = snapshot();
  auto r = call("PUT", "/v1/blobs/" + sha256_hex("other"), alpha, "bytes");
  expect_error(r, 422, "hashes to " + sha256_hex("bytes"));
  EXPECT_EQ(snapshot(), before);
  EXPECT_EQ(metrics.counter("mlk_verification_failures", {"alpha", "upload"}), 1);
  EXPECT_EQ(metrics.counter("mlk_rejects", {"alpha", "hash_mismatch"}), 1);
}

TEST_P(ApiTest, OversizedBodyIs413AndStoresNothing) {
  std::string big = cache::testing::bytes_of(4097, 2);
  std::string before = snapshot();
  expect_error(put_blob(alpha, big), 413, "larger than this server accepts");
  expect_error(call("PUT", "/ccache/" + std::string(33, 'a'), alpha, big), 413);
  expect_error(call("PUT", "/v1/entries/k1", alpha, big), 413);
  EXPECT_EQ(snapshot(), before);
  EXPECT_EQ(put_blob(alpha, big.substr(0, 4096)).status, 201);  // exactly the limit is fine
}

TEST_P(ApiTest, MalformedManifestsAre400AndStoreNothing) {
  ASSERT_EQ(put_blob(alpha, "abc").status, 201);
  std::string before = snapshot();
  json good = json::parse(manifest_of({{"a", "abc"}}));
  json no_files = good;
  no_files.erase("files");
  json bad_digest = good;
  bad_digest["files"]["a"]["digest"] = "XYZ";
  json bad_name = good;
  bad_name["files"]["../a"] = good["files"]["a"];
  json meta_array = good;
  meta_array["meta"] = json::array();
  for (std::string body : {std::string("{not json"), std::string("[]"), std::string(""), no_files.dump(),
                           bad_digest.dump(), bad_name.dump(), meta_array.dump(), std::string("\xff\xfe")})
    expect_error(call("PUT", "/v1/entries/k1", alpha, body), 400, "manifest");
  EXPECT_EQ(snapshot(), before);
}

TEST_P(ApiTest, EntryNeedsItsBlobsInItsNamespace) {
  std::string before = snapshot();
  auto r = call("PUT", "/v1/entries/k1", alpha, manifest_of({{"a", "abc"}, {"b", "def"}}));
  EXPECT_EQ(r.status, 409) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["missing"].size(), 2u);
  EXPECT_EQ(snapshot(), before);
  ASSERT_EQ(put_blob(alpha, "abc").status, 201);
  ASSERT_EQ(put_blob(alpha, "def").status, 201);
  const std::string k1 = manifest_of({{"a", "abc"}, {"b", "def"}}, R"({"fn":"f"})");
  auto ok = call("PUT", "/v1/entries/k1", alpha, k1);
  ASSERT_EQ(ok.status, 201) << ok.body;
  auto got = call("GET", "/v1/entries/k1", alpha_ro);
  ASSERT_EQ(got.status, 200);
  json e = json::parse(got.body);
  EXPECT_EQ(e["key"], "k1");
  EXPECT_EQ(e["size"], 6);
  EXPECT_EQ(e["manifest"]["files"]["b"]["digest"], sha256_hex("def"));
  EXPECT_EQ(e["manifest"]["provenance"]["host"], "builder");  // the producer's, not the server's
  EXPECT_EQ(e["manifest"]["meta"]["fn"], "f");
  // Bound blobs are no longer staged: the namespace is charged once, and for the manifest.
  auto status = json::parse(call("GET", "/v1/status", alpha).body);
  EXPECT_EQ(status["namespaces"][0]["bytes"], 6 + static_cast<int64_t>(k1.size()));
  EXPECT_EQ(status["namespaces"][0]["record_bytes"], static_cast<int64_t>(k1.size()));
  EXPECT_EQ(status["namespaces"][0]["staged_bytes"], 0);
  EXPECT_EQ(status["namespaces"][0]["entries"], 1);
  // Delete.
  EXPECT_EQ(call("DELETE", "/v1/entries/k1", alpha_ro).status, 403);
  EXPECT_EQ(call("DELETE", "/v1/entries/k1", alpha).status, 200);
  EXPECT_EQ(call("GET", "/v1/entries/k1", alpha).status, 404);
  EXPECT_EQ(call("DELETE", "/v1/entries/k1", alpha).status, 404);
}

TEST_P(ApiTest, PathTraversalIs400) {
  ASSERT_EQ(put_blob(alpha, "abc").status, 201);
  std::string before = snapshot();
  for (const auto& [m, p] : std::vector<std::pair<std::string, std::string>>{
           {"GET", "/v1/entries/../../etc/passwd"},
           {"PUT", "/v1/entries/../k"},
           {"GET", "/v1/entries/.hidden"},
           {"GET", "/v1/entries/a/b"},
           {"GET", "/v1/blobs/../../etc/passwd"},
           {"PUT", "/v1/blobs/" + sha256_hex("abc") + "/.."},
           {"GET", "/v1/blobs/" + std::string(64, 'A')},
           {"GET", "/ccache/../../etc/passwd"},
           {"PUT", "/ccache/ab/../" + std::string(31, 'c')},
           {"DELETE", "/ccache/.."},
       })
    expect_error(call(m, p, alpha, manifest_of({{"a", "abc"}})), 400);
  EXPECT_EQ(snapshot(), before);
}

TEST_P(ApiTest, UnknownRoutesAndMethods) {
  expect_error(call("GET", "/", alpha), 404, "no route");
  expect_error(call("GET", "/v2/blobs/x", alpha), 404, "no route");
  expect_error(call("POST", "/v1/entries/k", alpha, "x"), 405, "not allowed");
  auto r = call("PUT", "/v1/status", alpha);
  expect_error(r, 405);
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers[0].first, "Allow");
  EXPECT_EQ(call("GET", "/healthz", "").status, 200);  // the one route without a token
}

TEST_P(ApiTest, MissingUnknownAndRevokedTokensAre401NeverA404) {
  std::string bytes = "abc";
  ASSERT_EQ(put_blob(alpha, bytes).status, 201);
  std::string d = sha256_hex(bytes);
  std::string before = snapshot();
  for (const std::string& t : {std::string(""), std::string("mlk_nope"), revoked}) {
    for (const auto& [m, p] : std::vector<std::pair<std::string, std::string>>{
             {"GET", "/v1/blobs/" + d}, {"GET", "/v1/blobs/" + sha256_hex("missing")}, {"PUT", "/v1/blobs/" + d},
             {"GET", "/v1/entries/k"}, {"PUT", "/v1/entries/k"}, {"GET", "/v1/status"}, {"GET", "/metrics"},
             {"GET", "/ccache/" + std::string(33, 'a')}, {"GET", "/v1/entries"}}) {
      auto r = call(m, p, t, bytes);
      expect_error(r, 401);
      ASSERT_FALSE(r.headers.empty());
      EXPECT_EQ(r.headers[0].first, "WWW-Authenticate");
    }
  }
  ApiRequest basic_junk{"GET", "/v1/status", {}, "Digest abc"};
  StringBody none("");
  expect_error(api->handle(basic_junk, none), 401, "neither");
  EXPECT_EQ(snapshot(), before);
  EXPECT_GE(metrics.counter("mlk_rejects", {"", "unauthenticated"}), 27);
}

// Review 18 of issue 49 (low): a browser keeps Basic credentials typed
// into a URL and sends them with a cross-site form's POST, so a page could
// write with them (push a bench baseline, cancel jobs). A write a browser
// marks as cross-site, or whose Origin is another host, is refused.
TEST_P(ApiTest, Review18_L1_ABrowsersCrossSiteWriteIsRefused) {
  const std::string bytes = "cross-site bytes";
  auto put = [&](const std::string& site, const std::string& origin) {
    ApiRequest r{"PUT", "/v1/blobs/" + sha256_hex(bytes), {}, "Bearer " + alpha};
    r.sec_fetch_site = site;
    r.origin = origin;
    r.host = "127.0.0.1:8080";
    StringBody b(bytes);
    return api->handle(r, b);
  };
  auto r = put("cross-site", "");
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(r.body.find("a browser sent this request from another site"), std::string::npos) << r.body;
  EXPECT_EQ(put("same-site", "").status, 403);
  EXPECT_EQ(put("", "http://evil.example").status, 403);
  EXPECT_EQ(put("same-origin", "http://127.0.0.1:8080").status, 201);
  EXPECT_EQ(put("", "").status / 100, 2);  // a program: neither header (200: stored already)
}

TEST_P(ApiTest, BasicAuthCarriesTheTokenAsPassword) {
  // base64("team:" + token), as ccache sends for http://team:TOKEN@host/...
  std::string creds = "alpha:" + alpha;
  static const char* b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string enc;
  for (size_t i = 0; i < creds.size(); i += 3) {
    uint32_t n = static_cast<unsigned char>(creds[i]) << 16;
    if (i + 1 < creds.size()) n |= static_cast<unsigned char>(creds[i + 1]) << 8;
    if (i + 2 < creds.size()) n |= static_cast<unsigned char>(creds[i + 2]);
    enc += b64[(n >> 18) & 63];
    enc += b64[(n >> 12) & 63];
    enc += i + 1 < creds.size() ? b64[(n >> 6) & 63] : '=';
    enc += i + 2 < creds.size() ? b64[n & 63] : '=';
  }
  ApiRequest r{"GET", "/v1/whoami", {}, "Basic " + enc};
  StringBody none("");
  auto resp = api->handle(r, none);
  ASSERT_EQ(resp.status, 200) << resp.body;
  EXPECT_EQ(json::parse(resp.body)["team"], "alpha");
}

TEST_P(ApiTest, ForeignNamespaceAndMissingScopeAre403) {
  ASSERT_EQ(put_blob(beta, "abc").status, 201);
  std::string before = snapshot();
  std::map<std::string, std::string> beta_ns = {{"namespace", "beta"}};
  expect_error(call("GET", "/v1/blobs/" + sha256_hex("abc"), alpha, "", beta_ns), 403, "may not use namespace `beta`");
  expect_error(call("GET", "/v1/entries/k", alpha, "", beta_ns), 403);
  expect_error(call("GET", "/v1/status", alpha, "", beta_ns), 403);
  expect_error(put_blob(alpha, "abc", beta_ns), 403);
  expect_error(put_blob(alpha_ro, "xyz"), 403, "lacks the scope `write-blobs`");
  expect_error(call("PUT", "/v1/entries/k", alpha_blobs, manifest_of({{"a", "abc"}})), 403, "write-entries");
  expect_error(call("PUT", "/ccache/" + std::string(33, 'a'), alpha_blobs, "obj"), 403, "write-entries");
  expect_error(call("PUT", "/ccache/" + std::string(33, 'a'), alpha_ro, "obj"), 403);
  expect_error(call("GET", "/metrics", alpha), 403, "admin");
  expect_error(call("GET", "/v1/status", alpha, "", {{"namespace", "../x"}}), 400, "namespace");
  EXPECT_EQ(snapshot(), before);
  // An admin may use any namespace.
  EXPECT_EQ(call("GET", "/v1/blobs/" + sha256_hex("abc"), admin, "", beta_ns).status, 200);
  EXPECT_EQ(call("GET", "/metrics", admin).status, 200);
}

TEST_P(ApiTest, AReadGrantLetsAnotherTeamReadNeverWrite) {
  std::string k = cache::testing::bytes_of(200, 9);
  ASSERT_EQ(put_blob(beta, k).status, 201);
  ASSERT_EQ(call("PUT", "/v1/entries/shared", beta, manifest_of({{"k", k}})).status, 201);
  std::map<std::string, std::string> beta_ns = {{"namespace", "beta"}};
  expect_error(call("GET", "/v1/entries/shared", alpha, "", beta_ns), 403, "may not use namespace `beta`");
  auto lease = pool->acquire();  // the Api uses the pool's other session
  ServiceTables* tables = &lease.tables();
  ASSERT_TRUE(IsOk(tables->grant("beta", "alpha", 1000)));
  auto got = call("GET", "/v1/entries/shared", alpha_ro, "", beta_ns);
  EXPECT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(json::parse(got.body)["namespace"], "beta");
  auto blob = call("GET", "/v1/blobs/" + sha256_hex(k), alpha_ro, "", beta_ns);
  EXPECT_EQ(blob.status, 200);
  EXPECT_EQ(blob.body, k);
  EXPECT_EQ(call("GET", "/v1/entries", alpha, "", beta_ns).status, 200);  // queries are reads too
  EXPECT_EQ(metrics.counter("mlk_grant_reads", {"beta", "alpha"}), 3);
  // Never a write: not blobs, not entries, not ccache objects, not deletes.
  std::string before = snapshot();
  expect_error(put_blob(alpha, "intruder", beta_ns), 403, "may not use namespace `beta`");
  expect_error(call("PUT", "/v1/entries/shared", alpha, manifest_of({{"k", k}}), beta_ns), 403);
  expect_error(call("DELETE", "/v1/entries/shared", alpha, "", beta_ns), 403);
  expect_error(call("PUT", "/ccache/" + std::string(33, 'b'), alpha, "obj", beta_ns), 403);
  EXPECT_EQ(snapshot(), before);
  // Revoked: a 403 that says so, never a silent miss.
  ASSERT_TRUE(IsOk(tables->revoke_grant("beta", "alpha", 2000)));
  expect_error(call("GET", "/v1/entries/shared", alpha_ro, "", beta_ns), 403,
               "may not use namespace `beta`; its read grant to team `alpha` was revoked");
  EXPECT_EQ(metrics.counter("mlk_rejects", {"alpha", "grant_revoked"}), 1);
  EXPECT_EQ(tables->revoke_grant("beta", "alpha", 3000).message(),
            "no grant of namespace `beta` to team `alpha` in force");
  auto listed = tables->list_grants();
  ASSERT_TRUE(IsOk(listed));
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].revoked, 2000);
}

TEST_P(ApiTest, BlobsAreSharedButNotVisibleAcrossTeams) {
  ASSERT_EQ(put_blob(alpha, "secret").status, 201);
  // beta does not see alpha's blob, and cannot bind it without uploading it.
  EXPECT_EQ(call("GET", "/v1/blobs/" + sha256_hex("secret"), beta).status, 404);
  EXPECT_EQ(call("PUT", "/v1/entries/k", beta, manifest_of({{"s", "secret"}})).status, 409);
  // Uploading proves possession; the bytes are stored once.
  EXPECT_EQ(put_blob(beta, "secret").status, 201);
  EXPECT_EQ(call("PUT", "/v1/entries/k", beta, manifest_of({{"s", "secret"}})).status, 201);
  EXPECT_EQ(call("GET", "/v1/blobs/" + sha256_hex("secret"), beta).status, 200);
  EXPECT_EQ(stats().blobs, 1);
}

// A namespace is charged its blobs (once per reference) and its entries'
// manifests; the quota is exact over both.
TEST_P(ApiTest, QuotaIsExactAnd507LeavesTheStoreAlone) {
  std::string a(60, 'a'), b40(40, 'b');
  const std::string e1 = manifest_of({{"a", a}, {"b", b40}}), e1_small = manifest_of({{"a", a}});
  const int64_t record = static_cast<int64_t>(e1.size());
  ApiOptions o = api->options();
  o.quotas.limits["quota"] = 100 + record;  // the two blobs and e1's manifest, exactly
  api = std::make_unique<Api>(o, *pool, metrics);
  ASSERT_EQ(put_blob(quota, a).status, 201);  // staged: 60
  std::string before = snapshot();
  expect_error(put_blob(quota, std::string(41 + record, 'b')), 507, "over its quota");  // one byte over
  EXPECT_EQ(snapshot(), before);
  ASSERT_EQ(put_blob(quota, b40).status, 201);
  EXPECT_EQ(put_blob(quota, a).status, 200);  // re-upload: no new charge
  ASSERT_EQ(call("PUT", "/v1/entries/e1", quota, e1).status, 201);  // exactly the quota
  auto st = json::parse(call("GET", "/v1/status", quota).body)["namespaces"][0];
  EXPECT_EQ(st["bytes"], 100 + record);
  EXPECT_EQ(st["record_bytes"], record);
  EXPECT_EQ(st["staged_bytes"], 0);
  EXPECT_EQ(st["quota_bytes"], 100 + record);
  // A second entry referencing the same blobs is charged again: over.
  before = snapshot();
  expect_error(call("PUT", "/v1/entries/e2", quota, manifest_of({{"a", a}})), 507);
  expect_error(call("PUT", "/ccache/" + std::string(33, 'c'), quota, "x"), 507);
  EXPECT_EQ(snapshot(), before);
  // Replacing e1 by itself, or by something smaller, fits: its old charge is credited.
  EXPECT_EQ(call("PUT", "/v1/entries/e1", quota, e1).status, 201);
  EXPECT_EQ(call("PUT", "/v1/entries/e1", quota, e1_small).status, 201);
  st = json::parse(call("GET", "/v1/status", quota).body)["namespaces"][0];
  EXPECT_EQ(st["bytes"], 60 + static_cast<int64_t>(e1_small.size()));
  EXPECT_EQ(metrics.counter("mlk_rejects", {"quota", "quota"}), 3);
  // Other namespaces are not limited.
  EXPECT_EQ(put_blob(alpha, std::string(4000, 'z')).status, 201);
}

TEST_P(ApiTest, QueryByFunctionProfileAndProgramHash) {
  for (int i = 0; i < 3; ++i) {
    std::string bytes = "artifact" + std::to_string(i);
    ASSERT_EQ(put_blob(alpha, bytes).status, 201);
    json meta = {{"fn", i < 2 ? "sgemm" : "softmax"}, {"target", i == 0 ? "host" : "cpu_avx2"}, {"program_hash", "h" + std::to_string(i % 2)}};
    ASSERT_EQ(call("PUT", "/v1/entries/key" + std::to_string(i), alpha, manifest_of({{"k.so", bytes}}, meta.dump())).status, 201);
  }
  auto keys = [&](std::map<std::string, std::string> q) {
    auto r = call("GET", "/v1/entries", alpha, "", std::move(q));
    EXPECT_EQ(r.status, 200) << r.body;
    std::set<std::string> out;
    json body = json::parse(r.body);
    for (const auto& e : body["entries"]) out.insert(e["key"].get<std::string>());
    return out;
  };
  EXPECT_EQ(keys({{"fn", "sgemm"}}), (std::set<std::string>{"key0", "key1"}));
  EXPECT_EQ(keys({{"fn", "sgemm"}, {"target", "cpu_avx2"}}), (std::set<std::string>{"key1"}));
  EXPECT_EQ(keys({{"profile", "cpu_avx2"}}), (std::set<std::string>{"key1", "key2"}));
  EXPECT_EQ(keys({{"program_hash", "h0"}}), (std::set<std::string>{"key0", "key2"}));
  EXPECT_EQ(keys({{"fn", "nothing"}}), (std::set<std::string>{}));
  EXPECT_EQ(keys({}).size(), 3u);
  auto limited = json::parse(call("GET", "/v1/entries", alpha, "", {{"limit", "2"}}).body);
  EXPECT_EQ(limited["entries"].size(), 2u);
  EXPECT_TRUE(limited["truncated"]);
  EXPECT_TRUE(json::parse(call("GET", "/v1/entries", beta).body)["entries"].empty());  // other team
  expect_error(call("GET", "/v1/entries", alpha, "", {{"fnn", "x"}}), 400, "unknown query parameter");
  expect_error(call("GET", "/v1/entries", alpha, "", {{"limit", "0"}}), 400, "limit");
}

TEST_P(ApiTest, CcacheObjects) {
  std::string k = "2bc2pkgpj1abcdefghijklmnopqrstuv0";
  std::string sub = "/ccache/" + k.substr(0, 2) + "/" + k.substr(2), flat = "/ccache/" + k;
  EXPECT_EQ(call("GET", sub, alpha).status, 404);
  EXPECT_EQ(call("HEAD", sub, alpha).status, 404);
  auto put = call("PUT", sub, alpha, "object bytes");
  EXPECT_EQ(put.status, 201) << put.body;
  auto get = call("GET", flat, alpha_ro);  // the same object under the flat layout
  EXPECT_EQ(get.status, 200);
  EXPECT_EQ(get.body, "object bytes");
  EXPECT_EQ(call("HEAD", sub, alpha).status, 200);
  EXPECT_EQ(call("GET", sub, beta).status, 404);  // another team's cache
  std::string bazel = "/ccache/ac/" + sha256_hex("k");
  EXPECT_EQ(call("PUT", bazel, alpha, "b").status, 201);
  EXPECT_EQ(call("GET", bazel, alpha).body, "b");
  EXPECT_EQ(call("DELETE", sub, alpha).status, 200);
  EXPECT_EQ(call("GET", sub, alpha).status, 404);
  EXPECT_EQ(metrics.counter("mlk_cache_hits", {"alpha", "ccache"}), 3);
  EXPECT_EQ(metrics.counter("mlk_cache_misses", {"alpha", "ccache"}), 3);
  // Stored as ordinary verified entries: `mlk cache verify` checks them too.
  if (sqlite()) EXPECT_TRUE(cache::testing::open_store(path)->verify()->consistent());
}

TEST_P(ApiTest, DamagedDataIsAMissNeverServed) {
  std::string bytes = cache::testing::bytes_of(100, 3);
  ASSERT_EQ(put_blob(alpha, bytes).status, 201);
  ASSERT_EQ(call("PUT", "/v1/entries/k", alpha, manifest_of({{"f", bytes}})).status, 201);
  ASSERT_EQ(call("PUT", "/ccache/" + std::string(33, 'a'), alpha, bytes).status, 201);  // same blob
  corrupt(bytes);
  auto r = call("GET", "/v1/blobs/" + sha256_hex(bytes), alpha);
  expect_error(r, 404, "quarantined");
  EXPECT_EQ(r.body.find(bytes.substr(0, 8)), std::string::npos);
  EXPECT_EQ(call("GET", "/v1/entries/k", alpha).status, 404);
  EXPECT_EQ(call("GET", "/ccache/" + std::string(33, 'a'), alpha).status, 404);
  EXPECT_EQ(metrics.counter("mlk_verification_failures", {"alpha", "blob"}), 1);
  // Uploading the good bytes again heals the blob.
  EXPECT_EQ(put_blob(alpha, bytes).status, 201);
  EXPECT_EQ(call("GET", "/v1/blobs/" + sha256_hex(bytes), alpha).body, bytes);
}

TEST_P(ApiTest, StatusShowsOwnNamespaceAndAdminSeesAll) {
  ASSERT_EQ(put_blob(alpha, "abc").status, 201);
  ASSERT_EQ(call("PUT", "/v1/entries/k", alpha, manifest_of({{"a", "abc"}})).status, 201);
  ASSERT_EQ(call("PUT", "/ccache/" + std::string(33, 'b'), beta, "12345").status, 201);
  auto own = json::parse(call("GET", "/v1/status", beta).body);
  ASSERT_EQ(own["namespaces"].size(), 1u);
  EXPECT_EQ(own["namespaces"][0]["namespace"], "beta");
  EXPECT_EQ(own["namespaces"][0]["bytes"], 5 + own["namespaces"][0]["record_bytes"].get<int64_t>());
  EXPECT_GT(own["namespaces"][0]["record_bytes"].get<int64_t>(), 0);
  EXPECT_FALSE(own.contains("store"));
  auto all = json::parse(call("GET", "/v1/status", admin).body);
  EXPECT_EQ(all["namespaces"].size(), 2u);
  EXPECT_EQ(all["store"]["entries"], 2);
  EXPECT_EQ(all["store"]["blob_bytes"], 8);
  auto m = call("GET", "/metrics", admin);
  EXPECT_EQ(m.content_type, "text/plain; version=0.0.4");
  const int64_t beta_charged = own["namespaces"][0]["bytes"].get<int64_t>();  // its object and its manifest
  EXPECT_NE(m.body.find("mlk_namespace_bytes{namespace=\"beta\"} " + std::to_string(beta_charged) + "\n"), std::string::npos)
      << m.body;
  EXPECT_NE(m.body.find("mlk_requests_total{route=\"ccache\",method=\"PUT\",code=\"201\"} 1"), std::string::npos);
}

TEST_P(ApiTest, StagedUploadsExpire) {
  ApiOptions o;
  o.staged_ttl_s = -1;  // everything staged before now is expired at the next upload
  o.quotas.limits["quota"] = 100;
  Api short_lived(o, *pool, metrics);
  auto put = [&](const std::string& bytes) {
    ApiRequest r{"PUT", "/v1/blobs/" + sha256_hex(bytes), {}, "Bearer " + quota};
    StringBody b(bytes);
    return short_lived.handle(r, b).status;
  };
  EXPECT_EQ(put(std::string(90, 'a')), 201);
  EXPECT_EQ(put(std::string(90, 'b')), 201);  // the first no longer counts
  EXPECT_EQ(call("GET", "/v1/blobs/" + sha256_hex(std::string(90, 'a')), quota).status, 404);
}

// Finding 5 (issue 28): with `--require-verified alpha=all`, an entry that
// carried a self-written "verify_report" listing every level got 201. Only a
// report signed by a trusted verifier key, for exactly this entry, is
// evidence now.
TEST_P(ApiTest, Finding5_ASelfWrittenVerifyReportDoesNotEnterARelease) {
  auto verifier = create_signing_key(), stranger = create_signing_key();
  ASSERT_TRUE(verifier.ok() && stranger.ok());
  ApiOptions o;
  o.require_verified["alpha"] = *cache::parse_required_levels("all");
  o.trusted_verifiers["alpha"] = {verifier->public_key};
  Api release(o, *pool, metrics);
  auto put_entry = [&](const std::string& key, const std::string& body) {
    ApiRequest r{"PUT", "/v1/entries/" + key, {}, "Bearer " + alpha};
    StringBody b(body);
    return release.handle(r, b);
  };
  const std::map<std::string, std::string> files = {{"libf.so", "native code"}};
  for (const auto& [n, bytes] : files) ASSERT_EQ(put_blob(alpha, bytes).status, 201);
  const std::string all =
      R"({"fn":"f","verify_report":{"format":"mlk-verify-1","pass":true,)"
      R"("passed":["types","identity","envelope","memory","equivalence"]}})";
  expect_error(put_entry("k1", manifest_of(files, R"({"fn":"f"})")), 403, "has no verification report");
  // The forgery: the same entry with a report its writer wrote.
  auto forged = put_entry("k1", manifest_of(files, all));
  expect_error(forged, 403, "verification report is unsigned");
  EXPECT_EQ(forged.body.find("201"), std::string::npos);
  auto statement = [&](const std::string& key) {
    return *cache::entry_statement(key, *cache::statement_digests(files), all);
  };
  // Signed by a key the server does not trust.
  expect_error(put_entry("k1", manifest_of(files, *cache::sign_report(all, statement("k1"), *stranger))), 403,
               "signed by key " + stranger->key_id + ", which is not a trusted verifier");
  // Signed by the verifier, but for another entry (transplanted).
  expect_error(put_entry("k1", manifest_of(files, *cache::sign_report(all, statement("k2"), *verifier))), 403,
               "does not verify");
  EXPECT_EQ(stats().entries, 0);
  // Signed by the verifier for this entry: a release.
  auto ok = put_entry("k1", manifest_of(files, *cache::sign_report(all, statement("k1"), *verifier)));
  EXPECT_EQ(ok.status, 201) << ok.body;
}

// Issue 49, review 5 (H1): GET /v1/entries/KEY read every file of the entry
// into memory at once to re-hash it, and a manifest may name one large blob
// under many names (each charged, all within a large quota): 64 names of a
// 4 MiB blob held 256 MiB per request. Each distinct blob is hashed once
// now, one at a time; and an entry lists at most 1024 files.
TEST_P(ApiTest, Review5_H1_AnEntryReadHoldsOneBlobAtATime) {
  ApiOptions o;
  o.max_body_bytes = 8 << 20;
  Api large(o, *pool, metrics);
  auto call = [&](const std::string& method, const std::string& path_, const std::string& token,
                  const std::string& body = "") {
    ApiRequest r{method, path_, {}, "Bearer " + token};
    StringBody b(body);
    return large.handle(r, b);
  };
  const std::string big(4 << 20, 'x');
  ASSERT_EQ(call("PUT", "/v1/blobs/" + sha256_hex(big), alpha, big).status, 201);
  cache::Manifest m;
  for (int i = 0; i < 1025; ++i)
    m.files["f" + std::to_string(i)] = cache::BlobRef{sha256_hex(big), static_cast<int64_t>(big.size())};
  m.provenance = cache::testing::test_provenance();
  expect_error(call("PUT", "/v1/entries/many", alpha, cache::manifest_to_json(m)), 413, "an entry has at most 1024");
  while (m.files.size() > 64) m.files.erase(std::prev(m.files.end()));
  ASSERT_EQ(call("PUT", "/v1/entries/many", alpha, cache::manifest_to_json(m)).status, 201);
  struct rusage before {}, after {};
  getrusage(RUSAGE_SELF, &before);
  auto got = call("GET", "/v1/entries/many", alpha_ro);
  getrusage(RUSAGE_SELF, &after);
  EXPECT_EQ(got.status, 200) << got.body;
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 128 << 10) << "KiB of peak memory grew by one entry read";
  // Still every blob checked: a damaged one makes the entry's read fail.
  corrupt(big);
  expect_error(call("GET", "/v1/entries/many", alpha_ro), 404, "stored data failed verification");
  // And the entry is quarantined, as the store's own full read does.
  EXPECT_EQ(pool->acquire().store().show_entry("alpha", "many").status().code(), Status::Code::kNotFound);
}

// Issue 49, review 5 (L1): replacing an entry deleted its old blobs when no
// entry referred to them, though another team had just uploaded (staged)
// the same bytes: that team's entry then got 409.
TEST_P(ApiTest, Review5_L1_ReplacingAnEntryKeepsABlobAnotherTeamStaged) {
  ASSERT_EQ(put_blob(alpha, "shared bytes").status, 201);
  ASSERT_EQ(call("PUT", "/v1/entries/k", alpha, manifest_of({{"f", "shared bytes"}})).status, 201);
  ASSERT_LT(put_blob(beta, "shared bytes").status, 300);  // beta's upload: staged in beta
  ASSERT_EQ(put_blob(alpha, "other bytes").status, 201);
  ASSERT_EQ(call("PUT", "/v1/entries/k", alpha, manifest_of({{"f", "other bytes"}})).status, 201);  // replaces
  auto mine = call("PUT", "/v1/entries/b", beta, manifest_of({{"f", "shared bytes"}}));
  EXPECT_EQ(mine.status, 201) << mine.body;
}

// Issue 49, review 4 (low): a release namespace with trusted verifiers but
// no trusted signers kept no floor, so a withdrawn verified build was stored
// again with its old report. Its report's sequence keeps the floor now.
TEST_P(ApiTest, Review4_AWithdrawnReleaseIsNotStoredAgainWithItsOldReport) {
  auto verifier = create_signing_key();
  ASSERT_TRUE(verifier.ok());
  ApiOptions o;
  o.require_verified["alpha"] = *cache::parse_required_levels("all");
  o.trusted_verifiers["alpha"] = {verifier->public_key};
  Api release(o, *pool, metrics);
  auto call_release = [&](const std::string& method, const std::string& key, const std::string& body) {
    ApiRequest r{method, "/v1/entries/" + key, {}, "Bearer " + alpha};
    StringBody b(body);
    return release.handle(r, b);
  };
  const std::map<std::string, std::string> files = {{"libf.so", "native code"}};
  ASSERT_EQ(put_blob(alpha, "native code").status, 201);
  const std::string all =
      R"({"fn":"f","verify_report":{"format":"mlk-verify-1","pass":true,)"
      R"("passed":["types","identity","envelope","memory","equivalence"]}})";
  const std::string st = *cache::entry_statement("k1", *cache::statement_digests(files), all);
  const std::string old_release = manifest_of(files, *cache::sign_report(all, st, *verifier));
  ASSERT_EQ(call_release("PUT", "k1", old_release).status, 201);
  ASSERT_EQ(call_release("DELETE", "k1", "").status, 200);  // withdrawn
  // Visible again (201; 200 where the shared backend still holds it, staged
  // for the namespace since the delete: review 15).
  ASSERT_EQ(put_blob(alpha, "native code").status / 100, 2);
  expect_error(call_release("PUT", "k1", old_release), 403,
               "is verified by key " + verifier->key_id + " at sequence ");
  std::this_thread::sleep_for(std::chrono::milliseconds(2));  // a sequence is the signing time in ms
  auto anew = call_release("PUT", "k1", manifest_of(files, *cache::sign_report(all, st, *verifier)));
  EXPECT_EQ(anew.status, 201) << anew.body;
}

// Finding 6 (issue 28), the server's half: any write-entries token of a
// namespace chose the native code its runtimes load. A namespace with
// trusted signers stores only entries one of them signed.
TEST_P(ApiTest, Finding6_ASignedNamespaceRefusesUnsignedAndForeignSignedEntries) {
  auto signer = create_signing_key(), stranger = create_signing_key();
  ASSERT_TRUE(signer.ok() && stranger.ok());
  ApiOptions o;
  o.trusted_signers["alpha"] = {signer->public_key};
  Api signed_ns(o, *pool, metrics);
  auto put_entry = [&](const std::string& token, const std::string& key, const std::string& body) {
    ApiRequest r{"PUT", "/v1/entries/" + key, {}, "Bearer " + token};
    StringBody b(body);
    return signed_ns.handle(r, b);
  };
  const std::map<std::string, std::string> files = {{"libf.so", "native code"}};
  ASSERT_EQ(put_blob(alpha, "native code").status, 201);
  ASSERT_EQ(put_blob(beta, "native code").status, 201);
  const std::string meta = R"({"fn":"f","dims":{"N":4}})";
  const std::string st = *cache::entry_statement("k1", *cache::statement_digests(files), meta);
  expect_error(put_entry(alpha, "k1", manifest_of(files, meta)), 403, "entry k1 is unsigned");
  expect_error(put_entry(alpha, "k1", manifest_of(files, *cache::add_signature(meta, st, *stranger, {"alpha"}))), 403,
               "entry k1 is signed by key " + stranger->key_id + ", which is not trusted");
  // Signed, then relabelled (another shape for the nearest-shape choice).
  std::string relabelled = *cache::add_signature(meta, st, *signer, {"alpha"});
  relabelled.replace(relabelled.find("\"N\":4"), 5, "\"N\":8");
  expect_error(put_entry(alpha, "k1", manifest_of(files, relabelled)), 403, "does not verify");
  // Signed for another key.
  const std::string other = *cache::entry_statement("k2", *cache::statement_digests(files), meta);
  expect_error(put_entry(alpha, "k1", manifest_of(files, *cache::add_signature(meta, other, *signer, {"alpha"}))), 403,
               "does not verify");
  EXPECT_EQ(stats().entries, 0);
  auto ok = put_entry(alpha, "k1", manifest_of(files, *cache::add_signature(meta, st, *signer, {"alpha"})));
  EXPECT_EQ(ok.status, 201) << ok.body;
  // Another namespace has no signers: unchanged.
  EXPECT_EQ(put_entry(beta, "k1", manifest_of(files, meta)).status, 201);
}

// Issue 49, finding 11: a signature binds no namespace or sequence, so a
// writer of a signed namespace stores there what the key signed for another
// namespace (a dev build), and rebinds a key to an older or withdrawn signed
// build. A signature counts only for its namespace, and the server keeps
// per key the sequence below which it stores no signed build again, across
// deletes.
TEST_P(ApiTest, Round2_Finding11_ASignatureCountsForItsNamespaceAndNoOlderBuildReturns) {
  auto signer = create_signing_key();
  ASSERT_TRUE(signer.ok());
  ApiOptions o;
  o.trusted_signers["alpha"] = {signer->public_key};
  Api signed_ns(o, *pool, metrics);
  auto call = [&](const std::string& method, const std::string& key, const std::string& body) {
    ApiRequest r{method, "/v1/entries/" + key, {}, "Bearer " + alpha};
    StringBody b(body);
    return signed_ns.handle(r, b);
  };
  const std::map<std::string, std::string> v1 = {{"libf.so", "build one"}}, v2 = {{"libf.so", "build two"}};
  ASSERT_EQ(put_blob(alpha, "build one").status, 201);
  ASSERT_EQ(put_blob(alpha, "build two").status, 201);
  const std::string meta = R"({"fn":"f"})";
  auto signed_manifest = [&](const std::map<std::string, std::string>& files, const std::string& ns, int64_t seq) {
    const std::string st = *cache::entry_statement("k1", *cache::statement_digests(files), meta);
    return manifest_of(files, *cache::add_signature(meta, st, *signer, {ns, seq}));
  };
  // Sequences are signing times in ms: older builds were signed an hour and
  // half an hour ago.
  const int64_t s1 = cache::now_sequence() - 3600000, s2 = s1 + 1800000;
  // The key's dev-namespace signature is not one for alpha.
  expect_error(call("PUT", "k1", signed_manifest(v1, "dev", s1)), 403,
               "is signed by key " + signer->key_id + " for namespace `dev`, not for `alpha`");
  EXPECT_EQ(call("PUT", "k1", signed_manifest(v1, "alpha", s1)).status, 201);
  EXPECT_EQ(call("PUT", "k1", signed_manifest(v1, "alpha", s1)).status, 201);  // the same build again
  EXPECT_EQ(call("PUT", "k1", signed_manifest(v2, "alpha", s2)).status, 201);  // replaced by a newer one
  // The replaced build comes back under its key: refused.
  ASSERT_LT(put_blob(alpha, "build one").status, 300);
  expect_error(call("PUT", "k1", signed_manifest(v1, "alpha", s1)), 403,
               "signed by key " + signer->key_id + " at sequence " + std::to_string(s1) +
                   ", older than this key's entry here has been (sequence " + std::to_string(s2) + ")");
  // The newer build is withdrawn; it does not come back either.
  EXPECT_EQ(call("DELETE", "k1", "").status, 200);
  ASSERT_LT(put_blob(alpha, "build one").status, 300);  // staged (again): the refusal is the signature's
  ASSERT_LT(put_blob(alpha, "build two").status, 300);
  expect_error(call("PUT", "k1", signed_manifest(v2, "alpha", s2)), 403, "older than this key's entry here has been");
  // Nor with a spare signature of it, made after the stored one but before
  // the withdrawal (review 5: the floor rose only to one past the stored one).
  expect_error(call("PUT", "k1", signed_manifest(v2, "alpha", s2 + 60000)), 403, "older than this key's entry here has been");
  EXPECT_EQ(stats().entries, 0);
  // A build signed anew is stored.
  const int64_t s3 = cache::now_sequence() + 1000, s4 = s3 + 1000;
  EXPECT_EQ(call("PUT", "k1", signed_manifest(v1, "alpha", s3)).status, 201);
  // The review of the fix: a writer adds a signature of its own making,
  // naming a trusted key and a huge sequence, beside the real one, then
  // deletes the entry; the floor rises past the verified signature only, so
  // the signer can still store the key's next build.
  auto poisoned = nlohmann::json::parse(signed_manifest(v1, "alpha", s3));
  nlohmann::json meta_j = nlohmann::json::parse(poisoned["meta"].is_string() ? poisoned["meta"].get<std::string>()
                                                                               : poisoned["meta"].dump());
  meta_j["signatures"].push_back({{"key_id", signer->key_id}, {"public_key", signer->public_key}, {"ns", "alpha"},
                                  {"seq", int64_t{1} << 52}, {"sig", std::string(128, '0')}});
  if (poisoned["meta"].is_string()) poisoned["meta"] = meta_j.dump();
  else poisoned["meta"] = meta_j;
  EXPECT_EQ(call("PUT", "k1", poisoned.dump()).status, 201);
  EXPECT_EQ(call("DELETE", "k1", "").status, 200);
  ASSERT_LT(put_blob(alpha, "build two").status, 300);
  EXPECT_EQ(call("PUT", "k1", signed_manifest(v2, "alpha", s4)).status, 201);
  // An entry signed with a version-1 signature (stored before signatures
  // named a namespace) and then deleted does not come back re-signed: `mlk
  // cache push --sign` gives a re-signed v1 build sequence 1, and the floor
  // counts the deleted v1 entry as sequence 1 (the third review).
  {
    const std::string st = *cache::entry_statement("k9", *cache::statement_digests(v1), meta);
    nlohmann::json old = nlohmann::json::parse(meta);
    old["signatures"] = {{{"key_id", signer->key_id}, {"public_key", signer->public_key}, {"sig", *sign_bytes(*signer, st)}}};
    auto m = cache::manifest_from_json(manifest_of(v1, old.dump()));
    ASSERT_TRUE(m.ok());
    ASSERT_LT(put_blob(alpha, "build one").status, 300);
    ASSERT_TRUE(IsOk(pool->acquire().store().put_entry("alpha", "k9", *m)));
    EXPECT_EQ(call("DELETE", "k9", "").status, 200);
    ASSERT_LT(put_blob(alpha, "build one").status, 300);
    const std::string resigned = *cache::add_signature(meta, st, *signer, {"alpha", 1});
    expect_error(call("PUT", "k9", manifest_of(v1, resigned)), 403, "at sequence 1, older than");
  }
  // A sequence far ahead of the server's clock is refused.
  expect_error(call("PUT", "k1", signed_manifest(v2, "alpha", cache::now_sequence() + 2 * 86400000LL)), 403,
               "more than a day ahead of this server's clock");
}

// Issue 49, finding 5: a write-entries token chose the native code workers
// run: a candidate pack posted as a job was run by every worker of its
// device key. A signed namespace takes a job of built artifacts only with a
// pack signature by one of its signers, for it, over the setup it names.
TEST_P(ApiTest, Round2_Finding5_ASignedNamespaceTakesOnlySignedCandidatePacks) {
  auto signer = create_signing_key(), stranger = create_signing_key();
  ASSERT_TRUE(signer.ok() && stranger.ok());
  ApiOptions o;
  o.trusted_signers["alpha"] = {signer->public_key};
  Api signed_ns(o, *pool, metrics);
  auto post = [&](const std::string& path, const std::string& body) {
    ApiRequest r{"POST", path, {}, "Bearer " + alpha};
    StringBody b(body);
    return signed_ns.handle(r, b);
  };
  auto setup = post("/v1/jobs/setups", "mlk-measure-setup pack" + std::string(60, 'p'));
  ASSERT_EQ(setup.status, 201) << setup.body;
  const std::string digest = nlohmann::json::parse(setup.body)["setup"];
  auto submit = [&](const nlohmann::json& payload) {
    return post("/v1/jobs/submit", nlohmann::json{{"device_key", "gpu"}, {"setup", digest}, {"payload", payload}}.dump());
  };
  auto signed_payload = [&](const SigningKey& k, const std::string& ns, const std::string& over) {
    return nlohmann::json{{"kind", "candidates"}, {"pack_signature", nlohmann::json::parse(*cache::sign_pack(over, ns, k))}};
  };
  const std::string refused = "namespace `alpha` runs only candidate packs signed by its trusted signers: ";
  expect_error(submit({{"kind", "candidates"}}), 403, refused + "the candidate pack " + digest.substr(0, 16) + " is unsigned");
  expect_error(submit(signed_payload(*stranger, "alpha", digest)), 403,
               "is signed by key " + stranger->key_id + ", which is not trusted");
  expect_error(submit(signed_payload(*signer, "dev", digest)), 403, "for namespace `dev`, not for `alpha`");
  expect_error(submit(signed_payload(*signer, "alpha", std::string(64, 'a'))), 403, "does not verify");
  EXPECT_EQ(submit(signed_payload(*signer, "alpha", digest)).status, 201);
  EXPECT_EQ(submit({{"kind", "source"}}).status, 201);  // source: the worker compiles it itself
}

#ifdef MLK_CLUSTER_TESTS
INSTANTIATE_TEST_SUITE_P(Shared, ApiTest, ::testing::Values("pg"), [](const auto& i) { return i.param; });
#else
INSTANTIATE_TEST_SUITE_P(Sqlite, ApiTest, ::testing::Values("sqlite"), [](const auto& i) { return i.param; });
#endif

// A broken invariant inside a request (an MLK_CHECK that fails, here in the
// body's reader) fails that request with 500, logged with its place, and the
// server goes on; outside a request it would end the process with exit 3.
TEST_P(ApiTest, AFailedCheckInARequestIsA500NotTheServersEnd) {
  struct Broken : BodySource {
    Body read(int64_t) override {
      MLK_CHECK(false, "a reader invariant");
      return {};
    }
  } body;
  std::vector<std::string> lines;
  set_log_sink([&](LogLevel, std::string_view line) { lines.emplace_back(line); });
  ApiRequest r{"PUT", "/v1/blobs/" + sha256_hex("x"), {}, "Bearer " + alpha};
  ApiResponse got = api->handle(r, body);
  set_log_sink(nullptr);
  EXPECT_EQ(got.status, 500);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], ::testing::MatchesRegex(".*\\(route blobs\\): internal error: .*api_test.cpp:[0-9]+: internal "
                                                "error: a reader invariant \\(false\\)"));
  EXPECT_EQ(call("GET", "/v1/whoami", alpha).status, 200);  // still serving
}

// A 5xx answer (here an exception escaping the body's reader) reaches the
// log sink with its cause, the method, the path and the route, on one line
// (a newline in the cause is escaped); the client gets only the message.
TEST_P(ApiTest, EveryServerErrorIsLoggedWithItsCause) {
  struct Throwing : BodySource {
    Body read(int64_t) override { throw std::runtime_error("the disk is on fire\nforged line"); }
  } body;
  std::vector<std::pair<LogLevel, std::string>> lines;
  set_log_sink([&](LogLevel level, std::string_view line) { lines.emplace_back(level, std::string(line)); });
  ApiRequest r{"PUT", "/v1/blobs/" + sha256_hex("x"), {}, "Bearer " + alpha};
  ApiResponse got = api->handle(r, body);
  set_log_sink(nullptr);
  EXPECT_EQ(got.status, 500);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].first, LogLevel::kWarning);
  EXPECT_EQ(lines[0].second, "server error 500 on PUT /v1/blobs/" + sha256_hex("x") +
                                 " (route blobs): internal error: the disk is on fire\\x0aforged line");
  // A 4xx is the client's: not logged as a server error.
  set_log_sink([&](LogLevel level, std::string_view line) { lines.emplace_back(level, std::string(line)); });
  EXPECT_EQ(call("PUT", "/v1/blobs/" + sha256_hex("other"), alpha, "bytes").status, 422);
  set_log_sink(nullptr);
  EXPECT_EQ(lines.size(), 1u);
}

}  // namespace
}  // namespace mlk::service
