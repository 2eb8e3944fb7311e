// Benchmark history kept by `mlk serve` (docs/ci.md, "History on the
// server"): the results `mlk bench --record --push` sends, one row per
// report (its machine's fingerprint and versions, stored once) and one per
// kernel (its id, fn, target, the cache key of what was timed, every
// sample, and its report's row), and named baselines such as
// `main`: per kernel, the entry of the latest report pushed under that name,
// which `mlk bench --baseline-set NAME` fetches and compares with A/B.
//
// Its own SQLite database file (bench_history_path of ApiOptions), apart from
// the artifact store's tables. Thread-safe: one connection behind a mutex.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "cache/sqlite.h"

namespace mlk::service {

class BenchHistory {
 public:
  // Opens (creating when missing) the database at `path`.
  static Expected<std::unique_ptr<BenchHistory>> Open(const std::string& path);

  // Stores the kernels of `report` (the JSON document of `mlk bench --json`)
  // under namespace `ns`; with `baseline_set` non-empty, they also become
  // that set's baseline entries. InvalidArgument naming the field when the
  // document is no mlk bench report, or is over a bound: 10,000 kernels, a
  // kernel's result 256 KiB (10,000 samples), a name 1 KiB, machine and
  // versions 64 KiB each, `created` 64 characters, 2,000,000 JSON values in
  // all. Returns how many kernels were stored.
  Expected<int> add(const std::string& ns, const std::string& report, const std::string& baseline_set);

  // {"namespace", "kernel", "results": [...], "truncated", "next"?}: the
  // kernel's results, newest first, at most `limit` and, but for the first,
  // no more than `max_bytes` of answer; `before` > 0 starts below that
  // result id (a truncated answer's `next`). `kernel` empty: every kernel;
  // `target` non-empty narrows to that target. The rows are read under the
  // connection's lock, bounded by max_bytes, and turned into JSON after it.
  Expected<std::string> history(const std::string& ns, const std::string& kernel, const std::string& target, int limit,
                                int64_t before = 0, int64_t max_bytes = int64_t{8} << 20);

  // At least what add() would store for `report`: its size and a row's
  // bookkeeping per kernel (the machine and versions records are stored
  // once). What the quota is charged for it before it is added.
  static int64_t charge_of(const std::string& report);

  // The bytes the history holds for `ns` (each stored kernel's text, and
  // each report's machine and version records): what its quota is charged.
  Expected<int64_t> bytes(const std::string& ns);

  // One row per kernel and target of namespace `ns` that has results (the
  // first 500, with at most 20,000 artifacts timed among them), by
  // kernel: how many, and the newest's time, median and cache key (the
  // dashboard's list, service/dashboard.cpp).
  struct KernelSummary {
    std::string kernel, target, last_created, last_cache_key;
    std::vector<std::string> cache_keys;  // every artifact timed, sorted
    int64_t results = 0;
    double last_median_ms = 0;
  };
  Expected<std::vector<KernelSummary>> kernels(const std::string& ns);

  // The baseline set `name` as an mlk bench report (what --baseline reads);
  // NotFound when nothing was pushed under that name; Unsupported, without
  // reading further, when its kernels' records pass `max_bytes` (the
  // server's --max-answer: the answer is bounded like history()'s).
  Expected<std::string> baseline(const std::string& ns, const std::string& name, int64_t max_bytes);

 private:
  BenchHistory(std::unique_ptr<cache::sql::Db> db, std::unique_ptr<cache::sql::Db> reader,
               std::unique_ptr<cache::sql::Db> usage)
      : db_(std::move(db)), reader_(std::move(reader)), usage_(std::move(usage)) {}
  // Writes go through db_ under mu_; reads through reader_ under read_mu_;
  // bytes(), which every quota check of every namespace asks, through usage_
  // under usage_mu_: so that a large report being stored or read holds up
  // no other team's reads or quota checks (the database is in WAL mode:
  // readers never wait for the writer).
  std::mutex mu_;
  std::unique_ptr<cache::sql::Db> db_;
  std::mutex read_mu_;
  std::unique_ptr<cache::sql::Db> reader_;
  std::mutex usage_mu_;
  std::unique_ptr<cache::sql::Db> usage_;
};

// The history of the server whose ApiOptions name `path`: opened on first
// use and kept for the process (one per path).
Expected<BenchHistory*> bench_history_at(const std::string& path);

}  // namespace mlk::service
