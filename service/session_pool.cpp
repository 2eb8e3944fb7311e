#include "service/session_pool.h"

#include "cache/pg_store.h"
#include "cache/store.h"
#include "service/service_db.h"

namespace mlk::service {

Expected<std::unique_ptr<SessionPool>> SessionPool::Open(const std::string& path, int n) {
  BackendOptions b;
  b.store = path;
  return Open(b, n);
}

Expected<std::unique_ptr<SessionPool>> SessionPool::Open(const BackendOptions& backend, int n) {
  auto pool = std::make_unique<SessionPool>();
  pool->path_ = backend.store;
  std::optional<cache::SharedBackend> shared;
  if (backend.shared()) {
    auto sb = cache::open_shared_backend(backend.store, backend.blobs, backend.blob_cache_dir, backend.blob_cache_bytes);
    if (!sb.ok()) return sb.status();
    shared = std::move(*sb);
  } else if (!backend.blobs.empty()) {
    return Status::InvalidArgument("--blobs is for the shared backend (--store postgresql://...); an SQLite store keeps its blobs itself");
  }
  for (int i = 0; i < std::max(1, n); ++i) {
    auto s = std::make_unique<Session>();
    if (shared) {
      auto store = cache::PgStore::Open(*shared);
      if (!store.ok()) return store.status();
      s->store = std::move(*store);
      auto tables = pg_tables(backend.store);
      if (!tables.ok()) return tables.status();
      s->tables = std::move(*tables);
      auto jobs = pg_jobs(backend.store);
      if (!jobs.ok()) return jobs.status();
      s->jobs = std::move(*jobs);
    } else {
      auto db = open_service_db(backend.store, /*create_if_missing=*/true);
      if (!db.ok()) return db.status();
      // Durable: every write the server acknowledges is fsynced before the
      // answer, so a power loss (not only a crash) keeps it (docs/security.md).
      cache::StoreOptions so;
      so.durable = true;
      auto store = cache::Store::Open(backend.store, so);
      if (!store.ok()) return store.status();
      s->store = std::move(*store);
      s->tables = sqlite_tables(std::move(*db));
      auto jobs = sqlite_jobs(backend.store);
      if (!jobs.ok()) return jobs.status();
      s->jobs = std::move(*jobs);
    }
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
