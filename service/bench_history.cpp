#include "service/bench_history.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>

#include "base/time.h"
#include "base/json.h"

namespace mlk::service {

namespace {

using nlohmann::json;
namespace sql = cache::sql;

const char* kSchema = R"(
CREATE TABLE IF NOT EXISTS bench_results (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  ns TEXT NOT NULL, kernel TEXT NOT NULL, target TEXT NOT NULL,
  created TEXT NOT NULL, received TEXT NOT NULL,
  machine TEXT NOT NULL, versions TEXT NOT NULL,
  cache_key TEXT NOT NULL, variant TEXT NOT NULL,
  median_ms TEXT NOT NULL, entry TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS bench_reports (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  ns TEXT NOT NULL, machine TEXT NOT NULL, versions TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS bench_reports_ns ON bench_reports (ns);
CREATE INDEX IF NOT EXISTS bench_results_kernel ON bench_results (ns, kernel, id);
CREATE TABLE IF NOT EXISTS bench_usage (ns TEXT PRIMARY KEY, bytes INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS bench_counted (tbl TEXT PRIMARY KEY, last_id INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS bench_baselines (
  ns TEXT NOT NULL, name TEXT NOT NULL, kernel TEXT NOT NULL, result_id INTEGER NOT NULL,
  PRIMARY KEY (ns, name, kernel));
)";

constexpr size_t kMaxKernels = 10000;  // per report
// What one stored row may hold, so that a row read whole stays small: a
// kernel's result (with its samples), each name in it, and a report's
// machine and versions records.
constexpr size_t kMaxKernelBytes = 256 << 10, kMaxSamples = 10000, kMaxNameBytes = 1024, kMaxRecordBytes = 64 << 10;
// The values one report may hold (each a node once parsed: about 160 MB at
// most, where 64 MiB of `[{},...]` would have been 2 GiB).
constexpr int64_t kMaxReportValues = 2000000;
// The dashboard's list: at most this many kernels and artifacts timed.
constexpr int kMaxSummaries = 500, kMaxSummaryKeys = 20000;
constexpr int64_t kRowBytes = 64;      // a kernel row's bookkeeping, charged besides its text

// Rows written before reports were stored once keep their own machine and
// versions; newer rows keep '' there and point at their report.
const char* kMachine = "COALESCE(p.machine, r.machine)";
const char* kVersions = "COALESCE(p.versions, r.versions)";

// The bytes (not the characters: text is UTF-8) of a column, for the quota.
std::string bytes_of(const char* column) { return std::string("length(CAST(IFNULL(") + column + ", '') AS BLOB))"; }

// What a namespace's rows and reports are charged (bytes()), counted over
// the rows past those bench_usage already counts (bench_counted): how the
// totals catch up with a database made before them, or rows an older mlk
// wrote without counting them.
std::string uncounted_usage() {
  const std::string after = "(SELECT COALESCE(MAX(last_id), 0) FROM bench_counted WHERE tbl = ";
  return "SELECT ns, SUM(n) FROM (SELECT ns, " + bytes_of("entry") + " + " + bytes_of("machine") + " + " +
         bytes_of("versions") + " + " + bytes_of("kernel") + " + " + bytes_of("target") + " + " +
         bytes_of("cache_key") + " + " + bytes_of("variant") + " + " + bytes_of("median_ms") + " + " +
         bytes_of("created") + " AS n FROM bench_results WHERE id > " + after + "'results') UNION ALL SELECT ns, " +
         bytes_of("machine") + " + " + bytes_of("versions") + " AS n FROM bench_reports WHERE id > " + after +
         "'reports')) GROUP BY ns";
}

// Marks every row up to now as counted in bench_usage. Inside a write transaction.
Status mark_counted(sql::Db& db) {
  return db.exec(
      "INSERT OR REPLACE INTO bench_counted (tbl, last_id) VALUES "
      "('results', (SELECT COALESCE(MAX(id), 0) FROM bench_results)), "
      "('reports', (SELECT COALESCE(MAX(id), 0) FROM bench_reports))");
}

// Adds bench_results.report_id to a database made before it, and brings
// bench_usage (each namespace's running total) up to the rows.
Status migrate(sql::Db& db) {
  auto cols = db.prepare("SELECT 1 FROM pragma_table_info('bench_results') WHERE name = 'report_id'");
  if (!cols.ok()) return cols.status();
  auto has = cols->step();
  if (!has.ok()) return has.status();
  if (!*has) MLK_RETURN_IF_ERROR(db.exec("ALTER TABLE bench_results ADD COLUMN report_id INTEGER"));
  return sql::write_txn(db, [&]() -> Status {
    MLK_RETURN_IF_ERROR(db.exec("INSERT INTO bench_usage (ns, bytes) " + uncounted_usage() +
                                " ON CONFLICT(ns) DO UPDATE SET bytes = bytes + excluded.bytes"));
    return mark_counted(db);
  });
}

// What a stored JSON text costs once parsed, at most: its bytes and, for
// each value it may hold (an object or array opened, an element after a
// comma), 64 bytes of tree. `[{},{},...]` is 3 bytes a value but 80 parsed,
// so answers are bounded by this, not by their text.
int64_t parsed_weight(const std::string& text) {
  int64_t values = 0;
  for (char ch : text) values += ch == '{' || ch == '[' || ch == ',';
  return static_cast<int64_t>(text.size()) + 64 * values;
}

Status bad(const std::string& what) { return Status::InvalidArgument("the body is no mlk bench report: " + what); }

}  // namespace

Expected<std::unique_ptr<BenchHistory>> BenchHistory::Open(const std::string& path) {
  // A new database is private to its owner (0600; SQLite gives its -wal and
  // -shm files the same mode): it holds every team's results.
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0) ::close(fd);
  for (const char* tail : {"", "-wal", "-shm"})  // made before this rule: made private now
    (void)::chmod((path + tail).c_str(), 0600);
  auto db = sql::Db::Open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, 10000);
  if (!db.ok()) return db.status();
  if (Status s = (*db)->exec(kSchema); !s.ok()) return s;
  if (Status s = (*db)->exec("PRAGMA journal_mode=WAL"); !s.ok()) return s;
  // An acknowledged report survives a power loss, as in the store and the jobs table.
  if (Status s = (*db)->exec("PRAGMA synchronous=FULL"); !s.ok()) return s;
  if (Status s = migrate(**db); !s.ok()) return s;
  auto reader = sql::Db::Open(path, SQLITE_OPEN_READWRITE, 10000);  // it only reads
  if (!reader.ok()) return reader.status();
  auto usage = sql::Db::Open(path, SQLITE_OPEN_READWRITE, 10000);  // likewise
  if (!usage.ok()) return usage.status();
  return std::unique_ptr<BenchHistory>(
      new BenchHistory(std::move(db).value(), std::move(reader).value(), std::move(usage).value()));
}

Expected<int> BenchHistory::add(const std::string& ns, const std::string& report, const std::string& baseline_set) {
  std::string why;
  json doc = parse_json(report, &why, kMaxJsonDepth, kMaxReportValues);
  if (doc.is_discarded()) return bad("not valid JSON (" + why + ")");
  if (!doc.is_object()) return bad("not a JSON object");
  if (!doc.contains("format") || doc["format"] != "mlk-bench") return bad("`format` is not \"mlk-bench\"");
  if (!doc.contains("kernels") || !doc["kernels"].is_array()) return bad("no `kernels` list");
  if (doc["kernels"].size() > kMaxKernels)
    return bad(std::to_string(doc["kernels"].size()) + " kernels; a report holds at most " + std::to_string(kMaxKernels));
  if (doc.contains("created") && (!doc["created"].is_string() || doc["created"].get_ref<const std::string&>().size() > 64))
    return bad("`created` is not a string of at most 64 characters (an ISO time)");
  for (const char* f : {"machine", "versions"})
    if (doc.contains(f) && !doc[f].is_object()) return bad(std::string("`") + f + "` is not an object");
  const json machine = doc.value("machine", json::object()), versions = doc.value("versions", json::object());
  for (const auto& [f, v] : {std::pair<const char*, const json*>{"machine", &machine}, {"versions", &versions}})
    if (dump_json(*v).size() > kMaxRecordBytes)
      return bad(std::string("`") + f + "` is over " + std::to_string(kMaxRecordBytes) + " bytes");
  for (size_t i = 0; i < doc["kernels"].size(); ++i) {
    const json& k = doc["kernels"][i];
    const std::string at = "kernels[" + std::to_string(i) + "]";
    for (const char* f : {"id", "target", "cache_key", "variant"}) {
      if (!k.is_object() || !k.contains(f) || !k[f].is_string()) return bad(at + ": missing string field `" + f + "`");
      if (k[f].get_ref<const std::string&>().size() > kMaxNameBytes)
        return bad(at + ": `" + f + "` is over " + std::to_string(kMaxNameBytes) + " bytes");
    }
    // Every row is read whole by a history query and parsed by the dashboard: bounded when stored.
    if (dump_json(k).size() > kMaxKernelBytes)
      return bad(at + " is over " + std::to_string(kMaxKernelBytes) + " bytes (at most " +
                 std::to_string(kMaxSamples) + " samples)");
    if (k.contains("mlk") && k["mlk"].is_object())
      for (const char* f : {"samples_ms", "round_sizes"})
        if (k["mlk"].contains(f) && k["mlk"][f].is_array() && k["mlk"][f].size() > kMaxSamples)
          return bad(at + ": `mlk." + f + "` has " + std::to_string(k["mlk"][f].size()) + " values; at most " +
                     std::to_string(kMaxSamples));
    if (!k.contains("mlk") || !k["mlk"].is_object()) return bad("kernels[" + std::to_string(i) + "]: no `mlk` result");
    if (k["mlk"].contains("median_ms") && !k["mlk"]["median_ms"].is_number())
      return bad("kernels[" + std::to_string(i) + "]: `mlk.median_ms` is not a number");
  }
  std::lock_guard<std::mutex> lock(mu_);
  int stored = 0;
  Status s = sql::write_txn(*db_, [&]() -> Status {
    auto rep = db_->prepare("INSERT INTO bench_reports (ns, machine, versions) VALUES (?1, ?2, ?3)");
    if (!rep.ok()) return rep.status();
    rep->bind(1, ns).bind(2, dump_json(machine)).bind(3, dump_json(versions));
    if (Status r = rep->run(); !r.ok()) return r;
    const int64_t report_id = sqlite3_last_insert_rowid(db_->raw());
    // What bytes() charges for this report: the same columns usage_by_scan() counts.
    const std::string created = doc.value("created", "");
    int64_t added = static_cast<int64_t>(dump_json(machine).size() + dump_json(versions).size());
    for (const json& k : doc["kernels"]) {
      auto ins = db_->prepare(
          "INSERT INTO bench_results (ns, kernel, target, created, received, machine, versions, cache_key, variant, "
          "median_ms, entry, report_id) VALUES (?1, ?2, ?3, ?4, ?5, '', '', ?6, ?7, ?8, ?9, ?10)");
      if (!ins.ok()) return ins.status();
      const std::string kernel = k["id"].get<std::string>(), target = k["target"].get<std::string>(),
                        cache_key = k["cache_key"].get<std::string>(), variant = k["variant"].get<std::string>(),
                        median = json(k["mlk"].value("median_ms", 0.0)).dump(), entry = dump_json(k);
      ins->bind(1, ns).bind(2, kernel).bind(3, target).bind(4, created).bind(5, now_iso())
          .bind(6, cache_key).bind(7, variant).bind(8, median).bind(9, entry).bind(10, report_id);
      if (Status r = ins->run(); !r.ok()) return r;
      added += static_cast<int64_t>(kernel.size() + target.size() + created.size() + cache_key.size() +
                                    variant.size() + median.size() + entry.size());
      const int64_t id = sqlite3_last_insert_rowid(db_->raw());
      ++stored;
      if (baseline_set.empty()) continue;
      auto up = db_->prepare("INSERT OR REPLACE INTO bench_baselines (ns, name, kernel, result_id) VALUES (?1, ?2, ?3, ?4)");
      if (!up.ok()) return up.status();
      up->bind(1, ns).bind(2, baseline_set).bind(3, k["id"].get<std::string>()).bind(4, id);
      if (Status r = up->run(); !r.ok()) return r;
    }
    auto usage = db_->prepare(
        "INSERT INTO bench_usage (ns, bytes) VALUES (?1, ?2) ON CONFLICT(ns) DO UPDATE SET bytes = bytes + excluded.bytes");
    if (!usage.ok()) return usage.status();
    usage->bind(1, ns).bind(2, added);
    MLK_RETURN_IF_ERROR(usage->run());
    return mark_counted(*db_);
  });
  if (!s.ok()) return s;
  return stored;
}

int64_t BenchHistory::charge_of(const std::string& report) {
  json doc = parse_json(report, nullptr, kMaxJsonDepth, kMaxReportValues);
  const int64_t body = static_cast<int64_t>(report.size());
  if (!doc.is_object() || !doc.contains("kernels") || !doc["kernels"].is_array()) return body;
  auto size_of = [&](const char* f) { return doc.contains(f) ? static_cast<int64_t>(dump_json(doc[f]).size()) : 2; };
  const int64_t per_row = size_of("created") + kRowBytes;
  int64_t total = size_of("machine") + size_of("versions");
  for (const json& k : doc["kernels"]) total += 2 * static_cast<int64_t>(dump_json(k).size()) + per_row;
  return std::max(total, body);
}

Expected<int64_t> BenchHistory::bytes(const std::string& ns) {
  std::lock_guard<std::mutex> lock(usage_mu_);  // a running total: no scan of the namespace's rows
  auto q = usage_->prepare("SELECT bytes FROM bench_usage WHERE ns=?1");
  if (!q.ok()) return q.status();
  q->bind(1, ns);
  auto r = q->step();
  if (!r.ok()) return r.status();
  return *r ? q->i64(0) : int64_t{0};
}

Expected<std::string> BenchHistory::history(const std::string& ns, const std::string& kernel, const std::string& target,
                                            int limit, int64_t before, int64_t max_bytes) {
  struct Row {
    int64_t id;
    std::string text[10];
  };
  std::vector<Row> rows;
  bool truncated = false;
  {
    std::lock_guard<std::mutex> lock(read_mu_);  // the connection's: held while rows are read, not while they are parsed
    // The ids first (what is sorted holds no text), then each row, and each
    // report's machine and versions once: a query that sorted whole rows
    // copied a report's machine record into the sorter once per kernel.
    auto ids = reader_->prepare(
        "SELECT r.id FROM bench_results r WHERE r.ns = ?1 AND (?2 = '' OR r.kernel = ?2) AND (?3 = '' OR "
        "r.target = ?3) AND (?5 <= 0 OR r.id < ?5) ORDER BY r.id DESC LIMIT ?4");
    if (!ids.ok()) return ids.status();
    ids->bind(1, ns).bind(2, kernel).bind(3, target).bind(4, static_cast<int64_t>(limit) + 1).bind(5, before);
    std::vector<int64_t> found;
    while (true) {
      auto row = ids->step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      found.push_back(ids->i64(0));
    }
    auto q = reader_->prepare(
        "SELECT r.kernel, r.target, r.created, r.received, r.machine, r.versions, r.cache_key, r.variant, r.median_ms, "
        "r.entry, IFNULL(r.report_id, 0) FROM bench_results r WHERE r.id = ?1");
    if (!q.ok()) return q.status();
    auto rep = reader_->prepare("SELECT machine, versions FROM bench_reports WHERE id = ?1");
    if (!rep.ok()) return rep.status();
    std::map<int64_t, std::pair<std::string, std::string>> reports;  // id -> machine, versions
    int64_t bytes = 0;
    for (int64_t id : found) {
      q->reset().bind(1, id);
      auto row = q->step();
      if (!row.ok()) return row.status();
      if (!*row) continue;
      Row r{id, {}};
      for (int i = 0; i < 10; ++i) r.text[i] = q->text(i);
      if (int64_t report = q->i64(10); report != 0) {  // a newer row: its report's records
        auto it = reports.find(report);
        if (it == reports.end()) {
          rep->reset().bind(1, report);
          auto got = rep->step();
          if (!got.ok()) return got.status();
          it = reports.emplace(report, *got ? std::make_pair(rep->text(0), rep->text(1))
                                            : std::make_pair(std::string("{}"), std::string("{}"))).first;
        }
        r.text[4] = it->second.first;
        r.text[5] = it->second.second;
      }
      int64_t size = 0;
      for (const std::string& t : r.text) size += parsed_weight(t);
      if (static_cast<int>(rows.size()) == limit || (!rows.empty() && bytes + size > max_bytes)) {
        truncated = true;
        break;
      }
      bytes += size;
      rows.push_back(std::move(r));
    }
  }
  json out = {{"namespace", ns}, {"kernel", kernel}, {"results", json::array()}, {"truncated", truncated}};
  for (const Row& r : rows) {
    const std::string* t = r.text;
    json e = parse_json(t[9]);
    out["results"].push_back({{"kernel", t[0]}, {"target", t[1]}, {"created", t[2]}, {"received", t[3]},
                              {"machine", parse_json(t[4])}, {"versions", parse_json(t[5])}, {"cache_key", t[6]},
                              {"variant", t[7]}, {"median_ms", parse_json(t[8])},
                              {"samples_ms", e.is_object() ? e["mlk"].value("samples_ms", json::array()) : json::array()},
                              {"round_sizes", e.is_object() ? e["mlk"].value("round_sizes", json::array()) : json::array()}});
  }
  if (truncated && !rows.empty()) out["next"] = rows.back().id;
  return dump_json(out);  // the kernel and target come from the query: maybe invalid UTF-8
}

Expected<std::vector<BenchHistory::KernelSummary>> BenchHistory::kernels(const std::string& ns) {
  std::lock_guard<std::mutex> lock(read_mu_);
  auto q = reader_->prepare(
      "SELECT r.kernel, r.target, g.n, r.created, r.median_ms, r.cache_key FROM bench_results r JOIN "
      "(SELECT COUNT(*) AS n, MAX(id) AS last FROM bench_results WHERE ns = ?1 GROUP BY kernel, target) g "
      "ON r.id = g.last ORDER BY r.kernel, r.target LIMIT " + std::to_string(kMaxSummaries));
  if (!q.ok()) return q.status();
  q->bind(1, ns);
  std::vector<KernelSummary> out;
  while (true) {
    auto row = q->step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    json median = parse_json(q->text(4));
    out.push_back({q->text(0), q->text(1), q->text(3), q->text(5), {}, q->i64(2),
                   median.is_number() ? median.get<double>() : 0.0});
  }
  auto keys = reader_->prepare("SELECT DISTINCT kernel, target, cache_key FROM bench_results WHERE ns = ?1 "
                           "ORDER BY kernel, target, cache_key LIMIT " + std::to_string(kMaxSummaryKeys));
  if (!keys.ok()) return keys.status();
  keys->bind(1, ns);
  size_t at = 0;  // both lists are in (kernel, target) order
  while (true) {
    auto row = keys->step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    while (at < out.size() && (out[at].kernel != keys->text(0) || out[at].target != keys->text(1))) ++at;
    if (at < out.size()) out[at].cache_keys.push_back(keys->text(2));
  }
  return out;
}

Expected<std::string> BenchHistory::baseline(const std::string& ns, const std::string& name, int64_t max_bytes) {
  std::vector<std::string> entries;
  int64_t bytes = 0;
  std::string created, machine = "{}", versions = "{}";
  {
    std::lock_guard<std::mutex> lock(read_mu_);  // the rows are read under it, parsed after it
    auto q = reader_->prepare(
        "SELECT r.entry, r.created, r.id FROM bench_baselines b JOIN bench_results r ON r.id = b.result_id "
        "WHERE b.ns = ?1 AND b.name = ?2 ORDER BY b.kernel");
    if (!q.ok()) return q.status();
    q->bind(1, ns).bind(2, name);
    int64_t last = 0;
    while (true) {
      auto row = q->step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      entries.push_back(q->text(0));
      if ((bytes += parsed_weight(entries.back())) > max_bytes)
        return Status::Unsupported("the baseline set `" + name + "` is larger than this server answers at once (" +
                                   std::to_string(max_bytes) + " bytes, `mlk serve --max-answer`); push it in "
                                   "smaller sets (`--baseline-set` per group of kernels)");
      created = q->text(1);
      last = q->i64(2);
    }
    // The report keeps one machine and versions record: the last entry's, read once.
    auto m = reader_->prepare(std::string("SELECT ") + kMachine + ", " + kVersions +
                          " FROM bench_results r LEFT JOIN bench_reports p ON p.id = r.report_id WHERE r.id = ?1");
    if (!m.ok()) return m.status();
    m->bind(1, last);
    auto row = m->step();
    if (!row.ok()) return row.status();
    if (*row) machine = m->text(0), versions = m->text(1);
  }
  if (entries.empty())
    return Status::NotFound("no baseline set `" + name + "` in namespace " + ns + " (push one with `mlk bench --record "
                            "FILE --push --baseline-set " + name + "`)");
  json doc = {{"format", "mlk-bench"}, {"format_version", 1}, {"kernels", json::array()}, {"calibration_ms", json::array()},
              {"settings", json::object()}, {"machine", parse_json(machine)}, {"versions", parse_json(versions)},
              {"created", created}};
  for (const std::string& e : entries) {
    json k = parse_json(e);
    k.erase("comparison");
    k.erase("instructions");
    doc["kernels"].push_back(std::move(k));
  }
  return dump_json(doc) + "\n";  // compact: an indented dump grows with the nesting a writer chose
}

Expected<BenchHistory*> bench_history_at(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<BenchHistory>> open;
  std::lock_guard<std::mutex> lock(mu);
  auto it = open.find(path);
  if (it != open.end()) return it->second.get();
  auto h = BenchHistory::Open(path);
  if (!h.ok()) return h.status();
  return (open[path] = std::move(h).value()).get();
}

}  // namespace mlk::service
