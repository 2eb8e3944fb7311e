#include "service/session_pool.h"

#include "service/service_db.h"

namespace mlk::service {

Expected<std::unique_ptr<SessionPool>> SessionPool::Open(const std::string& path, int n) {
  auto pool = std::make_unique<SessionPool>();
  pool->path_ = path;
  for (int i = 0; i < std::max(1, n); ++i) {
    auto db = open_service_db(path, /*create_if_missing=*/true);
    if (!db.ok()) return db.status();
    auto store = cache::Store::Open(path);
    if (!store.ok()) return store.status();
    auto s = std::make_unique<Session>();
    s->store = std::move(*store);
    s->db = std::move(*db);
    pool->free_.push_back(s.get());
    pool->all_.push_back(std::move(s));
  }
  return pool;
}

SessionPool::Lease SessionPool::acquire() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !free_.empty(); });
  Session* s = free_.back();
  free_.pop_back();
  return Lease(this, s);
}

void SessionPool::give_back(Session* s) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(s);
  }
  cv_.notify_one();
}

}  // namespace mlk::service
