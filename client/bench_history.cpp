#include "client/bench_history.h"

#include <httplib.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include "base/json.h"

namespace mlk::client {

namespace {

constexpr size_t kMaxAnswer = size_t{64} << 20;

struct Reply {
  int status = 0;
  std::string body;
};

std::string with_ns(const std::string& path, const std::string& ns, const std::string& extra = "") {
  std::string q = ns.empty() ? "" : "namespace=" + httplib::detail::encode_query_param(ns);
  if (!extra.empty()) q += (q.empty() ? "" : "&") + extra;
  return q.empty() ? path : path + "?" + q;
}

Expected<Reply> call(const std::string& server, const std::string& method, const std::string& path,
                     const std::string& body) {
  const bool tls = server.rfind("https://", 0) == 0;
  if (!tls && server.rfind("http://", 0) != 0)
    return Status::Usage("--server: `" + server + "` is not an http:// or https:// URL of a `mlk serve`");
  httplib::Client cli(server);
  if (!cli.is_valid()) return Status::Usage("--server: cannot make a client for `" + server + "`");
  if (tls) {  // the server verified, as the cache client does: against $MLK_CACERT or the system's CAs
    if (const char* ca = std::getenv("MLK_CACERT"); ca && *ca) cli.set_ca_cert_path(ca);
    cli.enable_server_certificate_verification(true);
  }
  cli.set_connection_timeout(5);
  cli.set_read_timeout(60);
  httplib::Headers h;
  if (const char* t = std::getenv("MLK_TOKEN"); t && *t) h.emplace("Authorization", std::string("Bearer ") + t);
  // An answer is held whole: at most kMaxAnswer bytes of it.
  std::string got;
  bool too_long = false;
  auto take = [&](const char* data, size_t n) {
    if (got.size() + n > kMaxAnswer) return !(too_long = true);
    got.append(data, n);
    return true;
  };
  auto r = method == "POST" ? cli.Post(path, h, body, "application/json") : cli.Get(path, h, take);
  if (too_long) return Status::IOError(server + " answered more than " + std::to_string(kMaxAnswer >> 20) + " MiB");
  if (!r) return Status::IOError("cannot reach " + server + ": " + httplib::to_string(r.error()));
  return Reply{r->status, method == "POST" ? r->body : got};
}

Status refused(const std::string& server, const Reply& r) {
  auto j = parse_json(r.body);
  std::string why = j.is_object() && j.contains("error") && j["error"].is_string() ? j["error"].get<std::string>()
                                                                                   : r.body.substr(0, 200);
  std::string msg = server + " answered " + std::to_string(r.status) + ": " + why;
  return r.status == 404 ? Status::NotFound(msg) : Status::InvalidArgument(msg);
}

}  // namespace

Expected<int> push_bench_report(const std::string& server, const std::string& ns, const std::string& report,
                                const std::string& baseline_set) {
  auto r = call(server, "POST", with_ns("/v1/bench/results", ns, baseline_set.empty() ? "" : "baseline_set=" + baseline_set),
                report);
  if (!r.ok()) return r.status();
  if (r->status != 201) return refused(server, *r);
  auto j = parse_json(r->body);
  return j.is_object() && j.contains("stored") && j["stored"].is_number_integer() ? j["stored"].get<int>() : 0;
}

Expected<std::string> fetch_baseline_set(const std::string& server, const std::string& ns, const std::string& name) {
  auto r = call(server, "GET", with_ns("/v1/bench/baselines/" + name, ns), "");
  if (!r.ok()) return r.status();
  if (r->status != 200) return refused(server, *r);
  return r->body;
}

}  // namespace mlk::client
