// targets/scratch_cache.h: the cache behind every artifact's halide_malloc.
// Each test starts from an empty cache (mlk_scratch_release) because the
// cache is per translation unit, as it is per artifact.
#include "targets/scratch_cache.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace mlk {
namespace {

struct ScratchCache : ::testing::Test {
  void SetUp() override { mlk_scratch_release(); }
  void TearDown() override { mlk_scratch_release(); }
  static int idle_blocks() {
    int b = 0;
    size_t n = 0;
    mlk_scratch_stats(&b, &n);
    return b;
  }
  static size_t idle_bytes() {
    int b = 0;
    size_t n = 0;
    mlk_scratch_stats(&b, &n);
    return n;
  }
};

TEST_F(ScratchCache, ALargeFreedBlockIsHandedBackToTheNextRequestOfItsSize) {
  const size_t n = 1 << 20;
  auto* p = static_cast<unsigned char*>(mlk_scratch_get(n));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 128, 0u);
  std::memset(p, 0x5a, n + 128);  // the capacity and the slack past the end are writable
  mlk_scratch_put(p);
  EXPECT_EQ(idle_blocks(), 1);
  EXPECT_EQ(idle_bytes(), n);
  auto* q = static_cast<unsigned char*>(mlk_scratch_get(n - 100));  // rounds up to the same capacity
  EXPECT_EQ(q, p);
  EXPECT_EQ(q[4096], 0x5a) << "the block came back as it was left, not from the kernel";
  EXPECT_EQ(idle_blocks(), 0);
  mlk_scratch_put(q);
}

TEST_F(ScratchCache, ABlockIsReusedOnlyWithinAQuarterOfItsCapacity) {
  void* big = mlk_scratch_get(1 << 20);
  mlk_scratch_put(big);
  void* small = mlk_scratch_get((1 << 20) / 2);  // would waste half the block
  EXPECT_NE(small, big);
  EXPECT_EQ(idle_blocks(), 1);
  void* near = mlk_scratch_get((1 << 20) * 4 / 5);  // within a quarter
  EXPECT_EQ(near, big);
  mlk_scratch_put(small);
  mlk_scratch_put(near);
}

TEST_F(ScratchCache, TheBestFittingIdleBlockIsChosen) {
  void* a = mlk_scratch_get(1100 * 1024);
  void* b = mlk_scratch_get(1000 * 1024);
  mlk_scratch_put(a);
  mlk_scratch_put(b);
  EXPECT_EQ(mlk_scratch_get(1000 * 1024), b);
  EXPECT_EQ(mlk_scratch_get(1000 * 1024), a);
  mlk_scratch_put(a);
  mlk_scratch_put(b);
}

TEST_F(ScratchCache, SmallBlocksAreNotKept) {
  void* p = mlk_scratch_get(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 128, 0u);
  mlk_scratch_put(p);
  EXPECT_EQ(idle_blocks(), 0);
  mlk_scratch_put(nullptr);  // free(NULL) semantics
  EXPECT_EQ(idle_blocks(), 0);
}

TEST_F(ScratchCache, TheOldestIdleBlocksAreFreedPastTheSlotLimit) {
  std::vector<void*> blocks;
  for (int i = 0; i < MLK_SCRATCH_SLOTS + 5; ++i) blocks.push_back(mlk_scratch_get(MLK_SCRATCH_MIN));
  for (void* p : blocks) mlk_scratch_put(p);
  EXPECT_EQ(idle_blocks(), MLK_SCRATCH_SLOTS);
  // The five put first were evicted: the next request gets the oldest survivor.
  void* g = mlk_scratch_get(MLK_SCRATCH_MIN);
  EXPECT_EQ(g, blocks[5]);
  mlk_scratch_put(g);
}

TEST_F(ScratchCache, IdleBytesStayUnderTheByteLimit) {
  const size_t n = MLK_SCRATCH_BYTES / 3 + 128;
  void* a = mlk_scratch_get(n);
  void* b = mlk_scratch_get(n);
  void* c = mlk_scratch_get(n);
  mlk_scratch_put(a);
  mlk_scratch_put(b);
  mlk_scratch_put(c);  // three would pass the limit: `a` goes
  EXPECT_EQ(idle_blocks(), 2);
  EXPECT_LE(idle_bytes(), MLK_SCRATCH_BYTES);
  void* huge = mlk_scratch_get(MLK_SCRATCH_BYTES + 128);
  ASSERT_NE(huge, nullptr);
  mlk_scratch_put(huge);  // larger than the whole cache: freed at once
  EXPECT_EQ(idle_blocks(), 2);
}

TEST_F(ScratchCache, ASizeThatOverflowsIsRefusedWithNull) {
  EXPECT_EQ(mlk_scratch_get(SIZE_MAX), nullptr);
  EXPECT_EQ(mlk_scratch_get(SIZE_MAX - 200), nullptr);
}

TEST_F(ScratchCache, ConcurrentGetsAndPutsNeverHandOneBlockToTwoThreads) {
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t, &bad] {
      for (int i = 0; i < 500; ++i) {
        auto* p = static_cast<unsigned char*>(mlk_scratch_get(MLK_SCRATCH_MIN * (1 + i % 3)));
        std::memset(p, t, 256);
        std::this_thread::yield();
        for (int k = 0; k < 256; ++k) bad[t] += p[k] != t;
        mlk_scratch_put(p);
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(bad[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace mlk
