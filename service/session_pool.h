// A fixed set of open sessions on the backend, one per worker thread: a
// store (cache/artifact_store.h) and the service tables (tables.h) are used
// by one thread at a time, so the server gives each request its own session
// for the time it runs. The backend is one SQLite store file, or the shared
// backend (PostgreSQL and an S3-compatible bucket, cache/pg_store.h).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cache/artifact_store.h"
#include "service/jobs.h"
#include "service/tables.h"

namespace mlk::service {

struct BackendOptions {
  std::string store;  // an SQLite store path, or postgresql://... (then blobs is needed)
  std::string blobs;  // s3://BUCKET?endpoint=... (the shared backend only)
  std::string blob_cache_dir;             // the replica's local blob cache (shared backend)
  int64_t blob_cache_bytes = int64_t{1} << 30;  // its size limit; 0: none
  bool shared() const { return cache::is_postgres_url(store); }
};

struct Session {
  std::unique_ptr<cache::ArtifactStore> store;
  std::unique_ptr<ServiceTables> tables;
  std::unique_ptr<JobTables> jobs;  // measurement jobs and workers (jobs.h)
};

class SessionPool {
 public:
  // Opens `n` (>= 1) sessions on the store at `path`, creating the store and
  // the service tables when missing.
  static Expected<std::unique_ptr<SessionPool>> Open(const std::string& path, int n);
  // The same on either backend; the shared one gets its schema when missing.
  static Expected<std::unique_ptr<SessionPool>> Open(const BackendOptions& backend, int n);

  // A session borrowed for one request; given back on destruction.
  class Lease {
   public:
    Lease(SessionPool* pool, Session* s) : pool_(pool), s_(s) {}
    Lease(Lease&& o) noexcept : pool_(o.pool_), s_(o.s_) { o.s_ = nullptr; }
    Lease(const Lease&) = delete;
    ~Lease() {
      if (s_) pool_->give_back(s_);
    }
    cache::ArtifactStore& store() { return *s_->store; }
    ServiceTables& tables() { return *s_->tables; }
    JobTables& jobs() { return *s_->jobs; }

   private:
    SessionPool* pool_;
    Session* s_;
  };
  // Waits until a session is free.
  Lease acquire();
  const std::string& path() const { return path_; }

 private:
  void give_back(Session* s);
  std::string path_;
  std::vector<std::unique_ptr<Session>> all_;
  std::vector<Session*> free_;
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace mlk::service
