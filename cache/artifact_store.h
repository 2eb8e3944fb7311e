// The narrow interface of an artifact store that `mlk serve` is written
// against (docs/deploy.md): blobs by sha256, entries (namespace, key) ->
// manifest, and the accounting the quotas and /v1/status read. Two
// implementations: cache::Store (one SQLite file, store.h) and
// cache::PgStore (PostgreSQL for the records, an S3-compatible bucket for the
// blobs, pg_store.h). Maintenance (verify, gc, pin, export, import) is
// Store's own.
//
// Contracts every implementation keeps (docs/cache.md, "Guarantees"):
// - Nothing read back is trusted: every blob read re-hashes the bytes, every
//   entry read re-hashes its record; a mismatch quarantines what was damaged
//   and returns Status::Corruption. An entry is returned only when all its
//   blobs are present and valid.
// - A write is all or nothing, and an entry never points at a missing blob.
// - Errors: NotFound for a miss, InvalidArgument for a bad name or manifest,
//   IOError when the storage cannot be reached or is full (the server answers
//   503 or 507), Corruption as above.
// Threading: an object is used by one thread at a time unless its own header
// says more.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "cache/manifest.h"

namespace mlk::cache {

struct EntryInfo;
struct EntryPage;
struct Artifact;

// What ArtifactStore::collect_unreferenced deleted.
struct CollectReport {
  int64_t blobs_deleted = 0;
  int64_t bytes_freed = 0;
};

// Where a page of ArtifactStore::list_page ends (the order is newest row
// first; a row's id never changes, so no entry is skipped or seen twice
// while others are read or written): plain data a caller hands back.
struct ListCursor {
  int64_t id = 0;
};
struct NamespaceUsage;
struct StoreStats;

class ArtifactStore {
 public:
  virtual ~ArtifactStore() = default;

  // A name for messages: the SQLite path, or "postgresql://HOST/DB + s3://BUCKET".
  virtual const std::string& path() const = 0;

  // Stores bytes once per digest; returns the digest.
  virtual Expected<std::string> put_blob(std::string_view bytes) = 0;
  virtual Expected<std::string> get_blob(const std::string& digest) = 0;  // NotFound, Corruption
  // A blob's size, read from its row (the bytes are not read). NotFound.
  virtual Expected<int64_t> blob_size(const std::string& digest) = 0;
  // Bytes [offset, offset + length) of a blob (clipped at its end), read
  // without reading or hashing the rest: what a Range request of a server
  // answers. Unlike get_blob, a damaged blob is not detected here (a client
  // that reads a blob in parts checks its digest when it has them all).
  // NotFound; InvalidArgument for an offset past the end.
  virtual Expected<std::string> read_blob_range(const std::string& digest, int64_t offset, int64_t length) = 0;

  // Binds (ns, key) to a manifest whose blobs are stored (NotFound otherwise).
  virtual Status put_entry(const std::string& ns, const std::string& key, const Manifest& manifest) = 0;
  // Stores the files' bytes and the entry, all or nothing.
  virtual Status put_entry(const std::string& ns, const std::string& key, const std::string& meta_json,
                           const Provenance& provenance, const std::map<std::string, std::string>& files) = 0;

  virtual Expected<Artifact> get_entry(const std::string& ns, const std::string& key) = 0;
  virtual Expected<EntryInfo> show_entry(const std::string& ns, const std::string& key) = 0;
  // Marks the entry most recently used, as get_entry does (best effort:
  // OK when it is gone or the store is busy; an error only when the store
  // cannot be reached).
  virtual Status touch_entry(const std::string& ns, const std::string& key) = 0;
  // Every entry (of one namespace, or all): the whole list in memory, for
  // the CLI and tests on a local store. A server lists with list_page.
  virtual Expected<std::vector<EntryInfo>> list(const std::optional<std::string>& ns) = 0;
  // At most max_rows (1-1000) entries of `ns` after `after` (from the
  // start when none), newest first, so that a caller that reads
  // a namespace of any size holds one page at a time. A damaged record is
  // listed as list() lists it.
  virtual Expected<EntryPage> list_page(const std::string& ns, const std::optional<ListCursor>& after, int max_rows) = 0;
  virtual Expected<std::vector<std::string>> keys_with_prefix(const std::string& ns, const std::string& prefix,
                                                              int limit) = 0;
  virtual Status rm(const std::string& ns, const std::string& key) = 0;

  virtual Expected<std::vector<NamespaceUsage>> usage() = 0;
  // What `ns` is charged: the blob bytes its entries reference (once per
  // reference) and its entries' stored manifests.
  virtual Expected<int64_t> namespace_bytes(const std::string& ns) = 0;
  virtual Expected<StoreStats> stats() = 0;
  // Deletes the blobs that no entry references and no namespace has staged
  // (service/staging.h, when `mlk serve` made the tables), and whose row was
  // created before `created_before` (unix seconds): the grace that lets a
  // client bind a blob it has just uploaded. What `mlk serve` runs every
  // --collect-interval, so that an upload whose staging expired is not kept.
  virtual Expected<CollectReport> collect_unreferenced(int64_t created_before) = 0;
};

}  // namespace mlk::cache
