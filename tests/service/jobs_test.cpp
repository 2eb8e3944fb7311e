// service/jobs.h on both backends, with the times passed in: leases,
// heartbeats, expired leases requeued and failed after kMaxJobAttempts, the
// fingerprint and key a worker must match, cancel, and two connections
// leasing at once never getting one job twice (FOR UPDATE SKIP LOCKED on
// PostgreSQL; mlk_cluster_tests, under the cluster fixture).
#include <gtest/gtest.h>
#include <unistd.h>

#include <set>
#include <thread>

#include "base/files.h"
#include "cache/pg.h"
#include "cache/store.h"
#include "service/jobs.h"
#include "../cache/test_util.h"

namespace mlk::service {
namespace {

std::string cluster_store() {
  const char* dir = std::getenv("MLK_CLUSTER_DIR");
  auto text = read_file(std::string(dir ? dir : "") + "/env");
  if (!text.ok()) return "";
  std::string key = "export MLK_CLUSTER_STORE=";
  size_t at = text->find(key);
  if (at == std::string::npos) return "";
  return text->substr(at + key.size(), text->find('\n', at) - at - key.size());
}

class JobsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "sqlite") {
      spec = dir.file("jobs.db");
      ASSERT_TRUE(cache::Store::Open(spec).ok());
    } else {
      base = cluster_store();
      ASSERT_FALSE(base.empty()) << "no cluster: run under the ctest fixture (scripts/cluster.sh start)";
      static int n = 0;
      db_name = "jobstest_" + std::to_string(getpid()) + "_" + std::to_string(++n);
      auto c = cache::pg::Conn::Open(base);
      ASSERT_TRUE(c.ok());
      ASSERT_TRUE((*c)->exec("CREATE DATABASE " + db_name).ok());
      spec = base.substr(0, base.rfind('/') + 1) + db_name;
    }
    auto j = open();
    ASSERT_TRUE(j.ok()) << j.status().message();
    jobs = std::move(*j);
  }
  void TearDown() override {
    jobs.reset();
    if (db_name.empty()) return;
    auto c = cache::pg::Conn::Open(base);
    if (c.ok()) (void)(*c)->exec("DROP DATABASE IF EXISTS " + db_name + " WITH (FORCE)");
  }
  Expected<std::unique_ptr<JobTables>> open() { return GetParam() == "sqlite" ? sqlite_jobs(spec) : pg_jobs(spec, JobClock::kCaller); }
  WorkerInfo worker(const std::string& name, const std::string& key = "cpu", const std::string& fp = "fp-a",
                    const std::string& ns = "t") {
    WorkerInfo info;
    info.ns = ns;
    info.device_key = key;
    info.name = name;
    info.fingerprint = fp;
    auto w = jobs->register_worker(info, 0);
    EXPECT_TRUE(w.ok());
    return *w;
  }
  int64_t submit(const std::string& key = "cpu", const std::string& fp = "", const std::string& ns = "t") {
    auto id = jobs->submit(JobSpec{ns, key, fp, std::string(64, 'a'), R"({"schedule":{}})"}, 0);
    EXPECT_TRUE(id.ok());
    return *id;
  }
  cache::testing::TempDir dir;
  std::string spec, base, db_name;
  std::unique_ptr<JobTables> jobs;
};

TEST_P(JobsTest, LeaseExtendFinish) {
  int64_t a = submit(), b = submit();
  WorkerInfo w1 = worker("w1"), w2 = worker("w2"), w3 = worker("w3");
  auto l1 = jobs->lease("t", w1, 1000, 10);
  ASSERT_TRUE(l1.ok() && l1->has_value());
  EXPECT_EQ((*l1)->id, a);  // the oldest first
  EXPECT_EQ((*l1)->state, "running");
  EXPECT_EQ((*l1)->attempts, 1);
  auto l2 = jobs->lease("t", w2, 1000, 20);
  ASSERT_TRUE(l2.ok() && l2->has_value());
  EXPECT_EQ((*l2)->id, b);
  auto l3 = jobs->lease("t", w3, 1000, 30);
  ASSERT_TRUE(l3.ok());
  EXPECT_FALSE(l3->has_value());
  EXPECT_TRUE(*jobs->extend("t", a, w1.id, 1000, 900));   // until 1900
  EXPECT_FALSE(*jobs->extend("t", a, w2.id, 1000, 900));  // not w2's lease
  EXPECT_TRUE(*jobs->finish("t", a, w1.id, true, R"({"verdict":"ok"})", 1800));
  EXPECT_FALSE(*jobs->finish("t", a, w1.id, true, "{}", 1850));  // finished already
  auto g = jobs->get("t", a, 1900);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->state, "done");
  EXPECT_EQ(g->worker_name, "w1");
  EXPECT_EQ(g->worker_fingerprint, "fp-a");
  EXPECT_EQ(g->result, R"({"verdict":"ok"})");
  EXPECT_EQ(jobs->get("t", 999, 0).status().code(), Status::Code::kNotFound);
  EXPECT_EQ(jobs->get("other", a, 0).status().code(), Status::Code::kNotFound);
}

// Review 6 of issue 49: each registration added a row for good, so one
// worker token grew the table without bound. Now a token keeps its
// kMaxWorkersPerToken registrations heard from last; others are untouched.
TEST_P(JobsTest, RegistrationsOfOneTokenAreCapped) {
  WorkerInfo info;
  info.ns = "t", info.device_key = "cpu", info.name = "w", info.fingerprint = "fp";
  info.token_id = 8;
  auto other = jobs->register_worker(info, 0);
  ASSERT_TRUE(other.ok());
  info.token_id = 7;
  int64_t first = 0;
  for (int i = 0; i < kMaxWorkersPerToken + 5; ++i) {
    auto w = jobs->register_worker(info, 10 + i);
    ASSERT_TRUE(w.ok()) << w.status().message();
    if (i == 0) first = w->id;
  }
  auto all = jobs->workers("t", "", 0, 10 * kMaxWorkersPerToken);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), static_cast<size_t>(kMaxWorkersPerToken) + 1);
  EXPECT_EQ(jobs->find_worker("t", first).status().code(), Status::Code::kNotFound);  // heard from longest ago
  EXPECT_TRUE(jobs->find_worker("t", other->id).ok());                               // another token's
}

TEST_P(JobsTest, ExpiredLeaseGoesToTheNextWorker) {
  int64_t a = submit();
  WorkerInfo dead = worker("dead"), next = worker("next");
  ASSERT_TRUE(jobs->lease("t", dead, 1000, 0)->has_value());
  EXPECT_FALSE(jobs->lease("t", next, 1000, 999)->has_value());  // still held
  auto l = jobs->lease("t", next, 1000, 1001);
  ASSERT_TRUE(l.ok() && l->has_value());
  EXPECT_EQ((*l)->id, a);
  EXPECT_EQ((*l)->attempts, 2);
  EXPECT_EQ((*l)->worker_name, "next");
  EXPECT_FALSE(*jobs->extend("t", a, dead.id, 1000, 1100));
  EXPECT_FALSE(*jobs->finish("t", a, dead.id, true, "{}", 1100));
  EXPECT_TRUE(*jobs->finish("t", a, next.id, true, "{}", 1500));
}

TEST_P(JobsTest, ThreeExpiredLeasesFailTheJob) {
  int64_t a = submit();
  WorkerInfo w = worker("flaky");
  for (int i = 0; i < kMaxJobAttempts; ++i) {
    auto l = jobs->lease("t", w, 100, 1000 * i);
    ASSERT_TRUE(l.ok() && l->has_value()) << i;
  }
  auto g = jobs->get("t", a, 10000);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->state, "failed");
  EXPECT_NE(g->result.find("the lease expired 3 times without a result (the last worker was worker " +
                           std::to_string(w.id) + ")"),
            std::string::npos)
      << g->result;
  EXPECT_FALSE(jobs->lease("t", w, 100, 20000)->has_value());
}

TEST_P(JobsTest, KeyFingerprintAndNamespaceMustMatch) {
  int64_t pinned = submit("cpu", "fp-b");
  EXPECT_FALSE(jobs->lease("t", worker("a"), 1000, 0)->has_value());             // fingerprint fp-a
  EXPECT_FALSE(jobs->lease("t", worker("g", "gpu", "fp-b"), 1000, 0)->has_value());  // key gpu
  EXPECT_FALSE(jobs->lease("u", worker("u", "cpu", "fp-b", "u"), 1000, 0)->has_value());  // namespace u
  auto l = jobs->lease("t", worker("b", "cpu", "fp-b"), 1000, 0);
  ASSERT_TRUE(l.ok() && l->has_value());
  EXPECT_EQ((*l)->id, pinned);
  auto ws = jobs->workers("t", "cpu", 0, 100);
  ASSERT_TRUE(ws.ok());
  EXPECT_EQ(ws->size(), 2u);  // a and b; g is gpu, u another namespace
  // A limit keeps the ones registered last (review 5 of issue 49: the list was whole).
  auto last = jobs->workers("t", "cpu", 0, 1);
  ASSERT_TRUE(last.ok());
  ASSERT_EQ(last->size(), 1u);
  EXPECT_EQ((*last)[0].id, (*ws)[1].id);
  EXPECT_EQ(jobs->find_worker("u", worker("x").id).status().code(), Status::Code::kNotFound);
}

TEST_P(JobsTest, Cancel) {
  int64_t a = submit();
  EXPECT_TRUE(*jobs->cancel("t", a, R"({"error":"no worker"})", 5));
  EXPECT_FALSE(*jobs->cancel("t", a, "{}", 6));
  auto g = jobs->get("t", a, 7);
  EXPECT_EQ(g->state, "failed");
  EXPECT_EQ(g->result, R"({"error":"no worker"})");
  EXPECT_FALSE(jobs->lease("t", worker("w"), 1000, 8)->has_value());
}

TEST_P(JobsTest, ConcurrentLeasesNeverShareAJob) {
  constexpr int kJobs = 30;
  for (int i = 0; i < kJobs; ++i) submit();
  WorkerInfo w1 = worker("c1"), w2 = worker("c2");
  std::vector<int64_t> got[2];
  auto run = [&](int k, WorkerInfo w) {
    auto mine = open();
    ASSERT_TRUE(mine.ok());
    while (true) {
      auto l = (*mine)->lease("t", w, 60000, 1);
      ASSERT_TRUE(l.ok()) << l.status().message();
      if (!l->has_value()) return;
      got[k].push_back((*l)->id);
    }
  };
  std::thread t1(run, 0, w1), t2(run, 1, w2);
  t1.join();
  t2.join();
  std::set<int64_t> all(got[0].begin(), got[0].end());
  all.insert(got[1].begin(), got[1].end());
  EXPECT_EQ(all.size(), static_cast<size_t>(kJobs));
  EXPECT_EQ(got[0].size() + got[1].size(), static_cast<size_t>(kJobs));
}

#ifdef MLK_CLUSTER_TESTS
INSTANTIATE_TEST_SUITE_P(Shared, JobsTest, ::testing::Values("pg"), [](const auto& i) { return i.param; });
#else
INSTANTIATE_TEST_SUITE_P(Sqlite, JobsTest, ::testing::Values("sqlite"), [](const auto& i) { return i.param; });
#endif

}  // namespace
}  // namespace mlk::service
