// The collection of unreferenced blobs: a background thread that every
// `interval_s` deletes the blobs that no entry references, no namespace has
// staged, and nobody uploaded within `grace_s`
// (ArtifactStore::collect_unreferenced). On the shared backend removing an
// entry leaves its blobs for another replica that may be binding them; on
// either backend an upload whose staging expired (--staged-ttl) is bound to
// nothing and charged to no one, and goes here. Every replica may run one;
// the deletes are idempotent.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include "base/status.h"
#include "service/session_pool.h"

namespace mlk::service {

class BlobCollector {
 public:
  // Starts the thread; borrows a session of `pool` (which must outlive the
  // collector) for each run. Runs first after one interval.
  BlobCollector(SessionPool& pool, int64_t interval_s, int64_t grace_s);
  ~BlobCollector();  // stops the thread, waiting for a run in progress
  BlobCollector(const BlobCollector&) = delete;
  BlobCollector& operator=(const BlobCollector&) = delete;

  // One run now, on the calling thread: the blobs deleted, or the error.
  // Unsupported on a store that is not the shared backend.
  Expected<int64_t> run_once();

 private:
  void loop();
  SessionPool& pool_;
  int64_t interval_s_, grace_s_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace mlk::service
