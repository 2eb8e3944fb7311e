// The shared backend of `mlk serve` (docs/deploy.md): ArtifactStore
// (artifact_store.h) on PostgreSQL for entries, references, blob records and
// the quarantine, and an S3-compatible bucket (s3_blobs.h) for blob bytes,
// with a replica-local LRU (blob_lru.h) in front of the bucket. Any number
// of replicas may use one database and bucket at once.
//
// Contracts, beyond ArtifactStore's:
// - A blob's bytes are in the bucket before its row is in mlk_blobs, and an
//   entry is bound (one transaction) only to blobs with rows: a replica
//   killed at any instant leaves no entry pointing at a missing blob, at most
//   an object no row names (harmless, content-addressed).
// - Races between replicas are harmless: blob rows are inserted with ON
//   CONFLICT DO NOTHING, objects created with If-None-Match: *, and an entry
//   is an upsert on (ns, key), so identical concurrent uploads leave one
//   object, one blob row and one entry.
// - Reads re-hash every byte, whether from the bucket or the local cache. An
//   object that is missing or fails its digest is quarantined: copied to
//   quarantine/<sha256> in the bucket, its row and every entry using it
//   moved to mlk_quarantine.
// - Replacing or removing an entry does not delete the blobs it leaves
//   unreferenced (another replica may be binding them at that moment); they
//   are counted in stats().unreferenced_blobs, and collect_unreferenced
//   deletes them once they are older than a grace period.
// - The blob store unreachable is IOError naming it (the server answers 503).
// Threading: one PgStore per thread; the S3Blobs and the BlobLru are shared.
#pragma once

#include <memory>
#include <string>

#include "cache/artifact_store.h"
#include "cache/blob_lru.h"
#include "cache/pg.h"
#include "cache/s3_blobs.h"
#include "cache/store.h"

namespace mlk::cache {


// What the replicas of one deployment share, made once per process.
struct SharedBackend {
  std::string conninfo;  // --store postgresql://...
  std::shared_ptr<S3Blobs> blobs;
  std::shared_ptr<BlobLru> lru;
};

// Parses --store and --blobs, opens the local blob cache (`lru_dir`, at most
// `lru_bytes`; 0 disables it), checks the bucket (creating it when missing)
// and creates the schema in the database when missing.
Expected<SharedBackend> open_shared_backend(const std::string& store_url, const std::string& blobs_spec,
                                            const std::string& lru_dir, int64_t lru_bytes);

// Whether --store names PostgreSQL (postgresql:// or postgres://).
bool is_postgres_url(const std::string& spec);

class PgStore final : public ArtifactStore {
 public:
  static Expected<std::unique_ptr<PgStore>> Open(const SharedBackend& backend);
  ~PgStore() override;

  const std::string& path() const override { return name_; }
  pg::Conn& conn() { return *conn_; }

  Expected<std::string> put_blob(std::string_view bytes) override;
  Expected<std::string> get_blob(const std::string& digest) override;
  Expected<int64_t> blob_size(const std::string& digest) override;
  Expected<std::string> read_blob_range(const std::string& digest, int64_t offset, int64_t length) override;
  Status put_entry(const std::string& ns, const std::string& key, const Manifest& manifest) override;
  Status put_entry(const std::string& ns, const std::string& key, const std::string& meta_json,
                   const Provenance& provenance, const std::map<std::string, std::string>& files) override;
  Expected<Artifact> get_entry(const std::string& ns, const std::string& key) override;
  Expected<EntryInfo> show_entry(const std::string& ns, const std::string& key) override;
  Status touch_entry(const std::string& ns, const std::string& key) override;
  Expected<std::vector<EntryInfo>> list(const std::optional<std::string>& ns) override;
  Expected<EntryPage> list_page(const std::string& ns, const std::optional<ListCursor>& after, int max_rows) override;
  Expected<std::vector<std::string>> keys_with_prefix(const std::string& ns, const std::string& prefix,
                                                      int limit) override;
  Status rm(const std::string& ns, const std::string& key) override;
  Expected<std::vector<NamespaceUsage>> usage() override;
  Expected<int64_t> namespace_bytes(const std::string& ns) override;
  Expected<StoreStats> stats() override;
  // Deletes the blobs (rows, then bucket objects) that no entry references
  // and no namespace has staged, and whose row was created (or last
  // uploaded again) before `created_before` (unix seconds): the grace that
  // lets another replica bind a blob it has just uploaded. What `mlk serve`
  // runs on the shared backend every --collect-interval.
  Expected<CollectReport> collect_unreferenced(int64_t created_before) override;

 private:
  PgStore() = default;
  // The verified bytes of a blob with a row (LRU, else the bucket); a
  // missing or damaged object is quarantined and reported as Corruption.
  Expected<std::string> read_blob(const std::string& digest, int64_t size, const std::string& where);
  Status quarantine_blob(const std::string& digest, std::string_view bytes, const std::string& reason);
  Status quarantine_entry(int64_t id, const std::string& reason);
  std::unique_ptr<pg::Conn> conn_;
  std::shared_ptr<S3Blobs> blobs_;
  std::shared_ptr<BlobLru> lru_;
  std::string name_;
};

}  // namespace mlk::cache
