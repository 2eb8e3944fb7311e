#include "service/metrics.h"

#include <cstdio>
#include <cstdlib>

namespace mlk::service {

namespace {

// Label names of each counter, in the order their values are stored.
const std::map<std::string, std::vector<std::string>>& label_names() {
  static const std::map<std::string, std::vector<std::string>> names = {
      {"mlk_requests", {"route", "method", "code"}},
      {"mlk_cache_hits", {"namespace", "kind"}},
      {"mlk_cache_misses", {"namespace", "kind"}},
      {"mlk_bytes_received", {"namespace"}},
      {"mlk_bytes_sent", {"namespace"}},
      {"mlk_rejects", {"namespace", "reason"}},
      {"mlk_verification_failures", {"namespace", "kind"}},
      {"mlk_grant_reads", {"namespace", "team"}},
  };
  return names;
}

const std::map<std::string, std::string>& help_texts() {
  static const std::map<std::string, std::string> help = {
      {"mlk_requests", "HTTP requests answered, by route, method and status code."},
      {"mlk_cache_hits", "Reads that found what they asked for."},
      {"mlk_cache_misses", "Reads that found nothing (404)."},
      {"mlk_bytes_received", "Body bytes stored."},
      {"mlk_bytes_sent", "Body bytes served."},
      {"mlk_rejects", "Requests refused, by reason."},
      {"mlk_verification_failures", "Uploads that did not match their digest and stored data that failed its re-hash."},
      {"mlk_grant_reads", "Reads of a namespace by another team through a read grant, by namespace and reading team."},
  };
  return help;
}

std::string escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string label_text(const std::vector<std::string>& names, const std::vector<std::string>& values) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < values.size(); ++i)
    s += (s.empty() ? "" : ",") + names[i] + "=\"" + escape(values[i]) + "\"";
  return s;
}

// The shortest text that reads back as v (0.0005, not 0.00050000000000000001).
std::string number(double v) {
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

}  // namespace

void Metrics::request(const std::string& route, const std::string& method, int status, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  counters_["mlk_requests"][{route, method, std::to_string(status)}] += 1;
  Histogram& h = latency_[route];
  size_t i = 0;
  while (i < kBuckets.size() && seconds > kBuckets[i]) ++i;
  if (i < kBuckets.size()) h.buckets[i] += 1;
  h.count += 1;
  h.sum += seconds;
}

void Metrics::grant_read(const std::string& ns, const std::string& team) {
  std::lock_guard<std::mutex> lock(mu_);
  counters_["mlk_grant_reads"][{ns, team}] += 1;
}

void Metrics::hit(const std::string& ns, const std::string& kind) {
  std::lock_guard<std::mutex> lock(mu_);
  counters_["mlk_cache_hits"][{ns, kind}] += 1;
}

void Metrics::miss(const std::string& ns, const std::string& kind) {
  std::lock_guard<std::mutex> lock(mu_);
  counters_["mlk_cache_misses"][{ns, kind}] += 1;
}

void Metrics::bytes_received(const std::string& ns, int64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  counters_["mlk_bytes_received"][{ns}] += static_cast<double>(n);
}

void Metrics::bytes_sent(const std::string& ns, int64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  counters_["mlk_bytes_sent"][{ns}] += static_cast<double>(n);
}

void Metrics::reject(const std::string& ns, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  counters_["mlk_rejects"][{ns, reason}] += 1;
}

void Metrics::verification_failure(const std::string& ns, const std::string& kind) {
  std::lock_guard<std::mutex> lock(mu_);
  counters_["mlk_verification_failures"][{ns, kind}] += 1;
}

double Metrics::counter(const std::string& name, const std::vector<std::string>& labels) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = counters_.find(name);
  if (it == counters_.end()) return 0;
  auto v = it->second.find(labels);
  return v == it->second.end() ? 0 : v->second;
}

std::string Metrics::render(const std::vector<cache::NamespaceUsage>& usage) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  out += "# HELP mlk_build_info The build of this server, in its labels; always 1.\n";
  out += "# TYPE mlk_build_info gauge\n";
  out += "mlk_build_info{version=\"" + escape(MLK_VERSION) + "\",compiler=\"" + escape(__VERSION__) + "\"} 1\n";
  for (const auto& [name, labels] : label_names()) {
    out += "# HELP " + name + "_total " + help_texts().at(name) + "\n";
    out += "# TYPE " + name + "_total counter\n";
    auto it = counters_.find(name);
    if (it == counters_.end()) continue;
    for (const auto& [values, v] : it->second)
      out += name + "_total{" + label_text(labels, values) + "} " + number(v) + "\n";
  }
  out += "# HELP mlk_request_duration_seconds Time from routing a request to its response being ready.\n";
  out += "# TYPE mlk_request_duration_seconds histogram\n";
  for (const auto& [route, h] : latency_) {
    std::string r = "route=\"" + escape(route) + "\"";
    uint64_t cumulative = 0;
    for (size_t i = 0; i < kBuckets.size(); ++i) {
      cumulative += h.buckets[i];
      out += "mlk_request_duration_seconds_bucket{" + r + ",le=\"" + number(kBuckets[i]) + "\"} " +
             std::to_string(cumulative) + "\n";
    }
    out += "mlk_request_duration_seconds_bucket{" + r + ",le=\"+Inf\"} " + std::to_string(h.count) + "\n";
    out += "mlk_request_duration_seconds_sum{" + r + "} " + number(h.sum) + "\n";
    out += "mlk_request_duration_seconds_count{" + r + "} " + std::to_string(h.count) + "\n";
  }
  out += "# HELP mlk_namespace_bytes Bytes charged to a namespace by its entries (blobs once per reference, and manifests).\n";
  out += "# TYPE mlk_namespace_bytes gauge\n";
  for (const auto& u : usage) out += "mlk_namespace_bytes{namespace=\"" + escape(u.ns) + "\"} " + std::to_string(u.charged()) + "\n";
  out += "# HELP mlk_namespace_entries Entries in a namespace.\n";
  out += "# TYPE mlk_namespace_entries gauge\n";
  for (const auto& u : usage)
    out += "mlk_namespace_entries{namespace=\"" + escape(u.ns) + "\"} " + std::to_string(u.entries) + "\n";
  return out;
}

}  // namespace mlk::service
