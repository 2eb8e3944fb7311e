// The content-addressed artifact store: blobs by sha256, entries (namespace,
// key) -> manifest, in one SQLite database in WAL mode (docs/cache.md).
//
// Contracts:
// - Nothing read back is trusted: every blob read re-hashes the bytes, every
//   entry read re-hashes its (namespace, key, manifest) record. A mismatch
//   quarantines what was damaged and returns Status::Corruption; an entry is
//   returned only when all its blobs are present and valid.
// - Every write is one SQLite transaction (BEGIN IMMEDIATE): a process killed
//   at any instant leaves the store consistent, and an entry never points at
//   a missing blob.
// - Any number of processes may open one store at once. A Store object is
//   thread-safe (calls are serialised by a mutex); for parallelism, open one
//   Store per thread. Never use a Store across fork(): open a new one.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/artifact_store.h"
#include "cache/manifest.h"
#include "base/status.h"

namespace mlk::cache {

inline constexpr const char* kDefaultNamespace = "default";

struct StoreOptions {
  bool create_if_missing = true;  // create the file (and its directory) when absent
  bool read_only = false;         // SQLITE_OPEN_READONLY; writes fail with IOError
  int busy_timeout_ms = 10000;    // how long to wait for another process's write lock
  bool durable = false;           // synchronous=FULL: fsync every commit (survives power loss,
                                  // not only process death); default NORMAL
  // Test seams: tests use them to simulate a full disk and failures at named points.
  int64_t max_page_count = 0;  // > 0: PRAGMA max_page_count, to simulate a full disk
  // Called at named points inside write transactions; a non-OK result aborts
  // (rolls back) the operation with that status. Points: "put_entry:blobs"
  // (blobs written, entry not yet), "gc:evict" (after each eviction),
  // "import:entry" (after each imported entry).
  std::function<Status(std::string_view point)> fault;
};

// An entry as listed or shown: its manifest and bookkeeping, no blob bytes.
struct EntryInfo {
  std::string ns, key;
  Manifest manifest;
  int64_t size = 0;       // sum of the sizes of its files
  int64_t record_bytes = 0;  // bytes of its stored manifest; its namespace is charged size + record_bytes
  bool pinned = false;    // pinned entries survive gc
  int64_t created = 0;    // unix seconds
  int64_t last_used = 0;  // unix seconds of the last put or get
  bool damaged = false;   // list() only: the record fails its hash; manifest is empty
  ListCursor at;          // list_page() only: a cursor from which the list goes on after this entry
};

// A verified entry: every file's bytes hash to the digest in the manifest.
struct Artifact {
  EntryInfo info;
  std::map<std::string, std::string> files;  // name -> bytes
};

struct NamespaceUsage {
  std::string ns;
  int64_t entries = 0;
  int64_t bytes = 0;         // sizes of the blobs its entries reference, charged once per reference
  int64_t record_bytes = 0;  // bytes of its entries' stored manifests (metadata is charged too)
  int64_t charged() const { return bytes + record_bytes; }
};

// One page of list_page(): entries newest first, and where the next page
// starts (none after the last page).
struct EntryPage {
  std::vector<EntryInfo> entries;
  std::optional<ListCursor> next;
};

struct StoreStats {
  int64_t entries = 0;
  int64_t blobs = 0;
  int64_t blob_bytes = 0;   // bytes stored, each distinct blob once (what gc limits)
  int64_t unreferenced_blobs = 0;
  int64_t quarantined = 0;  // rows in the quarantine table
};

struct VerifyReport {
  int64_t blobs_checked = 0, blob_bytes_checked = 0, entries_checked = 0;
  std::vector<std::string> integrity_errors;  // PRAGMA integrity_check, SQLite errors while scanning
  std::vector<std::string> corrupt_blobs;     // digests whose bytes do not hash to them
  std::vector<std::string> damaged_entries;   // "NS/KEY: why": record fails its hash or does not parse
  std::vector<std::string> dangling_entries;  // "NS/KEY: why": a file's blob is missing or has another size
  std::vector<std::string> bad_refs;          // the reference index disagrees with the manifests
  int64_t quarantined_now = 0;  // blobs and entries moved to quarantine by this run
  int64_t repaired = 0;         // problems fixed because repair was asked for
  int64_t unreferenced_blobs = 0;  // not a problem: gc deletes them
  int64_t quarantined_total = 0;
  bool consistent() const;
  std::string summary() const;  // a few lines for people
};

struct GcReport {
  int64_t entries_evicted = 0;
  int64_t blobs_deleted = 0;
  int64_t bytes_before = 0, bytes_after = 0;  // blob_bytes, or the namespace's charged bytes
  bool within_limit = true;                   // false when pinned entries alone exceed the limit
  std::vector<std::string> evicted;           // "NS/KEY", oldest first
};

struct ExportReport {
  int64_t entries = 0;
  int64_t blobs = 0;
  int64_t bytes = 0;  // blob bytes in the archive
};

struct ImportReport {
  int64_t imported = 0;
  int64_t skipped = 0;  // keys already present here (kept as they are)
};

// The SQLite implementation of ArtifactStore (artifact_store.h), with the
// maintenance operations besides.
class Store final : public ArtifactStore {
 public:
  // Opens (or creates) the store at `path`. NotFound when it does not exist
  // and create_if_missing is false; InvalidArgument when the file is an SQLite
  // database but not an mlk store; Corruption when it is not a database.
  static Expected<std::unique_ptr<Store>> Open(const std::string& path, StoreOptions options = {});
  ~Store() override;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const std::string& path() const override;
  bool read_only() const;
  // Whether every commit is fsynced (PRAGMA synchronous FULL or EXTRA).
  bool durable() const;

  // Blobs. put_blob stores bytes once per digest and returns the digest; a
  // blob nothing references is deleted by the next gc, rm or replacement, so
  // bind it with put_entry soon (or use the put_entry overload taking bytes).
  Expected<std::string> put_blob(std::string_view bytes) override;
  Expected<std::string> get_blob(const std::string& digest) override;  // NotFound, Corruption
  Expected<int64_t> blob_size(const std::string& digest) override;
  Expected<std::string> read_blob_range(const std::string& digest, int64_t offset, int64_t length) override;

  // Binds (ns, key) to a manifest whose blobs are already stored (NotFound
  // otherwise). Replaces an existing entry of that key, keeping its pin.
  // Fills provenance.host and .time when empty.
  Status put_entry(const std::string& ns, const std::string& key, const Manifest& manifest) override;
  // Stores the files' bytes and the entry in one transaction.
  Status put_entry(const std::string& ns, const std::string& key, const std::string& meta_json,
                   const Provenance& provenance, const std::map<std::string, std::string>& files) override;

  // The entry with every file read and verified; marks it most recently used
  // (best effort: skipped when the store is read-only or stays locked 100 ms).
  Expected<Artifact> get_entry(const std::string& ns, const std::string& key) override;
  // The entry's record (verified) without reading blobs or touching recency.
  Expected<EntryInfo> show_entry(const std::string& ns, const std::string& key) override;
  Status touch_entry(const std::string& ns, const std::string& key) override;
  // Entries of one namespace (or all), by namespace then most recently used first.
  Expected<std::vector<EntryInfo>> list(const std::optional<std::string>& ns = std::nullopt) override;
  Expected<EntryPage> list_page(const std::string& ns, const std::optional<ListCursor>& after, int max_rows) override;
  // Keys in `ns` starting with `prefix`, at most `limit` of them, sorted.
  Expected<std::vector<std::string>> keys_with_prefix(const std::string& ns, const std::string& prefix, int limit) override;

  Status rm(const std::string& ns, const std::string& key) override;  // deletes blobs left unreferenced
  Status pin(const std::string& ns, const std::string& key);
  Status unpin(const std::string& ns, const std::string& key);

  Expected<std::vector<NamespaceUsage>> usage() override;  // every namespace with entries
  Expected<int64_t> namespace_bytes(const std::string& ns) override;
  Expected<CollectReport> collect_unreferenced(int64_t created_before) override;
  Expected<StoreStats> stats() override;

  // Re-hashes every blob and entry record, checks references and runs
  // PRAGMA integrity_check. Damaged blobs and entries are quarantined (as a
  // read would); with repair, entries with missing blobs are quarantined too
  // and the reference index is rebuilt from the manifests.
  Expected<VerifyReport> verify(bool repair = false);

  // Deletes unreferenced blobs, then evicts least recently used unpinned
  // entries until the store's blob bytes are <= max_bytes; empties the
  // quarantine. gc_namespace limits one namespace's charged bytes instead.
  Expected<GcReport> gc(int64_t max_bytes);
  Expected<GcReport> gc_namespace(const std::string& ns, int64_t max_bytes);

  // Writes the entries (of `ns`, or all) and their blobs, verified, to a new
  // single-file archive (an mlk store in rollback-journal mode). Refuses to
  // overwrite `file`; the archive appears atomically.
  Expected<ExportReport> export_to(const std::string& file, const std::optional<std::string>& ns = std::nullopt);
  // Adds the entries of an archive (of `ns`, or all), verifying every byte, in
  // one transaction: a damaged archive imports nothing. Keys already present
  // here are kept and counted as skipped. Pins are carried over.
  Expected<ImportReport> import_from(const std::string& file, const std::optional<std::string>& ns = std::nullopt);

  // Test seam: flips the bits of byte `offset` of a stored blob, leaving its
  // digest as it was (what a bad disk or a bug would do).
  Status corrupt_blob_for_testing(const std::string& digest, int64_t offset);

  struct Impl;

 private:
  int64_t touch_locked(const std::string& ns, const std::string& key);
  explicit Store(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Checks a namespace name: 1-64 characters from [A-Za-z0-9._-], not starting
// with '.' or '-'.
Status validate_namespace(const std::string& ns);
// Checks a key: 1-256 printable ASCII characters, no spaces.
Status validate_key(const std::string& key);

}  // namespace mlk::cache
