#include "client/jobs_client.h"

#include <nlohmann/json.hpp>

#include "base/sha256.h"
#include "base/json.h"

namespace mlk::client {

using nlohmann::json;

namespace {

WorkerView worker_of(const json& w) {
  return WorkerView{w.at("id").get<int64_t>(), w.at("device_key").get<std::string>(), w.at("name").get<std::string>(),
                    w.at("fingerprint").get<std::string>(), w.at("heartbeat_ms").get<int64_t>(),
                    w.value("secret", std::string())};
}

JobView job_of(const json& j) {
  JobView v;
  v.id = j.at("id").get<int64_t>();
  v.device_key = j.at("device_key").get<std::string>();
  v.setup = j.at("setup").get<std::string>();
  v.payload = j.at("payload").dump();
  v.state = j.at("state").get<std::string>();
  v.worker = j.at("worker").get<int64_t>();
  v.worker_name = j.at("worker_name").get<std::string>();
  v.worker_fingerprint = j.at("worker_fingerprint").get<std::string>();
  v.attempts = j.at("attempts").get<int>();
  v.result = j.at("result").is_null() ? "" : j.at("result").dump();
  return v;
}

}  // namespace

Expected<std::unique_ptr<JobsClient>> JobsClient::Open(RemoteOptions options) {
  options.keep_alive = false;  // polling clients must not hold a server thread each (remote_store.h)
  auto r = RemoteStore::Open(std::move(options));
  if (!r.ok()) return r.status();
  return std::unique_ptr<JobsClient>(new JobsClient(std::move(*r)));
}

Expected<std::string> JobsClient::call(const std::string& method, const std::string& path, const std::string& body,
                                       bool* conflict) {
  auto r = remote_->request(method, path, body);
  if (!r.ok()) return r.status();
  if (conflict && r->status == 409) {
    *conflict = true;
    return std::string();
  }
  if (r->status < 200 || r->status > 299) return remote_->failure(method + " " + path, *r);
  return std::move(r->body);
}

// Parses `text` and applies f; Corruption naming the route when the answer is
// not what f expects.
template <typename F>
auto parsed(const std::string& url, const std::string& route, const std::string& text, F f)
    -> Expected<decltype(f(json()))> {
  json j = parse_json(text, nullptr, kMaxAnswerDepth);
  try {
    return f(j);
  } catch (const json::exception& e) {
    return Status::Corruption("cache server " + url + ": " + route + " answered something unexpected (" + e.what() +
                              "): " + text.substr(0, 200));
  }
}

Expected<std::string> JobsClient::put_setup(std::string_view bytes) {
  auto r = remote_->request("POST", "/v1/jobs/setups", bytes, "application/octet-stream");
  if (!r.ok()) return r.status();
  if (r->status != 201 && r->status != 200) return remote_->failure("POST /v1/jobs/setups", *r);
  auto d = parsed(url(), "POST /v1/jobs/setups", r->body, [](const json& j) { return j.at("setup").get<std::string>(); });
  if (d.ok() && *d != sha256_hex(bytes))
    return Status::Corruption("cache server " + url() + ": the stored setup has digest " + *d + ", not the one sent");
  return d;
}

Expected<int64_t> JobsClient::submit(const std::string& device_key, const std::string& setup,
                                     const std::string& payload_json, const std::string& fingerprint) {
  json body = {{"device_key", device_key}, {"setup", setup}, {"payload", parse_json(payload_json)},
               {"fingerprint", fingerprint}};
  auto t = call("POST", "/v1/jobs/submit", body.dump());
  if (!t.ok()) return t.status();
  return parsed(url(), "POST /v1/jobs/submit", *t, [](const json& j) { return j.at("id").get<int64_t>(); });
}

Expected<JobView> JobsClient::get(int64_t id) {
  std::string route = "/v1/jobs/" + std::to_string(id);
  auto t = call("GET", route, "");
  if (!t.ok()) return t.status();
  return parsed(url(), "GET " + route, *t, [](const json& j) { return job_of(j); });
}

Status JobsClient::cancel(int64_t id, const std::string& why) {
  return call("POST", "/v1/jobs/" + std::to_string(id) + "/cancel", json{{"why", why}}.dump()).status();
}

Expected<std::vector<WorkerView>> JobsClient::workers(const std::string& device_key, int seen_s) {
  std::string route = "/v1/jobs/workers?device_key=" + device_key + "&seen_s=" + std::to_string(seen_s);
  auto t = call("GET", route, "");
  if (!t.ok()) return t.status();
  return parsed(url(), "GET /v1/jobs/workers", *t, [](const json& j) {
    std::vector<WorkerView> out;
    for (const auto& w : j.at("workers")) out.push_back(worker_of(w));
    return out;
  });
}

Expected<WorkerView> JobsClient::register_worker(const std::string& device_key, const std::string& name,
                                                 const std::string& fingerprint) {
  auto t = call("POST", "/v1/jobs/workers",
                json{{"device_key", device_key}, {"name", name}, {"fingerprint", fingerprint}}.dump());
  if (!t.ok()) return t.status();
  auto w = parsed(url(), "POST /v1/jobs/workers", *t, [](const json& j) { return worker_of(j.at("worker")); });
  if (w.ok() && w->secret.empty())
    return Status::Corruption("cache server " + url() + ": POST /v1/jobs/workers answered no worker secret (an older server?)");
  return w;
}

Expected<std::optional<JobView>> JobsClient::lease(const WorkerView& me, double lease_s) {
  auto t = call("POST", "/v1/jobs/lease", json{{"worker", me.id}, {"secret", me.secret}, {"lease_s", lease_s}}.dump());
  if (!t.ok()) return t.status();
  return parsed(url(), "POST /v1/jobs/lease", *t, [](const json& j) {
    return j.at("job").is_null() ? std::optional<JobView>() : std::optional<JobView>(job_of(j.at("job")));
  });
}

Expected<bool> JobsClient::heartbeat(int64_t job, const WorkerView& me, double lease_s) {
  bool lost = false;
  auto t = call("POST", "/v1/jobs/" + std::to_string(job) + "/heartbeat",
                json{{"worker", me.id}, {"secret", me.secret}, {"lease_s", lease_s}}.dump(), &lost);
  if (!t.ok()) return t.status();
  return !lost;
}

Expected<bool> JobsClient::report(int64_t job, const WorkerView& me, bool ok, const std::string& result_json) {
  bool lost = false;
  auto t = call("POST", "/v1/jobs/" + std::to_string(job) + "/result",
                json{{"worker", me.id}, {"secret", me.secret}, {"ok", ok}, {"result", parse_json(result_json)}}.dump(),
                &lost);
  if (!t.ok()) return t.status();
  return !lost;
}

Expected<std::string> JobsClient::setup_of(const JobView& job) {
  auto t = call("GET", "/v1/jobs/" + std::to_string(job.id) + "/setup", "");
  if (!t.ok()) return t.status();
  if (sha256_hex(*t) != job.setup)
    return Status::Corruption("cache server " + url() + ": the setup of job " + std::to_string(job.id) +
                              " arrived with other bytes than its sha256 " + job.setup.substr(0, 16));
  return t;
}

}  // namespace mlk::client
