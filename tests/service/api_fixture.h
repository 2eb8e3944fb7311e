// The fixture of the tests of service/api.h (api_test.cpp, trust_test.cpp):
// an Api over a fresh store, SQLite or (under the cluster fixture, in
// mlk_cluster_tests) PostgreSQL + S3, with tokens of several teams and
// scopes, and helpers to call it and to snapshot everything a request could
// change.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "../cache/test_util.h"
#include "base/files.h"
#include "base/sha256.h"
#include "cache/pg.h"
#include "cache/s3_blobs.h"
#include "service/api.h"
#include "service/service_db.h"
#include "service/tables.h"

namespace mlk::service::testing {

using cache::testing::IsOk;
using cache::testing::TempDir;

// The backend of a test: "sqlite" (a store file) or "pg" (a fresh database
// and bucket on the PostgreSQL and S3 endpoint that scripts/cluster.sh
// started; the test executable mlk_cluster_tests, under the ctest fixture).
inline std::map<std::string, std::string> cluster_env() {
  std::map<std::string, std::string> out;
  const char* dir = std::getenv("MLK_CLUSTER_DIR");
  auto text = read_file(std::string(dir ? dir : "") + "/env");
  if (!text.ok()) return out;
  size_t start = 0;
  while (start < text->size()) {
    size_t nl = text->find('\n', start);
    std::string line = text->substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    start = nl == std::string::npos ? text->size() : nl + 1;
    if (line.rfind("export ", 0) != 0 || line.find('=') == std::string::npos) continue;
    std::string k = line.substr(7, line.find('=') - 7), v = line.substr(line.find('=') + 1);
    if (v.size() >= 2 && v.front() == '\'' && v.back() == '\'') v = v.substr(1, v.size() - 2);
    out[k] = v;
  }
  return out;
}

class ApiFixture : public ::testing::TestWithParam<std::string> {
 protected:
  bool sqlite() const { return GetParam() == "sqlite"; }
  void SetUp() override {
    path = dir.file("serve.db");
    BackendOptions backend;
    backend.store = path;
    if (!sqlite()) {
      auto env = cluster_env();
      ASSERT_TRUE(env.count("MLK_CLUSTER_STORE") && env.count("MLK_CLUSTER_S3"))
          << "no cluster: run under the ctest fixture (scripts/cluster.sh start with $MLK_CLUSTER_DIR)";
      static int n = 0;
      std::string name = "apitest_" + std::to_string(getpid()) + "_" + std::to_string(++n);
      base_url = env["MLK_CLUSTER_STORE"];
      auto admin_conn = cache::pg::Conn::Open(base_url);
      ASSERT_TRUE(IsOk(admin_conn));
      ASSERT_TRUE(IsOk((*admin_conn)->exec("CREATE DATABASE " + name)));
      db_name = name;
      backend.store = base_url.substr(0, base_url.rfind('/') + 1) + name;
      std::string bucket = name;
      for (char& ch : bucket) ch = ch == '_' ? '-' : ch;  // bucket names allow no `_`
      backend.blobs = "s3://" + bucket + "?endpoint=" + env["MLK_CLUSTER_S3"] + "&access_key=mlk&secret_key=mlk-secret";
      blobs_spec = backend.blobs;
    }
    auto pool_or = SessionPool::Open(backend, 2);
    ASSERT_TRUE(IsOk(pool_or));
    pool = std::move(*pool_or);
    ApiOptions o;
    o.max_body_bytes = 4096;
    o.quotas.limits["quota"] = 100;
    api = std::make_unique<Api>(o, *pool, metrics);
    auto lease = pool->acquire();
    auto mk = [&](const std::string& team, Scopes s) { return lease.tables().create_token(team, s, "")->token; };
    alpha = mk("alpha", kScopeRead | kScopeWriteBlobs | kScopeWriteEntries);
    alpha_ro = mk("alpha", kScopeRead);
    alpha_blobs = mk("alpha", kScopeRead | kScopeWriteBlobs);
    beta = mk("beta", kScopeRead | kScopeWriteBlobs | kScopeWriteEntries);
    admin = mk("ops", kScopeAdmin);
    quota = mk("quota", kScopeRead | kScopeWriteBlobs | kScopeWriteEntries);
    revoked = mk("alpha", kScopeRead);
    ASSERT_TRUE(IsOk(lease.tables().revoke_token(revoked.substr(0, 12))));
  }
  void TearDown() override {
    api.reset();
    pool.reset();
    if (db_name.empty()) return;
    auto c = cache::pg::Conn::Open(base_url);
    if (c.ok()) (void)(*c)->exec("DROP DATABASE IF EXISTS " + db_name + " WITH (FORCE)");
  }

  // Everything a request could change: store statistics, every entry's
  // manifest, and the staged bytes of each namespace.
  std::string snapshot() {
    auto lease = pool->acquire();
    std::string s;
    auto st = lease.store().stats();
    s += std::to_string(st->entries) + "/" + std::to_string(st->blobs) + "/" + std::to_string(st->blob_bytes) + "/" +
         std::to_string(st->quarantined) + "\n";
    auto listed = lease.store().list(std::nullopt);
    for (const auto& e : *listed) s += e.ns + " " + e.key + " " + cache::manifest_to_json(e.manifest) + "\n";
    auto staged = lease.tables().staged_by_namespace();
    for (const auto& [ns, bytes] : *staged) s += "staged " + ns + " " + std::to_string(bytes) + "\n";
    return s;
  }
  cache::StoreStats stats() { return *pool->acquire().store().stats(); }
  // Damages the stored copy of `bytes` in place, keeping its digest.
  void corrupt(const std::string& bytes) {
    if (sqlite()) {
      auto store = cache::testing::open_store(path);
      ASSERT_TRUE(IsOk(store->corrupt_blob_for_testing(sha256_hex(bytes), 10)));
      return;
    }
    std::string bad = bytes;
    bad[10] = static_cast<char>(~bad[10]);
    auto spec = cache::parse_s3_spec(blobs_spec);
    ASSERT_TRUE(IsOk(spec));
    ASSERT_TRUE(IsOk(cache::S3Blobs(*spec).overwrite_for_testing(sha256_hex(bytes), bad)));
  }

  ApiResponse call(const std::string& method, const std::string& path_, const std::string& token,
                   const std::string& body = "", std::map<std::string, std::string> query = {}) {
    ApiRequest r{method, path_, std::move(query), token.empty() ? "" : "Bearer " + token};
    StringBody b(body);
    return api->handle(r, b);
  }
  ApiResponse put_blob(const std::string& token, const std::string& bytes, std::map<std::string, std::string> q = {}) {
    return call("PUT", "/v1/blobs/" + sha256_hex(bytes), token, bytes, std::move(q));
  }
  static std::string manifest_of(const std::map<std::string, std::string>& files, const std::string& meta = "{}") {
    cache::Manifest m;
    for (const auto& [n, b] : files) m.files[n] = cache::BlobRef{sha256_hex(b), static_cast<int64_t>(b.size())};
    m.meta_json = meta;
    m.provenance = cache::testing::test_provenance();
    m.provenance.host = "builder";
    m.provenance.time = 1700000000;
    return cache::manifest_to_json(m);
  }
  // The status, and that the body is {"error": non-empty text}.
  static void expect_error(const ApiResponse& r, int status, const std::string& needle = "") {
    EXPECT_EQ(r.status, status) << r.body;
    nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
    ASSERT_TRUE(j.is_object() && j.contains("error") && j["error"].is_string()) << r.body;
    EXPECT_FALSE(j["error"].get<std::string>().empty());
    if (!needle.empty()) {
      EXPECT_NE(r.body.find(needle), std::string::npos) << r.body;
    }
  }

  TempDir dir;
  std::string path, base_url, db_name, blobs_spec;
  std::unique_ptr<SessionPool> pool;
  Metrics metrics;
  std::unique_ptr<Api> api;
  std::string alpha, alpha_ro, alpha_blobs, beta, admin, quota, revoked;
};

}  // namespace mlk::service::testing
