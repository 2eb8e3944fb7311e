// The findings of the shared server's security review that live in the Api
// (service/api.h), one regression test each, named after the finding: what
// one team can read of another's through every route, request JSON nested
// to crash the parser's users, forged worker results, quota bypasses, and the
// smaller defects. The transport's findings (ranges, slow and idle clients,
// header floods) are in server_test.cpp, signatures in api_test.cpp and the
// runtime's tests, the dashboard's in dashboard_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <chrono>
#include <functional>
#include <map>
#include <ctime>
#include <set>
#include <string>

#include "api_fixture.h"
#include "base/json.h"
#include "base/signing.h"
#include "cache/blob_lru.h"
#include "cache/pg_store.h"
#include "cache/store.h"
#include "service/service_db.h"
#include "service/bench_history.h"
#include "service/jobs.h"
#include "service/tokens.h"

namespace mlk::service {
namespace {

using nlohmann::json;
using testing::IsOk;

class Trust : public testing::ApiFixture {
 protected:
  std::string token_of(const std::string& team, Scopes scopes) {
    auto lease = pool->acquire();
    auto t = lease.tables().create_token(team, scopes, "");
    EXPECT_TRUE(t.ok());
    return t->token;
  }
  // A measurement setup's bytes (what POST /v1/jobs/setups accepts).
  static std::string setup_bytes(const std::string& tag) { return "mlk-measure-setup " + tag + std::string(60, 's'); }
  // Makes `api` keep at most `n` finished jobs a namespace, then posts a
  // setup of alpha's (`tag`) to it; the setup's digest.
  std::string keep_finished_jobs(int n, const std::string& tag) {
    ApiOptions o = api->options();
    o.max_finished_jobs = n;
    api = std::make_unique<Api>(o, *pool, metrics);
    auto s = call("POST", "/v1/jobs/setups", alpha, setup_bytes(tag));
    EXPECT_EQ(s.status / 100, 2) << s.body;
    return json::parse(s.body, nullptr, false).value("setup", "");
  }
  // Submits a job of `token`'s team for `setup`; its id.
  int64_t submit(const std::string& token, const std::string& setup_digest) {
    auto r = call("POST", "/v1/jobs/submit", token,
                  json{{"device_key", "cpu"}, {"setup", setup_digest}, {"payload", json::object()}}.dump());
    EXPECT_EQ(r.status, 201) << r.body;
    return json::parse(r.body, nullptr, false).value("id", int64_t{0});
  }
  static std::string nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }
  // Team alpha's objects of every kind, each holding `marker`: a blob, the
  // entry alpha-key (fn alpha_fn), a ccache object, a job and its setup.
  struct Planted {
    std::string marker, digest, setup, job;
  };
  Planted plant_alpha_objects(char tag) {
    Planted p;
    p.marker = "alpha-secret-" + std::string(40, tag);
    EXPECT_EQ(put_blob(alpha, p.marker).status, 201);
    p.digest = sha256_hex(p.marker);
    EXPECT_EQ(call("PUT", "/v1/entries/alpha-key", alpha, manifest_of({{"f", p.marker}}, R"({"fn":"alpha_fn"})")).status, 201);
    EXPECT_EQ(call("PUT", "/ccache/" + std::string(32, 'c'), alpha, p.marker).status / 100, 2);
    auto s = call("POST", "/v1/jobs/setups", alpha, setup_bytes(p.marker));
    EXPECT_EQ(s.status, 201) << s.body;
    p.setup = json::parse(s.body, nullptr, false).value("setup", std::string());
    p.job = std::to_string(submit(alpha, p.setup));
    return p;
  }
};

// Finding 1: team B knew team A's digest D; GET /v1/blobs/D was 404, but a
// job submitted with {"setup": D} then returned A's bytes from
// GET /v1/jobs/ID/setup.
TEST_P(Trust, Finding1_AnotherTeamsBlobCannotBeReadThroughAJobSetup) {
  std::string secret = "alpha's private weights " + std::string(100, 'w');
  ASSERT_EQ(put_blob(alpha, secret).status, 201);
  std::string d = sha256_hex(secret);
  ASSERT_EQ(call("GET", "/v1/blobs/" + d, beta).status, 404);
  auto r = call("POST", "/v1/jobs/submit", beta, json{{"device_key", "cpu"}, {"setup", d}, {"payload", json::object()}}.dump());
  expect_error(r, 400, "is not in namespace `beta`");
  // Nor through a setup that team A staged as a setup.
  auto s = call("POST", "/v1/jobs/setups", alpha, setup_bytes("alpha"));
  ASSERT_EQ(s.status, 201) << s.body;
  std::string sd = json::parse(s.body)["setup"];
  expect_error(call("POST", "/v1/jobs/submit", beta,
                    json{{"device_key", "cpu"}, {"setup", sd}, {"payload", json::object()}}.dump()),
               400, "is not in namespace `beta`");
  // Team A's own job reads its own setup; team B cannot read A's job.
  int64_t id = submit(alpha, sd);
  auto mine = call("GET", "/v1/jobs/" + std::to_string(id) + "/setup", alpha);
  EXPECT_EQ(mine.status, 200);
  EXPECT_EQ(mine.body, setup_bytes("alpha"));
  EXPECT_EQ(call("GET", "/v1/jobs/" + std::to_string(id) + "/setup", beta).status, 404);
}

// Finding 2: a PUT /v1/entries/KEY whose metadata nested an array 100,000
// deep killed the server (stack overflow past the parser); so did a job
// result. Every request JSON is refused past kMaxJsonDepth, before a tree
// is built.
TEST_P(Trust, Finding2_DeeplyNestedJsonIsRefusedNotACrash) {
  const std::string deep = nested(100000);
  ApiOptions o = api->options();
  o.max_body_bytes = 1 << 20;
  o.bench_history_path = dir.file("bench.db");
  Api big(o, *pool, metrics);
  auto send = [&](const std::string& method, const std::string& path, const std::string& token, const std::string& body) {
    ApiRequest r{method, path, {}, "Bearer " + token};
    StringBody b(body);
    return big.handle(r, b);
  };
  ASSERT_EQ(put_blob(alpha, "x").status, 201);
  std::string manifest = manifest_of({{"a", "x"}});
  manifest.replace(manifest.find("\"meta\":{}"), 9, "\"meta\":{\"deep\":" + deep + "}");
  expect_error(send("PUT", "/v1/entries/deep", alpha, manifest), 400, "nested deeper than 64 levels");
  expect_error(send("POST", "/v1/jobs/submit", alpha, "{\"payload\":" + deep + "}"), 400, "nested deeper than 64 levels");
  expect_error(send("POST", "/v1/bench/results", alpha, deep), 400, "nested deeper than 64 levels");
  // A job result, from the worker holding the lease.
  std::string worker_token = token_of("alpha", kScopeRead | kScopeWorker);
  auto s = send("POST", "/v1/jobs/setups", alpha, setup_bytes("deep"));
  ASSERT_EQ(s.status, 201) << s.body;
  int64_t id = submit(alpha, json::parse(s.body)["setup"]);
  auto w = send("POST", "/v1/jobs/workers", worker_token, R"({"device_key":"cpu","name":"w","fingerprint":"fp"})");
  ASSERT_EQ(w.status, 201) << w.body;
  json me = json::parse(w.body)["worker"];
  json lease = {{"worker", me["id"]}, {"secret", me["secret"]}};
  ASSERT_EQ(send("POST", "/v1/jobs/lease", worker_token, lease.dump()).status, 200);
  std::string result = lease.dump();
  result.insert(result.size() - 1, ",\"ok\":true,\"result\":{\"d\":" + deep + "}");
  expect_error(send("POST", "/v1/jobs/" + std::to_string(id) + "/result", worker_token, result), 400,
               "nested deeper than 64 levels");
  // As deep as allowed is fine.
  EXPECT_FALSE(parse_json(nested(kMaxJsonDepth)).is_discarded());
}

TEST(BoundedJson, RefusesDepthBeforeBuildingATreeAndCountsOnlyStructure) {
  std::string why;
  EXPECT_TRUE(parse_json(std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']'), &why).is_discarded());
  EXPECT_EQ(why, "nested deeper than 64 levels of arrays and objects");
  // Brackets inside strings are text, not nesting.
  EXPECT_FALSE(parse_json("{\"a\":\"" + std::string(1000, '[') + "\"}").is_discarded());
  // Unclosed deep input (a stream cut short) is refused the same way, and a
  // plain syntax error names the parser's complaint.
  EXPECT_TRUE(parse_json(std::string(500000, '{')).is_discarded());
  EXPECT_TRUE(parse_json("{\"a\":", &why).is_discarded());
  EXPECT_NE(why.find("parse error"), std::string::npos) << why;
  EXPECT_EQ(dump_json(json{{"k", std::string("\xff")}}), "{\"k\":\"\xef\xbf\xbd\"}");
}

// Finding 7: a write-blobs token posted a result for a job leased by another
// token's worker in the same team ({"worker": 1, "ok": true, "result":
// {"median_ms": 0.0001}} got 200). A worker acts only with the secret it got
// at registration, with the token that registered it, under the worker scope.
TEST_P(Trust, Finding7_OnlyTheRegisteringTokenWithItsSecretActsForAWorker) {
  std::string w1 = token_of("alpha", kScopeRead | kScopeWorker), w2 = token_of("alpha", kScopeRead | kScopeWorker);
  auto s = call("POST", "/v1/jobs/setups", alpha, setup_bytes("w"));
  ASSERT_EQ(s.status, 201) << s.body;
  int64_t id = submit(alpha, json::parse(s.body)["setup"]);
  // A token without the worker scope cannot register.
  expect_error(call("POST", "/v1/jobs/workers", alpha_blobs, R"({"device_key":"cpu","name":"w","fingerprint":"fp"})"), 403,
               "lacks the scope `worker`");
  auto w = call("POST", "/v1/jobs/workers", w1, R"({"device_key":"cpu","name":"w1","fingerprint":"fp"})");
  ASSERT_EQ(w.status, 201) << w.body;
  json me = json::parse(w.body)["worker"];
  ASSERT_TRUE(me.contains("secret") && me["secret"].is_string());
  int64_t wid = me["id"];
  std::string secret = me["secret"];
  auto body = [&](const std::string& sec, const std::string& extra) {
    std::string b = json{{"worker", wid}, {"secret", sec}}.dump();
    return extra.empty() ? b : b.insert(b.size() - 1, "," + extra);
  };
  auto leased = call("POST", "/v1/jobs/lease", w1, body(secret, ""));
  ASSERT_EQ(leased.status, 200) << leased.body;
  ASSERT_EQ(json::parse(leased.body)["job"]["id"], id);
  const std::string forged = R"("ok":true,"result":{"median_ms":0.0001})";
  const std::string result = "/v1/jobs/" + std::to_string(id) + "/result";
  // Another token of the same team, with or without the secret.
  expect_error(call("POST", result, w2, body(secret, forged)), 403, "registered by another token");
  expect_error(call("POST", result, w2, body("guess", forged)), 403, "registered by another token");
  // The registering token without the secret, or with a wrong one.
  expect_error(call("POST", result, w1, json{{"worker", wid}, {"ok", true}, {"result", json::object()}}.dump()), 400,
               "lacks the field `secret`");
  expect_error(call("POST", result, w1, body(secret + "x", forged)), 403, "the secret does not match");
  expect_error(call("POST", "/v1/jobs/" + std::to_string(id) + "/heartbeat", w1, body("nope", "")), 403,
               "the secret does not match");
  // The job was not touched by any of that.
  auto job = json::parse(call("GET", "/v1/jobs/" + std::to_string(id), alpha).body);
  EXPECT_EQ(job["state"], "running");
  // The worker itself reports.
  EXPECT_EQ(call("POST", result, w1, body(secret, R"("ok":true,"result":{"median_ms":1.5})")).status, 200);
  job = json::parse(call("GET", "/v1/jobs/" + std::to_string(id), alpha).body);
  EXPECT_EQ(job["state"], "done");
  EXPECT_EQ(job["result"]["median_ms"], 1.5);
}

// Finding 8: a team over its quota stored three 1 MB setups through
// POST /v1/jobs/setups, and was not charged; benchmark history had no limit.
TEST_P(Trust, Finding8_SetupsAreChargedToTheQuota) {
  std::string before = snapshot();
  std::string a = "mlk-measure-setup " + std::string(60, 'a'), b = "mlk-measure-setup " + std::string(60, 'b');
  ASSERT_LE(a.size(), 100u);
  EXPECT_EQ(call("POST", "/v1/jobs/setups", quota, a).status, 201);
  EXPECT_EQ(call("POST", "/v1/jobs/setups", quota, a).status, 200);  // charged once
  expect_error(call("POST", "/v1/jobs/setups", quota, b), 507, "over its quota");
  auto lease = pool->acquire();
  EXPECT_EQ(*lease.tables().staged_bytes("quota", {}), static_cast<int64_t>(a.size()));
  EXPECT_NE(snapshot(), before);  // the first one is staged
}

TEST_P(Trust, Finding8_BenchmarkHistoryIsChargedToTheQuota) {
  ApiOptions o = api->options();
  o.bench_history_path = dir.file("bench.db");
  o.quotas.limits["quota"] = 500;  // a few reports of about 150 bytes
  Api with_history(o, *pool, metrics);
  auto post = [&](int n) {
    json report = {{"format", "mlk-bench"},
                   {"kernels", json::array({{{"id", "k" + std::to_string(n)},
                                             {"target", "host"},
                                             {"cache_key", "c"},
                                             {"variant", "v"},
                                             {"mlk", {{"median_ms", 1.0}}}}})}};
    ApiRequest r{"POST", "/v1/bench/results", {}, "Bearer " + quota};
    StringBody body(report.dump());
    return with_history.handle(r, body);
  };
  int stored = 0;
  ApiResponse last;
  for (int i = 0; i < 10 && (last = post(i)).status == 201; ++i) ++stored;
  EXPECT_GE(stored, 1);
  auto h = bench_history_at(o.bench_history_path);
  ASSERT_TRUE(h.ok());
  EXPECT_GT(*(*h)->bytes("quota"), 0);
  EXPECT_LT(stored, 10) << "a 500-byte quota held 10 benchmark reports";
  expect_error(last, 507, "over its quota");
}

// Found by review after finding 8: a report was charged its body's size,
// but each kernel's row repeated the report's machine record, so a small
// report with a large machine record stored many times its charge. Second
// review, finding 4: with no quota set that multiplied one 64 MiB upload
// into hundreds of GB. The machine and versions records are stored once per
// report: what is stored is at most what is charged, about the body's size.
TEST_P(Trust, Round2_Finding4_ABenchmarkReportIsStoredOnceAndChargedWhatItStores) {
  ApiOptions o = api->options();
  o.bench_history_path = dir.file("bench.db");
  o.max_body_bytes = 1 << 20;
  o.quotas.limits.clear();  // no quota: nothing else bounds what a report stores
  Api with_history(o, *pool, metrics);
  json kernels = json::array();
  for (int i = 0; i < 50; ++i)
    kernels.push_back({{"id", "k" + std::to_string(i)}, {"target", "t"}, {"cache_key", "c"}, {"variant", "v"}, {"mlk", json::object()}});
  json report = {{"format", "mlk-bench"}, {"machine", {{"cpu", std::string(20000, 'm')}}}, {"kernels", kernels}};
  const std::string body = report.dump();
  ApiRequest r{"POST", "/v1/bench/results", {}, "Bearer " + alpha};
  StringBody b(body);
  ApiResponse stored = with_history.handle(r, b);
  ASSERT_EQ(stored.status, 201) << stored.body;
  auto h = bench_history_at(o.bench_history_path);
  ASSERT_TRUE(h.ok());
  const int64_t held = *(*h)->bytes("alpha");
  EXPECT_LE(held, 2 * static_cast<int64_t>(body.size())) << "50 kernel rows multiplied a 20 KB machine record";
  EXPECT_LE(held, BenchHistory::charge_of(body));
  // The machine record still comes back with every result.
  ApiRequest q{"GET", "/v1/bench/history", {{"kernel", "k7"}}, "Bearer " + alpha};
  StringBody none("");
  ApiResponse got = with_history.handle(q, none);
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(json::parse(got.body)["results"][0]["machine"]["cpu"], std::string(20000, 'm'));
}

// The review of the round: GET /v1/bench/baselines/NAME read and expanded
// every row of a baseline set under the history's read lock, with no bound.
// A set larger than --max-answer is refused (413) without being read whole.
TEST_P(Trust, Round2_Review_ABaselineSetIsAnsweredWithinTheAnswerBound) {
  ApiOptions o = api->options();
  o.bench_history_path = dir.file("bench.db");
  o.max_body_bytes = 1 << 20;
  o.max_answer_bytes = 16 << 10;
  o.quotas.limits.clear();
  Api with_history(o, *pool, metrics);
  auto push = [&](const std::string& set, int n) {
    json kernels = json::array();
    for (int i = 0; i < n; ++i)
      kernels.push_back({{"id", "k" + std::to_string(i)}, {"target", "t"}, {"cache_key", "c"}, {"variant", "v"},
                         {"mlk", {{"median_ms", 1.5}, {"note", std::string(1000, 'n')}}}});
    json report = {{"format", "mlk-bench"}, {"kernels", kernels}};
    ApiRequest r{"POST", "/v1/bench/results", {{"baseline_set", set}}, "Bearer " + alpha};
    StringBody b(report.dump());
    return with_history.handle(r, b).status;
  };
  ASSERT_EQ(push("small", 3), 201);
  ASSERT_EQ(push("large", 100), 201);
  auto get = [&](const std::string& set) {
    ApiRequest q{"GET", "/v1/bench/baselines/" + set, {}, "Bearer " + alpha};
    StringBody none("");
    return with_history.handle(q, none);
  };
  auto small = get("small");
  EXPECT_EQ(small.status, 200) << small.body;
  EXPECT_EQ(json::parse(small.body)["kernels"].size(), 3u);
  expect_error(get("large"), 413, "the baseline set `large` is larger than this server answers at once");
}

// The fourth review: a write-entries token submitted and cancelled jobs
// with 1 MiB payloads in a loop, and nothing ever deleted a finished job:
// the store grew without bound, outside every quota. Payloads are at most
// 64 KiB, and a namespace keeps its newest max_finished_jobs finished jobs.
TEST_P(Trust, Round2_Review_FinishedJobsDoNotAccumulate) {
  const std::string setup = keep_finished_jobs(3, "few");
  auto send = [&](const std::string& method, const std::string& path, const std::string& body) {
    return call(method, path, alpha, body);
  };
  expect_error(send("POST", "/v1/jobs/submit",
                    json{{"device_key", "cpu"}, {"setup", setup}, {"payload", {{"pad", std::string(70 << 10, 'p')}}}}.dump()),
               413, "the payload is larger than 64 KiB");
  std::vector<int64_t> ids;
  for (int i = 0; i < 6; ++i) {
    auto r = send("POST", "/v1/jobs/submit", json{{"device_key", "cpu"}, {"setup", setup}, {"payload", json::object()}}.dump());
    ASSERT_EQ(r.status, 201) << r.body;
    ids.push_back(json::parse(r.body)["id"]);
    ASSERT_EQ(send("POST", "/v1/jobs/" + std::to_string(ids.back()) + "/cancel", "{}").status, 200);
  }
  int kept = 0;
  for (int64_t id : ids) kept += send("GET", "/v1/jobs/" + std::to_string(id), "").status == 200;
  EXPECT_EQ(kept, 3);
  EXPECT_EQ(send("GET", "/v1/jobs/" + std::to_string(ids.back()), "").status, 200);  // the newest stay
  EXPECT_EQ(send("GET", "/v1/jobs/" + std::to_string(ids.front()), "").status, 404);
}

// Review 12, M1: finished jobs were trimmed only when a job was submitted,
// so a team that submitted its 10,000 open jobs and then posted a 1 MiB
// result for each (a write-entries and a worker token) kept them all: about
// 10 GiB of results outside every quota. Trimmed as each job finishes now.
TEST_P(Trust, Review12_M1_FinishedJobsAreTrimmedAsTheyFinish) {
  const std::string setup = keep_finished_jobs(3, "finish");
  std::vector<int64_t> ids;
  for (int i = 0; i < 6; ++i) {
    auto r = call("POST", "/v1/jobs/submit", alpha, json{{"device_key", "cpu"}, {"setup", setup}, {"payload", json::object()}}.dump());
    ASSERT_EQ(r.status, 201) << r.body;
    ids.push_back(json::parse(r.body)["id"]);
  }
  const std::string worker_token = token_of("alpha", kScopeRead | kScopeWorker);
  auto w = call("POST", "/v1/jobs/workers", worker_token, R"({"device_key":"cpu","name":"w","fingerprint":"fp"})");
  ASSERT_EQ(w.status, 201) << w.body;
  json me = json::parse(w.body)["worker"];
  const json lease = {{"worker", me["id"]}, {"secret", me["secret"]}};
  for (int i = 0; i < 6; ++i) {
    auto l = call("POST", "/v1/jobs/lease", worker_token, lease.dump());
    ASSERT_EQ(l.status, 200) << l.body;
    json done = lease;
    done["ok"] = true;
    done["result"] = {{"pad", std::string(1000, 'r')}};
    auto r = call("POST", "/v1/jobs/" + std::to_string(json::parse(l.body)["job"]["id"].get<int64_t>()) + "/result",
                  worker_token, done.dump());
    ASSERT_EQ(r.status, 200) << r.body;
  }
  int kept = 0;
  for (int64_t id : ids) kept += call("GET", "/v1/jobs/" + std::to_string(id), alpha, "").status == 200;
  EXPECT_EQ(kept, 3);
}

// Review 15, M1: on the shared backend a replaced (or deleted) entry's blobs
// stay stored until a collection past its grace, but were charged to no
// one: replacing one entry in a loop stored far past the quota. They are
// staged again (charged until --staged-ttl) when the store still holds them;
// SQLite drops them with the entry, so there nothing is left to charge.
TEST_P(Trust, Review15_M1_AReplacedEntrysBlobsStayChargedWhileStored) {
  ApiOptions o = api->options();
  o.quotas.limits["quota"] = 3500;
  api = std::make_unique<Api>(o, *pool, metrics);
  auto send = [&](const std::string& method, const std::string& path, const std::string& body) {
    return call(method, path, quota, body);
  };
  int first_refusal = -1;
  for (int i = 0; i < 6 && first_refusal < 0; ++i) {
    const std::string blob = cache::testing::bytes_of(1000, 40 + i);
    auto up = send("PUT", "/v1/blobs/" + sha256_hex(blob), blob);
    if (up.status == 507) {
      first_refusal = i;
      break;
    }
    ASSERT_EQ(up.status, 201) << up.body;
    ASSERT_EQ(send("PUT", "/v1/entries/k", manifest_of({{"f", blob}})).status, 201);
  }
  if (GetParam() == std::string("pg")) EXPECT_EQ(first_refusal, 3) << "the replaced blobs were not charged";
  else EXPECT_EQ(first_refusal, -1) << "SQLite drops a replaced entry's blobs: nothing to charge";
}

// Review 16: a blob an entry of another team still holds is that team's
// charge, not the dropping team's: re-staging it made a writer that deleted
// its own entry of a shared blob pay for it until --staged-ttl.
TEST_P(Trust, Review16_ABlobAnotherTeamHoldsIsNotChargedToTheTeamThatDropsIt) {
  ApiOptions o = api->options();
  o.quotas.limits["quota"] = 1 << 20;
  Api roomy(o, *pool, metrics);
  auto as = [&](const std::string& tok, const std::string& method, const std::string& path, const std::string& body) {
    ApiRequest r{method, path, {}, "Bearer " + tok};
    StringBody b(body);
    return roomy.handle(r, b);
  };
  const std::string shared = cache::testing::bytes_of(1500, 77);
  ASSERT_EQ(as(alpha, "PUT", "/v1/blobs/" + sha256_hex(shared), shared).status, 201);
  ASSERT_EQ(as(alpha, "PUT", "/v1/entries/held", manifest_of({{"f", shared}})).status, 201);
  ASSERT_EQ(as(quota, "PUT", "/v1/blobs/" + sha256_hex(shared), shared).status, 201);
  ASSERT_EQ(as(quota, "PUT", "/v1/entries/s", manifest_of({{"f", shared}})).status, 201);
  ASSERT_EQ(as(quota, "DELETE", "/v1/entries/s", "").status, 200);
  auto st = json::parse(as(quota, "GET", "/v1/status", "").body)["namespaces"][0];
  EXPECT_EQ(st.value("staged_bytes", int64_t{-1}), 0) << st.dump();
}

// Review 17 M1: /ccache/ replaces and deletes entries too, and on
// PostgreSQL + S3 a replaced object's blob stayed stored, charged to no one,
// until a collection past its grace: a writer cycling one ccache key stored
// far past its quota. Charged while stored now, as for /v1/entries.
TEST_P(Trust, Review17_M1_AReplacedCcacheObjectStaysChargedWhileStored) {
  ApiOptions capped = api->options();
  capped.quotas.limits["quota"] = 3500;
  api = std::make_unique<Api>(capped, *pool, metrics);
  const std::string path = "/ccache/" + std::string(33, 'a');
  int first_refusal = -1;
  for (int i = 0; i < 8 && first_refusal < 0; ++i) {
    auto up = call("PUT", path, quota, cache::testing::bytes_of(1000, 60 + i));
    if (up.status == 507) {
      first_refusal = i;
      break;
    }
    ASSERT_EQ(up.status, 201) << up.body;
    if (i % 2) ASSERT_EQ(call("DELETE", path, quota).status, 200);  // deleted ones count too
  }
  if (GetParam() == std::string("pg")) EXPECT_GE(first_refusal, 1) << "the replaced blobs were not charged";
  else EXPECT_EQ(first_refusal, -1) << "SQLite drops a replaced object's blob: nothing to charge";
}

// Review 14, low: the trim kept the newest finished jobs by id, so a job
// that finished late, behind newer ones, lost its result as it was stored.
// Kept by when they finished now.
TEST_P(Trust, Review14_AJobThatFinishesLateKeepsItsResult) {
  const std::string setup = keep_finished_jobs(3, "late");
  for (int i = 0; i < 5; ++i)
    ASSERT_EQ(call("POST", "/v1/jobs/submit", alpha,
                   json{{"device_key", "cpu"}, {"setup", setup}, {"payload", json::object()}}.dump()).status, 201);
  const std::string worker_token = token_of("alpha", kScopeRead | kScopeWorker);
  auto w = call("POST", "/v1/jobs/workers", worker_token, R"({"device_key":"cpu","name":"w","fingerprint":"fp"})");
  ASSERT_EQ(w.status, 201) << w.body;
  json me = json::parse(w.body)["worker"];
  const json lease = {{"worker", me["id"]}, {"secret", me["secret"]}};
  auto take = [&] {
    auto l = call("POST", "/v1/jobs/lease", worker_token, lease.dump());
    EXPECT_EQ(l.status, 200) << l.body;
    return json::parse(l.body)["job"]["id"].get<int64_t>();
  };
  auto finish = [&](int64_t id) {
    json done = lease;
    done["ok"] = true;
    done["result"] = {{"median_ms", 1.0}};
    return call("POST", "/v1/jobs/" + std::to_string(id) + "/result", worker_token, done.dump()).status;
  };
  const int64_t oldest = take();  // held while the four newer ones finish
  for (int i = 0; i < 4; ++i) ASSERT_EQ(finish(take()), 200);
  ASSERT_EQ(finish(oldest), 200);
  auto got = call("GET", "/v1/jobs/" + std::to_string(oldest), alpha, "");
  ASSERT_EQ(got.status, 200) << "the job that finished last lost its result";
  EXPECT_EQ(json::parse(got.body)["state"], "done");
}

// The hostile benchmark (bench/serve_hostile.sh) after finding 4: every
// quota check of a namespace summed its whole history under the history's
// one lock, so a team that stored large reports made each of its writes
// scan them and held up every other team's quota checks. Each namespace's
// total is kept as reports are stored (and counted once from the rows for
// a database made before): it equals the sum over the rows.
TEST_P(Trust, Round2_Finding4_TheHistorysChargeIsARunningTotalOfItsRows) {
  ApiOptions o = api->options();
  o.bench_history_path = dir.file("bench.db");
  o.max_body_bytes = 1 << 20;
  o.quotas.limits.clear();
  Api with_history(o, *pool, metrics);
  for (const std::string& tok : {alpha, beta, alpha}) {
    json kernels = json::array();
    for (int i = 0; i < 20; ++i)
      kernels.push_back({{"id", "k\u00e9" + std::to_string(i)}, {"target", "t"}, {"cache_key", "c"}, {"variant", "v"},
                         {"mlk", {{"median_ms", 1.5}}}});
    json report = {{"format", "mlk-bench"}, {"created", "2026-12-06T00:00:00Z"},
                   {"machine", {{"cpu", std::string(300, 'm')}}}, {"versions", {{"mlk", "1"}}}, {"kernels", kernels}};
    ApiRequest r{"POST", "/v1/bench/results", {}, "Bearer " + tok};
    StringBody b(report.dump());
    ASSERT_EQ(with_history.handle(r, b).status, 201);
  }
  auto scanned = [&](const std::string& ns) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(o.bench_history_path.c_str(), &db), SQLITE_OK);
    auto len = [](const char* c) { return std::string("length(CAST(IFNULL(") + c + ", '') AS BLOB))"; };
    std::string q = "SELECT (SELECT SUM(" + len("entry") + "+" + len("machine") + "+" + len("versions") + "+" +
                    len("kernel") + "+" + len("target") + "+" + len("cache_key") + "+" + len("variant") + "+" +
                    len("median_ms") + "+" + len("created") + ") FROM bench_results WHERE ns=?1) + (SELECT SUM(" +
                    len("machine") + "+" + len("versions") + ") FROM bench_reports WHERE ns=?1)";
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db, q.c_str(), -1, &st, nullptr);
    sqlite3_bind_text(st, 1, ns.c_str(), -1, SQLITE_TRANSIENT);
    int64_t n = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    sqlite3_finalize(st);
    sqlite3_close(db);
    return n;
  };
  auto h = bench_history_at(o.bench_history_path);
  ASSERT_TRUE(h.ok());
  for (const std::string ns : {"alpha", "beta"}) {
    EXPECT_GT(scanned(ns), 0);
    EXPECT_EQ(*(*h)->bytes(ns), scanned(ns)) << ns;
  }
  // Rows an older mlk wrote without counting them, and then a database made
  // before the totals: each is counted from its rows when opened.
  for (const char* sql : {"INSERT INTO bench_reports (ns, machine, versions) VALUES ('beta', '{\"cpu\":\"old\"}', '{}')",
                          "INSERT INTO bench_results (ns, kernel, target, created, received, machine, versions, "
                          "cache_key, variant, median_ms, entry) VALUES ('beta', 'k', 't', '', '', '{}', '{}', 'c', "
                          "'v', '1.0', '{\"id\":\"k\"}')",
                          "DROP TABLE bench_usage; DROP TABLE bench_counted"}) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(o.bench_history_path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
    auto reopened = BenchHistory::Open(o.bench_history_path);
    ASSERT_TRUE(reopened.ok()) << reopened.status().message();
    EXPECT_EQ(*(*reopened)->bytes("alpha"), scanned("alpha")) << sql;
    EXPECT_EQ(*(*reopened)->bytes("beta"), scanned("beta")) << sql;
  }
}

// Second review, finding 4: reading the history parsed up to 10,000 rows
// into one answer. The answer is bounded in bytes (--max-answer), with a
// `next` to pass as `before`; paging through lists every result once.
TEST_P(Trust, Round2_Finding4_TheHistoryAnswerIsBoundedAndPaged) {
  ApiOptions o = api->options();
  o.bench_history_path = dir.file("bench.db");
  o.max_body_bytes = 1 << 20;
  o.max_answer_bytes = 20000;
  Api with_history(o, *pool, metrics);
  for (int i = 0; i < 12; ++i) {
    json k = {{"id", "k"}, {"target", "t"}, {"cache_key", "c" + std::to_string(i)}, {"variant", "v"},
              {"mlk", {{"median_ms", 1.0}, {"samples_ms", std::vector<double>(1000, 1.25)}}}};
    ApiRequest r{"POST", "/v1/bench/results", {}, "Bearer " + alpha};
    StringBody b(json{{"format", "mlk-bench"}, {"kernels", json::array({k})}}.dump());
    ASSERT_EQ(with_history.handle(r, b).status, 201);
  }
  std::set<std::string> seen;
  std::map<std::string, std::string> q = {{"kernel", "k"}, {"limit", "10000"}};
  int answers = 0;
  while (answers++ < 20) {
    ApiRequest r{"GET", "/v1/bench/history", q, "Bearer " + alpha};
    StringBody none("");
    ApiResponse a = with_history.handle(r, none);
    ASSERT_EQ(a.status, 200) << a.body;
    EXPECT_LE(a.body.size(), 20000u + 5000u);
    json j = json::parse(a.body);
    for (const auto& e : j["results"]) EXPECT_TRUE(seen.insert(e["cache_key"].get<std::string>()).second);
    if (!j["truncated"].get<bool>()) break;
    q["before"] = std::to_string(j["next"].get<int64_t>());
  }
  EXPECT_GT(answers, 2);
  EXPECT_EQ(seen.size(), 12u);
}

// Found by review after finding 8: job rows (payloads up to 1 MiB each)
// were never limited. A namespace has at most max_open_jobs unfinished.
TEST_P(Trust, Finding8_UnfinishedJobsOfANamespaceAreCapped) {
  ApiOptions o = api->options();
  o.max_open_jobs = 2;
  Api capped(o, *pool, metrics);
  auto s = call("POST", "/v1/jobs/setups", alpha, setup_bytes("cap"));
  ASSERT_EQ(s.status, 201) << s.body;
  const std::string body = json{{"device_key", "cpu"}, {"setup", json::parse(s.body)["setup"]}, {"payload", json::object()}}.dump();
  auto submit_capped = [&] {
    ApiRequest r{"POST", "/v1/jobs/submit", {}, "Bearer " + alpha};
    StringBody b(body);
    return capped.handle(r, b);
  };
  EXPECT_EQ(submit_capped().status, 201);
  ApiResponse second = submit_capped();
  EXPECT_EQ(second.status, 201);
  expect_error(submit_capped(), 507, "has 2 unfinished jobs");
  // A cancelled job makes room.
  std::string id = std::to_string(json::parse(second.body)["id"].get<int64_t>());
  EXPECT_EQ(call("POST", "/v1/jobs/" + id + "/cancel", alpha, "{}").status, 200);
  EXPECT_EQ(submit_capped().status, 201);
}

// Finding 10, the smaller ones.
TEST_P(Trust, Finding10_InvalidUtf8InAnEntryKeyIs400Not500) {
  expect_error(call("GET", "/v1/entries/\xff", alpha), 400, "must be 1-256 characters");
  expect_error(call("GET", "/v1/blobs/\xff\xfe", alpha), 400, "is not a sha256");
}

TEST_P(Trust, Finding10_ABenchReportWithANumericCreatedIs400Not500) {
  ApiOptions o = api->options();
  o.bench_history_path = dir.file("bench.db");
  Api with_history(o, *pool, metrics);
  for (const char* bad : {R"({"format":"mlk-bench","created":5,"kernels":[]})", R"({"format":7,"kernels":[]})",
                          R"({"format":"mlk-bench","kernels":[{"id":"k","target":"t","cache_key":"c","variant":"v","mlk":{"median_ms":"slow"}}]})"}) {
    ApiRequest r{"POST", "/v1/bench/results", {}, "Bearer " + alpha};
    StringBody body(bad);
    expect_error(with_history.handle(r, body), 400, "no mlk bench report");
  }
}

// Deleting team A's entry dropped the blob that team B had just staged (the
// CAS is shared), so B's next PUT of an entry failed with missing blobs.
TEST_P(Trust, Finding10_OrphanCollectionKeepsABlobAnotherNamespaceStaged) {
  std::string bytes = "shared bytes " + std::string(50, 'z');
  ASSERT_EQ(put_blob(alpha, bytes).status, 201);
  ASSERT_EQ(call("PUT", "/v1/entries/k", alpha, manifest_of({{"f", bytes}})).status, 201);
  ASSERT_EQ(put_blob(beta, bytes).status, 201);  // staged by beta, stored once
  ASSERT_EQ(call("DELETE", "/v1/entries/k", alpha).status, 200);
  EXPECT_EQ(call("GET", "/v1/blobs/" + sha256_hex(bytes), beta).status, 200);
  EXPECT_EQ(call("PUT", "/v1/entries/k", beta, manifest_of({{"f", bytes}})).status, 201);
  if (sqlite()) {  // and a whole-store gc keeps it while it is staged
    ASSERT_EQ(put_blob(beta, "staged only").status, 201);
    auto store = cache::testing::open_store(path);
    ASSERT_TRUE(IsOk(store->gc(int64_t{1} << 40)));
    EXPECT_EQ(call("GET", "/v1/blobs/" + sha256_hex(std::string("staged only")), beta).status, 200);
  }
}

// Finding 8, last part: on PostgreSQL + S3 unreferenced blobs were never
// collected. They are, after a grace, unless a namespace has them staged.
TEST_P(Trust, Finding8_UnreferencedBlobsAreCollectedOnTheSharedBackend) {
  if (sqlite()) GTEST_SKIP() << "the SQLite store drops a blob when its last reference goes (Finding10_Orphan...); "
                                "Round2_Low_ExpiredUploadsAreCollected covers it there";
  std::string dropped = "dropped " + std::string(40, 'd'), staged = "staged " + std::string(40, 's');
  ASSERT_EQ(put_blob(alpha, dropped).status, 201);
  ASSERT_EQ(call("PUT", "/v1/entries/k", alpha, manifest_of({{"f", dropped}})).status, 201);
  ASSERT_EQ(call("DELETE", "/v1/entries/k", alpha).status, 200);
  ASSERT_EQ(put_blob(beta, staged).status, 201);
  auto lease = pool->acquire();
  auto* pg = dynamic_cast<cache::PgStore*>(&lease.store());
  ASSERT_NE(pg, nullptr);
  ASSERT_TRUE(IsOk(lease.tables().unstage("alpha", {sha256_hex(dropped)})));  // as if its staging had expired
  // Within the grace nothing goes.
  auto none = pg->collect_unreferenced(0);
  ASSERT_TRUE(IsOk(none));
  EXPECT_EQ(none->blobs_deleted, 0);
  auto rep = pg->collect_unreferenced(static_cast<int64_t>(std::time(nullptr)) + 10);
  ASSERT_TRUE(IsOk(rep));
  EXPECT_EQ(rep->blobs_deleted, 1);
  EXPECT_EQ(lease.store().get_blob(sha256_hex(dropped)).status().code(), Status::Code::kNotFound);
  EXPECT_TRUE(IsOk(lease.store().get_blob(sha256_hex(staged))));
  EXPECT_EQ(lease.store().stats()->unreferenced_blobs, 1);  // the staged one: unreferenced, but held
}

TEST_P(Trust, Finding10_ANewStoreFileIsPrivateToItsOwner) {
  if (!sqlite()) GTEST_SKIP() << "the shared backend has no store file";
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// Every route of the route table, probed by team beta for team alpha's
// objects: a 403 or 404 (or an answer that does not contain them). A route
// added to the table without a probe here fails the test.
TEST_P(Trust, EveryRouteHidesAnotherTeamsObjects) {
  const Planted p = plant_alpha_objects('m');
  ASSERT_FALSE(HasFailure());
  const std::string &marker = p.marker, &d = p.digest, &sd = p.setup, &job = p.job;
  const std::map<std::string, std::string> other = {{"namespace", "alpha"}};
  // An answer hides alpha's objects: refused, or free of every trace of them.
  auto hidden = [&](const ApiResponse& r, const std::string& what) {
    bool refused = r.status == 401 || r.status == 403 || r.status == 404 || r.status == 303 || r.status == 400;
    bool clean = r.body.find(marker) == std::string::npos && r.body.find(d) == std::string::npos &&
                 r.body.find("alpha-key") == std::string::npos && r.body.find(sd) == std::string::npos &&
                 r.body.find("alpha_fn") == std::string::npos;
    EXPECT_TRUE(clean && (refused || r.status == 200)) << what << ": " << r.status << " " << r.body.substr(0, 300);
  };
  std::map<std::string, std::function<void()>> probes = {
      {"/healthz", [&] { hidden(call("GET", "/healthz", beta), "health"); }},
      {"/metrics", [&] { expect_error(call("GET", "/metrics", beta), 403); }},
      {"/v1/whoami", [&] { hidden(call("GET", "/v1/whoami", beta), "whoami"); }},
      {"/v1/status",
       [&] {
         hidden(call("GET", "/v1/status", beta), "status");
         expect_error(call("GET", "/v1/status", beta, "", other), 403);
       }},
      {"/v1/blobs/",
       [&] {
         expect_error(call("GET", "/v1/blobs/" + d, beta), 404);
         expect_error(call("GET", "/v1/blobs/" + sd, beta), 404);
         expect_error(call("GET", "/v1/blobs/" + d, beta, "", other), 403);
       }},
      {"/v1/entries",
       [&] {
         hidden(call("GET", "/v1/entries", beta), "query");
         expect_error(call("GET", "/v1/entries", beta, "", other), 403);
       }},
      {"/v1/entries/",
       [&] {
         expect_error(call("GET", "/v1/entries/alpha-key", beta), 404);
         expect_error(call("GET", "/v1/entries/alpha-key", beta, "", other), 403);
         expect_error(call("DELETE", "/v1/entries/alpha-key", beta, "", other), 403);
       }},
      {"/ccache/",
       [&] {
         hidden(call("GET", "/ccache/" + std::string(32, 'c'), beta), "ccache");
         expect_error(call("GET", "/ccache/" + std::string(32, 'c'), beta, "", other), 403);
       }},
      {"/v1/bench/",
       [&] {
         hidden(call("GET", "/v1/bench/history", beta), "bench");
         hidden(call("GET", "/v1/bench/history", beta, "", other), "bench of alpha");
       }},
      {"/ui",
       [&] {
         hidden(call("GET", "/ui", beta), "dashboard");
         hidden(call("GET", "/ui", beta, "", other), "dashboard of alpha");
       }},
      {"/ui/", [&] { hidden(call("GET", "/ui/kernel", beta, "", {{"id", "alpha_fn"}, {"namespace", "alpha"}}), "kernel page"); }},
      {"/v1/jobs/",
       [&] {
         expect_error(call("GET", "/v1/jobs/" + job, beta), 404);
         expect_error(call("GET", "/v1/jobs/" + job + "/setup", beta), 404);
         expect_error(call("GET", "/v1/jobs/" + job, beta, "", other), 403);
         expect_error(call("GET", "/v1/jobs/" + job + "/setup", beta, "", other), 403);
         expect_error(call("POST", "/v1/jobs/" + job + "/cancel", beta, "{}"), 404);
         expect_error(call("POST", "/v1/jobs/submit", beta,
                           json{{"device_key", "cpu"}, {"setup", sd}, {"payload", json::object()}}.dump()),
                      400);
         hidden(call("GET", "/v1/jobs/workers", beta), "workers");
       }},
  };
  for (const std::string& prefix : route_prefixes()) {
    auto p = probes.find(prefix);
    if (p == probes.end()) {
      ADD_FAILURE() << "route " << prefix << " has no probe in this test: add one";
      continue;
    }
    SCOPED_TRACE(prefix);
    p->second();
  }
}

// Second review, finding 3: a manifest could carry no files and metadata up
// to the body limit while quotas counted blob bytes only (12 entries of
// 512 KiB metadata stored 6 MiB under a 1 MiB quota). An entry's manifest
// is now charged with its blobs, and one over --max-manifest is 413.
TEST_P(Trust, Round2_Finding3_EntryMetadataIsChargedAndCapped) {
  ApiOptions o = api->options();
  o.max_body_bytes = 1 << 20;
  o.max_manifest_bytes = 4096;
  o.quotas.limits["quota"] = 2000;
  Api capped(o, *pool, metrics);
  auto put = [&](const std::string& key, const std::string& manifest) {
    ApiRequest r{"PUT", "/v1/entries/" + key, {}, "Bearer " + quota};
    StringBody b(manifest);
    return capped.handle(r, b);
  };
  const std::string m = manifest_of({}, json{{"note", std::string(700, 'm')}}.dump());
  ASSERT_GT(m.size(), 700u);
  ASSERT_LT(m.size(), 1000u);
  EXPECT_EQ(put("e0", m).status, 201);
  EXPECT_EQ(put("e1", m).status, 201);
  std::string before = snapshot();
  expect_error(put("e2", m), 507, "over its quota");  // a third manifest does not fit in 2000 bytes
  EXPECT_EQ(put("e1", m).status, 201);                // replacing credits the old manifest
  EXPECT_EQ(snapshot(), before);
  auto st = json::parse(call("GET", "/v1/status", quota).body)["namespaces"][0];
  EXPECT_EQ(st["bytes"], 2 * static_cast<int64_t>(m.size()));
  EXPECT_EQ(st["record_bytes"], 2 * static_cast<int64_t>(m.size()));
  // Over the cap: 413 whatever the quota, nothing stored.
  const std::string big = manifest_of({}, json{{"note", std::string(5000, 'm')}}.dump());
  ApiRequest r{"PUT", "/v1/entries/big", {}, "Bearer " + alpha};
  StringBody b(big);
  before = snapshot();
  expect_error(capped.handle(r, b), 413, "--max-manifest");
  EXPECT_EQ(snapshot(), before);
}

// Second review, finding 3: GET /v1/entries parsed every manifest of the
// namespace into one list and answered them in one body, so a namespace of
// large manifests made one query exhaust the server's memory. The namespace
// is read a page at a time, and the answer stops at --max-answer bytes with
// a `next` to go on from; following it lists every entry exactly once.
TEST_P(Trust, Round2_Finding3_AQueryIsBoundedInBytesAndPagesThroughEverything) {
  ApiOptions o = api->options();
  o.max_body_bytes = 1 << 20;
  o.max_answer_bytes = 4000;
  Api bounded(o, *pool, metrics);
  std::set<std::string> keys;
  for (int i = 0; i < 23; ++i) {
    std::string key = "k" + std::to_string(i);
    keys.insert(key);
    ApiRequest r{"PUT", "/v1/entries/" + key, {}, "Bearer " + alpha};
    StringBody b(manifest_of({}, json{{"fn", "f"}, {"note", std::string(900, 'n')}}.dump()));
    ASSERT_EQ(bounded.handle(r, b).status, 201);
  }
  std::set<std::string> seen;
  std::map<std::string, std::string> q = {{"fn", "f"}, {"limit", "1000"}};
  int answers = 0;
  while (answers++ < 30) {
    ApiRequest r{"GET", "/v1/entries", q, "Bearer " + alpha};
    StringBody none("");
    ApiResponse a = bounded.handle(r, none);
    ASSERT_EQ(a.status, 200) << a.body;
    EXPECT_LE(a.body.size(), 4000u + 1200u) << "an answer past the bound by more than one entry";
    json j = json::parse(a.body);
    EXPECT_GE(j["entries"].size(), 1u);
    for (const auto& e : j["entries"]) EXPECT_TRUE(seen.insert(e["key"].get<std::string>()).second) << e["key"];
    if (!j["truncated"].get<bool>()) break;
    ASSERT_TRUE(j.contains("next") && j["next"].is_string()) << a.body.substr(0, 200);
    q["after"] = j["next"].get<std::string>();
  }
  EXPECT_GT(answers, 5);  // 23 entries of about 1 KB in answers of 4 KB
  EXPECT_EQ(seen, keys);
  expect_error(call("GET", "/v1/entries", alpha, "", {{"after", "x.y"}}), 400, "is not a `next`");
}

// Review 12, M2: a query read up to 10,000 entries whatever their size, so a
// filter that matched nothing made one request parse 10,000 manifests of up
// to 1 MiB. It stops (truncated, with `next`) once it has read four times its
// answer bound in metadata; following `next` still reaches every entry.
TEST_P(Trust, Review12_M2_AQueryThatMatchesNothingReadsABoundedAmount) {
  ApiOptions o = api->options();
  o.max_body_bytes = 1 << 20;
  o.max_answer_bytes = 4000;
  Api bounded(o, *pool, metrics);
  for (int i = 0; i < 20; ++i) {
    ApiRequest r{"PUT", "/v1/entries/m" + std::to_string(i), {}, "Bearer " + alpha};
    // Half of them with their bulk in the metadata, half in the provenance
    // (review 13: a count of metadata bytes alone missed the latter).
    cache::Manifest m;
    m.meta_json = i % 2 ? json{{"fn", "f"}, {"note", std::string(3000, 'n')}}.dump() : R"({"fn":"f"})";
    m.provenance = cache::testing::test_provenance();
    m.provenance.host = i % 2 ? "builder" : std::string(3000, 'h');
    m.provenance.time = 1700000000;
    StringBody b(cache::manifest_to_json(m));
    ASSERT_EQ(bounded.handle(r, b).status, 201);
  }
  std::map<std::string, std::string> q = {{"fn", "nothing"}};
  int answers = 0;
  while (answers++ < 30) {
    ApiRequest r{"GET", "/v1/entries", q, "Bearer " + alpha};
    StringBody none("");
    ApiResponse a = bounded.handle(r, none);
    ASSERT_EQ(a.status, 200) << a.body;
    json j = json::parse(a.body);
    EXPECT_EQ(j["entries"].size(), 0u);
    if (!j["truncated"].get<bool>()) break;
    ASSERT_TRUE(j.contains("next") && j["next"].is_string()) << a.body.substr(0, 200);
    q["after"] = j["next"].get<std::string>();
  }
  // 20 entries of about 3 KB, at most 16 KB read per answer: at least four answers.
  // (Counting the metadata alone, the ten with a long provenance cost nothing: two answers.)
  EXPECT_GE(answers, 4);
  EXPECT_LT(answers, 30);
}

// Second review, low: ccache PUTs bypassed the gates of a signed or release
// namespace (a ccache object carries no signature or report).
TEST_P(Trust, Round2_Low_CcachePutsAreRefusedInSignedAndReleaseNamespaces) {
  for (int gate = 0; gate < 2; ++gate) {
    ApiOptions o = api->options();
    if (gate == 0) o.trusted_signers["alpha"] = {std::string(64, 'a')};
    if (gate == 1) o.require_verified["alpha"] = {"types"};
    Api gated(o, *pool, metrics);
    ApiRequest r{"PUT", "/ccache/" + std::string(33, 'c'), {}, "Bearer " + alpha};
    StringBody b("object");
    std::string before = snapshot();
    expect_error(gated.handle(r, b), 403, "cannot be");
    EXPECT_EQ(snapshot(), before);
  }
}

// Second review, low: the benchmark history's database and the shared
// backend's blob cache were created world-readable (the umask's 0644, 0755).
// Second review, finding 10: PostgreSQL had no timeouts (a namespace lock
// held by a stalled replica made every write of that namespace wait without
// end), and a lost connection reconnected transparently, dropping the
// session's advisory lock in the middle of a quota-checked write.
TEST_P(Trust, Round2_Finding10_PostgresLocksTimeOutAndALostLockFailsTheWrite) {
  if (sqlite()) GTEST_SKIP() << "PostgreSQL only";
  BackendOptions b;
  b.store = base_url.substr(0, base_url.rfind('/') + 1) + db_name + "?options=-c%20lock_timeout%3D300";
  b.blobs = blobs_spec;
  auto p = SessionPool::Open(b, 2);
  ASSERT_TRUE(IsOk(p));
  {
    auto a = (*p)->acquire();
    auto b2 = (*p)->acquire();
    auto held = a.tables().lock_namespace("alpha");
    ASSERT_TRUE(IsOk(held));
    auto t0 = std::chrono::steady_clock::now();
    auto second = b2.tables().lock_namespace("alpha");
    EXPECT_FALSE(second.ok()) << "a second writer waited for the lock without a timeout";
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
    if (!second.ok()) {
      EXPECT_EQ(second.status().code(), Status::Code::kIOError) << second.status().message();  // 503, not 500
      EXPECT_NE(second.status().message().find("busy"), std::string::npos) << second.status().message();
    }
    // The lock's connection dies (a network cut, a failover): the next
    // statement on it fails instead of silently running in a new session.
    auto admin_conn = cache::pg::Conn::Open(base_url);
    ASSERT_TRUE(IsOk(admin_conn));
    ASSERT_TRUE(IsOk((*admin_conn)->exec(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", {db_name})));
    auto after = a.tables().staged_bytes("alpha", {});
    EXPECT_FALSE(after.ok()) << "the write went on without the namespace lock";
    if (!after.ok()) EXPECT_NE(after.status().message().find("while it held a lock"), std::string::npos) << after.status().message();
  }
  // Released, the sessions reconnect for the next request.
  auto again = (*p)->acquire();
  EXPECT_TRUE(IsOk(again.tables().staged_bytes("alpha", {})));
}

// Second review, low: the server's SQLite store ran synchronous=NORMAL, so
// a power loss could drop acknowledged writes and revocations. Every
// connection of the server's pool fsyncs each commit.
TEST_P(Trust, Round2_Low_TheServersSqliteStoreIsDurable) {
  if (!sqlite()) GTEST_SKIP() << "SQLite only (PostgreSQL's durability is its own configuration)";
  auto lease = pool->acquire();
  auto* store = dynamic_cast<cache::Store*>(&lease.store());
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->durable());
  auto tables = open_service_db(path, false);  // what the pool's tables and tokens are read through
  ASSERT_TRUE(tables.ok());
  EXPECT_EQ(*(*tables)->query_text("PRAGMA synchronous"), "2");
}

// Second review, low: leases and dashboard sessions were timed by each
// replica's own clock, so a replica whose clock ran behind kept a dead
// worker's lease, or a session, alive. On PostgreSQL the database's clock
// decides, whatever the replica passes.
TEST_P(Trust, Round2_Low_LeasesAndSessionsUseTheDatabasesClock) {
  if (sqlite()) GTEST_SKIP() << "PostgreSQL only (one SQLite store has one server and one clock)";
  auto lease = pool->acquire();
  const int64_t real_ms = static_cast<int64_t>(std::time(nullptr)) * 1000;
  WorkerInfo w;
  w.ns = "alpha", w.device_key = "cpu", w.name = "w", w.fingerprint = "f", w.token_id = 1, w.secret_sha256 = "s";
  auto reg = lease.jobs().register_worker(w, /*a replica whose clock says 1970*/ 0);
  ASSERT_TRUE(IsOk(reg));
  JobSpec j;
  j.ns = "alpha", j.device_key = "cpu", j.setup = std::string(64, 'a'), j.payload = "{}";
  auto id = lease.jobs().submit(j, 0);
  ASSERT_TRUE(IsOk(id));
  auto got = lease.jobs().lease("alpha", *reg, 30000, 0);
  ASSERT_TRUE(IsOk(got));
  ASSERT_TRUE(got->has_value());
  EXPECT_GT((*got)->lease_until_ms, real_ms - 60000) << "the lease was timed by the replica's clock";
  EXPECT_LT((*got)->lease_until_ms, real_ms + 120000);
  // A session made by a replica 1000 s behind, read by one whose clock is
  // right: it lasts its 60 s by the database's clock.
  const int64_t behind = std::time(nullptr) - 1000;
  ASSERT_TRUE(IsOk(lease.tables().create_ui_session(std::string(64, 'e'), 1, behind, behind + 60, 16)));
  auto found = lease.tables().find_ui_session(std::string(64, 'e'), std::time(nullptr));
  ASSERT_TRUE(IsOk(found));
  EXPECT_TRUE(found->has_value()) << "a session that lasts 60 s from now was taken as expired";
}

// Second review, low: on SQLite an upload whose staging expired stayed on
// disk, charged to no one, for ever (only the shared backend collected).
// Both backends collect it past the grace; a staged one stays.
TEST_P(Trust, Round2_Low_ExpiredUploadsAreCollected) {
  const std::string expired = "expired " + std::string(40, 'x'), staged = "staged " + std::string(40, 'y');
  ASSERT_EQ(put_blob(alpha, expired).status, 201);
  ASSERT_EQ(put_blob(beta, staged).status, 201);
  auto lease = pool->acquire();
  ASSERT_TRUE(IsOk(lease.tables().expire_staged("alpha", static_cast<int64_t>(std::time(nullptr)) + 10)));
  auto none = lease.store().collect_unreferenced(0);  // within the grace nothing goes
  ASSERT_TRUE(IsOk(none));
  EXPECT_EQ(none->blobs_deleted, 0);
  auto rep = lease.store().collect_unreferenced(static_cast<int64_t>(std::time(nullptr)) + 10);
  ASSERT_TRUE(IsOk(rep));
  EXPECT_EQ(rep->blobs_deleted, 1);
  EXPECT_EQ(rep->bytes_freed, static_cast<int64_t>(expired.size()));
  EXPECT_EQ(lease.store().get_blob(sha256_hex(expired)).status().code(), Status::Code::kNotFound);
  EXPECT_TRUE(IsOk(lease.store().get_blob(sha256_hex(staged))));
}

// Review of the above: a queued job's setup is a staged blob too; past its
// staging it must stay as long as the job may still be leased.
TEST_P(Trust, Round2_Low_AnUnfinishedJobsSetupIsNotCollected) {
  auto s = call("POST", "/v1/jobs/setups", alpha, setup_bytes("queued-long"));
  ASSERT_EQ(s.status, 201) << s.body;
  const std::string sd = json::parse(s.body)["setup"];
  submit(alpha, sd);
  auto lease = pool->acquire();
  ASSERT_TRUE(IsOk(lease.tables().expire_staged("alpha", static_cast<int64_t>(std::time(nullptr)) + 10)));
  auto rep = lease.store().collect_unreferenced(static_cast<int64_t>(std::time(nullptr)) + 10);
  ASSERT_TRUE(IsOk(rep));
  EXPECT_EQ(rep->blobs_deleted, 0);
  EXPECT_TRUE(IsOk(lease.store().get_blob(sd))) << "a queued job lost its setup";
}

// Review 7 of issue 49, M1: a job could name as its setup a blob an entry
// referenced (so not staged); once the entry was deleted, the queued job
// held the blob stored and charged to no one. Both orders: the setup is
// staged at submit, and an entry that names a job's setup does not unstage it.
TEST_P(Trust, Review7_M1_AJobsSetupStaysChargedAfterItsEntryIsDeleted) {
  const std::string a = "referenced first " + std::string(300, 'a'), b = "staged first " + std::string(300, 'b');
  ASSERT_EQ(put_blob(alpha, a).status, 201);
  ASSERT_EQ(call("PUT", "/v1/entries/ka", alpha, manifest_of({{"f", a}})).status, 201);
  submit(alpha, sha256_hex(a));  // the entry's blob, as a job's setup
  ASSERT_EQ(put_blob(alpha, b).status, 201);
  submit(alpha, sha256_hex(b));  // a staged blob, as a job's setup
  ASSERT_EQ(call("PUT", "/v1/entries/kb", alpha, manifest_of({{"f", b}})).status, 201);
  ASSERT_EQ(call("DELETE", "/v1/entries/ka", alpha).status, 200);
  ASSERT_EQ(call("DELETE", "/v1/entries/kb", alpha).status, 200);
  auto lease = pool->acquire();
  EXPECT_TRUE(*lease.tables().blob_staged("alpha", sha256_hex(a))) << "a setup an entry referenced went uncharged";
  EXPECT_TRUE(*lease.tables().blob_staged("alpha", sha256_hex(b))) << "an entry unstaged a queued job's setup";
  EXPECT_TRUE(IsOk(lease.store().get_blob(sha256_hex(a))));
}

// Review 7 of issue 49, M2: in a signed namespace the 4 MiB bound on the
// manifest.json a signature covers was checked against the size the writer
// declared, so a blob of millions of JSON values said to be 1 byte was read
// and parsed whole, outside every memory bound. Now its real size counts,
// and the parse of one under the bound is bounded in values.
TEST_P(Trust, Review7_M2_ASignedManifestsSizeIsTheBlobsNotTheWritersWord) {
  ApiOptions o = api->options();
  o.max_body_bytes = 8 << 20;
  o.trusted_signers["alpha"] = {std::string(64, 'a')};
  Api signed_ns(o, *pool, metrics);
  auto send = [&](const std::string& method, const std::string& path, const std::string& body) {
    ApiRequest r{method, path, {}, "Bearer " + alpha};
    StringBody sb(body);
    return signed_ns.handle(r, sb);
  };
  auto values = [](size_t n) {
    std::string t = "{\"a\":[";
    for (size_t i = 0; i < n; ++i) t += i ? ",{}" : "{}";
    return t + "]}";
  };
  auto declared_one_byte = [&](const std::string& bytes) {
    const std::string d = sha256_hex(bytes);
    EXPECT_EQ(send("PUT", "/v1/blobs/" + d, bytes).status, 201);
    json m = json::parse(manifest_of({}));
    m["files"]["manifest.json"] = {{"digest", d}, {"size", 1}};
    return send("PUT", "/v1/entries/big", m.dump());
  };
  const std::string huge = values(1900000), many = values(300000);
  ASSERT_GT(huge.size(), size_t{4} << 20);
  ASSERT_LT(many.size(), size_t{1} << 20);
  expect_error(declared_one_byte(huge), 403, "is larger than a signature is checked over (4 MiB)");
  expect_error(declared_one_byte(many), 403, "more than 200000 values");
}

// Review 7 of issue 49, low: job bodies (up to 2 MiB) and manifests were
// parsed with no bound on their values (about 80 bytes of tree each).
TEST_P(Trust, Review7_Low_RequestBodiesAreParsedWithinABoundOfValues) {
  std::string body = "{\"payload\":[";
  for (int i = 0; i < 250000; ++i) body += i ? ",0" : "0";
  body += "]}";
  expect_error(call("POST", "/v1/jobs/submit", alpha, body), 400, "more than 200000 values");
  std::string meta = "{\"a\":[";
  for (int i = 0; i < 250000; ++i) meta += i ? ",0" : "0";
  meta += "]}";
  ApiOptions o = api->options();
  o.max_body_bytes = 4 << 20;
  o.max_manifest_bytes = 4 << 20;
  Api roomy(o, *pool, metrics);
  ApiRequest r{"PUT", "/v1/entries/many", {}, "Bearer " + alpha};
  StringBody sb("{\"files\":{},\"meta\":" + meta + ",\"provenance\":{}}");
  expect_error(roomy.handle(r, sb), 400, "more than 200000 values");
}

// Review 8 of issue 49, M1: whether a blob is staged or a job's setup was
// looked up by scanning service_staged and jobs_queue for every blob, so
// 300k tiny staged blobs (1 MB of quota) made each collection quadratic,
// holding SQLite's write lock for every team. Both are looked up by index.
TEST_P(Trust, Review8_M1_WhetherABlobIsHeldIsLookedUpByIndex) {
  if (!sqlite()) GTEST_SKIP() << "SQLite's query plan (PostgreSQL has the same indexes)";
  submit(alpha, json::parse(call("POST", "/v1/jobs/setups", alpha, setup_bytes("plan")).body)["setup"]);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  std::string plan;
  auto row = [](void* out, int n, char** v, char**) {
    for (int i = 0; i < n; ++i) *static_cast<std::string*>(out) += std::string(v[i] ? v[i] : "") + " ";
    *static_cast<std::string*>(out) += "\n";
    return 0;
  };
  char* err = nullptr;
  const char* q =
      "EXPLAIN QUERY PLAN SELECT 1 FROM blobs WHERE NOT EXISTS (SELECT 1 FROM service_staged g WHERE "
      "g.digest=blobs.digest) AND NOT EXISTS (SELECT 1 FROM jobs_queue q WHERE q.setup=blobs.digest AND q.state IN "
      "('queued', 'running'))";
  ASSERT_EQ(sqlite3_exec(db, q, row, &plan, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_close(db);
  EXPECT_THAT(plan, ::testing::HasSubstr("INDEX service_staged_digest")) << plan;
  EXPECT_THAT(plan, ::testing::HasSubstr("INDEX jobs_queue_setup")) << plan;
  EXPECT_THAT(plan, ::testing::Not(::testing::HasSubstr("SCAN g"))) << plan;
  EXPECT_THAT(plan, ::testing::Not(::testing::HasSubstr("SCAN q"))) << plan;
}

#ifndef MLK_CLUSTER_TESTS
TEST(Round2Low, TheBenchHistoryAndTheBlobCacheArePrivate) {
  testing::TempDir d;
  ASSERT_TRUE(BenchHistory::Open(d.file("bench.db")).ok());
  struct stat st {};
  ASSERT_EQ(stat(d.file("bench.db").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto lru = cache::BlobLru::Open(d.file("blobs/cache"), 1 << 20);
  ASSERT_TRUE(lru.ok());
  ASSERT_EQ(stat(d.file("blobs/cache").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}
#endif

// Second review, low: EveryRouteHidesAnotherTeamsObjects walked prefixes
// with one token. This walks every (route, method) of the route table, each
// with no token, another team's read token, its write token, and a token
// whose team holds a revoked read grant, with and without ?namespace= of the
// team whose objects they are after: no answer holds a trace of them that
// the request did not already carry, none is a 5xx, and the owner's objects
// are unchanged after it all.
TEST_P(Trust, Round2_Low_EveryRouteAndMethodWithEveryTokenKindHidesAnotherTeamsObjects) {
  const Planted p = plant_alpha_objects('w');
  ASSERT_FALSE(HasFailure());
  const std::string &marker = p.marker, &d = p.digest, &sd = p.setup, &job = p.job;
  const std::string beta_ro = token_of("beta", kScopeRead), gamma = token_of("gamma", kScopeRead);
  {
    auto lease = pool->acquire();
    ASSERT_TRUE(IsOk(lease.tables().grant("alpha", "gamma", 1)));
    ASSERT_TRUE(IsOk(lease.tables().revoke_grant("alpha", "gamma", 2)));
  }
  const std::vector<std::string> secrets = {marker, d, "alpha-key", sd, "alpha_fn"};
  // The rest of a prefix route's path, for each route.
  const std::map<std::string, std::vector<std::string>> args = {
      {"/v1/blobs/", {d, sd}},
      {"/v1/entries/", {"alpha-key"}},
      {"/ccache/", {std::string(32, 'c')}},
      {"/v1/bench/", {"history", "results", "baselines/main"}},
      {"/ui/", {"kernel", "login", "logout"}},
      {"/v1/jobs/", {job, job + "/setup", job + "/cancel", job + "/result", "submit", "setups", "workers", "lease"}},
  };
  const std::vector<std::pair<std::string, std::string>> who = {
      {"no token", ""}, {"beta read", beta_ro}, {"beta write", beta}, {"gamma, grant revoked", gamma}};
  int probes = 0;
  for (const RouteInfo& route : route_table()) {
    std::vector<std::string> paths = {route.prefix};
    if (route.prefix.back() == '/') {
      auto a = args.find(route.prefix);
      ASSERT_NE(a, args.end()) << "route " << route.prefix << " has no arguments in this test: add them";
      paths.clear();
      for (const auto& rest : a->second) paths.push_back(route.prefix + rest);
    }
    for (const std::string& method : route.methods)
      for (const std::string& path : paths)
        for (const auto& [kind, tok] : who)
          for (int foreign = 0; foreign < 2; ++foreign) {
            std::map<std::string, std::string> q;
            if (foreign) q["namespace"] = "alpha";
            if (path.find("kernel") != std::string::npos) q["id"] = "alpha_fn";
            const std::string body = method == "PUT" || method == "POST" ? R"({"setup":")" + sd + R"("})" : "";
            ApiResponse r = call(method, path, tok, body, q);
            ++probes;
            const std::string sent = path + body + (foreign ? "alpha" : "") + q["id"];
            SCOPED_TRACE(method + " " + path + (foreign ? "?namespace=alpha" : "") + " as " + kind);
            EXPECT_LT(r.status, 500) << r.body.substr(0, 300);
            for (const std::string& secret : secrets)
              if (sent.find(secret) == std::string::npos)
                EXPECT_EQ(r.body.find(secret), std::string::npos) << "the answer holds `" << secret.substr(0, 20)
                                                                  << "`: " << r.status << " " << r.body.substr(0, 300);
          }
  }
  EXPECT_GT(probes, 300);
  // The owner's objects are as they were.
  EXPECT_EQ(call("GET", "/v1/blobs/" + d, alpha).body, marker);
  EXPECT_EQ(call("GET", "/ccache/" + std::string(32, 'c'), alpha).body, marker);
  auto e = call("GET", "/v1/entries/alpha-key", alpha);
  ASSERT_EQ(e.status, 200);
  EXPECT_EQ(json::parse(e.body)["manifest"]["meta"]["fn"], "alpha_fn");
  auto j = call("GET", "/v1/jobs/" + job, alpha);
  ASSERT_EQ(j.status, 200);
  EXPECT_EQ(json::parse(j.body)["state"], "queued");
}

// Second review, finding 8: HEAD and a one-byte Range read and re-hashed the
// whole blob (a 64 MiB read for each). HEAD now answers the blob's size from
// its row and a Range reads only its bytes: the stored copy, damaged here
// after it was stored, is not read whole (a whole GET still finds the damage).
TEST_P(Trust, Round2_Finding8_HeadAndRangeReadNotTheWholeBlob) {
  const std::string blob = cache::testing::bytes_of(3000, 8);
  ASSERT_EQ(put_blob(alpha, blob).status / 100, 2);
  corrupt(blob);
  const std::string path = "/v1/blobs/" + sha256_hex(blob);
  ApiResponse head = call("HEAD", path, alpha);
  EXPECT_EQ(head.status, 200) << head.body;
  EXPECT_EQ(head.head_length, 3000);
  EXPECT_TRUE(head.body.empty()) << "HEAD read " << head.body.size() << " bytes";
  ApiRequest r{"GET", path, {}, "Bearer " + alpha};
  r.range = "bytes=100-109";
  StringBody none("");
  ApiResponse part = api->handle(r, none);
  EXPECT_EQ(part.status, 206) << part.body;
  EXPECT_EQ(part.body, blob.substr(100, 10));
  r.range = "bytes=5000-";
  expect_error(api->handle(r, none), 416, "past the body's 3000 bytes");
  r.range = "bytes=0-1,5-6";
  expect_error(api->handle(r, none), 416, "several ranges");
  // The whole blob is read and checked, and the damage found.
  EXPECT_EQ(call("GET", path, alpha).status, 404);
}

// Issue 49, review 5 (M1): a benchmark row was unbounded (a kernel with 32 M
// samples stored, then read whole and parsed several times over by every
// history query and the dashboard). A kernel's result, its samples, its
// names and the report's records are bounded when stored.
TEST_P(Trust, Review5_M1_ABenchmarkRowIsBoundedWhenStored) {
  ApiOptions o = api->options();
  o.bench_history_path = dir.file("bench.db");
  o.max_body_bytes = 8 << 20;
  o.quotas.limits.clear();
  Api with_history(o, *pool, metrics);
  auto post = [&](const json& kernel, const json& machine = json::object()) {
    const std::string body = json{{"format", "mlk-bench"}, {"machine", machine}, {"kernels", {kernel}}}.dump();
    ApiRequest r{"POST", "/v1/bench/results", {}, "Bearer " + alpha};
    StringBody b(body);
    return with_history.handle(r, b);
  };
  auto kernel = [](const std::string& id, size_t samples) {
    return json{{"id", id}, {"target", "t"}, {"cache_key", "c"}, {"variant", "v"},
                {"mlk", {{"median_ms", 1.0}, {"samples_ms", std::vector<double>(samples, 0.5)}}}};
  };
  EXPECT_EQ(post(kernel("k", 10000)).status, 201);
  expect_error(post(kernel("k", 10001)), 400, "`mlk.samples_ms` has 10001 values; at most 10000");
  json padded = kernel("k", 1);
  padded["notes"] = std::string(300 << 10, 'n');
  expect_error(post(padded), 400, "kernels[0] is over 262144 bytes");
  expect_error(post(kernel(std::string(1025, 'k'), 1)), 400, "`id` is over 1024 bytes");
  expect_error(post(kernel("k", 1), json{{"cpu", std::string(70000, 'm')}}), 400, "`machine` is over 65536 bytes");
  // A report's `created` went into every row; and 64 MiB of `[{},{},...]`
  // parsed into about 2 GiB (review 5, M1 and M3).
  auto raw = [&](const std::string& body) {
    ApiRequest r{"POST", "/v1/bench/results", {}, "Bearer " + alpha};
    StringBody b(body);
    return with_history.handle(r, b);
  };
  json stamped = {{"format", "mlk-bench"}, {"created", std::string(65, '2')}, {"kernels", {kernel("k", 1)}}};
  expect_error(raw(stamped.dump()), 400, "`created` is not a string of at most 64 characters");
  std::string pad = R"({"format":"mlk-bench","kernels":[],"pad":[)";
  for (int i = 0; i < 2000001; ++i) pad += "{},";
  pad += "{}]}";
  expect_error(raw(pad), 400, "more than 2000000 values");
}

// Issue 49, review 5 (H2): the dashboard held up to 500 whole entries (a
// manifest may be a megabyte) and escaped their names whole, a megabyte of
// `&` growing fivefold, before any bound on its answer. Each cell shows at
// most 200 characters and only the cells are held.
TEST_P(Trust, Review5_H2_TheDashboardShowsAWritersNamesClipped) {
  ApiOptions o = api->options();
  o.max_body_bytes = 1 << 20;
  o.max_manifest_bytes = 1 << 20;
  o.quotas.limits.clear();
  Api large(o, *pool, metrics);
  cache::Manifest m;
  m.meta_json = json{{"fn", std::string(200000, '&')}, {"target", std::string(200000, '<')}}.dump();
  m.provenance = cache::testing::test_provenance();
  ApiRequest put{"PUT", "/v1/entries/amp", {}, "Bearer " + alpha};
  StringBody body(cache::manifest_to_json(m));
  ASSERT_EQ(large.handle(put, body).status, 201);
  ApiRequest ui{"GET", "/ui", {{"namespace", "alpha"}}, "Bearer " + alpha_ro};
  StringBody none("");
  ApiResponse page = large.handle(ui, none);
  ASSERT_EQ(page.status, 200) << page.body.substr(0, 300);
  EXPECT_NE(page.body.find("&amp;&amp;&amp;"), std::string::npos) << "the name is shown, clipped";
  EXPECT_LT(page.body.size(), size_t{64} << 10) << "a 400 KB name grew the page";
}

// Issue 49, review 5 (L3): a signed namespace checked a pack's signature only
// at submit, so an unsigned pack queued before the namespace was signed was
// still leased to its workers afterwards. The lease checks it again, and
// the job fails naming why.
TEST_P(Trust, Review5_L3_AnUnsignedPackQueuedBeforeSigningIsNotLeased) {
  auto s = call("POST", "/v1/jobs/setups", alpha, setup_bytes("pack"));
  ASSERT_EQ(s.status, 201) << s.body;
  auto queued = call("POST", "/v1/jobs/submit", alpha,
                     json{{"device_key", "cpu"}, {"setup", json::parse(s.body)["setup"]}, {"payload", {{"kind", "candidates"}}}}.dump());
  ASSERT_EQ(queued.status, 201) << queued.body;  // the namespace is not signed yet
  const int64_t id = json::parse(queued.body)["id"];
  auto signer = create_signing_key();
  ASSERT_TRUE(signer.ok());
  ApiOptions o = api->options();
  o.trusted_signers["alpha"] = {signer->public_key};
  Api signed_ns(o, *pool, metrics);  // the operator signs the namespace
  auto as_signed = [&](const std::string& path, const std::string& token, const std::string& body) {
    ApiRequest r{"POST", path, {}, "Bearer " + token};
    StringBody b(body);
    return signed_ns.handle(r, b);
  };
  const std::string worker_token = token_of("alpha", kScopeRead | kScopeWorker);
  // Review 5 (H2): a fingerprint of control characters was stored and then
  // dumped six times its size by every listing.
  expect_error(as_signed("/v1/jobs/workers", worker_token, R"({"device_key":"cpu","name":"w","fingerprint":"\u0001\u0001"})"),
               400, "none a control character");
  auto w = as_signed("/v1/jobs/workers", worker_token, R"({"device_key":"cpu","name":"w","fingerprint":"fp"})");
  ASSERT_EQ(w.status, 201) << w.body;
  json me = json::parse(w.body)["worker"];
  auto leased = as_signed("/v1/jobs/lease", worker_token, json{{"worker", me["id"]}, {"secret", me["secret"]}}.dump());
  ASSERT_EQ(leased.status, 200) << leased.body;
  EXPECT_TRUE(json::parse(leased.body)["job"].is_null()) << leased.body;
  auto job = call("GET", "/v1/jobs/" + std::to_string(id), alpha);
  ASSERT_EQ(job.status, 200) << job.body;
  EXPECT_NE(job.body.find("runs only candidate packs signed by its trusted signers"), std::string::npos) << job.body;
}

// Issue 49, review 5 (M2): a job's setup was charged only while staged, and
// staged rows expired after --staged-ttl even while a queued job held the
// setup (which the collector keeps): a namespace kept 64 MiB setups stored,
// uncharged, behind jobs no worker takes. They stay charged now.
TEST_P(Trust, Review5_M2_AQueuedJobsSetupStaysCharged) {
  ApiOptions o = api->options();
  o.staged_ttl_s = -1;  // everything staged before now is expired at the next upload
  o.quotas.limits["quota"] = 100;
  Api short_lived(o, *pool, metrics);
  auto post = [&](const std::string& method, const std::string& path, const std::string& body) {
    ApiRequest r{method, path, {}, "Bearer " + quota};
    StringBody b(body);
    return short_lived.handle(r, b);
  };
  const std::string setup = setup_bytes("held");  // 78 bytes
  auto s = post("POST", "/v1/jobs/setups", setup);
  ASSERT_EQ(s.status, 201) << s.body;
  auto job = post("POST", "/v1/jobs/submit",
                  json{{"device_key", "nobody"}, {"setup", json::parse(s.body)["setup"]}, {"payload", json::object()}}.dump());
  ASSERT_EQ(job.status, 201) << job.body;
  const std::string more(40, 'm');
  expect_error(post("PUT", "/v1/blobs/" + sha256_hex(more), more), 507, "over its quota");
  // Once the job is cancelled, its setup expires like any staged upload.
  ASSERT_EQ(post("POST", "/v1/jobs/" + std::to_string(json::parse(job.body)["id"].get<int64_t>()) + "/cancel", "{}").status, 200);
  EXPECT_EQ(post("PUT", "/v1/blobs/" + sha256_hex(more), more).status, 201);
}

#ifdef MLK_CLUSTER_TESTS
INSTANTIATE_TEST_SUITE_P(Shared, Trust, ::testing::Values("pg"), [](const auto& i) { return i.param; });
#else
INSTANTIATE_TEST_SUITE_P(Sqlite, Trust, ::testing::Values("sqlite"), [](const auto& i) { return i.param; });
#endif

}  // namespace
}  // namespace mlk::service
