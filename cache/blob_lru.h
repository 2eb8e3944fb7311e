// A replica's local on-disk cache of blobs in front of the shared blob store
// (pg_store.h): files DIR/<sha256>, at most max_bytes in all, the least
// recently used deleted first. Nothing in it is trusted: get() re-hashes the
// file and drops it when it does not match (the caller then reads the
// blob store). Files appear atomically (written to a temporary name, then
// renamed), so a replica killed mid-write leaves no partial blob.
// Threading: thread-safe; several replicas must not share one directory.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace mlk::cache {

class BlobLru {
 public:
  // Creates `dir` when missing and takes over the files already there
  // (oldest modification first). max_bytes 0 or an empty `dir` disables the cache.
  static Expected<std::unique_ptr<BlobLru>> Open(const std::string& dir, int64_t max_bytes);

  // The verified bytes of `digest`, or nullopt (absent, or damaged and dropped).
  std::optional<std::string> get(const std::string& digest);
  // Bytes [offset, offset + length) of the cached file, clipped at its end,
  // read without hashing the file (a Range read); nullopt when it is not here.
  std::optional<std::string> read_range(const std::string& digest, int64_t offset, int64_t length);
  // Keeps a copy of verified bytes; best effort (a full disk is not an error).
  void put(const std::string& digest, std::string_view bytes);
  // Forgets `digest` (its blob was quarantined).
  void drop(const std::string& digest);

  int64_t bytes() const;
  int64_t files() const;

 private:
  BlobLru() = default;
  void evict_locked();
  void forget_locked(const std::string& digest);
  std::string dir_;
  int64_t max_bytes_ = 0;
  mutable std::mutex mu_;
  int64_t total_ = 0;
  std::list<std::string> order_;  // most recently used first
  std::map<std::string, std::pair<std::list<std::string>::iterator, int64_t>> index_;
};

}  // namespace mlk::cache
