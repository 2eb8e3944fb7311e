// Store maintenance: verify (scrub), gc (LRU eviction), export and import.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "cache/store_internal.h"
#include "base/sha256.h"

namespace mlk::cache {

using detail::EntryRow;

bool VerifyReport::consistent() const {
  return integrity_errors.empty() && corrupt_blobs.empty() && damaged_entries.empty() && dangling_entries.empty() &&
         bad_refs.empty();
}

std::string VerifyReport::summary() const {
  std::string s = "checked " + std::to_string(blobs_checked) + " blobs (" + std::to_string(blob_bytes_checked) +
                  " bytes) and " + std::to_string(entries_checked) + " entries\n";
  auto section = [&](const char* title, const std::vector<std::string>& items) {
    if (items.empty()) return;
    s += std::string(title) + ": " + std::to_string(items.size()) + "\n";
    for (size_t i = 0; i < items.size() && i < 20; ++i) s += "  " + items[i] + "\n";
    if (items.size() > 20) s += "  ... and " + std::to_string(items.size() - 20) + " more\n";
  };
  section("SQLite integrity errors", integrity_errors);
  section("corrupt blobs", corrupt_blobs);
  section("damaged entries", damaged_entries);
  section("entries with missing blobs", dangling_entries);
  section("reference index errors", bad_refs);
  if (quarantined_now) s += "quarantined now: " + std::to_string(quarantined_now) + "\n";
  if (repaired) s += "repaired: " + std::to_string(repaired) + "\n";
  if (unreferenced_blobs) s += "unreferenced blobs (gc deletes them): " + std::to_string(unreferenced_blobs) + "\n";
  if (quarantined_total) s += "in quarantine: " + std::to_string(quarantined_total) + " (gc empties it)\n";
  s += consistent() ? "store is consistent\n" : "store is NOT consistent\n";
  return s;
}

namespace {

// Reads all rows of a one-column-or-more query through `row`.
Status each_row(sql::Db& db, const std::string& query, const std::function<Status(sql::Stmt&)>& row) {
  auto st = db.prepare(query);
  if (!st.ok()) return st.status();
  while (true) {
    auto r = st->step();
    if (!r.ok()) return r.status();
    if (!*r) return Status::Ok();
    MLK_RETURN_IF_ERROR(row(*st));
  }
}

Status scan(Store::Impl& s, VerifyReport& rep, std::vector<int64_t>& bad_blob_ids, std::vector<int64_t>& damaged_ids,
            std::vector<int64_t>& dangling_ids, std::vector<int64_t>& bad_ref_ids, bool& orphan_refs) {
  sql::Db& db = *s.db;
  MLK_RETURN_IF_ERROR(each_row(db, "SELECT id, digest, size, data FROM blobs ORDER BY id", [&](sql::Stmt& st) {
    detail::BlobRow b{st.i64(0), st.text(1), st.i64(2), st.blob(3)};
    rep.blobs_checked += 1;
    rep.blob_bytes_checked += static_cast<int64_t>(b.data.size());
    std::string problem = detail::blob_problem(b, b.digest);
    if (!problem.empty()) {
      rep.corrupt_blobs.push_back(b.digest + ": " + problem);
      bad_blob_ids.push_back(b.id);
    }
    return Status::Ok();
  }));
  std::set<std::string> bad_digests;
  for (const auto& c : rep.corrupt_blobs) bad_digests.insert(c.substr(0, c.find(':')));
  MLK_RETURN_IF_ERROR(each_row(
      db, "SELECT id, ns, key, manifest, digest, pinned, created, last_used FROM entries ORDER BY id", [&](sql::Stmt& st) {
        EntryRow e{st.i64(0), st.text(1), st.text(2), st.text(3), st.text(4), st.i64(5) != 0, st.i64(6), st.i64(7)};
        rep.entries_checked += 1;
        std::string name = e.ns + "/" + e.key;
        auto info = detail::decode_entry(e);
        if (!info.ok()) {
          rep.damaged_entries.push_back(name + ": " + info.status().message());
          damaged_ids.push_back(e.id);
          return Status::Ok();
        }
        std::map<std::string, BlobRef> refs;
        MLK_RETURN_IF_ERROR(each_row(db, "SELECT name, digest, size FROM refs WHERE entry_id=" + std::to_string(e.id),
                                     [&](sql::Stmt& r) {
                                       refs[r.text(0)] = BlobRef{r.text(1), r.i64(2)};
                                       return Status::Ok();
                                     }));
        if (refs != info->manifest.files) {
          rep.bad_refs.push_back(name + ": the reference index disagrees with the manifest");
          bad_ref_ids.push_back(e.id);
        }
        for (const auto& [file, ref] : info->manifest.files) {
          if (bad_digests.count(ref.digest)) continue;  // reported (and handled) with the blob
          auto b = db.prepare("SELECT size FROM blobs WHERE digest=?1");
          if (!b.ok()) return b.status();
          b->bind(1, ref.digest);
          auto r = b->step();
          if (!r.ok()) return r.status();
          if (!*r || b->i64(0) != ref.size) {
            rep.dangling_entries.push_back(name + ": file `" + file + "`: blob " + ref.digest +
                                           (*r ? " has another size" : " is missing"));
            dangling_ids.push_back(e.id);
            break;
          }
        }
        return Status::Ok();
      }));
  auto orphans = db.query_text("SELECT COUNT(*) FROM refs WHERE entry_id NOT IN (SELECT id FROM entries)");
  if (!orphans.ok()) return orphans.status();
  if (*orphans != "0") {
    rep.bad_refs.push_back(*orphans + " references belong to no entry");
    orphan_refs = true;
  }
  auto unref = db.query_text(
      "SELECT COUNT(*) FROM blobs b WHERE NOT EXISTS (SELECT 1 FROM refs r WHERE r.digest=b.digest)");
  if (!unref.ok()) return unref.status();
  rep.unreferenced_blobs = std::stoll(*unref);
  return Status::Ok();
}

Status rebuild_refs(Store::Impl& s, int64_t entry_id) {
  auto st = s.db->prepare("SELECT id, ns, key, manifest, digest, pinned, created, last_used FROM entries WHERE id=?1");
  if (!st.ok()) return st.status();
  st->bind(1, entry_id);
  auto r = st->step();
  if (!r.ok()) return r.status();
  if (!*r) return Status::Ok();
  EntryRow e{st->i64(0), st->text(1), st->text(2), st->text(3), st->text(4), st->i64(5) != 0, st->i64(6), st->i64(7)};
  auto info = detail::decode_entry(e);
  if (!info.ok()) return Status::Ok();
  MLK_RETURN_IF_ERROR(s.db->exec("DELETE FROM refs WHERE entry_id=" + std::to_string(entry_id)));
  for (const auto& [name, ref] : info->manifest.files) {
    auto ins = s.db->prepare("INSERT INTO refs(entry_id, name, digest, size) VALUES(?1, ?2, ?3, ?4)");
    if (!ins.ok()) return ins.status();
    ins->bind(1, entry_id).bind(2, name).bind(3, ref.digest).bind(4, ref.size);
    MLK_RETURN_IF_ERROR(ins->run());
  }
  return Status::Ok();
}

}  // namespace

Expected<VerifyReport> Store::verify(bool repair) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Impl& s = *impl_;
  VerifyReport rep;
  auto ic = s.db->prepare("PRAGMA integrity_check(100)");
  if (!ic.ok()) {
    if (ic.status().code() != Status::Code::kCorruption) return ic.status();
    rep.integrity_errors.push_back(ic.status().message());
  } else {
    while (true) {
      auto r = ic->step();
      if (!r.ok()) {
        if (r.status().code() != Status::Code::kCorruption) return r.status();
        rep.integrity_errors.push_back(r.status().message());
        break;
      }
      if (!*r) break;
      if (ic->text(0) != "ok") rep.integrity_errors.push_back(ic->text(0));
    }
  }
  std::vector<int64_t> bad_blobs, damaged, dangling, bad_ref_entries;
  bool orphan_refs = false;
  Status scanned = sql::read_txn(*s.db, [&] { return scan(s, rep, bad_blobs, damaged, dangling, bad_ref_entries, orphan_refs); });
  if (!scanned.ok()) {
    // A damaged file can stop the scan part way: report it, keep what was found.
    if (scanned.code() != Status::Code::kCorruption) return scanned;
    rep.integrity_errors.push_back(scanned.message());
  }
  if (!s.read_only && (!bad_blobs.empty() || !damaged.empty() || (repair && (!dangling.empty() || !bad_ref_entries.empty() || orphan_refs)))) {
    MLK_RETURN_IF_ERROR(sql::write_txn(*s.db, [&]() -> Status {
      for (int64_t id : bad_blobs) {
        auto n = detail::quarantine_blob(s, id, "verify: bytes do not match the digest");
        if (!n.ok()) return n.status();
        rep.quarantined_now += *n;
      }
      for (int64_t id : damaged) {
        auto n = detail::quarantine_entry(s, id, "verify: record does not match its hash", /*recheck=*/true);
        if (!n.ok()) return n.status();
        rep.quarantined_now += *n;
      }
      if (!repair) return Status::Ok();
      for (int64_t id : bad_ref_entries) {
        MLK_RETURN_IF_ERROR(rebuild_refs(s, id));
        rep.repaired += 1;
      }
      for (int64_t id : dangling) {
        auto n = detail::quarantine_entry(s, id, "verify --repair: a blob is missing", /*recheck=*/false);
        if (!n.ok()) return n.status();
        rep.quarantined_now += *n;
        rep.repaired += *n;
      }
      if (orphan_refs) {
        MLK_RETURN_IF_ERROR(s.db->exec("DELETE FROM refs WHERE entry_id NOT IN (SELECT id FROM entries)"));
        rep.repaired += 1;
      }
      return Status::Ok();
    }));
  }
  auto q = s.db->query_text("SELECT COUNT(*) FROM quarantine");
  if (q.ok()) rep.quarantined_total = std::stoll(*q);
  return rep;
}

namespace {

// Deletes blobs no entry references; adds what it freed to `rep`.
Status drop_unreferenced(Store::Impl& s, GcReport& rep, int64_t& total) {
  auto unheld = detail::unheld_blob_condition(s);
  if (!unheld.ok()) return unheld.status();
  return each_row(*s.db, "DELETE FROM blobs WHERE " + *unheld + " RETURNING size",
                  [&](sql::Stmt& st) {
                    rep.blobs_deleted += 1;
                    total -= st.i64(0);
                    return Status::Ok();
                  });
}

// Evicts least recently used unpinned entries (of `ns`, or all) while the
// measured total (blob bytes, or the namespace's charged bytes) is above
// `max_bytes`, in batches of one transaction each so that other writers get
// the lock in between. The first batch also deletes unreferenced blobs
// (whole-store gc only) and empties the quarantine.
Expected<GcReport> evict(Store::Impl& s, const std::optional<std::string>& ns, int64_t max_bytes) {
  MLK_RETURN_IF_ERROR(s.check_writable());
  if (max_bytes < 0) return Status::InvalidArgument("gc: the size limit must be >= 0");
  GcReport rep;
  bool first = true, done = false;
  constexpr int kBatch = 128;
  while (!done) {
    MLK_RETURN_IF_ERROR(sql::write_txn(*s.db, [&]() -> Status {
      std::string q = ns ? "SELECT (SELECT COALESCE(SUM(r.size), 0) FROM refs r JOIN entries e ON e.id=r.entry_id "
                           "WHERE e.ns=?1) + (SELECT COALESCE(SUM(" + s.record_bytes_sql + "), 0) FROM entries e "
                           "WHERE e.ns=?1)"
                         : "SELECT COALESCE(SUM(size), 0) FROM blobs";
      auto st = s.db->prepare(q);
      if (!st.ok()) return st.status();
      if (ns) st->bind(1, *ns);
      auto r = st->step();
      if (!r.ok()) return r.status();
      int64_t total = st->i64(0);
      if (first) {
        rep.bytes_before = total;
        first = false;
        if (!ns) MLK_RETURN_IF_ERROR(drop_unreferenced(s, rep, total));
        MLK_RETURN_IF_ERROR(s.db->exec("DELETE FROM quarantine"));
      }
      for (int n = 0; n < kBatch && total > max_bytes; ++n) {
        auto pick = s.db->prepare(std::string("SELECT id, ns, key FROM entries WHERE pinned=0") +
                                  (ns ? " AND ns=?1" : "") + " ORDER BY lru LIMIT 1");
        if (!pick.ok()) return pick.status();
        if (ns) pick->bind(1, *ns);
        auto p = pick->step();
        if (!p.ok()) return p.status();
        if (!*p) break;  // only pinned entries are left
        int64_t id = pick->i64(0);
        rep.evicted.push_back(pick->text(1) + "/" + pick->text(2));
        auto removed = detail::delete_entry(s, id, /*drop_orphans=*/true);
        if (!removed.ok()) return removed.status();
        rep.entries_evicted += 1;
        rep.blobs_deleted += removed->blobs_deleted;
        total -= ns ? removed->charged : removed->bytes_freed;
        MLK_RETURN_IF_ERROR(s.fault("gc:evict"));
      }
      rep.bytes_after = total;
      if (total <= max_bytes) {
        done = true;
      } else {
        auto more = s.db->prepare(std::string("SELECT 1 FROM entries WHERE pinned=0") + (ns ? " AND ns=?1" : "") + " LIMIT 1");
        if (!more.ok()) return more.status();
        if (ns) more->bind(1, *ns);
        auto m = more->step();
        if (!m.ok()) return m.status();
        if (!*m) done = true;
      }
      return Status::Ok();
    }));
  }
  rep.within_limit = rep.bytes_after <= max_bytes;
  return rep;
}

}  // namespace

Expected<GcReport> Store::gc(int64_t max_bytes) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return evict(*impl_, std::nullopt, max_bytes);
}

Expected<CollectReport> Store::collect_unreferenced(int64_t created_before) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  MLK_RETURN_IF_ERROR(impl_->check_writable());
  CollectReport rep;
  // In batches, each its own write transaction, so that a store of many
  // unreferenced blobs does not hold the write lock (every team's writes)
  // for the whole collection (review 8 of issue 49).
  // Each batch goes on from the last id examined (review 9: starting over,
  // every batch scanned the held blobs again), and deletes the unheld ones
  // among the blobs it examined.
  for (int64_t after = 0, more = 1; more > 0;) {
    more = 0;
    MLK_RETURN_IF_ERROR(sql::write_txn(*impl_->db, [&]() -> Status {
      auto unheld = detail::unheld_blob_condition(*impl_);
      if (!unheld.ok()) return unheld.status();
      // The batch: up to 2,000 blobs, and no more than 256 MiB of them
      // (review 10: freeing 2,000 of 64 MiB each held the lock long).
      auto next = impl_->db->prepare("SELECT id, size FROM blobs WHERE id>?1 AND created<?2 ORDER BY id LIMIT 2000");
      if (!next.ok()) return next.status();
      next->bind(1, after).bind(2, created_before);
      int64_t upto = -1, bytes = 0;
      while (bytes < (int64_t{256} << 20)) {
        auto r = next->step();
        if (!r.ok()) return r.status();
        if (!*r) break;
        upto = next->i64(0);
        bytes += next->i64(1);
      }
      if (upto < 0) return Status::Ok();
      auto del = impl_->db->prepare("DELETE FROM blobs WHERE id>?1 AND id<=?2 AND created<?3 AND " + *unheld +
                                    " RETURNING size");
      if (!del.ok()) return del.status();
      del->bind(1, after).bind(2, upto).bind(3, created_before);
      while (true) {
        auto d = del->step();
        if (!d.ok()) return d.status();
        if (!*d) break;
        rep.blobs_deleted += 1;
        rep.bytes_freed += del->i64(0);
      }
      after = upto;
      more = 1;
      return Status::Ok();
    }));
  }
  return rep;
}

Expected<GcReport> Store::gc_namespace(const std::string& ns, int64_t max_bytes) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  MLK_RETURN_IF_ERROR(validate_namespace(ns));
  return evict(*impl_, ns, max_bytes);
}

Expected<ExportReport> Store::export_to(const std::string& file, const std::optional<std::string>& ns) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Impl& s = *impl_;
  if (access(file.c_str(), F_OK) == 0)
    return Status::InvalidArgument(file + " already exists; remove it or choose another archive name");
  std::string tmp = file + ".tmp." + std::to_string(getpid());
  unlink(tmp.c_str());
  ExportReport rep;
  auto cleanup = [&](Status st) {
    unlink(tmp.c_str());
    unlink((tmp + "-wal").c_str());
    unlink((tmp + "-shm").c_str());
    unlink((tmp + "-journal").c_str());
    return st;
  };
  {
    StoreOptions o;
    o.busy_timeout_ms = s.opt.busy_timeout_ms;
    auto out = Store::Open(tmp, o);
    if (!out.ok()) return cleanup(out.status());
    Impl& d = *(*out)->impl_;
    // One snapshot of this store, one transaction in the archive.
    Status st = sql::read_txn(*s.db, [&]() -> Status {
      std::vector<std::pair<std::string, std::string>> keys;
      MLK_RETURN_IF_ERROR(each_row(*s.db, "SELECT ns, key FROM entries ORDER BY ns, lru", [&](sql::Stmt& r) {
        if (!ns || r.text(0) == *ns) keys.emplace_back(r.text(0), r.text(1));
        return Status::Ok();
      }));
      return sql::write_txn(*d.db, [&]() -> Status {
        for (const auto& [n, k] : keys) {
          detail::Damage damage;
          auto a = detail::read_artifact(s, n, k, &damage);
          if (!a.ok())
            return Status(a.status().code() == Status::Code::kCorruption
                              ? Status::Corruption("export: " + a.status().message() +
                                                   "; run `mlk cache verify` and export again")
                              : a.status());
          for (const auto& [name, bytes] : a->files) {
            auto dg = detail::insert_blob(d, bytes);
            if (!dg.ok()) return dg.status();
          }
          // An archive is a store others may open with --cache: what it
          // holds was made here, not there, so it is not `local` to them.
          cache::Manifest m = a->info.manifest;
          if (m.provenance.origin == kOriginLocal) m.provenance.origin = "export";
          MLK_RETURN_IF_ERROR(detail::insert_entry(d, n, k, m, a->info.pinned));
          rep.entries += 1;
        }
        auto totals = d.db->prepare("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM blobs");
        if (!totals.ok()) return totals.status();
        auto t = totals->step();
        if (!t.ok()) return t.status();
        rep.blobs = totals->i64(0);
        rep.bytes = totals->i64(1);
        return Status::Ok();
      });
    });
    if (!st.ok()) return cleanup(st);
    // A single file: leave WAL mode so no -wal/-shm files belong to the archive.
    auto mode = d.db->query_text("PRAGMA journal_mode=DELETE");
    if (!mode.ok()) return cleanup(mode.status());
  }
  // link() fails when `file` appeared meanwhile: never overwrite.
  if (link(tmp.c_str(), file.c_str()) != 0) {
    int e = errno;
    return cleanup(Status::IOError(file + ": cannot create the archive: " + std::strerror(e)));
  }
  unlink(tmp.c_str());
  return rep;
}

Expected<ImportReport> Store::import_from(const std::string& file, const std::optional<std::string>& ns) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Impl& s = *impl_;
  MLK_RETURN_IF_ERROR(s.check_writable());
  StoreOptions o;
  o.read_only = true;
  o.create_if_missing = false;
  auto in = Store::Open(file, o);
  if (!in.ok()) return Status(in.status().code() == Status::Code::kCorruption
                                  ? Status::Corruption("import: " + in.status().message())
                                  : in.status());
  Impl& src = *(*in)->impl_;
  ImportReport rep;
  Status st = sql::read_txn(*src.db, [&]() -> Status {
    std::vector<std::pair<std::string, std::string>> keys;
    MLK_RETURN_IF_ERROR(each_row(*src.db, "SELECT ns, key FROM entries ORDER BY ns, lru", [&](sql::Stmt& r) {
      if (!ns || r.text(0) == *ns) keys.emplace_back(r.text(0), r.text(1));
      return Status::Ok();
    }));
    return sql::write_txn(*s.db, [&]() -> Status {
      for (const auto& [n, k] : keys) {
        auto here = detail::find_entry(s, n, k);
        if (!here.ok()) return here.status();
        if (here->has_value()) {
          rep.skipped += 1;
          continue;
        }
        detail::Damage damage;
        auto a = detail::read_artifact(src, n, k, &damage);
        if (!a.ok())
          return Status(a.status().code() == Status::Code::kCorruption
                            ? Status::Corruption(file + " is damaged, nothing was imported: " + a.status().message())
                            : a.status());
        for (const auto& [name, bytes] : a->files) {
          auto dg = detail::insert_blob(s, bytes);
          if (!dg.ok()) return dg.status();
        }
        cache::Manifest m = a->info.manifest;
        m.provenance.origin = "import:" + file;  // not made in this store, whatever the archive says
        MLK_RETURN_IF_ERROR(detail::insert_entry(s, n, k, m, a->info.pinned));
        rep.imported += 1;
        MLK_RETURN_IF_ERROR(s.fault("import:entry"));
      }
      return Status::Ok();
    });
  });
  if (!st.ok()) return st;
  return rep;
}

}  // namespace mlk::cache
