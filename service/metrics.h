// The server's counters and the request latency histogram, rendered in the
// Prometheus text exposition format (version 0.0.4) for GET /metrics.
//
// Metric names (docs/api.md, "Metrics"):
//   mlk_requests_total{route,method,code}
//   mlk_request_duration_seconds{route} (histogram)
//   mlk_cache_hits_total{namespace,kind}       kind: blob, entry, ccache
//   mlk_cache_misses_total{namespace,kind}
//   mlk_bytes_received_total{namespace}        bodies stored
//   mlk_bytes_sent_total{namespace}            bodies served
//   mlk_rejects_total{namespace,reason}        every refused request, by cause
//   mlk_verification_failures_total{namespace,kind}  uploads whose bytes do not
//                                              match their digest, and stored
//                                              data that failed its re-hash
//   mlk_grant_reads_total{namespace,team}      reads through a read grant
//   mlk_namespace_bytes{namespace}, mlk_namespace_entries{namespace} (gauges)
// Thread-safe: every method may be called from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "cache/store.h"

namespace mlk::service {

class Metrics {
 public:
  static constexpr std::array<double, 14> kBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                      0.1,    0.25,  0.5,    1,     2.5,   5,     10};

  void request(const std::string& route, const std::string& method, int status, double seconds);
  void hit(const std::string& ns, const std::string& kind);
  void miss(const std::string& ns, const std::string& kind);
  void bytes_received(const std::string& ns, int64_t n);
  void bytes_sent(const std::string& ns, int64_t n);
  void reject(const std::string& ns, const std::string& reason);
  void verification_failure(const std::string& ns, const std::string& kind);
  void grant_read(const std::string& ns, const std::string& team);

  // The exposition text; `usage` (one row per namespace) becomes the gauges.
  std::string render(const std::vector<cache::NamespaceUsage>& usage) const;

  // For tests: a counter's value, 0 when never incremented. `name` without
  // "_total"; labels in the order listed above.
  double counter(const std::string& name, const std::vector<std::string>& labels) const;

 private:
  struct Histogram {
    std::array<uint64_t, kBuckets.size()> buckets{};  // non-cumulative
    uint64_t count = 0;
    double sum = 0;
  };
  using Labels = std::vector<std::string>;
  mutable std::mutex mu_;
  std::map<std::string, std::map<Labels, double>> counters_;  // metric name -> labels -> value
  std::map<std::string, Histogram> latency_;                 // route -> histogram
};

}  // namespace mlk::service
