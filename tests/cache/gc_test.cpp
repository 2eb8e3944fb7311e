// gc: least recently used first, pins survive, the store ends within the
// limit, shared blobs are kept while referenced, per-namespace limits.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "cache/store.h"
#include "tests/cache/test_util.h"

namespace mlk::cache {
namespace {

using testing::bytes_of;
using testing::HasCode;
using testing::IsOk;
using testing::open_store;
using testing::TempDir;
using testing::test_provenance;
using Code = Status::Code;

void put(Store& s, const std::string& ns, const std::string& key, int64_t size, uint64_t seed) {
  ASSERT_TRUE(IsOk(s.put_entry(ns, key, "{}", test_provenance(), {{"f", bytes_of(size, seed)}})));
}

TEST(Gc, EvictsLeastRecentlyUsedFirst) {
  TempDir dir;
  auto s = open_store(dir.file("c.db"));
  put(*s, "default", "a", 1000, 1);
  put(*s, "default", "b", 1000, 2);
  put(*s, "default", "c", 1000, 3);
  put(*s, "default", "d", 1000, 4);
  ASSERT_TRUE(IsOk(s->get_entry("default", "a")));  // a is now the most recent
  auto r = s->gc(3000);
  ASSERT_TRUE(IsOk(r));
  EXPECT_EQ(r->evicted, std::vector<std::string>{"default/b"});
  EXPECT_EQ(r->bytes_before, 4000);
  EXPECT_EQ(r->bytes_after, 3000);
  EXPECT_EQ(r->blobs_deleted, 1);
  EXPECT_TRUE(r->within_limit);
  r = s->gc(1500);
  ASSERT_TRUE(IsOk(r));
  EXPECT_EQ(r->evicted, (std::vector<std::string>{"default/c", "default/d"}));
  EXPECT_TRUE(IsOk(s->get_entry("default", "a")));
  EXPECT_EQ(s->stats()->blob_bytes, 1000);
  r = s->gc(1000);  // already within: nothing to do
  EXPECT_EQ(r->entries_evicted, 0);
}

TEST(Gc, PinnedEntriesSurvive) {
  TempDir dir;
  auto s = open_store(dir.file("c.db"));
  put(*s, "default", "a", 1000, 1);
  put(*s, "default", "b", 2000, 2);
  put(*s, "team", "c", 500, 3);
  ASSERT_TRUE(IsOk(s->pin("default", "a")));
  auto r = s->gc(0);
  ASSERT_TRUE(IsOk(r));
  EXPECT_EQ(r->entries_evicted, 2);
  EXPECT_FALSE(r->within_limit);
  EXPECT_EQ(r->bytes_after, 1000);
  EXPECT_TRUE(IsOk(s->get_entry("default", "a")));
  EXPECT_EQ(s->stats()->entries, 1);
  ASSERT_TRUE(IsOk(s->unpin("default", "a")));
  EXPECT_TRUE(s->gc(0)->within_limit);
  EXPECT_EQ(s->stats()->blob_bytes, 0);
}

TEST(Gc, SharedBlobsStayWhileReferenced) {
  TempDir dir;
  auto s = open_store(dir.file("c.db"));
  std::string shared = bytes_of(3000, 1);
  ASSERT_TRUE(IsOk(s->put_entry("default", "old", "{}", test_provenance(), {{"s", shared}, {"o", bytes_of(100, 2)}})));
  ASSERT_TRUE(IsOk(s->put_entry("default", "new", "{}", test_provenance(), {{"s", shared}, {"n", bytes_of(100, 3)}})));
  ASSERT_TRUE(IsOk(s->put_blob(bytes_of(50, 4))));  // unreferenced: the first thing gc deletes
  auto r = s->gc(3150);
  ASSERT_TRUE(IsOk(r));
  EXPECT_EQ(r->entries_evicted, 1);  // 3250 - 50 (unreferenced) - 100 (old's own blob) = 3100
  EXPECT_EQ(r->bytes_after, 3100);
  EXPECT_EQ(r->blobs_deleted, 2);
  auto n = s->get_entry("default", "new");
  ASSERT_TRUE(IsOk(n));
  EXPECT_EQ(n->files.at("s"), shared);
  EXPECT_TRUE(s->verify()->consistent());
}

// A random workload against a model of LRU order.
TEST(Gc, RandomWorkloadMatchesModel) {
  TempDir dir;
  auto s = open_store(dir.file("c.db"));
  std::mt19937 rng(7);
  std::vector<std::string> order;  // least recent first
  std::map<std::string, int64_t> sizes;
  for (int i = 0; i < 40; ++i) {
    std::string key = "k" + std::to_string(i);
    int64_t size = 100 + rng() % 2000;
    put(*s, "default", key, size, 1000 + i);
    order.push_back(key);
    sizes[key] = size;
    if (rng() % 2) {
      std::string touch = order[rng() % order.size()];
      ASSERT_TRUE(IsOk(s->get_entry("default", touch)));
      order.erase(std::find(order.begin(), order.end(), touch));
      order.push_back(touch);
    }
  }
  int64_t total = 0;
  for (const auto& [k, v] : sizes) total += v;
  int64_t limit = total / 3;
  std::vector<std::string> want;
  for (const auto& k : order) {
    if (total <= limit) break;
    want.push_back("default/" + k);
    total -= sizes[k];
  }
  auto r = s->gc(limit);
  ASSERT_TRUE(IsOk(r));
  EXPECT_EQ(r->evicted, want);
  EXPECT_EQ(r->bytes_after, total);
  EXPECT_LE(s->stats()->blob_bytes, limit);
  EXPECT_TRUE(s->verify()->consistent());
}

TEST(Gc, NamespaceLimit) {
  TempDir dir;
  auto s = open_store(dir.file("c.db"));
  put(*s, "team-a", "a1", 1000, 1);
  put(*s, "team-a", "a2", 1000, 2);
  put(*s, "team-b", "b1", 5000, 3);
  // A namespace is charged its blobs and its entries' manifests.
  const int64_t r1 = s->show_entry("team-a", "a1")->record_bytes, r2 = s->show_entry("team-a", "a2")->record_bytes;
  ASSERT_GT(r1, 0);
  auto r = s->gc_namespace("team-a", 1000 + r2);
  ASSERT_TRUE(IsOk(r));
  EXPECT_EQ(r->evicted, std::vector<std::string>{"team-a/a1"});
  EXPECT_EQ(r->bytes_before, 2000 + r1 + r2);
  EXPECT_EQ(r->bytes_after, 1000 + r2);
  EXPECT_EQ(*s->namespace_bytes("team-a"), 1000 + r2);
  EXPECT_TRUE(IsOk(s->get_entry("team-b", "b1")));
  EXPECT_TRUE(HasCode(s->gc_namespace("bad ns", 0), Code::kInvalidArgument));
  EXPECT_TRUE(HasCode(s->gc(-1), Code::kInvalidArgument));
}

TEST(Gc, EmptiesTheQuarantine) {
  TempDir dir;
  auto s = open_store(dir.file("c.db"));
  auto d = s->put_blob("doomed");
  ASSERT_TRUE(IsOk(d));
  ASSERT_TRUE(IsOk(s->corrupt_blob_for_testing(*d, 0)));
  EXPECT_FALSE(s->get_blob(*d).ok());
  EXPECT_EQ(s->stats()->quarantined, 1);
  ASSERT_TRUE(IsOk(s->gc(1 << 30)));
  EXPECT_EQ(s->stats()->quarantined, 0);
}

TEST(Gc, AFailureMidwayRollsBackTheBatch) {
  TempDir dir;
  StoreOptions o;
  int evictions = 0;
  o.fault = [&](std::string_view point) {
    return point == "gc:evict" && ++evictions == 2 ? Status::IOError("injected") : Status::Ok();
  };
  auto s = open_store(dir.file("c.db"), o);
  for (int i = 0; i < 4; ++i) put(*s, "default", "k" + std::to_string(i), 100, i);
  EXPECT_TRUE(HasCode(s->gc(0), Code::kIOError));
  EXPECT_EQ(s->stats()->entries, 4);  // the batch's first eviction was rolled back too
  EXPECT_EQ(s->stats()->blob_bytes, 400);
  EXPECT_TRUE(s->verify()->consistent());
}

}  // namespace
}  // namespace mlk::cache
