#include "service/collector.h"

#include <chrono>
#include <ctime>

#include "base/log.h"
#include "cache/store.h"

namespace mlk::service {

BlobCollector::BlobCollector(SessionPool& pool, int64_t interval_s, int64_t grace_s)
    : pool_(pool), interval_s_(interval_s), grace_s_(grace_s), thread_([this] { loop(); }) {}

BlobCollector::~BlobCollector() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

Expected<int64_t> BlobCollector::run_once() {
  auto lease = pool_.acquire();
  auto rep = lease.store().collect_unreferenced(static_cast<int64_t>(std::time(nullptr)) - grace_s_);
  if (!rep.ok()) return rep.status();
  return rep->blobs_deleted;
}

void BlobCollector::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, std::chrono::seconds(interval_s_), [this] { return stop_; })) {
    lock.unlock();
    auto n = run_once();
    if (!n.ok())
      log_linef(LogLevel::kNote, "mlk serve: blob collection: %s (tried again in %lld s)", n.status().message().c_str(),
                static_cast<long long>(interval_s_));
    else if (*n > 0)
      log_linef(LogLevel::kNote, "mlk serve: blob collection: deleted %lld unreferenced blobs", static_cast<long long>(*n));
    lock.lock();
  }
}

}  // namespace mlk::service
