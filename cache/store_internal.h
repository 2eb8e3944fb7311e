// Shared internals of Store (store.cpp, store_maintenance.cpp): the Impl and
// the row-level operations every public operation is built from. Functions
// marked "in a write txn" must run inside sql::write_txn on impl.db.
#pragma once

#include <mutex>
#include <optional>

#include "cache/sqlite.h"
#include "cache/store.h"

namespace mlk::cache {

struct Store::Impl {
  std::string path;
  StoreOptions opt;
  std::unique_ptr<sql::Db> db;
  bool read_only = false;
  std::mutex mu;  // serialises every public call
  // An entry's charged manifest bytes, in SQL over `entries` (alias e): its
  // record_bytes column, written with the entry, so that a quota check reads
  // no manifest; its manifest's length where the column is NULL (written by
  // an mlk before it) or missing (a store made before it, opened read-only).
  std::string record_bytes_sql = "COALESCE(e.record_bytes, length(CAST(e.manifest AS BLOB)))";

  Status fault(const char* point) const { return opt.fault ? opt.fault(point) : Status::Ok(); }
  Status check_writable() const;
};

// OK when `path` lies where no other user can put files in its place: every
// folder on the way to it (links resolved) is this user's or root's (any
// owner for root) and none writable by others unless sticky; in a sticky
// folder, `path` and SQLite's files beside it, where present, are plain
// files of this user. InvalidArgument naming the folder otherwise. For a
// store, and for the blob cache's folder (checked as `DIR/blob`).
Status check_store_place(const std::string& path);

namespace detail {

int64_t now_unix();

// The hash that protects an entry's record: sha256 over the length-prefixed
// namespace, key and manifest text. A flipped byte in any of them (or in the
// stored hash) makes the record fail and the entry is never served.
std::string entry_record_digest(const std::string& ns, const std::string& key, const std::string& manifest_text);

struct EntryRow {
  int64_t id = 0;
  std::string ns, key, manifest_text, digest;
  bool pinned = false;
  int64_t created = 0, last_used = 0;
};

struct BlobRow {
  int64_t id = 0;
  std::string digest;
  int64_t size = 0;
  std::string data;
};

Expected<std::optional<EntryRow>> find_entry(Store::Impl& s, const std::string& ns, const std::string& key);
Expected<std::optional<BlobRow>> find_blob(Store::Impl& s, const std::string& digest);
// Corruption (saying why) when the row's record hash fails or its manifest
// does not parse. size is the sum of the manifest's file sizes.
Expected<EntryInfo> decode_entry(const EntryRow& row);
// What list() reports for a row: the decoded entry, or, when decode_entry
// fails, an entry marked `damaged` that keeps only the row's namespace, key,
// pin and times (its manifest empty).
EntryInfo listed_entry(const EntryRow& row);
// Empty when the bytes hash to `digest` with the stored size, else why not.
std::string blob_problem(const BlobRow& row, const std::string& digest);

// What a failed read found damaged, so that it can be quarantined once the
// read transaction is over.
struct Damage {
  enum Kind { kNone, kEntry, kBlob, kDangling } kind = kNone;
  int64_t id = 0;  // entry id (kEntry, kDangling) or blob id (kBlob)
  std::string reason;
};

// Reads and verifies an entry and all its blobs (in a read txn). On
// Corruption, *damage says what to quarantine.
Expected<Artifact> read_artifact(Store::Impl& s, const std::string& ns, const std::string& key, Damage* damage);
// Quarantines what a read found damaged, in its own write txn; best effort
// (a read-only store or a failing write leaves it as it is). Returns `found`,
// saying what was quarantined.
Status quarantine_damage(Store::Impl& s, const Damage& damage, Status found);

// In a write txn: stores bytes once per digest (healing a stored copy whose
// bytes no longer match) and returns the digest.
Expected<std::string> insert_blob(Store::Impl& s, std::string_view bytes);
// In a write txn: binds (ns, key) to m, whose blobs must be stored. An
// existing entry is replaced; pinned (when given) overrides its pin.
Status insert_entry(Store::Impl& s, const std::string& ns, const std::string& key, Manifest m,
                    std::optional<bool> pinned);

struct Removed {
  int64_t charged = 0;        // what its namespace was charged: its reference sizes and its manifest
  int64_t blobs_deleted = 0;  // blobs left unreferenced and deleted
  int64_t bytes_freed = 0;
};
// In a write txn: deletes an entry and its references; with drop_orphans, the
// blobs no longer referenced by anything (nor staged, see below).
Expected<Removed> delete_entry(Store::Impl& s, int64_t id, bool drop_orphans);
// The condition, on a row of `blobs`, that nothing holds it: no reference,
// and, in a store that `mlk serve` uses, no namespace's staged upload (its
// `service_staged` table, service/staging.h): a team that uploaded a blob
// another team's entry also referenced keeps it when that entry goes.
Expected<std::string> unheld_blob_condition(Store::Impl& s);
// In a write txn: moves a blob whose bytes fail their digest (checked again
// here) to the quarantine table, and quarantines every entry referencing it.
Expected<int64_t> quarantine_blob(Store::Impl& s, int64_t blob_id, const std::string& reason);
// In a write txn: moves an entry's record to the quarantine table and deletes
// it. With recheck, does nothing when the record now verifies.
Expected<int64_t> quarantine_entry(Store::Impl& s, int64_t entry_id, const std::string& reason, bool recheck);

}  // namespace detail
}  // namespace mlk::cache
