#include "client/cli_cache.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "base/log.h"
#include "cache/paths.h"
#include "cache/sizes.h"

namespace mlk::client {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

}  // namespace

std::string local_mirror_path() {
  if (std::string v = env("MLK_LOCAL_CACHE"); !v.empty()) return v;
  if (std::string v = env("MLK_CACHE"); !v.empty() && !is_remote_url(v)) return v;
  if (std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty() && xdg[0] == '/') return xdg + "/mlk/cache.db";
  std::string home = env("HOME");
  if (home.empty())
    if (const passwd* pw = getpwuid(getuid()); pw && pw->pw_dir) home = pw->pw_dir;
  return home.empty() ? ".mlk-cache.db" : home + "/.cache/mlk/cache.db";
}

Status check_read_order(const std::string& csv) {
  bool own = false;
  size_t start = 0;
  while (true) {
    size_t comma = csv.find(',', start);
    std::string n = csv.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (n == "own") {
      if (own) return Status::Usage("`own` appears twice in the read order `" + csv + "`");
      own = true;
    } else if (Status v = cache::validate_namespace(n); !v.ok()) {
      return Status::Usage("read order `" + csv + "`: " + v.message());
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (!own)
    return Status::Usage("the read order `" + csv + "` must name `own` (where this team writes), e.g. own,shared-release");
  return Status::Ok();
}

Expected<std::unique_ptr<CliCache>> CliCache::Open(const std::string& flag_value, const std::string& ns,
                                                   const std::string& who, bool create_if_missing,
                                                   const std::string& token, const std::string& read_order,
                                                   const std::string& read_order_name) {
  if (!read_order.empty())
    if (Status v = check_read_order(read_order); !v.ok()) return Status::Usage(read_order_name + ": " + v.message());
  auto c = std::unique_ptr<CliCache>(new CliCache());
  c->who_ = who;
  c->ns_ = ns;
  // $MLK_SERVERS (replicas, comma-separated) when neither --cache nor $MLK_CACHE says otherwise.
  std::string spec = flag_value.empty() && env("MLK_CACHE").empty() && !env("MLK_SERVERS").empty()
                         ? env("MLK_SERVERS")
                         : cache::default_store_path(flag_value);
  if (is_remote_url(spec)) {
    RemoteOptions ro;
    ro.url = spec;
    ro.token = token.empty() ? env("MLK_TOKEN") : token;
    ro.ns = ns == cache::kDefaultNamespace ? "" : ns;
    auto r = RemoteStore::Open(ro);
    if (!r.ok()) return r.status();
    c->remote_ = std::move(*r);
    c->store_path_ = local_mirror_path();
    create_if_missing = true;
  } else {
    c->store_path_ = spec;
    if (!read_order.empty())
      return Status::Usage(read_order_name + ": `" + read_order +
                           "` is a read order of a cache server's namespaces, but the cache is the local store " + spec +
                           " (give --cache http://HOST:PORT, or set $MLK_SERVERS)");
  }
  if (!create_if_missing && !std::filesystem::exists(c->store_path_)) return c;
  cache::StoreOptions so;
  so.create_if_missing = create_if_missing;
  auto s = cache::Store::Open(c->store_path_, so);
  if (!s.ok()) return s.status();
  c->store_ = std::move(*s);
  // The flag's read order, else $MLK_NAMESPACES (which a local store ignores).
  const std::string order_csv = read_order.empty() ? env("MLK_NAMESPACES") : read_order;
  if (c->remote_ && !order_csv.empty()) {
    Status order = c->set_read_order(order_csv, token.empty() ? env("MLK_TOKEN") : token);
    if (!order.ok())
      return Status::Usage((read_order.empty() ? "$MLK_NAMESPACES" : read_order_name) + ": " + order.message());
  }
  if (c->remote_ && token.empty() && env("MLK_TOKEN").empty())
    log_linef(LogLevel::kNote, "%s: note: $MLK_TOKEN is not set; the cache server %s will refuse requests", who.c_str(),
              c->remote_->url().c_str());
  return c;
}

void CliCache::server_down(const Status& why) {
  if (down_) return;
  down_ = true;
  log_linef(LogLevel::kWarning, "%s: %s; using the local store %s only", who_.c_str(), why.message().c_str(), store_path_.c_str());
}

Status CliCache::set_read_order(const std::string& csv, const std::string& token) {
  if (!remote_) return Status::Ok();
  MLK_RETURN_IF_ERROR(check_read_order(csv));
  std::vector<std::string> names;
  size_t start = 0;
  while (true) {
    size_t comma = csv.find(',', start);
    names.push_back(csv.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  std::vector<std::unique_ptr<RemoteStore>> order;
  std::vector<std::string> labels;
  for (const auto& n : names) {
    if (n == "own") {
      order.push_back(nullptr);  // remote_ itself
      labels.push_back(n);
      continue;
    }
    RemoteOptions ro;
    ro.url = remote_->url();
    ro.token = token;
    ro.ns = n;
    auto r = RemoteStore::Open(ro);
    if (!r.ok()) return r.status();
    order.push_back(std::move(*r));
    labels.push_back(n);
  }
  read_order_ = std::move(order);
  read_labels_ = std::move(labels);
  return Status::Ok();
}

bool CliCache::pull(const std::string& key) {
  if (!remote_ || down_ || !store_) return false;
  if (store_->show_entry(ns_, key).ok()) return false;  // already here
  size_t n = read_order_.empty() ? 1 : read_order_.size();
  for (size_t i = 0; i < n; ++i) {
    RemoteStore* from = read_order_.empty() || !read_order_[i] ? remote_.get() : read_order_[i].get();
    std::string label = read_order_.empty() || !read_order_[i] ? "" : " namespace `" + read_labels_[i] + "`";
    auto rep = from->pull(*store_, ns_, key);
    if (rep.ok()) {
      log_linef(LogLevel::kNote, "%s: pulled %s from %s%s (%lld files, %s)", who_.c_str(), key.substr(0, 16).c_str(),
                remote_->url().c_str(), label.c_str(), static_cast<long long>(rep->files),
                cache::human_bytes(rep->bytes).c_str());
      return true;
    }
    if (rep.status().code() == Status::Code::kNotFound) continue;
    if (rep.status().code() == Status::Code::kInvalidArgument && !label.empty()) {
      // A refused shared namespace (a revoked grant: 403) is said, never a silent miss; the others are still read.
      log_linef(LogLevel::kWarning, "%s: %s; skipping%s", who_.c_str(), rep.status().message().c_str(), label.c_str());
      continue;
    }
    server_down(rep.status());
    return false;
  }
  return false;
}

Status CliCache::push(const std::string& key) {
  if (!remote_ || !store_) return Status::Ok();
  if (down_) return Status::IOError("the cache server is unreachable");
  auto rep = remote_->push(*store_, ns_, key);
  if (rep.ok()) {
    log_linef(LogLevel::kNote, "%s: pushed %s to %s (%lld blobs sent, %lld already there, %s)", who_.c_str(),
              key.substr(0, 16).c_str(), remote_->url().c_str(), static_cast<long long>(rep->blobs_sent),
              static_cast<long long>(rep->blobs_skipped), cache::human_bytes(rep->bytes).c_str());
    return Status::Ok();
  }
  server_down(rep.status());
  return rep.status();
}

std::vector<cache::EntryInfo> CliCache::query(const std::string& fn, const std::string& target,
                                              const std::string& program_hash) {
  if (!remote_ || down_) return {};
  auto r = remote_->query(fn, target, program_hash);
  if (r.ok()) return std::move(*r);
  server_down(r.status());
  return {};
}

Expected<std::string> CliCache::own_namespace() {
  if (!remote_) return ns_;
  return remote_->server_namespace();  // opened with --namespace, or none for the token's team
}

std::vector<std::string> CliCache::signature_namespaces(const cache::EntryInfo& e) {
  // A local store counts its own namespace only, whatever an entry's origin
  // says (a store file is copied and opened elsewhere).
  if (!remote_) return {ns_};
  auto own = own_namespace();
  if (!own.ok()) {
    if (!warned_) {
      warned_ = true;
      log_linef(LogLevel::kWarning,
                "%s: %s; entries signed for this team's namespace are not recognised (give --namespace NAME)",
                who_.c_str(), own.status().message().c_str());
    }
  }
  // What this cache reads: its own namespace and its read order's, of its server.
  std::vector<std::string> reads;
  if (own.ok()) reads.push_back(*own);
  for (size_t i = 0; i < read_labels_.size(); ++i)
    if (read_order_[i]) reads.push_back(read_labels_[i]);
  const std::string& origin = e.manifest.provenance.origin;
  auto from = pulled_namespace(origin);
  if (!from) return own.ok() ? std::vector<std::string>{*own} : std::vector<std::string>{};  // made or imported here
  // Pulled: its namespace counts only when it is one this cache reads, from
  // this cache's server (the mirror is shared by every run of this user).
  const bool ours = origin == origin_of_pull(remote_->url(), *from) &&
                    std::find(reads.begin(), reads.end(), *from) != reads.end();
  if (ours) return {*from};
  return {};
}

}  // namespace mlk::client
