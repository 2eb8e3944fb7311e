#include "service/staging.h"

#include <initializer_list>
#include <string_view>

namespace mlk::service {

std::optional<int64_t> QuotaPolicy::limit_for(const std::string& ns) const {
  auto it = limits.find(ns);
  if (it != limits.end()) return it->second;
  if (default_limit > 0) return default_limit;
  return std::nullopt;
}

Status stage_blob(cache::sql::Db& db, const std::string& ns, const std::string& digest, int64_t size, int64_t now) {
  auto st = db.prepare(
      "INSERT INTO service_staged(ns, digest, size, time) VALUES(?1, ?2, ?3, ?4) "
      "ON CONFLICT(ns, digest) DO UPDATE SET time=excluded.time");
  if (!st.ok()) return st.status();
  st->bind(1, ns).bind(2, digest).bind(3, size).bind(4, now);
  return st->run();
}

namespace {

// " AND NOT EXISTS (...)": a staged row that an unfinished job of ?1 holds as
// its setup; "" in a store without the jobs table (no job holds anything).
Expected<std::string> unless_a_job_holds_it(cache::sql::Db& db) {
  auto jobs = db.query_text("SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name='jobs_queue'");
  if (!jobs.ok()) return jobs.status();
  return std::string(*jobs == "0" ? ""
                                  : " AND NOT EXISTS (SELECT 1 FROM jobs_queue q WHERE q.ns=?1 AND "
                                    "q.setup=service_staged.digest AND q.state IN ('queued', 'running'))");
}

}  // namespace

Status unstage(cache::sql::Db& db, const std::string& ns, const std::set<std::string>& digests) {
  if (digests.empty()) return Status::Ok();
  // A setup an unfinished job holds stays staged (charged): an entry naming
  // it may be deleted while the job still holds the blob (review 7 of issue 49).
  auto held = unless_a_job_holds_it(db);
  if (!held.ok()) return held.status();
  return cache::sql::write_txn(db, [&]() -> Status {
    for (const auto& d : digests) {
      auto st = db.prepare("DELETE FROM service_staged WHERE ns=?1 AND digest=?2" + *held);
      if (!st.ok()) return st.status();
      st->bind(1, ns).bind(2, d);
      MLK_RETURN_IF_ERROR(st->run());
    }
    return Status::Ok();
  });
}

Status expire_staged(cache::sql::Db& db, const std::string& ns, int64_t before) {
  // A setup an unfinished job of the namespace holds stays staged, and so
  // charged, as long as the job (review 5 of issue 49: it was kept stored but
  // no longer charged).
  auto held = unless_a_job_holds_it(db);
  if (!held.ok()) return held.status();
  auto st = db.prepare("DELETE FROM service_staged WHERE ns=?1 AND time<?2" + *held);
  if (!st.ok()) return st.status();
  st->bind(1, ns).bind(2, before);
  return st->run();
}

Expected<int64_t> staged_bytes(cache::sql::Db& db, const std::string& ns, const std::set<std::string>& excluding) {
  auto st = db.prepare("SELECT digest, size FROM service_staged WHERE ns=?1");
  if (!st.ok()) return st.status();
  st->bind(1, ns);
  int64_t total = 0;
  while (true) {
    auto r = st->step();
    if (!r.ok()) return r.status();
    if (!*r) break;
    if (!excluding.count(st->text(0))) total += st->i64(1);
  }
  return total;
}

Expected<std::map<std::string, int64_t>> staged_by_namespace(cache::sql::Db& db) {
  auto st = db.prepare("SELECT ns, SUM(size) FROM service_staged GROUP BY ns ORDER BY ns");
  if (!st.ok()) return st.status();
  std::map<std::string, int64_t> out;
  while (true) {
    auto r = st->step();
    if (!r.ok()) return r.status();
    if (!*r) break;
    out[st->text(0)] = st->i64(1);
  }
  return out;
}

namespace {

// Whether `sql` (a SELECT EXISTS) holds, its parameters ?1, ?2, .. bound to `params`.
Expected<bool> exists(cache::sql::Db& db, const char* sql, std::initializer_list<std::string_view> params) {
  auto st = db.prepare(sql);
  if (!st.ok()) return st.status();
  int i = 0;
  for (std::string_view p : params) st->bind(++i, p);
  auto r = st->step();
  if (!r.ok()) return r.status();
  return *r && st->i64(0) != 0;
}

}  // namespace

Expected<bool> blob_staged(cache::sql::Db& db, const std::string& ns, const std::string& digest) {
  return exists(db, "SELECT EXISTS(SELECT 1 FROM service_staged WHERE ns=?1 AND digest=?2)", {ns, digest});
}

Expected<bool> blob_referenced(cache::sql::Db& db, const std::string& ns, const std::string& digest) {
  return exists(db,
                "SELECT EXISTS(SELECT 1 FROM refs r JOIN entries e ON e.id=r.entry_id WHERE e.ns=?1 AND r.digest=?2)",
                {ns, digest});
}

Expected<bool> blob_held(cache::sql::Db& db, const std::string& digest) {
  return exists(db, "SELECT EXISTS(SELECT 1 FROM refs WHERE digest=?1)", {digest});
}

Expected<bool> blob_visible(cache::sql::Db& db, const std::string& ns, const std::string& digest) {
  auto staged = blob_staged(db, ns, digest);
  if (!staged.ok() || *staged) return staged;
  return blob_referenced(db, ns, digest);
}

}  // namespace mlk::service
