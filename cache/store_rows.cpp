// The row-level operations of Store (store_internal.h): finding, verifying,
// inserting, deleting and quarantining blobs and entries.
#include <unistd.h>

#include <ctime>
#include <set>

#include "cache/store_internal.h"
#include "base/sha256.h"

namespace mlk::cache {

namespace {

std::string lp(const std::string& s) { return std::to_string(s.size()) + ":" + s; }

std::string hostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

}  // namespace

namespace detail {

int64_t now_unix() { return static_cast<int64_t>(std::time(nullptr)); }

std::string entry_record_digest(const std::string& ns, const std::string& key, const std::string& manifest_text) {
  return sha256_hex("mlk-entry/1\n" + lp(ns) + lp(key) + lp(manifest_text));
}

Expected<std::optional<EntryRow>> find_entry(Store::Impl& s, const std::string& ns, const std::string& key) {
  auto st = s.db->prepare(
      "SELECT id, ns, key, manifest, digest, pinned, created, last_used FROM entries WHERE ns=?1 AND key=?2");
  if (!st.ok()) return st.status();
  st->bind(1, ns).bind(2, key);
  auto row = st->step();
  if (!row.ok()) return row.status();
  if (!*row) return std::optional<EntryRow>();
  return std::optional<EntryRow>(EntryRow{st->i64(0), st->text(1), st->text(2), st->text(3), st->text(4),
                                          st->i64(5) != 0, st->i64(6), st->i64(7)});
}

Expected<std::optional<BlobRow>> find_blob(Store::Impl& s, const std::string& digest) {
  auto st = s.db->prepare("SELECT id, digest, size, data FROM blobs WHERE digest=?1");
  if (!st.ok()) return st.status();
  st->bind(1, digest);
  auto row = st->step();
  if (!row.ok()) return row.status();
  if (!*row) return std::optional<BlobRow>();
  return std::optional<BlobRow>(BlobRow{st->i64(0), st->text(1), st->i64(2), st->blob(3)});
}

Expected<EntryInfo> decode_entry(const EntryRow& row) {
  std::string where = "entry " + row.ns + "/" + row.key + ": ";
  if (entry_record_digest(row.ns, row.key, row.manifest_text) != row.digest)
    return Status::Corruption(where + "its record does not match its hash (damaged on disk)");
  auto m = manifest_from_json(row.manifest_text);
  if (!m.ok()) return Status::Corruption(where + m.status().message());
  EntryInfo info;
  info.ns = row.ns;
  info.key = row.key;
  info.manifest = std::move(*m);
  for (const auto& [name, ref] : info.manifest.files) info.size += ref.size;
  info.record_bytes = static_cast<int64_t>(row.manifest_text.size());
  info.pinned = row.pinned;
  info.created = row.created;
  info.last_used = row.last_used;
  return info;
}

EntryInfo listed_entry(const EntryRow& row) {
  auto info = decode_entry(row);
  if (info.ok()) return std::move(*info);
  EntryInfo bad;
  bad.ns = row.ns;
  bad.key = row.key;
  bad.pinned = row.pinned;
  bad.created = row.created;
  bad.last_used = row.last_used;
  bad.damaged = true;
  return bad;
}

std::string blob_problem(const BlobRow& row, const std::string& digest) {
  if (row.digest != digest) return "the blob row holds digest " + row.digest;
  if (static_cast<int64_t>(row.data.size()) != row.size)
    return "has " + std::to_string(row.data.size()) + " bytes, recorded as " + std::to_string(row.size);
  if (sha256_hex(row.data) != digest) return "its bytes do not hash to its digest";
  return "";
}

Expected<Artifact> read_artifact(Store::Impl& s, const std::string& ns, const std::string& key, Damage* damage) {
  auto row = find_entry(s, ns, key);
  if (!row.ok()) return row.status();
  if (!row->has_value()) return Status::NotFound("no entry `" + key + "` in namespace `" + ns + "`");
  const EntryRow& e = **row;
  auto info = decode_entry(e);
  if (!info.ok()) {
    *damage = {Damage::kEntry, e.id, info.status().message()};
    return Status::Corruption(info.status().message());
  }
  Artifact a;
  a.info = std::move(*info);
  for (const auto& [name, ref] : a.info.manifest.files) {
    std::string where = "entry " + ns + "/" + key + ": file `" + name + "`: blob " + ref.digest;
    auto blob = find_blob(s, ref.digest);
    if (!blob.ok()) return blob.status();
    if (!blob->has_value()) {
      *damage = {Damage::kDangling, e.id, where + " is missing"};
      return Status::Corruption(where + " is missing from the store");
    }
    std::string problem = blob_problem(**blob, ref.digest);
    if (!problem.empty()) {
      *damage = {Damage::kBlob, (*blob)->id, where + ": " + problem};
      return Status::Corruption(where + ": " + problem);
    }
    if ((*blob)->size != ref.size) {
      *damage = {Damage::kEntry, e.id, where + ": the manifest says " + std::to_string(ref.size) + " bytes"};
      return Status::Corruption(damage->reason + ", the blob has " + std::to_string((*blob)->size));
    }
    a.files[name] = std::move((*blob)->data);
  }
  return a;
}

Status quarantine_damage(Store::Impl& s, const Damage& d, Status found) {
  if (d.kind == Damage::kNone || s.read_only) return found;
  Status st = sql::write_txn(*s.db, [&]() -> Status {
    Expected<int64_t> n = int64_t{0};
    if (d.kind == Damage::kBlob) n = quarantine_blob(s, d.id, d.reason);
    if (d.kind == Damage::kEntry) n = quarantine_entry(s, d.id, d.reason, /*recheck=*/true);
    if (d.kind == Damage::kDangling) n = quarantine_entry(s, d.id, d.reason, /*recheck=*/false);
    return n.status();
  });
  if (!st.ok()) return found;  // best effort: the corruption is what the caller reports
  const char* what = d.kind == Damage::kBlob ? "; the blob and the entries using it were quarantined"
                                             : "; the entry was quarantined";
  if (found.code() != Status::Code::kCorruption) return found;
  return Status::Corruption(found.message() + what);
}

Expected<std::string> insert_blob(Store::Impl& s, std::string_view bytes) {
  std::string digest = sha256_hex(bytes);
  auto existing = find_blob(s, digest);
  if (!existing.ok()) return existing.status();
  if (existing->has_value()) {
    if ((*existing)->data == bytes && (*existing)->size == static_cast<int64_t>(bytes.size())) {
      // Uploaded again: young again, so that collect_unreferenced leaves it
      // to the client about to stage or bind it.
      auto touch = s.db->prepare("UPDATE blobs SET created=?2 WHERE id=?1 AND created<?2 - 60");
      if (!touch.ok()) return touch.status();
      touch->bind(1, (*existing)->id).bind(2, now_unix());
      MLK_RETURN_IF_ERROR(touch->run());
      return digest;
    }
    // The stored copy is damaged: keep it in quarantine and store the good bytes.
    auto q = s.db->prepare("INSERT INTO quarantine(kind, name, reason, time, data) VALUES('blob', ?1, ?2, ?3, ?4)");
    if (!q.ok()) return q.status();
    q->bind(1, digest).bind(2, "replaced by a good copy on put").bind(3, now_unix()).bind_blob(4, (*existing)->data);
    MLK_RETURN_IF_ERROR(q->run());
    auto u = s.db->prepare("UPDATE blobs SET data=?1, size=?2 WHERE id=?3");
    if (!u.ok()) return u.status();
    u->bind_blob(1, bytes).bind(2, static_cast<int64_t>(bytes.size())).bind(3, (*existing)->id);
    MLK_RETURN_IF_ERROR(u->run());
    return digest;
  }
  auto ins = s.db->prepare("INSERT INTO blobs(digest, size, created, data) VALUES(?1, ?2, ?3, ?4)");
  if (!ins.ok()) return ins.status();
  ins->bind(1, digest).bind(2, static_cast<int64_t>(bytes.size())).bind(3, now_unix()).bind_blob(4, bytes);
  MLK_RETURN_IF_ERROR(ins->run());
  return digest;
}

Status insert_entry(Store::Impl& s, const std::string& ns, const std::string& key, Manifest m,
                    std::optional<bool> pinned) {
  MLK_RETURN_IF_ERROR(validate_namespace(ns));
  MLK_RETURN_IF_ERROR(validate_key(key));
  MLK_RETURN_IF_ERROR(validate_manifest(m));
  auto meta = canonical_json_object(m.meta_json);
  if (!meta.ok()) return meta.status();
  m.meta_json = *meta;
  if (m.provenance.host.empty()) m.provenance.host = hostname();
  if (m.provenance.time == 0) m.provenance.time = now_unix();

  for (const auto& [name, ref] : m.files) {
    auto st = s.db->prepare("SELECT size FROM blobs WHERE digest=?1");
    if (!st.ok()) return st.status();
    st->bind(1, ref.digest);
    auto row = st->step();
    if (!row.ok()) return row.status();
    if (!*row)
      return Status::NotFound("file `" + name + "`: blob " + ref.digest + " is not in the store; put_blob it first");
    if (st->i64(0) != ref.size)
      return Status::InvalidArgument("file `" + name + "`: blob " + ref.digest + " has " + std::to_string(st->i64(0)) +
                                     " bytes, the manifest says " + std::to_string(ref.size));
  }

  bool pin = pinned.value_or(false);
  std::set<std::string> old_digests;
  auto old = find_entry(s, ns, key);
  if (!old.ok()) return old.status();
  if (old->has_value()) {
    if (!pinned) pin = (*old)->pinned;
    auto refs = s.db->prepare("SELECT digest FROM refs WHERE entry_id=?1");
    if (!refs.ok()) return refs.status();
    refs->bind(1, (*old)->id);
    while (true) {
      auto r = refs->step();
      if (!r.ok()) return r.status();
      if (!*r) break;
      old_digests.insert(refs->text(0));
    }
    auto removed = delete_entry(s, (*old)->id, /*drop_orphans=*/false);
    if (!removed.ok()) return removed.status();
  }

  std::string text = manifest_to_json(m);
  int64_t now = now_unix();
  auto ins = s.db->prepare(
      "INSERT INTO entries(ns, key, manifest, digest, pinned, created, last_used, lru, record_bytes) "
      "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?6, (SELECT COALESCE(MAX(lru), 0) + 1 FROM entries), ?7)");
  if (!ins.ok()) return ins.status();
  ins->bind(1, ns).bind(2, key).bind(3, text).bind(4, entry_record_digest(ns, key, text)).bind(5, int64_t{pin}).bind(6, now)
      .bind(7, static_cast<int64_t>(text.size()));
  MLK_RETURN_IF_ERROR(ins->run());
  int64_t id = sqlite3_last_insert_rowid(s.db->raw());
  for (const auto& [name, ref] : m.files) {
    auto r = s.db->prepare("INSERT INTO refs(entry_id, name, digest, size) VALUES(?1, ?2, ?3, ?4)");
    if (!r.ok()) return r.status();
    r->bind(1, id).bind(2, name).bind(3, ref.digest).bind(4, ref.size);
    MLK_RETURN_IF_ERROR(r->run());
  }
  // The replaced entry's blobs that nothing else holds (no entry, no staged
  // upload, no unfinished job's setup: review 5 of issue 49).
  auto unheld = old_digests.empty() ? Expected<std::string>(std::string()) : unheld_blob_condition(s);
  if (!unheld.ok()) return unheld.status();
  for (const auto& d : old_digests) {
    auto del = s.db->prepare("DELETE FROM blobs WHERE digest=?1 AND " + *unheld);
    if (!del.ok()) return del.status();
    del->bind(1, d);
    MLK_RETURN_IF_ERROR(del->run());
  }
  return Status::Ok();
}

Expected<std::string> unheld_blob_condition(Store::Impl& s) {
  auto served = s.db->query_text("SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name='service_staged'");
  if (!served.ok()) return served.status();
  std::string cond = "NOT EXISTS (SELECT 1 FROM refs r WHERE r.digest=blobs.digest)";
  if (*served != "0") cond += " AND NOT EXISTS (SELECT 1 FROM service_staged g WHERE g.digest=blobs.digest)";
  // An unfinished measurement job's setup is held as long as the job is.
  auto jobs = s.db->query_text("SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name='jobs_queue'");
  if (!jobs.ok()) return jobs.status();
  if (*jobs != "0")
    cond += " AND NOT EXISTS (SELECT 1 FROM jobs_queue q WHERE q.setup=blobs.digest AND q.state IN ('queued', 'running'))";
  return cond;
}

Expected<Removed> delete_entry(Store::Impl& s, int64_t id, bool drop_orphans) {
  Removed out;
  std::set<std::string> digests;
  auto refs = s.db->prepare("DELETE FROM refs WHERE entry_id=?1 RETURNING digest, size");
  if (!refs.ok()) return refs.status();
  refs->bind(1, id);
  while (true) {
    auto r = refs->step();
    if (!r.ok()) return r.status();
    if (!*r) break;
    digests.insert(refs->text(0));
    out.charged += refs->i64(1);
  }
  std::string charged = s.record_bytes_sql;  // RETURNING names no alias
  for (size_t at; (at = charged.find("e.")) != std::string::npos;) charged.erase(at, 2);
  auto del = s.db->prepare("DELETE FROM entries WHERE id=?1 RETURNING " + charged);
  if (!del.ok()) return del.status();
  del->bind(1, id);
  while (true) {
    auto r = del->step();
    if (!r.ok()) return r.status();
    if (!*r) break;
    out.charged += del->i64(0);  // its manifest was charged too
  }
  if (!drop_orphans) return out;
  auto unheld = unheld_blob_condition(s);
  if (!unheld.ok()) return unheld.status();
  for (const auto& d : digests) {
    auto b = s.db->prepare("DELETE FROM blobs WHERE digest=?1 AND " + *unheld + " RETURNING size");
    if (!b.ok()) return b.status();
    b->bind(1, d);
    while (true) {
      auto r = b->step();
      if (!r.ok()) return r.status();
      if (!*r) break;
      out.blobs_deleted += 1;
      out.bytes_freed += b->i64(0);
    }
  }
  return out;
}

Expected<int64_t> quarantine_entry(Store::Impl& s, int64_t entry_id, const std::string& reason, bool recheck) {
  auto st = s.db->prepare("SELECT id, ns, key, manifest, digest, pinned, created, last_used FROM entries WHERE id=?1");
  if (!st.ok()) return st.status();
  st->bind(1, entry_id);
  auto row = st->step();
  if (!row.ok()) return row.status();
  if (!*row) return int64_t{0};  // already gone (replaced or removed meanwhile)
  EntryRow e{st->i64(0), st->text(1), st->text(2), st->text(3), st->text(4), st->i64(5) != 0, st->i64(6), st->i64(7)};
  if (recheck && decode_entry(e).ok()) return int64_t{0};
  auto q = s.db->prepare("INSERT INTO quarantine(kind, name, reason, time, data) VALUES('entry', ?1, ?2, ?3, ?4)");
  if (!q.ok()) return q.status();
  q->bind(1, e.ns + "/" + e.key).bind(2, reason).bind(3, now_unix()).bind_blob(4, e.manifest_text);
  MLK_RETURN_IF_ERROR(q->run());
  auto removed = delete_entry(s, entry_id, /*drop_orphans=*/true);
  if (!removed.ok()) return removed.status();
  return int64_t{1};
}

Expected<int64_t> quarantine_blob(Store::Impl& s, int64_t blob_id, const std::string& reason) {
  auto st = s.db->prepare("SELECT id, digest, size, data FROM blobs WHERE id=?1");
  if (!st.ok()) return st.status();
  st->bind(1, blob_id);
  auto row = st->step();
  if (!row.ok()) return row.status();
  if (!*row) return int64_t{0};
  BlobRow b{st->i64(0), st->text(1), st->i64(2), st->blob(3)};
  if (blob_problem(b, b.digest).empty()) return int64_t{0};  // healed meanwhile
  auto q = s.db->prepare("INSERT INTO quarantine(kind, name, reason, time, data) VALUES('blob', ?1, ?2, ?3, ?4)");
  if (!q.ok()) return q.status();
  q->bind(1, b.digest).bind(2, reason).bind(3, now_unix()).bind_blob(4, b.data);
  MLK_RETURN_IF_ERROR(q->run());
  auto del = s.db->prepare("DELETE FROM blobs WHERE id=?1");
  if (!del.ok()) return del.status();
  del->bind(1, blob_id);
  MLK_RETURN_IF_ERROR(del->run());
  std::vector<int64_t> entries;
  auto refs = s.db->prepare("SELECT DISTINCT entry_id FROM refs WHERE digest=?1");
  if (!refs.ok()) return refs.status();
  refs->bind(1, b.digest);
  while (true) {
    auto r = refs->step();
    if (!r.ok()) return r.status();
    if (!*r) break;
    entries.push_back(refs->i64(0));
  }
  int64_t n = 1;
  for (int64_t id : entries) {
    auto qe = quarantine_entry(s, id, "references damaged blob " + b.digest, /*recheck=*/false);
    if (!qe.ok()) return qe.status();
    n += *qe;
  }
  return n;
}

}  // namespace detail

}  // namespace mlk::cache
