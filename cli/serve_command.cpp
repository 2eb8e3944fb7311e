// `mlk serve`: the cache daemon (service/server.h) on a store file.
#include <algorithm>
#include <set>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/signing.h"
#include "cache/entry_meta.h"
#include "cache/paths.h"
#include "cache/pg_store.h"
#include "cache/sizes.h"
#include "cli/command.h"
#include "cli/config_file.h"
#include "cli/flags.h"
#include "service/api.h"
#include "service/server.h"

namespace mlk::cli {

namespace {

struct ServeArgs {
  service::ServeOptions o;
  std::string cache_flag, store_flag;
  bool routes = false;
};

Expected<int64_t> size_flag(const std::string& flag, const std::string& text) {
  auto v = cache::parse_size(text);
  if (!v.ok() || *v <= 0)
    return Status::Usage(flag + ": `" + text + "` is not a size; give bytes or a whole number with K, M or G, e.g. 512M");
  return *v;
}

FlagSetter store_size(int64_t& out) {
  return [&out](const std::string& flag, const std::string& value) -> Status {
    auto n = size_flag(flag, value);
    if (!n.ok()) return n.status();
    out = *n;
    return Status::Ok();
  };
}

FlagSetter store_listen(service::ServeOptions& o) {
  return [&o](const std::string& flag, const std::string& text) -> Status {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0)
      return Status::Usage(flag + ": `" + text +
                           "` is not HOST:PORT (e.g. 127.0.0.1:8080, 0.0.0.0:8080; port 0: any free one)");
    std::string port = text.substr(colon + 1);
    bool digits = !port.empty() && port.size() <= 5 && port.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || std::stoi(port) > 65535) return Status::Usage(flag + ": `" + port + "` is not a port number (0-65535)");
    o.host = text.substr(0, colon);
    if (o.host.size() > 2 && o.host.front() == '[' && o.host.back() == ']') o.host = o.host.substr(1, o.host.size() - 2);
    o.port = std::stoi(port);
    return Status::Ok();
  };
}

FlagSetter store_threads(int& out) {
  return [&out](const std::string& flag, const std::string& value) -> Status {
    auto n = parse_count(flag, value);
    if (!n.ok() || *n > 1024) return Status::Usage(flag + ": `" + value + "` is not a number from 1 to 1024");
    out = static_cast<int>(*n);
    return Status::Ok();
  };
}

// --quota TEAM=SIZE, once per team.
FlagSetter store_quota(std::map<std::string, int64_t>& limits) {
  return [&limits](const std::string& flag, const std::string& value) -> Status {
    size_t eq = value.find('=');
    if (eq == std::string::npos || eq == 0) return Status::Usage(flag + ": `" + value + "` is not TEAM=SIZE (e.g. vision=50G)");
    std::string team = value.substr(0, eq);
    Status ns = cache::validate_namespace(team);
    if (!ns.ok()) return Status::Usage(flag + ": " + ns.message());
    auto n = size_flag(flag, value.substr(eq + 1));
    if (!n.ok()) return n.status();
    limits[team] = *n;
    return Status::Ok();
  };
}

// --require-verified NS=LEVELS, once per release namespace.
FlagSetter store_release(std::map<std::string, std::vector<std::string>>& gates) {
  return [&gates](const std::string& flag, const std::string& value) -> Status {
    size_t eq = value.find('=');
    if (eq == std::string::npos || eq == 0)
      return Status::Usage(flag + ": `" + value + "` is not NAMESPACE=LEVELS (e.g. release=envelope,memory)");
    Status ns = cache::validate_namespace(value.substr(0, eq));
    if (!ns.ok()) return Status::Usage(flag + ": " + ns.message());
    auto lv = cache::parse_required_levels(value.substr(eq + 1));
    if (!lv.ok()) return Status::Usage(flag + ": " + lv.status().message());
    gates[value.substr(0, eq)] = *lv;
    return Status::Ok();
  };
}

// --trusted-signers / --trusted-verifiers NS=KEY[,KEY...], once per
// namespace: Ed25519 public keys (64 hex) or KEY.pub files (base/signing.h).
FlagSetter store_trust(std::map<std::string, std::vector<std::string>>& lists) {
  return [&lists](const std::string& flag, const std::string& value) -> Status {
    size_t eq = value.find('=');
    if (eq == std::string::npos || eq == 0)
      return Status::Usage(flag + ": `" + value.substr(0, 80) + "` is not NAMESPACE=KEY[,KEY...] (public keys or .pub files)");
    Status ns = cache::validate_namespace(value.substr(0, eq));
    if (!ns.ok()) return Status::Usage(flag + ": " + ns.message());
    auto keys = parse_trusted_keys(value.substr(eq + 1));
    if (!keys.ok()) return Status::Usage(flag + ": " + keys.status().message());
    auto& list = lists[value.substr(0, eq)];
    for (const auto& k : *keys)
      if (std::find(list.begin(), list.end(), k) == list.end()) list.push_back(k);
    return Status::Ok();
  };
}

// --timeout: the read and the write limit.
FlagSetter store_timeout(service::ServeOptions& o) {
  return [&o](const std::string& flag, const std::string& value) -> Status {
    auto n = parse_count(flag, value);
    if (!n.ok()) return n.status();
    o.read_timeout_s = o.write_timeout_s = static_cast<int>(*n);
    return Status::Ok();
  };
}

const char* kServeDescription =
    "Serves the artifact store over HTTP (docs/api.md): blobs by sha256, entries by\n"
    "key, queries, status and Prometheus metrics under /v1/ and /metrics, and ccache's\n"
    "HTTP remote-storage protocol under /ccache/, and a web dashboard of the entries\n"
    "and benchmark histories under /ui (docs/ci.md). Every request needs a token from\n"
    "`mlk token create`, which binds it to a team (namespace) and scopes. Runs until\n"
    "SIGTERM or SIGINT, then finishes the requests in flight and exits 0. SIGHUP\n"
    "reloads nothing and says so in the log: tokens are read from the store on every\n"
    "request, so `mlk token create/revoke` count at once; flags and --config take\n"
    "effect on a restart.\n"
    "\n"
    "--config FILE reads the flags from a TOML file first (deploy/mlk-serve.toml,\n"
    "docs/deploy.md): a key is a flag's name without `--` (`listen = \"0.0.0.0:8080\"`,\n"
    "`access-log = true`); NAME=VALUE flags are tables (`[quota]` `vision = \"50G\"`).\n"
    "Flags on the command line override the file's values.\n";

// The limits against slow, greedy and hostile clients (docs/api.md, "Limits and threads").
std::vector<Flag> limit_flags(service::ServeOptions& o) {
  return {
      {.name = "--timeout", .metavar = "SECONDS", .help = "a connection with no bytes moving this long is dropped",
       .default_value = "30", .set = store_timeout(o)},
      {.name = "--keep-alive", .metavar = "SECONDS", .help = "idle time before a keep-alive connection is closed",
       .default_value = "5", .set = store_count(o.keep_alive_timeout_s)},
      {.name = "--max-connections", .metavar = "N", .help = "open connections; more are refused",
       .default_value = "1000", .set = store_count(o.max_connections)},
      {.name = "--max-connections-per-address", .metavar = "N",
       .help = "open connections of one client address; more are refused", .default_value = "64",
       .set = store_count(o.max_connections_per_address)},
      {.name = "--max-header-bytes", .metavar = "SIZE", .help = "a request's line and headers together; more get 431",
       .default_value = "32K", .set = store_size(o.max_header_bytes)},
      {.name = "--max-headers", .metavar = "N", .help = "header fields of a request; more get 431",
       .default_value = "100", .set = store_count(o.max_headers)},
      {.name = "--header-timeout", .metavar = "SECONDS",
       .help = "a request's head must arrive whole within this (of connecting, or of its first line on a "
               "kept-alive connection); else the connection is closed",
       .default_value = "10", .set = store_count(o.header_timeout_s)},
      {.name = "--body-timeout", .metavar = "SECONDS",
       .help = "a request's body must arrive whole within this of its head; else the connection is closed",
       .default_value = "120", .set = store_count(o.body_timeout_s)},
      {.name = "--collect-interval", .metavar = "SECONDS",
       .help = "how often the server deletes the blobs no entry references and no namespace has staged "
               "(uploads whose staging expired; on the shared backend also what removed entries left)",
       .default_value = "600", .set = store_count(o.collect_interval_s)},
      {.name = "--collect-grace", .metavar = "SECONDS",
       .help = "blobs uploaded within this are never collected (a client, or another replica, may be "
               "binding them)",
       .default_value = "3600", .set = store_count(o.collect_grace_s)},
      {.name = "--upload-memory", .metavar = "SIZE",
       .help = "request bodies buffered at once, all connections together; beyond it writes get 503",
       .default_value = "256M", .set = store_size(o.upload_memory_bytes)},
      {.name = "--upload-memory-per-token", .metavar = "SIZE",
       .help = "what one token's bodies may hold of --upload-memory at once (default: a quarter of it, at "
               "least --max-body); beyond it that token's writes get 503",
       .set = store_size(o.upload_memory_per_token_bytes)},
      {.name = "--answer-memory", .metavar = "SIZE",
       .help = "answers over 64 KiB (blobs, entry lists) held while they are sent, all connections "
               "together; one client (token, session or address) holds at most a quarter; beyond it 503",
       .default_value = "1G", .set = store_size(o.answer_memory_bytes)},
  };
}

// TLS, the namespaces' staging, the route table and the access log.
std::vector<Flag> tail_flags(ServeArgs& a, service::ServeOptions& o) {
  return {
      {.name = "--trusted-proxies", .metavar = "ADDRS",
       .help = "peers that are proxies in front of this server (comma-separated addresses, e.g. 127.0.0.1 behind "
               "a TLS proxy on this host): their requests count against the address of the last X-Forwarded-For "
               "entry, for the per-address limits and the access log",
       .set = [&o](const std::string&, const std::string& v) {
         o.trusted_proxies.clear();
         for (size_t at = 0; at <= v.size();) {
           size_t comma = std::min(v.find(',', at), v.size());
           if (comma > at) o.trusted_proxies.push_back(v.substr(at, comma - at));
           at = comma + 1;
         }
         return Status::Ok();
       }},
      {.name = "--tls-cert", .metavar = "FILE",
       .help = "serve HTTPS: the PEM certificate (chain) of the server; with --tls-key. Clients verify it "
               "($MLK_CACERT: the CA's PEM file)",
       .set = store(o.tls_cert_path)},
      {.name = "--tls-key", .metavar = "FILE", .help = "the PEM private key of --tls-cert",
       .set = store(o.tls_key_path)},
      {.name = "--public-url", .metavar = "URL",
       .help = "the URL clients reach this server at (behind a TLS proxy: https://...; the dashboard's "
               "cookie is then Secure)",
       .set = store(o.public_url)},
      {.name = "--staged-ttl", .metavar = "SECONDS",
       .help = "how long an uploaded blob no entry uses stays charged to its namespace and readable by it",
       .default_value = "3600", .set = store_count(o.api.staged_ttl_s)},
      {.name = "--routes",
       .help = "print the route table as JSON (path or prefix, metrics name, methods) and exit; "
               "docs/openapi.yaml describes each route",
       .set = set_bool(a.routes)},
      {.name = "--access-log", .help = "one line per request on stderr", .set = set_bool(o.access_log)},
      {.name = "--access-log-json",
       .help = "the access log as JSON lines (time, client, method, target, status, bytes, ms, team, ended)",
       .set = [&o](const std::string&, const std::string&) {
         o.access_log = o.access_log_json = true;
         return Status::Ok();
       }},
  };
}

CommandSpec spec(ServeArgs& a) {
  service::ServeOptions& o = a.o;
  CommandSpec s = {
      .name = "serve",
      .summary = "serve the artifact cache over HTTP (API, ccache protocol, metrics)",
      .description = kServeDescription,
      .flags =
          {
              {.name = "--config", .metavar = "FILE",
               .help = "read these flags from a TOML file first (keys are flag names without `--`); flags given "
                       "here override it",
               .set = [](const std::string&, const std::string&) { return Status::Ok(); }},  // read by run_serve
              cache_flag(a.cache_flag, CacheFlag::kStoreFile),
              {.name = "--store", .metavar = "URL",
               .help = "the shared backend instead of a store file: postgresql://USER@HOST:PORT/DB (needs --blobs)",
               .set = store(a.store_flag)},
              {.name = "--blobs", .metavar = "S3URL",
               .help = "with --store: the bucket for blob bytes, s3://BUCKET?endpoint=http://HOST:PORT[&region=R]; "
                       "credentials from $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY",
               .set = store(o.blobs)},
              {.name = "--blob-cache", .metavar = "DIR",
               .help = "with --store: this replica's local cache of blobs read from the bucket (one per replica)",
               .default_value = "none", .set = store(o.blob_cache_dir)},
              {.name = "--blob-cache-size", .metavar = "SIZE", .help = "the local blob cache's limit, least recently used out first",
               .default_value = "1G", .set = store_size(o.blob_cache_bytes)},
              {.name = "--listen", .metavar = "HOST:PORT",
               .help = "the address; port 0: any free port, printed on the first line of output",
               .default_value = "127.0.0.1:8080", .set = store_listen(o)},
              {.name = "--threads", .metavar = "N",
               .help = "worker threads: requests handled at once (idle or slow connections hold none); one client "
                       "(token, session or address) runs on at most half of them, and a quarter as many event "
                       "loops (1-4) read requests and write answers",
               .default_value = "8", .set = store_threads(o.threads)},
              {.name = "--max-body", .metavar = "SIZE", .help = "largest request body; larger ones get 413",
               .default_value = "64M", .set = store_size(o.api.max_body_bytes)},
              {.name = "--max-manifest", .metavar = "SIZE",
               .help = "largest entry manifest (files, meta, provenance), charged to the quota; larger ones get 413",
               .default_value = "1M", .set = store_size(o.api.max_manifest_bytes)},
              {.name = "--max-answer", .metavar = "SIZE",
               .help = "largest answer of a listing (GET /v1/entries, /v1/bench/history); past it the answer is "
                       "`truncated` with a `next` to go on from",
               .default_value = "8M", .set = store_size(o.api.max_answer_bytes)},
              {.name = "--quota", .metavar = "TEAM=SIZE", .help = "hard limit of a namespace's bytes; over it writes get 507",
               .set = store_quota(o.api.quotas.limits), .repeatable = true},
              {.name = "--require-verified", .metavar = "NS=LEVELS",
               .help = "a release namespace: it accepts only entries whose `mlk verify` report passed LEVELS "
                       "(e.g. release=envelope,memory); others get 403",
               .set = store_release(o.api.require_verified), .repeatable = true},
              {.name = "--trusted-signers", .metavar = "NS=KEYS",
               .help = "a signed namespace: it accepts only entries signed by one of KEYS (Ed25519 public keys or "
                       ".pub files, comma-separated; `mlk key create`); unsigned or foreign-signed ones get 403 "
                       "(docs/signing.md)",
               .set = store_trust(o.api.trusted_signers), .repeatable = true},
              {.name = "--trusted-verifiers", .metavar = "NS=KEYS",
               .help = "the keys whose signed `mlk verify` reports release namespace NS (--require-verified) "
                       "accepts; unsigned reports are refused",
               .default_value = "NS's --trusted-signers", .set = store_trust(o.api.trusted_verifiers), .repeatable = true},
              {.name = "--default-quota", .metavar = "SIZE", .help = "the limit of every namespace without --quota",
               .default_value = "none", .set = store_size(o.api.quotas.default_limit)},
          },
      .epilogue = "SIZE is bytes, or a whole number with K, M or G (powers of 1024).\n",
  };
  for (auto more : {limit_flags(o), tail_flags(a, o)}) s.flags.insert(s.flags.end(), more.begin(), more.end());
  return s;
}

}  // namespace

CommandSpec serve_spec() {
  static ServeArgs scratch;
  return spec(scratch);
}

int run_serve(const std::vector<std::string>& args) {
  ServeArgs a;
  // The file first, then the command line through the same setters; a flag
  // the command line gives replaces the file's key whole (--cache and
  // --store: either replaces both).
  auto config = config_flag_value(args);
  if (!config.ok()) return usage_error("serve", config.status().message());
  if (*config) {
    ServeArgs scratch;
    ParsedFlags given;
    if (int bad = parse_or_usage_error(spec(scratch), args, &given)) return bad;
    std::set<std::string> skip(given.given.begin(), given.given.end());
    if (skip.count("--cache") || skip.count("--store")) skip.insert({"--cache", "--store"});
    Status s = apply_config_file(spec(a), **config, skip, {"--routes"});
    if (!s.ok()) return usage_error("serve", s.message());
  }
  if (int bad = parse_or_usage_error(spec(a), args)) return bad;
  if (a.routes) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : service::route_table())
      out.push_back({{"prefix", r.prefix}, {"name", r.name}, {"methods", r.methods}});
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  if (!a.store_flag.empty() && !a.cache_flag.empty()) return usage_error("serve", "give --cache PATH or --store URL, not both");
  if (!a.store_flag.empty() && !cache::is_postgres_url(a.store_flag))
    return usage_error("serve", "--store `" + a.store_flag + "` is not a postgresql:// URL (a store file is --cache PATH)");
  if (a.store_flag.empty() && (!a.o.blobs.empty() || !a.o.blob_cache_dir.empty()))
    return usage_error("serve", "--blobs and --blob-cache go with --store postgresql://...; an SQLite store keeps its blobs itself");
  if (!a.store_flag.empty() && a.o.blobs.empty())
    return usage_error("serve", "--store needs --blobs s3://BUCKET?endpoint=... (where the blob bytes live)");
  for (const auto& [ns, levels] : a.o.api.require_verified)
    if (!a.o.api.trusted_verifiers.count(ns) && !a.o.api.trusted_signers.count(ns))
      return usage_error("serve", "--require-verified " + ns + "=...: a release accepts only reports signed by a trusted "
                                  "verifier; give --trusted-verifiers " + ns + "=KEYS (or --trusted-signers " + ns +
                                  "=KEYS)");
  if (a.o.tls_cert_path.empty() != a.o.tls_key_path.empty())
    return usage_error("serve", "--tls-cert and --tls-key go together: give both, or neither for plain HTTP");
  a.o.store_path = a.store_flag.empty() ? cache::default_store_path(a.cache_flag) : a.store_flag;
  // The benchmark history beside an SQLite store (docs/ci.md); none with PostgreSQL yet.
  if (a.store_flag.empty()) a.o.api.bench_history_path = a.o.store_path + ".bench-history";
  if (a.o.blob_cache_dir.empty()) a.o.blob_cache_bytes = 0;
  Status s = service::serve_until_signal(a.o);
  if (!s.ok()) {
    std::fprintf(stderr, "mlk serve: %s\n", s.message().c_str());
    return s.exit_code();
  }
  return 0;
}

}  // namespace mlk::cli
