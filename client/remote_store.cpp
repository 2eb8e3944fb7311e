#include "client/remote_store.h"

#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "base/sha256.h"
#include "base/json.h"

namespace mlk::client {

using nlohmann::json;

bool is_remote_url(const std::string& spec) { return spec.rfind("http://", 0) == 0 || spec.rfind("https://", 0) == 0; }

namespace {

std::string transport_error(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection: return "cannot connect (refused, or no route to the host)";
    case httplib::Error::ConnectionTimeout: return "connection timed out";
    case httplib::Error::Read: return "the connection broke or timed out while reading the response";
    case httplib::Error::Write: return "the connection broke or timed out while sending the request";
    case httplib::Error::SSLConnection: return "TLS handshake failed";
    case httplib::Error::SSLServerVerification:
      return "the server's TLS certificate did not verify (give the CA that signed it in $MLK_CACERT)";
    case httplib::Error::SSLLoadingCerts: return "cannot load the CA certificates ($MLK_CACERT: a PEM file?)";
    default: return "HTTP client error " + httplib::to_string(e);
  }
}

bool transient(int status) { return status == 429 || (status >= 500 && status != 507 && status != 501); }

// The `error` of a JSON error body, else the start of the body.
std::string server_says(const httplib::Response& r) {
  json j = parse_json(r.body);
  if (j.is_object() && j.contains("error") && j["error"].is_string()) return j["error"].get<std::string>();
  return r.body.substr(0, 200);
}

}  // namespace

struct RemoteStore::Impl {
  RemoteOptions opt;
  std::string prefix;  // "" or "/path" without a trailing slash (the same on every server)
  std::vector<std::unique_ptr<httplib::Client>> clients;  // one per server of opt.url, in order
  size_t current = 0;                                     // the server in use
  httplib::Client* client = nullptr;                      // clients[current]
  std::mt19937 rng{std::random_device{}()};
  int last_status = 0;  // HTTP status of the last response (0: none)
  std::string team;     // whoami's answer, once asked

  std::string path(const std::string& p) const {
    return prefix + p + (opt.ns.empty() ? "" : (p.find('?') == std::string::npos ? "?" : "&") + std::string("namespace=") + opt.ns);
  }

  // One request with retries. Returns the response of the last try (any
  // status), or IOError when no response ever came.
  // With several servers, a failed try moves to the next one, which stays
  // in use; every server gets at least one try.
  Expected<httplib::Response> call(const std::string& what, const std::function<httplib::Result()>& send) {
    std::string last;
    const int attempts = std::max({1, opt.attempts, static_cast<int>(clients.size())});
    for (int attempt = 1; attempt <= attempts; ++attempt) {
      if (attempt > 1 && clients.size() > 1) {
        current = (current + 1) % clients.size();
        client = clients[current].get();
      }
      if (attempt > 1) {
        double base = opt.backoff_ms * std::pow(2.0, attempt - 2);
        std::uniform_real_distribution<double> jitter(0.5, 1.5);
        std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(base * jitter(rng))));
      }
      httplib::Result r = send();
      last_status = r ? r->status : 0;
      if (r) {
        if (!transient(r->status) || attempt == attempts) return *r;
        last = "HTTP " + std::to_string(r->status) + ": " + server_says(*r);
        continue;
      }
      last = transport_error(r.error());
    }
    return Status::IOError("cache server " + opt.url + ": " + what + ": " + last + " (after " +
                           std::to_string(attempts) + " attempts)");
  }

  // A non-2xx response as a Status (see remote_store.h).
  Status failure(const std::string& what, const httplib::Response& r) const {
    std::string m = "cache server " + opt.url + ": " + what + ": HTTP " + std::to_string(r.status) + ": " + server_says(r);
    if (r.status == 404) return Status::NotFound(m);
    if (r.status >= 500 && r.status != 507) return Status::IOError(m);
    return Status::InvalidArgument(m);
  }
};

RemoteStore::RemoteStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RemoteStore::~RemoteStore() = default;
const std::string& RemoteStore::url() const { return impl_->opt.url; }

namespace {

// One server URL of a list: its origin (scheme://host[:port]) and path prefix.
Status split_url(const std::string& url, std::string& origin, std::string& prefix) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("cache URL `" + url + "`: " + why + "; expected http://HOST:PORT (a `mlk serve`)");
  };
  if (!is_remote_url(url)) return bad("not an http:// or https:// URL");
  size_t host_start = url.find("://") + 3;
  size_t slash = url.find('/', host_start);
  std::string authority = url.substr(host_start, slash == std::string::npos ? std::string::npos : slash - host_start);
  if (authority.empty()) return bad("no host");
  if (authority.find('@') != std::string::npos) return bad("put the token in $MLK_TOKEN, not in the URL");
  for (char c : authority)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' || c == '[' || c == ']'))
      return bad("odd characters in the host");
  origin = url.substr(0, slash == std::string::npos ? std::string::npos : slash);
  prefix = slash == std::string::npos ? "" : url.substr(slash);
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  return Status::Ok();
}

}  // namespace

Expected<std::unique_ptr<RemoteStore>> RemoteStore::Open(RemoteOptions options) {
  auto impl = std::make_unique<Impl>();
  std::vector<std::string> origins;
  size_t start = 0;
  while (true) {
    size_t comma = options.url.find(',', start);
    std::string one = options.url.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    std::string origin, prefix;
    MLK_RETURN_IF_ERROR(split_url(one, origin, prefix));
    if (!origins.empty() && prefix != impl->prefix)
      return Status::InvalidArgument("cache URLs `" + options.url + "`: the servers of a list must share one path prefix");
    impl->prefix = prefix;
    origins.push_back(origin);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (!options.ns.empty()) {
    Status s = cache::validate_namespace(options.ns);
    if (!s.ok()) return s;
  }
  impl->opt = std::move(options);
  for (const auto& origin : origins) {
    auto c = std::make_unique<httplib::Client>(origin);
    if (!c->is_valid())
      return Status::InvalidArgument("cache URL `" + origin + "`: cannot make a client for it; expected http://HOST:PORT (a `mlk serve`)");
    if (origin.rfind("https://", 0) == 0) {
      // Verify the server: its certificate against the CA, its name against the certificate.
      const char* env = std::getenv("MLK_CACERT");
      std::string ca = !impl->opt.ca_cert.empty() ? impl->opt.ca_cert : env ? env : "";
      if (!ca.empty()) c->set_ca_cert_path(ca.c_str());
      c->enable_server_certificate_verification(true);
    }
    c->set_keep_alive(impl->opt.keep_alive);
    c->set_tcp_nodelay(true);
    c->set_connection_timeout(0, impl->opt.connect_timeout_ms * 1000);
    c->set_read_timeout(impl->opt.timeout_s, 0);
    c->set_write_timeout(impl->opt.timeout_s, 0);
    if (!impl->opt.token.empty()) c->set_bearer_token_auth(impl->opt.token.c_str());
    impl->clients.push_back(std::move(c));
  }
  impl->client = impl->clients[0].get();
  signal(SIGPIPE, SIG_IGN);  // a server that goes away mid-upload is an error, not a death
  return std::unique_ptr<RemoteStore>(new RemoteStore(std::move(impl)));
}

Expected<bool> RemoteStore::has_blob(const std::string& digest) {
  Impl& s = *impl_;
  auto r = s.call("HEAD blob " + digest.substr(0, 16), [&] { return s.client->Head(s.path("/v1/blobs/" + digest).c_str()); });
  if (!r.ok()) return r.status();
  if (r->status == 200) return true;
  if (r->status == 404) return false;
  return s.failure("HEAD blob " + digest.substr(0, 16), *r);
}

Status RemoteStore::put_blob(std::string_view bytes) {
  Impl& s = *impl_;
  std::string digest = sha256_hex(bytes);
  auto r = s.call("PUT blob " + digest.substr(0, 16), [&] {
    return s.client->Put(s.path("/v1/blobs/" + digest).c_str(), bytes.data(), bytes.size(), "application/octet-stream");
  });
  if (!r.ok()) return r.status();
  if (r->status == 200 || r->status == 201) return Status::Ok();
  return s.failure("PUT blob " + digest.substr(0, 16), *r);
}

Expected<std::string> RemoteStore::get_blob(const std::string& digest) {
  Impl& s = *impl_;
  std::string what = "GET blob " + digest.substr(0, 16);
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto r = s.call(what, [&] { return s.client->Get(s.path("/v1/blobs/" + digest).c_str()); });
    if (!r.ok()) return r.status();
    if (r->status != 200) return s.failure(what, *r);
    if (sha256_hex(r->body) == digest) return std::move(r->body);
    // Damaged in transit (or by a broken proxy): one more try, then give up.
  }
  return Status::Corruption("cache server " + s.opt.url + ": blob " + digest + " arrived with other bytes twice; nothing was stored");
}

Expected<cache::EntryInfo> RemoteStore::get_entry(const std::string& key) {
  Impl& s = *impl_;
  std::string what = "GET entry " + key.substr(0, 16);
  auto r = s.call(what, [&] { return s.client->Get(s.path("/v1/entries/" + key).c_str()); });
  if (!r.ok()) return r.status();
  if (r->status != 200) return s.failure(what, *r);
  json j = parse_json(r->body, nullptr, kMaxAnswerDepth);
  if (!j.is_object() || !j.contains("manifest") || !j["manifest"].is_object())
    return Status::Corruption("cache server " + s.opt.url + ": " + what + ": the answer is not an entry");
  auto m = cache::manifest_from_json(j["manifest"].dump());
  if (!m.ok()) return Status::Corruption("cache server " + s.opt.url + ": " + what + ": " + m.status().message());
  // The other fields are optional; one of the wrong type is a damaged answer.
  auto field_error = [&](const char* field, const char* want) {
    return Status::Corruption("cache server " + s.opt.url + ": " + what + ": `" + field + "` must be " + want);
  };
  cache::EntryInfo e;
  if (j.contains("namespace")) {
    if (!j["namespace"].is_string()) return field_error("namespace", "a string");
    e.ns = j["namespace"].get<std::string>();
  }
  e.key = key;
  e.manifest = std::move(*m);
  for (const auto& [name, ref] : e.manifest.files) e.size += ref.size;
  if (j.contains("pinned")) {
    if (!j["pinned"].is_boolean()) return field_error("pinned", "true or false");
    e.pinned = j["pinned"].get<bool>();
  }
  for (const char* f : {"created", "last_used"}) {
    if (!j.contains(f)) continue;
    const json& v = j[f];
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)))
      return field_error(f, "unix seconds (an integer)");
    (std::string(f) == "created" ? e.created : e.last_used) = v.get<int64_t>();
  }
  return e;
}

Status RemoteStore::put_entry(const std::string& key, const cache::Manifest& m) {
  Impl& s = *impl_;
  std::string what = "PUT entry " + key.substr(0, 16);
  std::string body = cache::manifest_to_json(m);
  auto r = s.call(what, [&] { return s.client->Put(s.path("/v1/entries/" + key).c_str(), body, "application/json"); });
  if (!r.ok()) return r.status();
  if (r->status == 200 || r->status == 201) return Status::Ok();
  return s.failure(what, *r);
}

Expected<std::string> RemoteStore::whoami() {
  Impl& s = *impl_;
  auto r = s.call("GET /v1/whoami", [&] { return s.client->Get(s.path("/v1/whoami").c_str()); });
  if (!r.ok()) return r.status();
  if (r->status != 200) return s.failure("GET /v1/whoami", *r);
  json j = parse_json(r->body);
  if (!j.is_object() || !j.contains("team") || !j["team"].is_string())
    return Status::Corruption("cache server " + s.opt.url + ": /v1/whoami did not answer a team");
  return j["team"].get<std::string>();
}

Expected<RemoteStore::Response> RemoteStore::request(const std::string& method, const std::string& path,
                                                     std::string_view body, const std::string& content_type) {
  Impl& s = *impl_;
  if (method != "GET" && method != "POST") return Status::InvalidArgument("RemoteStore::request: method " + method);
  auto r = s.call(method + " " + path, [&] {
    return method == "GET" ? s.client->Get(s.path(path).c_str())
                           : s.client->Post(s.path(path).c_str(), body.data(), body.size(), content_type.c_str());
  });
  if (!r.ok()) return r.status();
  return Response{r->status, std::move(r->body)};
}

Status RemoteStore::failure(const std::string& what, const Response& r) const {
  httplib::Response h;
  h.status = r.status;
  h.body = r.body;
  return impl_->failure(what, h);
}

Expected<TransferReport> RemoteStore::push(cache::Store& local, const std::string& local_ns, const std::string& key) {
  auto a = local.get_entry(local_ns, key);  // verified
  if (!a.ok()) return a.status();
  TransferReport rep;
  // 409: a blob went away between its upload and the entry (a concurrent
  // replacement of an entry that used it deleted it); upload again.
  for (int round = 0;; ++round) {
    rep = TransferReport{};
    for (const auto& [name, ref] : a->info.manifest.files) {
      rep.files += 1;
      auto have = has_blob(ref.digest);
      if (!have.ok()) return have.status();
      if (*have) {
        rep.blobs_skipped += 1;
        continue;
      }
      MLK_RETURN_IF_ERROR(put_blob(a->files.at(name)));
      rep.blobs_sent += 1;
      rep.bytes += ref.size;
    }
    Status s = put_entry(key, a->info.manifest);
    if (s.ok()) return rep;
    if (impl_->last_status != 409 || round == 2) return s;
  }
}

Expected<TransferReport> RemoteStore::pull(cache::Store& local, const std::string& local_ns, const std::string& key) {
  auto e = get_entry(key);
  if (!e.ok()) return e.status();
  TransferReport rep;
  std::map<std::string, std::string> files;
  for (const auto& [name, ref] : e->manifest.files) {
    auto bytes = get_blob(ref.digest);
    if (!bytes.ok()) return bytes.status();
    if (static_cast<int64_t>(bytes->size()) != ref.size)
      return Status::Corruption("cache server " + url() + ": entry " + key + ": file `" + name + "` has " +
                                std::to_string(bytes->size()) + " bytes, its manifest says " + std::to_string(ref.size));
    rep.files += 1;
    rep.blobs_sent += 1;
    rep.bytes += ref.size;
    files[name] = std::move(*bytes);
  }
  auto from = server_namespace();
  if (!from.ok()) return from.status();
  cache::Provenance prov = e->manifest.provenance;
  prov.origin = origin_of_pull(url(), *from);  // whatever the writer said: this copy came from that namespace
  MLK_RETURN_IF_ERROR(local.put_entry(local_ns, key, e->manifest.meta_json, prov, files));
  return rep;
}

Expected<std::string> RemoteStore::server_namespace() {
  if (!impl_->opt.ns.empty()) return impl_->opt.ns;
  if (impl_->team.empty()) {
    auto t = whoami();
    if (!t.ok()) return t.status();
    impl_->team = *t;
  }
  return impl_->team;
}

std::string origin_of_pull(const std::string& url, const std::string& ns) { return url + "#" + ns; }

std::optional<std::string> pulled_namespace(const std::string& origin) {
  if (origin.rfind("http://", 0) != 0 && origin.rfind("https://", 0) != 0) return std::nullopt;
  size_t hash = origin.rfind('#');
  if (hash == std::string::npos) return std::nullopt;
  return origin.substr(hash + 1);
}

Expected<std::vector<cache::EntryInfo>> RemoteStore::query(const std::string& fn, const std::string& target,
                                                           const std::string& program_hash, int limit) {
  Impl& s = *impl_;
  const std::string what = "query entries of `" + fn + "`";
  httplib::Params q = {{"fn", fn}, {"target", target}, {"program_hash", program_hash}, {"limit", std::to_string(limit)}};
  const std::string url = s.path(httplib::append_query_params("/v1/entries", q));
  auto r = s.call(what, [&] { return s.client->Get(url.c_str()); });
  if (!r.ok()) return r.status();
  if (r->status != 200) return s.failure(what, *r);
  auto bad = [&](const std::string& why) {
    return Status::Corruption("cache server " + s.opt.url + ": " + what + ": " + why);
  };
  json j = parse_json(r->body, nullptr, kMaxAnswerDepth);
  if (!j.is_object() || !j.contains("entries") || !j["entries"].is_array()) return bad("the answer has no `entries` list");
  std::vector<cache::EntryInfo> out;
  for (const auto& e : j["entries"]) {
    if (!e.is_object() || !e.contains("key") || !e["key"].is_string() || !e.contains("manifest") ||
        !e["manifest"].is_object())
      return bad("an entry without `key` or `manifest`");
    auto m = cache::manifest_from_json(e["manifest"].dump());
    if (!m.ok()) return bad(m.status().message());
    cache::EntryInfo info;
    info.key = e["key"].get<std::string>();
    info.ns = e.contains("namespace") && e["namespace"].is_string() ? e["namespace"].get<std::string>() : "";
    info.manifest = std::move(*m);
    for (const auto& [name, ref] : info.manifest.files) info.size += ref.size;
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace mlk::client
