// service/work_queue.h: admission limits, the clients' turns, and that every
// admitted job has exactly one of its callbacks called.
#include "service/work_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace mlk::service {
namespace {

// A gate that jobs wait at until the test opens it.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  void wait() {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return open; });
  }
  void release() {
    std::lock_guard<std::mutex> g(mu);
    open = true;
    cv.notify_all();
  }
};

void wait_for(const std::function<bool()>& done) {
  for (int i = 0; i < 2000 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

TEST(WorkQueue, OneClientRunsOnAtMostItsShareAndOthersGetTheRest) {
  WorkQueue q({.threads = 4, .max_queued = 100, .max_per_client = 10, .max_running_per_client = 2});
  Gate gate;
  std::atomic<int> a_running{0}, b_done{0}, dropped{0};
  for (int i = 0; i < 6; ++i)
    ASSERT_EQ(q.submit("a", "a", [&] { a_running++; gate.wait(); }, [&] { dropped++; }), WorkQueue::Admit::kQueued);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(q.submit("b", "b", [&] { b_done++; }, [&] { dropped++; }), WorkQueue::Admit::kQueued);
  wait_for([&] { return b_done == 3; });
  EXPECT_EQ(b_done, 3) << "client b waited behind client a's stalled jobs";
  EXPECT_EQ(a_running, 2) << "client a ran on more than its share of the threads";
  EXPECT_EQ(q.queued(), 4);
  gate.release();
  wait_for([&] { return a_running == 6; });
  EXPECT_EQ(a_running, 6);
  EXPECT_EQ(dropped, 0);
}

TEST(WorkQueue, AdmissionIsRefusedPastTheLimitsNotBlocked) {
  WorkQueue q({.threads = 1, .max_queued = 3, .max_per_client = 2, .max_running_per_client = 1});
  Gate gate;
  auto park = [&] { gate.wait(); };
  ASSERT_EQ(q.submit("a", "a", park, [] {}), WorkQueue::Admit::kQueued);
  wait_for([&] { return q.running() == 1; });
  ASSERT_EQ(q.submit("a", "a", park, [] {}), WorkQueue::Admit::kQueued);
  EXPECT_EQ(q.submit("a", "a", park, [] {}), WorkQueue::Admit::kClientFull);
  ASSERT_EQ(q.submit("b", "b", park, [] {}), WorkQueue::Admit::kQueued);
  ASSERT_EQ(q.submit("c", "c", park, [] {}), WorkQueue::Admit::kQueued);
  EXPECT_EQ(q.submit("d", "d", park, [] {}), WorkQueue::Admit::kFull);
  gate.release();
}

TEST(WorkQueue, ClientsTakeTurnsOneJobEach) {
  WorkQueue q({.threads = 1, .max_queued = 100, .max_per_client = 10, .max_running_per_client = 1});
  Gate gate;
  std::mutex mu;
  std::string order;
  ASSERT_EQ(q.submit("first", "first", [&] { gate.wait(); }, [] {}), WorkQueue::Admit::kQueued);
  wait_for([&] { return q.running() == 1; });
  auto note = [&](char c) {
    return [&, c] {
      std::lock_guard<std::mutex> g(mu);
      order += c;
    };
  };
  for (int i = 0; i < 3; ++i) ASSERT_EQ(q.submit("a", "a", note('a'), [] {}), WorkQueue::Admit::kQueued);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(q.submit("b", "b", note('b'), [] {}), WorkQueue::Admit::kQueued);
  gate.release();
  wait_for([&] {
    std::lock_guard<std::mutex> g(mu);
    return order.size() == 6;
  });
  EXPECT_EQ(order, "ababab");
}

TEST(WorkQueue, StopDropsWhatWaitsAndFinishesWhatRuns) {
  Gate gate;
  std::atomic<int> ran{0}, dropped{0};
  {
    WorkQueue q({.threads = 1, .max_queued = 100, .max_per_client = 10, .max_running_per_client = 1});
    ASSERT_EQ(q.submit("a", "a", [&] { gate.wait(); ran++; }, [&] { dropped++; }), WorkQueue::Admit::kQueued);
    wait_for([&] { return q.running() == 1; });
    for (int i = 0; i < 3; ++i) ASSERT_EQ(q.submit("a", "a", [&] { ran++; }, [&] { dropped++; }), WorkQueue::Admit::kQueued);
    std::thread opener([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      gate.release();
    });
    q.stop();
    opener.join();
    EXPECT_EQ(q.submit("a", "a", [] {}, [] {}), WorkQueue::Admit::kStopping);
  }
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(dropped, 3);
}

TEST(WorkQueue, ManyClientsOfOneGroupShareItsLimits) {
  WorkQueue q({.threads = 4, .max_queued = 100, .max_per_client = 3, .max_running_per_client = 2});
  Gate gate;
  std::atomic<int> running{0}, other{0};
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(q.submit("key" + std::to_string(i), "address", [&] { running++; gate.wait(); }, [] {}),
              WorkQueue::Admit::kQueued);
  EXPECT_EQ(q.submit("key9", "address", [] {}, [] {}), WorkQueue::Admit::kClientFull);
  ASSERT_EQ(q.submit("honest", "elsewhere", [&] { other++; }, [] {}), WorkQueue::Admit::kQueued);
  wait_for([&] { return other == 1; });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(running, 2) << "one address's credentials ran on more than its share";
  EXPECT_EQ(other, 1);
  gate.release();
  wait_for([&] { return running == 3; });
  EXPECT_EQ(running, 3);
}

TEST(WorkQueue, ExpireDropsWhatWaitedTooLongWhileEveryThreadIsBusy) {
  WorkQueue q({.threads = 1, .max_queued = 100, .max_per_client = 10, .max_running_per_client = 1, .max_wait_ms = 20});
  Gate gate;
  std::atomic<int> ran{0}, dropped{0};
  ASSERT_EQ(q.submit("a", "a", [&] { gate.wait(); }, [] {}), WorkQueue::Admit::kQueued);
  wait_for([&] { return q.running() == 1; });
  ASSERT_EQ(q.submit("b", "b", [&] { ran++; }, [&] { dropped++; }), WorkQueue::Admit::kQueued);
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  q.expire();
  EXPECT_EQ(dropped, 1);
  EXPECT_EQ(q.queued(), 0);
  gate.release();
  ASSERT_EQ(q.submit("b", "b", [&] { ran++; }, [&] { dropped++; }), WorkQueue::Admit::kQueued);
  wait_for([&] { return ran == 1; });
  EXPECT_EQ(ran, 1);
}

TEST(WorkQueue, AJobThatWaitedTooLongIsDroppedNotRun) {
  WorkQueue q({.threads = 1, .max_queued = 100, .max_per_client = 10, .max_running_per_client = 1, .max_wait_ms = 20});
  Gate gate;
  std::atomic<int> ran{0}, dropped{0};
  ASSERT_EQ(q.submit("a", "a", [&] { gate.wait(); }, [] {}), WorkQueue::Admit::kQueued);
  wait_for([&] { return q.running() == 1; });
  ASSERT_EQ(q.submit("b", "b", [&] { ran++; }, [&] { dropped++; }), WorkQueue::Admit::kQueued);
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  gate.release();
  wait_for([&] { return dropped + ran == 1; });
  EXPECT_EQ(ran, 0);
  EXPECT_EQ(dropped, 1);
}

}  // namespace
}  // namespace mlk::service
