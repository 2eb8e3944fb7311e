// service/: the ccache path layouts, scopes, tokens (only hashes stored) and
// the Prometheus rendering of the metrics.
#include <gtest/gtest.h>

#include "../cache/test_util.h"
#include "base/files.h"
#include "base/sha256.h"
#include "service/ccache_layout.h"
#include "service/metrics.h"
#include "service/service_db.h"
#include "service/staging.h"
#include "service/tokens.h"

namespace mlk::service {
namespace {

using cache::testing::HasCode;
using cache::testing::IsOk;
using cache::testing::TempDir;

const std::string k33 = "2bc2pkgpj1abcdefghijklmnopqrstuv0";  // what ccache 4.7 sends: 33 of [0-9a-v]

TEST(CcacheLayout, SubdirsAndFlatNameTheSameEntry) {
  auto sub = ccache_store_key(k33.substr(0, 2) + "/" + k33.substr(2));
  auto flat = ccache_store_key(k33);
  ASSERT_TRUE(IsOk(sub));
  ASSERT_TRUE(IsOk(flat));
  EXPECT_EQ(*sub, "ccache/" + k33);
  EXPECT_EQ(*sub, *flat);
  std::string hex = sha256_hex("k").substr(0, 40);
  EXPECT_EQ(*ccache_store_key(hex.substr(0, 2) + "/" + hex.substr(2)), "ccache/" + hex);  // ccache 4.13+ keys
}

TEST(CcacheLayout, Bazel) {
  std::string h64 = sha256_hex("x");
  EXPECT_EQ(*ccache_store_key("ac/" + h64), "ccache/ac/" + h64);
  // A subdirs key that happens to start with "ac" is not bazel.
  EXPECT_EQ(*ccache_store_key("ac/" + k33.substr(2)), "ccache/ac" + k33.substr(2));
}

TEST(CcacheLayout, RejectsTraversalAndOddPaths) {
  for (std::string bad : {std::string(""), std::string(".."), "../" + k33, k33.substr(0, 2) + "/../" + k33,
                          k33.substr(0, 2) + "/" + k33.substr(2) + "/x", std::string("ab/"), std::string("/") + k33,
                          "AB/" + k33.substr(2), k33 + "%2e", std::string("short"), std::string(200, 'a'),
                          "ac/" + std::string(64, 'A'), "ab/" + k33.substr(2) + ".."}) {
    auto k = ccache_store_key(bad);
    EXPECT_TRUE(HasCode(k, Status::Code::kInvalidArgument)) << bad;
    if (!k.ok()) {
      EXPECT_NE(k.status().message().find("layout=subdirs"), std::string::npos);
    }
  }
}

TEST(Scopes, ParseAndPrint) {
  auto s = parse_scopes("write-entries,read");
  ASSERT_TRUE(IsOk(s));
  EXPECT_EQ(*s, kScopeRead | kScopeWriteEntries);
  EXPECT_EQ(scopes_string(*s), "read,write-entries");
  EXPECT_TRUE(has_scope(kScopeAdmin, kScopeWriteBlobs));
  EXPECT_FALSE(has_scope(kScopeRead, kScopeWriteBlobs));
  for (std::string bad : {"", "read,", "write", "READ", "read,,admin"}) {
    auto b = parse_scopes(bad);
    EXPECT_TRUE(HasCode(b, Status::Code::kUsage)) << bad;
  }
}

TEST(Tokens, CreateFindRevokeAndOnlyHashesAreStored) {
  TempDir dir;
  auto db = open_service_db(dir.file("s.db"), true);
  ASSERT_TRUE(IsOk(db));
  auto t = create_token(**db, "alpha", kScopeRead | kScopeWriteBlobs, "ci");
  ASSERT_TRUE(IsOk(t));
  EXPECT_EQ(t->token.rfind("mlk_", 0), 0u);
  EXPECT_EQ(t->token.size(), 47u);
  EXPECT_EQ(t->info.prefix, t->token.substr(0, 12));
  auto other = create_token(**db, "alpha", kScopeRead, "");
  ASSERT_TRUE(IsOk(other));
  EXPECT_NE(other->token, t->token);

  auto found = find_token(**db, t->token);
  ASSERT_TRUE(IsOk(found));
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->team, "alpha");
  EXPECT_EQ((*found)->scopes, kScopeRead | kScopeWriteBlobs);
  auto wrong = find_token(**db, t->token + "x");
  ASSERT_TRUE(IsOk(wrong));
  EXPECT_FALSE(wrong->has_value());

  // The database file never holds a token, only its sha256.
  std::string file = cache::testing::read_file(dir.file("s.db")) + cache::testing::read_file(dir.file("s.db-wal"));
  EXPECT_EQ(file.find(t->token), std::string::npos);
  EXPECT_NE(file.find(sha256_hex(t->token)), std::string::npos);

  auto revoked = revoke_token(**db, t->info.prefix);
  ASSERT_TRUE(IsOk(revoked));
  EXPECT_EQ(revoked->id, t->info.id);
  auto gone = find_token(**db, t->token);
  ASSERT_TRUE(IsOk(gone));
  EXPECT_FALSE(gone->has_value());
  auto still = find_token(**db, other->token);
  ASSERT_TRUE(IsOk(still) && still->has_value());
  EXPECT_TRUE(HasCode(revoke_token(**db, "999"), Status::Code::kNotFound));
  EXPECT_TRUE(HasCode(revoke_token(**db, "mlk_"), Status::Code::kInvalidArgument));
  auto list = list_tokens(**db);
  ASSERT_TRUE(IsOk(list));
  ASSERT_EQ(list->size(), 2u);
  EXPECT_TRUE((*list)[0].revoked);
  EXPECT_FALSE((*list)[1].revoked);
  EXPECT_TRUE(HasCode(create_token(**db, "../x", kScopeRead, ""), Status::Code::kInvalidArgument));
  EXPECT_TRUE(HasCode(create_token(**db, "alpha", 0, ""), Status::Code::kInvalidArgument));
}

TEST(Tokens, ServiceTablesLiveBesideAStoreAndRefuseOtherFiles) {
  TempDir dir;
  cache::testing::write_file(dir.file("junk.db"), "this is not a database at all, not even close........");
  EXPECT_FALSE(open_service_db(dir.file("junk.db"), true).ok());
  EXPECT_TRUE(HasCode(open_service_db(dir.file("none.db"), false), Status::Code::kNotFound));
  ASSERT_TRUE(IsOk(open_service_db(dir.file("s.db"), true)));
  // The store still opens and verifies with the extra tables.
  auto store = cache::testing::open_store(dir.file("s.db"));
  auto rep = store->verify();
  ASSERT_TRUE(IsOk(rep));
  EXPECT_TRUE(rep->consistent());
}

TEST(Quota, LimitFor) {
  QuotaPolicy q;
  EXPECT_FALSE(q.limit_for("a").has_value());
  q.default_limit = 10;
  q.limits["b"] = 5;
  EXPECT_EQ(*q.limit_for("a"), 10);
  EXPECT_EQ(*q.limit_for("b"), 5);
}

TEST(Metrics, PrometheusText) {
  Metrics m;
  m.request("blobs", "GET", 200, 0.0007);
  m.request("blobs", "GET", 404, 3.0);
  m.hit("alpha", "blob");
  m.reject("be\"ta", "quota");
  std::string t = m.render({{"alpha", 2, 300}});
  EXPECT_NE(t.find("# TYPE mlk_build_info gauge\nmlk_build_info{version=\"" MLK_VERSION "\",compiler=\""),
            std::string::npos);
  EXPECT_NE(t.find("\"} 1\n# HELP mlk_requests_total"), std::string::npos);
  EXPECT_NE(t.find("# TYPE mlk_requests_total counter\n"), std::string::npos);
  EXPECT_NE(t.find("mlk_requests_total{route=\"blobs\",method=\"GET\",code=\"404\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("mlk_cache_hits_total{namespace=\"alpha\",kind=\"blob\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("mlk_rejects_total{namespace=\"be\\\"ta\",reason=\"quota\"} 1\n"), std::string::npos);
  // Histogram buckets are cumulative: 0.0007 s is in le=0.001 and above, 3 s only from le=5.
  EXPECT_NE(t.find("mlk_request_duration_seconds_bucket{route=\"blobs\",le=\"0.0005\"} 0\n"), std::string::npos);
  EXPECT_NE(t.find("mlk_request_duration_seconds_bucket{route=\"blobs\",le=\"0.001\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("mlk_request_duration_seconds_bucket{route=\"blobs\",le=\"2.5\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("mlk_request_duration_seconds_bucket{route=\"blobs\",le=\"5\"} 2\n"), std::string::npos);
  EXPECT_NE(t.find("mlk_request_duration_seconds_bucket{route=\"blobs\",le=\"+Inf\"} 2\n"), std::string::npos);
  EXPECT_NE(t.find("mlk_request_duration_seconds_count{route=\"blobs\"} 2\n"), std::string::npos);
  EXPECT_NE(t.find("mlk_namespace_bytes{namespace=\"alpha\"} 300\n"), std::string::npos);
  EXPECT_EQ(m.counter("mlk_cache_hits", {"alpha", "blob"}), 1);
}

}  // namespace
}  // namespace mlk::service
