// Store: opening, the schema, and the public blob and entry operations. The
// row-level operations they are built from are in store_rows.cpp; maintenance
// (verify, gc, export, import) is in store_maintenance.cpp.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "cache/store_internal.h"

namespace mlk::cache {

using detail::EntryRow;

namespace {

constexpr const char* kFormat = "mlk-cache";
constexpr const char* kSchemaVersion = "1";

// Blob bytes live in `blobs.data`, last, so scans of the small columns do not
// read them. `refs` is the reference index (entry -> digests) that makes
// reference counting, size accounting and gc plain SQL; the manifest text in
// `entries` (protected by `entries.digest`) is the truth it is checked against.
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS blobs(
  id INTEGER PRIMARY KEY,
  digest TEXT NOT NULL UNIQUE,
  size INTEGER NOT NULL,
  created INTEGER NOT NULL,
  data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS entries(
  id INTEGER PRIMARY KEY,
  ns TEXT NOT NULL,
  key TEXT NOT NULL,
  manifest TEXT NOT NULL,
  digest TEXT NOT NULL,
  pinned INTEGER NOT NULL DEFAULT 0,
  created INTEGER NOT NULL,
  last_used INTEGER NOT NULL,
  lru INTEGER NOT NULL,
  record_bytes INTEGER,
  UNIQUE(ns, key));
CREATE INDEX IF NOT EXISTS entries_lru ON entries(lru);
CREATE INDEX IF NOT EXISTS entries_ns_id ON entries(ns, id);
CREATE TABLE IF NOT EXISTS refs(
  entry_id INTEGER NOT NULL,
  name TEXT NOT NULL,
  digest TEXT NOT NULL,
  size INTEGER NOT NULL,
  PRIMARY KEY(entry_id, name)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS refs_digest ON refs(digest);
CREATE TABLE IF NOT EXISTS quarantine(
  id INTEGER PRIMARY KEY,
  kind TEXT NOT NULL,
  name TEXT NOT NULL,
  reason TEXT NOT NULL,
  time INTEGER NOT NULL,
  data BLOB);
INSERT OR IGNORE INTO meta(k, v) VALUES('format', 'mlk-cache'), ('schema', '1');
)sql";

Status make_parent_dirs(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos || slash == 0) return Status::Ok();
  std::string dir = path.substr(0, slash);
  for (size_t i = 1; i <= dir.size(); ++i) {
    if (i != dir.size() && dir[i] != '/') continue;
    std::string part = dir.substr(0, i);
    if (mkdir(part.c_str(), 0700) != 0 && errno != EEXIST)  // folders made here are the user's alone
      return Status::IOError(part + ": cannot create the cache directory: " + std::strerror(errno));
  }
  return Status::Ok();
}


// PRAGMA journal_mode=WAL needs a moment alone with the file; when several
// processes open a new store at once, retry through SQLITE_BUSY.
Status set_wal(sql::Db& db, int busy_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(busy_ms);
  while (true) {
    auto mode = db.query_text("PRAGMA journal_mode=WAL");
    if (mode.ok()) {
      if (*mode == "wal") return Status::Ok();
      return Status::IOError(db.path() + ": cannot switch the database to WAL mode (journal_mode is `" + *mode + "`)");
    }
    int rc = sqlite3_errcode(db.raw()) & 0xff;
    if ((rc != SQLITE_BUSY && rc != SQLITE_LOCKED) || std::chrono::steady_clock::now() > deadline) return mode.status();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

Status check_schema(sql::Db& db) {
  auto n = db.query_text("SELECT count(*) FROM sqlite_master WHERE type='table' AND name='meta'");
  if (!n.ok()) return n.status();
  if (*n == "0")
    return Status::InvalidArgument(db.path() + " is an SQLite database but not an mlk cache store (it has no `meta` table)");
  auto format = db.query_text("SELECT v FROM meta WHERE k='format'");
  if (!format.ok()) return format.status();
  if (*format != kFormat)
    return Status::InvalidArgument(db.path() + " is an SQLite database but not an mlk cache store (format `" + *format + "`)");
  auto version = db.query_text("SELECT v FROM meta WHERE k='schema'");
  if (!version.ok()) return version.status();
  if (*version != kSchemaVersion)
    return Status::Unsupported(db.path() + ": cache schema version " + *version + ", this mlk reads version " +
                               kSchemaVersion + "; use a matching mlk or start a new cache with --cache PATH");
  return Status::Ok();
}

}  // namespace

// A store must lie where no other user can put files in its place (reviews
// 10 and 11 of issue 49: a store planted under the name a user's --cache
// gives was opened, and its entries loaded and signed as made there). Every
// folder on the way to it (links resolved) must be this user's or root's,
// and none writable by others unless sticky (/tmp); in a sticky folder the
// store and SQLite's files beside it, where present, must be plain files of
// this user. Folders not made yet are made private by make_parent_dirs.
Status check_store_place(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  auto resolved = [](const std::string& d) {
    char* r = ::realpath(d.c_str(), nullptr);
    std::string out = r ? r : "";
    std::free(r);
    return out;
  };
  std::string real;  // the deepest folder on the way that exists, links resolved
  for (std::string d = dir; (real = resolved(d)).empty();) {
    const size_t up = d.find_last_of('/');
    d = up == std::string::npos ? "." : up == 0 ? "/" : d.substr(0, up);
  }
  auto refuse = [&](const std::string& why) {
    return Status::InvalidArgument(path + ": " + why + "; keep the store in a folder of your own");
  };
  std::vector<std::string> folders = {"/"};
  for (size_t at = real.find('/', 1); at != std::string::npos; at = real.find('/', at + 1)) folders.push_back(real.substr(0, at));
  if (real != "/") folders.push_back(real);
  const uid_t me = ::geteuid();
  bool shared = false;  // the deepest folder is writable by others (and sticky)
  for (const std::string& f : folders) {
    struct stat ds {};
    if (::stat(f.c_str(), &ds) != 0) return Status::IOError(path + ": cannot read the folder " + f + ": " + std::strerror(errno));
    // Root, the administrator, may keep a store in any user's folder.
    if (ds.st_uid != me && ds.st_uid != 0 && me != 0)
      return refuse("the folder " + f + " belongs to user " + std::to_string(ds.st_uid) +
                    ", who could put files in the store's place");
    shared = (ds.st_mode & (S_IWGRP | S_IWOTH)) != 0;
    if (shared && (ds.st_mode & S_ISVTX) == 0)
      return refuse("the folder " + f + " is writable by other users and not sticky, so they could replace the store "
                    "or its files");
  }
  if (!shared || real != resolved(dir)) return Status::Ok();
  for (const char* side : {"", "-wal", "-shm", "-journal"}) {
    const std::string f = path + side;
    struct stat fs {};
    if (::lstat(f.c_str(), &fs) != 0) continue;
    if (!S_ISREG(fs.st_mode))
      return refuse(f + " is not a plain file (a link or something else stands there in the shared folder " + dir + ")");
    if (fs.st_uid != me)
      return refuse(f + " belongs to user " + std::to_string(fs.st_uid) + ", not to this one: in the shared folder " +
                    dir + " another user made it");
  }
  return Status::Ok();
}

Status Store::Impl::check_writable() const {
  if (read_only)
    return Status::IOError(path +
                           ": the store is read-only (the file is not writable, or it was opened read-only); "
                           "nothing was written");
  return Status::Ok();
}


Status validate_namespace(const std::string& ns) {
  bool ok = !ns.empty() && ns.size() <= 64 && ns[0] != '.' && ns[0] != '-';
  for (char c : ns)
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-');
  if (!ok)
    return Status::InvalidArgument("namespace `" + ns +
                                   "` must be 1-64 characters from [A-Za-z0-9._-], not starting with `.` or `-`");
  return Status::Ok();
}

Status validate_key(const std::string& key) {
  bool ok = !key.empty() && key.size() <= 256;
  for (char c : key) ok = ok && c > 0x20 && c < 0x7f;
  if (!ok) return Status::InvalidArgument("key `" + key + "` must be 1-256 printable ASCII characters without spaces");
  return Status::Ok();
}

Store::Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Store::~Store() = default;
const std::string& Store::path() const { return impl_->path; }
bool Store::read_only() const { return impl_->read_only; }

bool Store::durable() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto v = impl_->db->query_text("PRAGMA synchronous");
  return v.ok() && (*v == "2" || *v == "3");
}

Expected<std::unique_ptr<Store>> Store::Open(const std::string& path, StoreOptions opt) {
  if (path.empty()) return Status::InvalidArgument("the cache store path is empty");
  MLK_RETURN_IF_ERROR(check_store_place(path));
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) return Status::IOError(path + ": cannot open the cache store: " + std::strerror(errno));
    if (!opt.create_if_missing || opt.read_only)
      return Status::NotFound(path + ": no cache store here (nothing has been cached yet, or a wrong --cache PATH)");
    MLK_RETURN_IF_ERROR(make_parent_dirs(path));
    // A new store is private to its owner (0600; SQLite gives its -wal and
    // -shm files the same mode): it holds other teams' artifacts and, for
    // `mlk serve`, the token table.
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) return Status::IOError(path + ": cannot create the cache store: " + std::strerror(errno));
    if (fd >= 0) ::close(fd);
    else MLK_RETURN_IF_ERROR(check_store_place(path));  // made meanwhile: by whom?
  } else if (S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument(path + " is a directory; the cache store is a file, e.g. " + path + "/cache.db");
  }
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->opt = opt;
  int flags = opt.read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  auto db = sql::Db::Open(path, flags, opt.busy_timeout_ms);
  if (!db.ok()) return db.status();
  impl->db = std::move(*db);
  sql::Db& d = *impl->db;
  // A file we may not write (permissions) is opened read-only by SQLite.
  impl->read_only = opt.read_only || sqlite3_db_readonly(d.raw(), "main") == 1;
  if (!impl->read_only) MLK_RETURN_IF_ERROR(set_wal(d, opt.busy_timeout_ms));
  MLK_RETURN_IF_ERROR(d.exec(opt.durable ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL"));
  if (opt.max_page_count > 0) {
    auto r = d.query_text("PRAGMA max_page_count=" + std::to_string(opt.max_page_count));
    if (!r.ok()) return r.status();
  }
  if (impl->read_only) {
    MLK_RETURN_IF_ERROR(d.exec("PRAGMA query_only=1"));
  } else {
    auto n = d.query_text("SELECT count(*) FROM sqlite_master WHERE type='table' AND name='meta'");
    if (!n.ok()) return n.status();
    auto tables = d.query_text("SELECT count(*) FROM sqlite_master");
    if (!tables.ok()) return tables.status();
    // Only a new (empty) database gets the schema: never add tables to someone else's.
    if (*n == "0" && *tables == "0") MLK_RETURN_IF_ERROR(sql::write_txn(d, [&] { return d.exec(kSchema); }));
  }
  MLK_RETURN_IF_ERROR(check_schema(d));
  // entries.record_bytes came after schema 1's first stores: added to those
  // (a column, NULL in their rows), or, read-only, read around.
  auto has = d.query_text("SELECT count(*) FROM pragma_table_info('entries') WHERE name='record_bytes'");
  if (!has.ok()) return has.status();
  if (*has == "0" && !impl->read_only) {
    MLK_RETURN_IF_ERROR(sql::write_txn(d, [&]() -> Status {
      // Checked again inside the write lock: another process may have added it meanwhile.
      auto again = d.query_text("SELECT count(*) FROM pragma_table_info('entries') WHERE name='record_bytes'");
      if (!again.ok()) return again.status();
      return *again == "0" ? d.exec("ALTER TABLE entries ADD COLUMN record_bytes INTEGER") : Status::Ok();
    }));
  } else if (*has == "0") {
    impl->record_bytes_sql = "length(CAST(e.manifest AS BLOB))";
  }
  return std::unique_ptr<Store>(new Store(std::move(impl)));
}

Expected<std::string> Store::put_blob(std::string_view bytes) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  MLK_RETURN_IF_ERROR(impl_->check_writable());
  std::string digest;
  MLK_RETURN_IF_ERROR(sql::write_txn(*impl_->db, [&]() -> Status {
    auto d = detail::insert_blob(*impl_, bytes);
    if (!d.ok()) return d.status();
    digest = *d;
    return Status::Ok();
  }));
  return digest;
}

Expected<std::string> Store::get_blob(const std::string& digest) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!is_sha256_hex(digest))
    return Status::InvalidArgument("`" + digest + "` is not a sha256 digest (64 lower-case hex characters)");
  std::string data;
  detail::Damage damage;
  Status s = sql::read_txn(*impl_->db, [&]() -> Status {
    auto b = detail::find_blob(*impl_, digest);
    if (!b.ok()) return b.status();
    if (!b->has_value()) return Status::NotFound("no blob " + digest + " in " + impl_->path);
    std::string problem = detail::blob_problem(**b, digest);
    if (!problem.empty()) {
      damage = {detail::Damage::kBlob, (*b)->id, "blob " + digest + ": " + problem};
      return Status::Corruption("blob " + digest + ": " + problem);
    }
    data = std::move((*b)->data);
    return Status::Ok();
  });
  if (!s.ok()) return detail::quarantine_damage(*impl_, damage, s);
  return data;
}

Expected<int64_t> Store::blob_size(const std::string& digest) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!is_sha256_hex(digest))
    return Status::InvalidArgument("`" + digest + "` is not a sha256 digest (64 lower-case hex characters)");
  auto st = impl_->db->prepare("SELECT size FROM blobs WHERE digest=?1");
  if (!st.ok()) return st.status();
  st->bind(1, digest);
  auto row = st->step();
  if (!row.ok()) return row.status();
  if (!*row) return Status::NotFound("no blob " + digest + " in " + impl_->path);
  return st->i64(0);
}

Expected<std::string> Store::read_blob_range(const std::string& digest, int64_t offset, int64_t length) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!is_sha256_hex(digest))
    return Status::InvalidArgument("`" + digest + "` is not a sha256 digest (64 lower-case hex characters)");
  std::string out;
  MLK_RETURN_IF_ERROR(sql::read_txn(*impl_->db, [&]() -> Status {
    auto st = impl_->db->prepare("SELECT id, size FROM blobs WHERE digest=?1");
    if (!st.ok()) return st.status();
    st->bind(1, digest);
    auto row = st->step();
    if (!row.ok()) return row.status();
    if (!*row) return Status::NotFound("no blob " + digest + " in " + impl_->path);
    const int64_t id = st->i64(0), size = st->i64(1);
    if (offset < 0 || length < 0 || (offset >= size && length > 0))
      return Status::InvalidArgument("bytes from " + std::to_string(offset) + " are past blob " + digest + "'s " +
                                     std::to_string(size));
    const int64_t n = std::min(length, size - offset);
    if (n <= 0) return Status::Ok();
    // Incremental blob I/O: only the pages of the range are read.
    sqlite3_blob* h = nullptr;
    if (sqlite3_blob_open(impl_->db->raw(), "main", "blobs", "data", id, 0, &h) != SQLITE_OK) {
      sqlite3_blob_close(h);
      return Status::IOError("blob " + digest + ": " + sqlite3_errmsg(impl_->db->raw()));
    }
    out.resize(static_cast<size_t>(n));
    int rc = sqlite3_blob_bytes(h) == size ? sqlite3_blob_read(h, out.data(), static_cast<int>(n), static_cast<int>(offset))
                                           : SQLITE_CORRUPT;
    sqlite3_blob_close(h);
    if (rc != SQLITE_OK) return Status::Corruption("blob " + digest + ": its stored bytes do not have its recorded size");
    return Status::Ok();
  }));
  return out;
}

Status Store::put_entry(const std::string& ns, const std::string& key, const Manifest& manifest) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  MLK_RETURN_IF_ERROR(impl_->check_writable());
  return sql::write_txn(*impl_->db, [&] { return detail::insert_entry(*impl_, ns, key, manifest, std::nullopt); });
}

Status Store::put_entry(const std::string& ns, const std::string& key, const std::string& meta_json,
                        const Provenance& provenance, const std::map<std::string, std::string>& files) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  MLK_RETURN_IF_ERROR(impl_->check_writable());
  // Validate before writing anything, so a bad request costs no I/O.
  MLK_RETURN_IF_ERROR(validate_namespace(ns));
  MLK_RETURN_IF_ERROR(validate_key(key));
  auto meta = canonical_json_object(meta_json);
  if (!meta.ok()) return meta.status();
  return sql::write_txn(*impl_->db, [&]() -> Status {
    Manifest m;
    m.meta_json = *meta;
    m.provenance = provenance;
    for (const auto& [name, bytes] : files) {
      auto d = detail::insert_blob(*impl_, bytes);
      if (!d.ok()) return d.status();
      m.files[name] = BlobRef{*d, static_cast<int64_t>(bytes.size())};
    }
    MLK_RETURN_IF_ERROR(impl_->fault("put_entry:blobs"));
    return detail::insert_entry(*impl_, ns, key, std::move(m), std::nullopt);
  });
}

Expected<Artifact> Store::get_entry(const std::string& ns, const std::string& key) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Artifact a;
  detail::Damage damage;
  Status s = sql::read_txn(*impl_->db, [&]() -> Status {
    auto r = detail::read_artifact(*impl_, ns, key, &damage);
    if (!r.ok()) return r.status();
    a = std::move(*r);
    return Status::Ok();
  });
  if (!s.ok()) return detail::quarantine_damage(*impl_, damage, s);
  if (int64_t now = touch_locked(ns, key)) a.info.last_used = now;
  return a;
}

// Caller holds impl_->mu. The time it marked, or 0 when it did not.
int64_t Store::touch_locked(const std::string& ns, const std::string& key) {
  if (impl_->read_only) return 0;
  // Recency is best effort: a store busy for more than 100 ms skips it.
  sqlite3_busy_timeout(impl_->db->raw(), 100);
  int64_t now = detail::now_unix();
  Status t = sql::write_txn(*impl_->db, [&]() -> Status {
    auto u = impl_->db->prepare(
        "UPDATE entries SET lru=(SELECT COALESCE(MAX(lru), 0) + 1 FROM entries), last_used=?1 "
        "WHERE ns=?2 AND key=?3");
    if (!u.ok()) return u.status();
    u->bind(1, now).bind(2, ns).bind(3, key);
    return u->run();
  });
  sqlite3_busy_timeout(impl_->db->raw(), impl_->opt.busy_timeout_ms);
  return t.ok() ? now : 0;
}

Status Store::touch_entry(const std::string& ns, const std::string& key) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  touch_locked(ns, key);
  return Status::Ok();
}

Expected<EntryInfo> Store::show_entry(const std::string& ns, const std::string& key) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto row = detail::find_entry(*impl_, ns, key);
  if (!row.ok()) return row.status();
  if (!row->has_value()) return Status::NotFound("no entry `" + key + "` in namespace `" + ns + "`");
  return detail::decode_entry(**row);
}

Expected<std::vector<EntryInfo>> Store::list(const std::optional<std::string>& ns) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<EntryInfo> out;
  MLK_RETURN_IF_ERROR(sql::read_txn(*impl_->db, [&]() -> Status {
    auto st = impl_->db->prepare(
        std::string("SELECT id, ns, key, manifest, digest, pinned, created, last_used FROM entries") +
        (ns ? " WHERE ns=?1" : "") + " ORDER BY ns, lru DESC");
    if (!st.ok()) return st.status();
    if (ns) st->bind(1, *ns);
    while (true) {
      auto r = st->step();
      if (!r.ok()) return r.status();
      if (!*r) break;
      EntryRow e{st->i64(0), st->text(1), st->text(2), st->text(3), st->text(4), st->i64(5) != 0, st->i64(6), st->i64(7)};
      out.push_back(detail::listed_entry(e));
    }
    return Status::Ok();
  }));
  return out;
}

Expected<EntryPage> Store::list_page(const std::string& ns, const std::optional<ListCursor>& after, int max_rows) {
  if (max_rows < 1 || max_rows > 1000) return Status::InvalidArgument("list_page: max_rows must be 1-1000");
  std::lock_guard<std::mutex> lock(impl_->mu);
  EntryPage page;
  auto st = impl_->db->prepare(
      std::string("SELECT id, ns, key, manifest, digest, pinned, created, last_used FROM entries WHERE ns=?1") +
      (after ? " AND id < ?3" : "") + " ORDER BY id DESC LIMIT ?2");
  if (!st.ok()) return st.status();
  st->bind(1, ns).bind(2, int64_t{max_rows});
  if (after) st->bind(3, after->id);
  while (true) {
    auto r = st->step();
    if (!r.ok()) return r.status();
    if (!*r) break;
    EntryRow e{st->i64(0), st->text(1), st->text(2), st->text(3), st->text(4), st->i64(5) != 0, st->i64(6), st->i64(7)};
    page.entries.push_back(detail::listed_entry(e));
    page.entries.back().at = ListCursor{e.id};
  }
  if (static_cast<int>(page.entries.size()) == max_rows) page.next = page.entries.back().at;
  return page;
}

Expected<std::vector<std::string>> Store::keys_with_prefix(const std::string& ns, const std::string& prefix, int limit) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto st = impl_->db->prepare(
      "SELECT key FROM entries WHERE ns=?1 AND substr(key, 1, length(?2))=?2 ORDER BY key LIMIT ?3");
  if (!st.ok()) return st.status();
  st->bind(1, ns).bind(2, prefix).bind(3, int64_t{limit});
  std::vector<std::string> out;
  while (true) {
    auto r = st->step();
    if (!r.ok()) return r.status();
    if (!*r) break;
    out.push_back(st->text(0));
  }
  return out;
}

namespace {

Status set_pin(Store::Impl& s, const std::string& ns, const std::string& key, bool pinned) {
  MLK_RETURN_IF_ERROR(s.check_writable());
  return sql::write_txn(*s.db, [&]() -> Status {
    auto u = s.db->prepare("UPDATE entries SET pinned=?1 WHERE ns=?2 AND key=?3");
    if (!u.ok()) return u.status();
    u->bind(1, int64_t{pinned}).bind(2, ns).bind(3, key);
    MLK_RETURN_IF_ERROR(u->run());
    if (sqlite3_changes(s.db->raw()) == 0) return Status::NotFound("no entry `" + key + "` in namespace `" + ns + "`");
    return Status::Ok();
  });
}

}  // namespace

Status Store::pin(const std::string& ns, const std::string& key) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return set_pin(*impl_, ns, key, true);
}

Status Store::unpin(const std::string& ns, const std::string& key) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return set_pin(*impl_, ns, key, false);
}

Status Store::rm(const std::string& ns, const std::string& key) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  MLK_RETURN_IF_ERROR(impl_->check_writable());
  return sql::write_txn(*impl_->db, [&]() -> Status {
    auto row = detail::find_entry(*impl_, ns, key);
    if (!row.ok()) return row.status();
    if (!row->has_value()) return Status::NotFound("no entry `" + key + "` in namespace `" + ns + "`");
    return detail::delete_entry(*impl_, (*row)->id, /*drop_orphans=*/true).status();
  });
}

Expected<std::vector<NamespaceUsage>> Store::usage() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<NamespaceUsage> out;
  MLK_RETURN_IF_ERROR(sql::read_txn(*impl_->db, [&]() -> Status {
    auto st = impl_->db->prepare(
        "SELECT e.ns, COUNT(*), COALESCE(SUM((SELECT COALESCE(SUM(r.size), 0) FROM refs r WHERE r.entry_id=e.id)), 0), "
        "COALESCE(SUM(" + impl_->record_bytes_sql + "), 0) FROM entries e GROUP BY e.ns ORDER BY e.ns");
    if (!st.ok()) return st.status();
    while (true) {
      auto r = st->step();
      if (!r.ok()) return r.status();
      if (!*r) break;
      out.push_back(NamespaceUsage{st->text(0), st->i64(1), st->i64(2), st->i64(3)});
    }
    return Status::Ok();
  }));
  return out;
}

Expected<int64_t> Store::namespace_bytes(const std::string& ns) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto st = impl_->db->prepare(
      "SELECT (SELECT COALESCE(SUM(r.size), 0) FROM refs r JOIN entries e ON e.id=r.entry_id WHERE e.ns=?1) + "
      "(SELECT COALESCE(SUM(" + impl_->record_bytes_sql + "), 0) FROM entries e WHERE e.ns=?1)");
  if (!st.ok()) return st.status();
  st->bind(1, ns);
  auto r = st->step();
  if (!r.ok()) return r.status();
  return st->i64(0);
}

Expected<StoreStats> Store::stats() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  StoreStats out;
  MLK_RETURN_IF_ERROR(sql::read_txn(*impl_->db, [&]() -> Status {
    auto st = impl_->db->prepare(
        "SELECT (SELECT COUNT(*) FROM entries), (SELECT COUNT(*) FROM blobs), "
        "(SELECT COALESCE(SUM(size), 0) FROM blobs), "
        "(SELECT COUNT(*) FROM blobs b WHERE NOT EXISTS (SELECT 1 FROM refs r WHERE r.digest=b.digest)), "
        "(SELECT COUNT(*) FROM quarantine)");
    if (!st.ok()) return st.status();
    auto r = st->step();
    if (!r.ok()) return r.status();
    out = StoreStats{st->i64(0), st->i64(1), st->i64(2), st->i64(3), st->i64(4)};
    return Status::Ok();
  }));
  return out;
}

Status Store::corrupt_blob_for_testing(const std::string& digest, int64_t offset) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return sql::write_txn(*impl_->db, [&]() -> Status {
    auto b = detail::find_blob(*impl_, digest);
    if (!b.ok()) return b.status();
    if (!b->has_value()) return Status::NotFound("no blob " + digest);
    std::string data = (*b)->data;
    if (offset < 0 || offset >= static_cast<int64_t>(data.size()))
      return Status::InvalidArgument("offset " + std::to_string(offset) + " is outside the blob");
    data[offset] = static_cast<char>(~data[offset]);
    auto u = impl_->db->prepare("UPDATE blobs SET data=?1 WHERE id=?2");
    if (!u.ok()) return u.status();
    u->bind_blob(1, data).bind(2, (*b)->id);
    return u->run();
  });
}

}  // namespace mlk::cache
