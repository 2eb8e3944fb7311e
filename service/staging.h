// Quota accounting of the server (docs/api.md, "Quotas"). What a namespace is
// charged, exactly:
//
//   charged(ns) = Store::namespace_bytes(ns)   bytes its entries reference,
//                                               once per reference (cache/)
//               + staged(ns)                   blobs it uploaded that none of
//                                               its entries references yet
//
// A staged row is written after its blob is stored and removed when an entry
// of the namespace binds the blob, or when it is older than the staging TTL
// (the blob is then garbage that `mlk cache gc` deletes). A namespace may read
// a blob it has staged or that one of its entries references, and nothing
// else: the CAS is shared (deduplicated) but not visible across teams.
//
// All functions take the service connection (service_db.h); none is
// thread-safe on one Db.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cache/sqlite.h"
#include "base/status.h"

namespace mlk::service {

// Hard limits per namespace, in bytes of charged(ns).
struct QuotaPolicy {
  std::map<std::string, int64_t> limits;  // per namespace (--quota TEAM=SIZE)
  int64_t default_limit = 0;              // for the others (--default-quota); 0: unlimited
  std::optional<int64_t> limit_for(const std::string& ns) const;
};

// Records that `ns` uploaded blob `digest` of `size` bytes at `now` (a repeat
// upload refreshes the time).
Status stage_blob(cache::sql::Db& db, const std::string& ns, const std::string& digest, int64_t size, int64_t now);
// Removes the staged rows of `ns` for `digests` (they are bound now).
Status unstage(cache::sql::Db& db, const std::string& ns, const std::set<std::string>& digests);
// Drops the staged rows of `ns` older than `before` (unix seconds).
Status expire_staged(cache::sql::Db& db, const std::string& ns, int64_t before);
// Sum of the sizes of the staged rows of `ns`, leaving out `excluding`.
Expected<int64_t> staged_bytes(cache::sql::Db& db, const std::string& ns, const std::set<std::string>& excluding = {});
// Staged bytes of every namespace that has any.
Expected<std::map<std::string, int64_t>> staged_by_namespace(cache::sql::Db& db);
// Whether `ns` may read blob `digest`: it staged it, or an entry of `ns`
// references it. Reads cache/'s `entries` and `refs` tables (docs/cache.md,
// "Layout"), read-only.
Expected<bool> blob_visible(cache::sql::Db& db, const std::string& ns, const std::string& digest);
// The two halves of blob_visible.
Expected<bool> blob_staged(cache::sql::Db& db, const std::string& ns, const std::string& digest);
Expected<bool> blob_referenced(cache::sql::Db& db, const std::string& ns, const std::string& digest);
// Whether an entry of any namespace references blob `digest`.
Expected<bool> blob_held(cache::sql::Db& db, const std::string& digest);

}  // namespace mlk::service
