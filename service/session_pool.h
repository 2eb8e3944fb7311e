// A fixed set of open connections to one store, one per worker thread: a
// cache::Store serialises its calls, so the server gives each request its own
// Store (and service connection) for the time it runs.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cache/sqlite.h"
#include "cache/store.h"

namespace mlk::service {

struct Session {
  std::unique_ptr<cache::Store> store;
  std::unique_ptr<cache::sql::Db> db;  // the service tables (service_db.h)
};

class SessionPool {
 public:
  // Opens `n` (>= 1) sessions on the store at `path`, creating the store and
  // the service tables when missing.
  static Expected<std::unique_ptr<SessionPool>> Open(const std::string& path, int n);

  // A session borrowed for one request; given back on destruction.
  class Lease {
   public:
    Lease(SessionPool* pool, Session* s) : pool_(pool), s_(s) {}
    Lease(Lease&& o) noexcept : pool_(o.pool_), s_(o.s_) { o.s_ = nullptr; }
    Lease(const Lease&) = delete;
    ~Lease() {
      if (s_) pool_->give_back(s_);
    }
    cache::Store& store() { return *s_->store; }
    cache::sql::Db& db() { return *s_->db; }

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
