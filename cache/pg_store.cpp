// PgStore: the schema, blobs (bucket + rows), entries and quarantine on
// PostgreSQL (pg_store.h).
#include "cache/pg_store.h"

#include <unistd.h>

#include <ctime>

#include "base/sha256.h"
#include "cache/store_internal.h"

namespace mlk::cache {

namespace {

// Text columns sort byte-wise (COLLATE "C") as in SQLite, whatever the
// database's locale.
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS mlk_meta(k text PRIMARY KEY, v text NOT NULL);
CREATE TABLE IF NOT EXISTS mlk_blobs(
  digest text COLLATE "C" PRIMARY KEY,
  size bigint NOT NULL,
  created bigint NOT NULL);
CREATE SEQUENCE IF NOT EXISTS mlk_lru;
CREATE TABLE IF NOT EXISTS mlk_entries(
  id bigserial PRIMARY KEY,
  ns text COLLATE "C" NOT NULL,
  key text COLLATE "C" NOT NULL,
  manifest text NOT NULL,
  digest text NOT NULL,
  pinned boolean NOT NULL DEFAULT false,
  created bigint NOT NULL,
  last_used bigint NOT NULL,
  lru bigint NOT NULL,
  UNIQUE(ns, key));
CREATE INDEX IF NOT EXISTS mlk_entries_ns_id ON mlk_entries(ns, id);
CREATE TABLE IF NOT EXISTS mlk_refs(
  entry_id bigint NOT NULL REFERENCES mlk_entries(id) ON DELETE CASCADE,
  name text COLLATE "C" NOT NULL,
  digest text COLLATE "C" NOT NULL,
  size bigint NOT NULL,
  PRIMARY KEY(entry_id, name));
CREATE INDEX IF NOT EXISTS mlk_refs_digest ON mlk_refs(digest);
CREATE TABLE IF NOT EXISTS mlk_quarantine(
  id bigserial PRIMARY KEY,
  kind text NOT NULL,
  name text NOT NULL,
  reason text NOT NULL,
  time bigint NOT NULL);
INSERT INTO mlk_meta(k, v) VALUES('format', 'mlk-cache-pg'), ('schema', '1') ON CONFLICT DO NOTHING;
)sql";

int64_t now_unix() { return static_cast<int64_t>(std::time(nullptr)); }
std::string str(int64_t v) { return std::to_string(v); }

std::string hostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

constexpr const char* kEntryColumns = "id, ns, key, manifest, digest, pinned, created, last_used";

detail::EntryRow entry_row(const pg::Rows& r, int i) {
  return detail::EntryRow{r.i64(i, 0), r.text(i, 1), r.text(i, 2), r.text(i, 3),
                          r.text(i, 4), r.text(i, 5) == "t", r.i64(i, 6), r.i64(i, 7)};
}

Status check_schema(pg::Conn& c) {
  auto f = c.exec("SELECT v FROM mlk_meta WHERE k='format'");
  if (!f.ok()) return f.status();
  if (f->empty() || f->text(0, 0) != "mlk-cache-pg")
    return Status::InvalidArgument(c.name() + ": the database has an `mlk_meta` table that is not an mlk store's");
  auto v = c.exec("SELECT v FROM mlk_meta WHERE k='schema'");
  if (!v.ok()) return v.status();
  if (v->empty() || v->text(0, 0) != "1")
    return Status::Unsupported(c.name() + ": store schema version " + (v->empty() ? "?" : v->text(0, 0)) +
                               ", this mlk reads version 1");
  return Status::Ok();
}

}  // namespace

bool is_postgres_url(const std::string& spec) {
  return spec.rfind("postgresql://", 0) == 0 || spec.rfind("postgres://", 0) == 0;
}

Expected<SharedBackend> open_shared_backend(const std::string& store_url, const std::string& blobs_spec,
                                            const std::string& lru_dir, int64_t lru_bytes) {
  if (!is_postgres_url(store_url))
    return Status::InvalidArgument("--store `" + store_url + "` is not a postgresql:// URL");
  if (blobs_spec.empty())
    return Status::InvalidArgument("--store postgresql://... needs --blobs s3://BUCKET?endpoint=... for the blob bytes");
  auto spec = parse_s3_spec(blobs_spec);
  if (!spec.ok()) return spec.status();
  SharedBackend b;
  b.conninfo = store_url;
  b.blobs = std::make_shared<S3Blobs>(*spec);
  MLK_RETURN_IF_ERROR(b.blobs->ensure_bucket());
  auto lru = BlobLru::Open(lru_dir, lru_bytes);
  if (!lru.ok()) return lru.status();
  b.lru = std::move(*lru);
  // Replicas starting at once: one creates the schema, the others wait.
  auto conn = pg::open_with_schema(store_url, "schema", kSchema);
  if (!conn.ok()) return conn.status();
  MLK_RETURN_IF_ERROR(check_schema(**conn));
  return b;
}

PgStore::~PgStore() = default;

Expected<std::unique_ptr<PgStore>> PgStore::Open(const SharedBackend& backend) {
  auto conn = pg::Conn::Open(backend.conninfo);
  if (!conn.ok()) return conn.status();
  std::unique_ptr<PgStore> s(new PgStore());
  s->conn_ = std::move(*conn);
  s->blobs_ = backend.blobs;
  s->lru_ = backend.lru;
  s->name_ = s->conn_->name() + " + " + backend.blobs->name();
  return s;
}

Expected<std::string> PgStore::put_blob(std::string_view bytes) {
  std::string digest = sha256_hex(bytes);
  auto row = conn_->exec("SELECT size FROM mlk_blobs WHERE digest=$1", {digest});
  if (!row.ok()) return row.status();
  if (!row->empty() && row->i64(0, 0) == static_cast<int64_t>(bytes.size())) {
    // Uploaded again: young again, so collect_unreferenced leaves it to the
    // entry about to bind it.
    auto touch = conn_->exec("UPDATE mlk_blobs SET created=$2 WHERE digest=$1 AND created<$2 - 60",
                             {digest, str(now_unix())});
    if (!touch.ok()) return touch.status();
    return digest;
  }
  // The bytes first, then the row: a row always names an object.
  auto created = blobs_->put_if_absent(digest, bytes);
  if (!created.ok()) return created.status();
  auto ins = conn_->exec("INSERT INTO mlk_blobs(digest, size, created) VALUES($1, $2, $3) ON CONFLICT DO NOTHING",
                         {digest, str(static_cast<int64_t>(bytes.size())), str(now_unix())});
  if (!ins.ok()) return ins.status();
  return digest;
}

Status PgStore::quarantine_entry(int64_t id, const std::string& reason) {
  return pg::txn(*conn_, [&]() -> Status {
    auto del = conn_->exec("DELETE FROM mlk_entries WHERE id=$1 RETURNING ns, key", {str(id)});
    if (!del.ok()) return del.status();
    if (del->empty()) return Status::Ok();  // gone meanwhile
    auto q = conn_->exec("INSERT INTO mlk_quarantine(kind, name, reason, time) VALUES('entry', $1, $2, $3)",
                         {del->text(0, 0) + "/" + del->text(0, 1), reason, str(now_unix())});
    return q.status();
  });
}

Status PgStore::quarantine_blob(const std::string& digest, std::string_view bytes, const std::string& reason) {
  lru_->drop(digest);
  MLK_RETURN_IF_ERROR(blobs_->quarantine(digest, bytes));
  return pg::txn(*conn_, [&]() -> Status {
    auto del = conn_->exec("DELETE FROM mlk_blobs WHERE digest=$1", {digest});
    if (!del.ok()) return del.status();
    auto q = conn_->exec("INSERT INTO mlk_quarantine(kind, name, reason, time) VALUES('blob', $1, $2, $3)",
                         {digest, reason, str(now_unix())});
    if (!q.ok()) return q.status();
    auto users = conn_->exec(
        "DELETE FROM mlk_entries WHERE id IN (SELECT entry_id FROM mlk_refs WHERE digest=$1) RETURNING ns, key", {digest});
    if (!users.ok()) return users.status();
    for (int i = 0; i < users->size(); ++i) {
      auto qe = conn_->exec("INSERT INTO mlk_quarantine(kind, name, reason, time) VALUES('entry', $1, $2, $3)",
                            {users->text(i, 0) + "/" + users->text(i, 1), "references damaged blob " + digest,
                             str(now_unix())});
      if (!qe.ok()) return qe.status();
    }
    return Status::Ok();
  });
}

Expected<std::string> PgStore::read_blob(const std::string& digest, int64_t size, const std::string& where) {
  if (auto local = lru_->get(digest); local && static_cast<int64_t>(local->size()) == size) return std::move(*local);
  auto bytes = blobs_->get(digest);
  std::string problem;
  if (bytes.status().code() == Status::Code::kNotFound) {
    problem = "is missing from the bucket";
  } else if (!bytes.ok()) {
    return bytes.status();
  } else if (static_cast<int64_t>(bytes->size()) != size) {
    problem = "has " + str(static_cast<int64_t>(bytes->size())) + " bytes, recorded as " + str(size);
  } else if (sha256_hex(*bytes) != digest) {
    problem = "its bytes do not hash to its digest";
  }
  if (problem.empty()) {
    lru_->put(digest, *bytes);
    return std::move(*bytes);
  }
  std::string msg = where + problem;
  Status q = quarantine_blob(digest, bytes.ok() ? std::string_view(*bytes) : std::string_view(), msg);
  return Status::Corruption(msg + (q.ok() ? "; the blob and the entries using it were quarantined" : ""));
}

Expected<std::string> PgStore::get_blob(const std::string& digest) {
  if (!is_sha256_hex(digest))
    return Status::InvalidArgument("`" + digest + "` is not a sha256 digest (64 lower-case hex characters)");
  auto row = conn_->exec("SELECT size FROM mlk_blobs WHERE digest=$1", {digest});
  if (!row.ok()) return row.status();
  if (row->empty()) return Status::NotFound("no blob " + digest + " in " + name_);
  return read_blob(digest, row->i64(0, 0), "blob " + digest + ": ");
}

Expected<int64_t> PgStore::blob_size(const std::string& digest) {
  if (!is_sha256_hex(digest))
    return Status::InvalidArgument("`" + digest + "` is not a sha256 digest (64 lower-case hex characters)");
  auto row = conn_->exec("SELECT size FROM mlk_blobs WHERE digest=$1", {digest});
  if (!row.ok()) return row.status();
  if (row->empty()) return Status::NotFound("no blob " + digest + " in " + name_);
  return row->i64(0, 0);
}

Expected<std::string> PgStore::read_blob_range(const std::string& digest, int64_t offset, int64_t length) {
  auto size = blob_size(digest);
  if (!size.ok()) return size.status();
  if (offset < 0 || length < 0 || (offset >= *size && length > 0))
    return Status::InvalidArgument("bytes from " + str(offset) + " are past blob " + digest + "'s " + str(*size));
  if (auto local = lru_->read_range(digest, offset, length)) return std::move(*local);
  return blobs_->get_range(digest, offset, std::min(length, *size - offset));
}

Status PgStore::put_entry(const std::string& ns, const std::string& key, const Manifest& manifest) {
  MLK_RETURN_IF_ERROR(validate_namespace(ns));
  MLK_RETURN_IF_ERROR(validate_key(key));
  MLK_RETURN_IF_ERROR(validate_manifest(manifest));
  Manifest m = manifest;
  auto meta = canonical_json_object(m.meta_json);
  if (!meta.ok()) return meta.status();
  m.meta_json = *meta;
  if (m.provenance.host.empty()) m.provenance.host = hostname();
  if (m.provenance.time == 0) m.provenance.time = now_unix();
  std::string text = manifest_to_json(m);
  return pg::txn(*conn_, [&]() -> Status {
    for (const auto& [name, ref] : m.files) {
      auto b = conn_->exec("SELECT size FROM mlk_blobs WHERE digest=$1 FOR SHARE", {ref.digest});
      if (!b.ok()) return b.status();
      if (b->empty())
        return Status::NotFound("file `" + name + "`: blob " + ref.digest + " is not in the store; put_blob it first");
      if (b->i64(0, 0) != ref.size)
        return Status::InvalidArgument("file `" + name + "`: blob " + ref.digest + " has " + str(b->i64(0, 0)) +
                                       " bytes, the manifest says " + str(ref.size));
    }
    // An upsert: replicas binding the same key at once serialise on the row
    // and leave one entry; a replaced entry keeps its pin.
    auto up = conn_->exec(
        "INSERT INTO mlk_entries(ns, key, manifest, digest, created, last_used, lru) "
        "VALUES($1, $2, $3, $4, $5, $5, nextval('mlk_lru')) "
        "ON CONFLICT(ns, key) DO UPDATE SET manifest=excluded.manifest, digest=excluded.digest, "
        "created=excluded.created, last_used=excluded.last_used, lru=excluded.lru RETURNING id",
        {ns, key, text, detail::entry_record_digest(ns, key, text), str(now_unix())});
    if (!up.ok()) return up.status();
    std::string id = up->text(0, 0);
    auto del = conn_->exec("DELETE FROM mlk_refs WHERE entry_id=$1", {id});
    if (!del.ok()) return del.status();
    for (const auto& [name, ref] : m.files) {
      auto r = conn_->exec("INSERT INTO mlk_refs(entry_id, name, digest, size) VALUES($1, $2, $3, $4)",
                           {id, name, ref.digest, str(ref.size)});
      if (!r.ok()) return r.status();
    }
    return Status::Ok();
  });
}

Status PgStore::put_entry(const std::string& ns, const std::string& key, const std::string& meta_json,
                          const Provenance& provenance, const std::map<std::string, std::string>& files) {
  MLK_RETURN_IF_ERROR(validate_namespace(ns));
  MLK_RETURN_IF_ERROR(validate_key(key));
  auto meta = canonical_json_object(meta_json);
  if (!meta.ok()) return meta.status();
  Manifest m;
  m.meta_json = *meta;
  m.provenance = provenance;
  for (const auto& [name, bytes] : files) {
    auto d = put_blob(bytes);
    if (!d.ok()) return d.status();
    m.files[name] = BlobRef{*d, static_cast<int64_t>(bytes.size())};
  }
  return put_entry(ns, key, m);
}

Expected<Artifact> PgStore::get_entry(const std::string& ns, const std::string& key) {
  auto rows = conn_->exec(std::string("SELECT ") + kEntryColumns + " FROM mlk_entries WHERE ns=$1 AND key=$2", {ns, key});
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return Status::NotFound("no entry `" + key + "` in namespace `" + ns + "`");
  detail::EntryRow e = entry_row(*rows, 0);
  auto info = detail::decode_entry(e);
  if (!info.ok()) {
    Status q = quarantine_entry(e.id, info.status().message());
    return Status::Corruption(info.status().message() + (q.ok() ? "; the entry was quarantined" : ""));
  }
  Artifact a;
  a.info = std::move(*info);
  for (const auto& [name, ref] : a.info.manifest.files) {
    std::string where = "entry " + ns + "/" + key + ": file `" + name + "`: blob " + ref.digest + " ";
    auto b = conn_->exec("SELECT size FROM mlk_blobs WHERE digest=$1", {ref.digest});
    if (!b.ok()) return b.status();
    if (b->empty() || b->i64(0, 0) != ref.size) {
      std::string why = where + (b->empty() ? "is missing from the store" : "has another size than the manifest says");
      Status q = quarantine_entry(e.id, why);
      return Status::Corruption(why + (q.ok() ? "; the entry was quarantined" : ""));
    }
    auto bytes = read_blob(ref.digest, ref.size, where);
    if (!bytes.ok()) return bytes.status();
    a.files[name] = std::move(*bytes);
  }
  int64_t now = now_unix();
  auto touch = conn_->exec("UPDATE mlk_entries SET lru=nextval('mlk_lru'), last_used=$1 WHERE id=$2", {str(now), str(e.id)});
  if (touch.ok()) a.info.last_used = now;  // recency is best effort
  return a;
}

Status PgStore::touch_entry(const std::string& ns, const std::string& key) {
  auto touch = conn_->exec("UPDATE mlk_entries SET lru=nextval('mlk_lru'), last_used=$1 WHERE ns=$2 AND key=$3",
                           {str(now_unix()), ns, key});
  return touch.ok() ? Status::Ok() : touch.status();
}

Expected<EntryInfo> PgStore::show_entry(const std::string& ns, const std::string& key) {
  auto rows = conn_->exec(std::string("SELECT ") + kEntryColumns + " FROM mlk_entries WHERE ns=$1 AND key=$2", {ns, key});
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return Status::NotFound("no entry `" + key + "` in namespace `" + ns + "`");
  return detail::decode_entry(entry_row(*rows, 0));
}

Expected<std::vector<EntryInfo>> PgStore::list(const std::optional<std::string>& ns) {
  auto rows = ns ? conn_->exec(std::string("SELECT ") + kEntryColumns + " FROM mlk_entries WHERE ns=$1 ORDER BY ns, lru DESC", {*ns})
                 : conn_->exec(std::string("SELECT ") + kEntryColumns + " FROM mlk_entries ORDER BY ns, lru DESC");
  if (!rows.ok()) return rows.status();
  std::vector<EntryInfo> out;
  for (int i = 0; i < rows->size(); ++i) out.push_back(detail::listed_entry(entry_row(*rows, i)));
  return out;
}

Expected<EntryPage> PgStore::list_page(const std::string& ns, const std::optional<ListCursor>& after, int max_rows) {
  if (max_rows < 1 || max_rows > 1000) return Status::InvalidArgument("list_page: max_rows must be 1-1000");
  std::string sql = std::string("SELECT ") + kEntryColumns + " FROM mlk_entries WHERE ns=$1" +
                    (after ? " AND id < $3" : "") + " ORDER BY id DESC LIMIT $2";
  auto rows = after ? conn_->exec(sql, {ns, str(max_rows), str(after->id)}) : conn_->exec(sql, {ns, str(max_rows)});
  if (!rows.ok()) return rows.status();
  EntryPage page;
  for (int i = 0; i < rows->size(); ++i) {
    detail::EntryRow e = entry_row(*rows, i);
    page.entries.push_back(detail::listed_entry(e));
    page.entries.back().at = ListCursor{e.id};
    if (i + 1 == max_rows) page.next = page.entries.back().at;
  }
  return page;
}

Expected<std::vector<std::string>> PgStore::keys_with_prefix(const std::string& ns, const std::string& prefix, int limit) {
  auto rows = conn_->exec("SELECT key FROM mlk_entries WHERE ns=$1 AND left(key, length($2))=$2 ORDER BY key LIMIT $3",
                          {ns, prefix, str(limit)});
  if (!rows.ok()) return rows.status();
  std::vector<std::string> out;
  for (int i = 0; i < rows->size(); ++i) out.push_back(rows->text(i, 0));
  return out;
}

Expected<CollectReport> PgStore::collect_unreferenced(int64_t created_before) {
  // The service's staging table (service/staging.h) is in the same database
  // when `mlk serve` made it: a staged blob is held like a referenced one.
  auto served = conn_->exec("SELECT to_regclass('service_staged') IS NOT NULL");
  if (!served.ok()) return served.status();
  std::string held = "NOT EXISTS (SELECT 1 FROM mlk_refs r WHERE r.digest=b.digest)";
  if (!served->empty() && served->text(0, 0) == "t")
    held += " AND NOT EXISTS (SELECT 1 FROM service_staged g WHERE g.digest=b.digest)";
  // An unfinished measurement job's setup is held as long as the job is.
  auto jobs = conn_->exec("SELECT to_regclass('jobs_queue') IS NOT NULL");
  if (!jobs.ok()) return jobs.status();
  if (!jobs->empty() && jobs->text(0, 0) == "t")
    held += " AND NOT EXISTS (SELECT 1 FROM jobs_queue q WHERE q.setup=b.digest AND q.state IN ('queued', 'running'))";
  CollectReport rep;
  // Batches of up to 2,000 blobs (and 256 MiB) examined in digest order,
  // each going on from the last (no statement holds the table for long, and
  // none scans again what an earlier one examined: reviews 9 and 10 of
  // issue 49).
  for (std::string after;;) {
    auto next = conn_->exec("SELECT digest, size FROM mlk_blobs WHERE digest>$1 AND created<$2 ORDER BY digest LIMIT 2000",
                            {after, str(created_before)});
    if (!next.ok()) return next.status();
    std::string upto;
    int64_t bytes = 0;  // and no more than 256 MiB a batch (review 10)
    for (int i = 0; i < next->size() && bytes < (int64_t{256} << 20); ++i) {
      upto = next->text(i, 0);
      bytes += next->i64(i, 1);
    }
    if (upto.empty()) break;
    auto gone = conn_->exec("DELETE FROM mlk_blobs b WHERE b.digest>$1 AND b.digest<=$2 AND b.created<$3 AND " + held +
                                " RETURNING digest, size",
                            {after, upto, str(created_before)});
    if (!gone.ok()) return gone.status();
    after = upto;
    for (int i = 0; i < gone->size(); ++i) {
      // The row first, then the object: an object no row names is harmless,
      // a row without its object is not.
      MLK_RETURN_IF_ERROR(blobs_->remove(gone->text(i, 0)));
      rep.blobs_deleted += 1;
      rep.bytes_freed += gone->i64(i, 1);
    }
  }
  return rep;
}

Status PgStore::rm(const std::string& ns, const std::string& key) {
  auto del = conn_->exec("DELETE FROM mlk_entries WHERE ns=$1 AND key=$2", {ns, key});
  if (!del.ok()) return del.status();
  if (del->affected() == 0) return Status::NotFound("no entry `" + key + "` in namespace `" + ns + "`");
  return Status::Ok();
}

Expected<std::vector<NamespaceUsage>> PgStore::usage() {
  auto rows = conn_->exec(
      "SELECT e.ns, COUNT(*), COALESCE(SUM((SELECT COALESCE(SUM(r.size), 0) FROM mlk_refs r WHERE r.entry_id=e.id)), 0), "
      "COALESCE(SUM(octet_length(e.manifest)), 0) FROM mlk_entries e GROUP BY e.ns ORDER BY e.ns");
  if (!rows.ok()) return rows.status();
  std::vector<NamespaceUsage> out;
  for (int i = 0; i < rows->size(); ++i) out.push_back(NamespaceUsage{rows->text(i, 0), rows->i64(i, 1), rows->i64(i, 2), rows->i64(i, 3)});
  return out;
}

Expected<int64_t> PgStore::namespace_bytes(const std::string& ns) {
  auto rows = conn_->exec(
      "SELECT (SELECT COALESCE(SUM(r.size), 0) FROM mlk_refs r JOIN mlk_entries e ON e.id=r.entry_id WHERE e.ns=$1) + "
      "(SELECT COALESCE(SUM(octet_length(manifest)), 0) FROM mlk_entries WHERE ns=$1)", {ns});
  if (!rows.ok()) return rows.status();
  return rows->i64(0, 0);
}

Expected<StoreStats> PgStore::stats() {
  auto r = conn_->exec(
      "SELECT (SELECT COUNT(*) FROM mlk_entries), (SELECT COUNT(*) FROM mlk_blobs), "
      "(SELECT COALESCE(SUM(size), 0) FROM mlk_blobs), "
      "(SELECT COUNT(*) FROM mlk_blobs b WHERE NOT EXISTS (SELECT 1 FROM mlk_refs r WHERE r.digest=b.digest)), "
      "(SELECT COUNT(*) FROM mlk_quarantine)");
  if (!r.ok()) return r.status();
  return StoreStats{r->i64(0, 0), r->i64(0, 1), r->i64(0, 2), r->i64(0, 3), r->i64(0, 4)};
}

}  // namespace mlk::cache
