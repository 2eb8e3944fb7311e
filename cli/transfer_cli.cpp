#include "cli/transfer_cli.h"

#include <cstdlib>

#include "cache/paths.h"
#include "cache/sizes.h"
#include "cache/store.h"
#include "client/remote_store.h"

namespace mlk::cli {

namespace {

using client::is_remote_url;
using client::RemoteOptions;
using client::RemoteStore;

struct Options {
  std::string command, key, remote, cache, ns = cache::kDefaultNamespace;
};

Expected<Options> parse(const std::vector<std::string>& args) {
  Options o;
  o.command = args.at(0);
  for (size_t i = 1; i < args.size(); ++i) {
    std::string a = args[i];
    std::string value;
    bool inline_value = false;
    if (a.rfind("--", 0) == 0 && a.find('=') != std::string::npos) {
      value = a.substr(a.find('=') + 1);
      a = a.substr(0, a.find('='));
      inline_value = true;
    }
    if (a == "--remote" || a == "--cache" || a == "--namespace") {
      if (!inline_value) {
        if (i + 1 >= args.size()) return Status::Usage(a + " needs a value");
        value = args[++i];
      }
      if (value.empty()) return Status::Usage(a + " needs a non-empty value");
      (a == "--remote" ? o.remote : a == "--cache" ? o.cache : o.ns) = value;
    } else if (a.size() > 1 && a[0] == '-') {
      return Status::Usage("unknown option `" + args[i] + "`");
    } else if (o.key.empty()) {
      o.key = a;
    } else {
      return Status::Usage(o.command + " takes one KEY, got `" + a + "` too");
    }
  }
  if (o.key.empty()) return Status::Usage(o.command + " needs a KEY");
  if (o.remote.empty()) return Status::Usage(o.command + " needs --remote URL (the `mlk serve`, e.g. http://cache:8080)");
  if (!is_remote_url(o.remote)) return Status::Usage("--remote: `" + o.remote + "` is not an http:// URL");
  Status ns = cache::validate_namespace(o.ns);
  if (!ns.ok()) return Status::Usage("--namespace: " + ns.message());
  return o;
}

// An exact key, or a unique prefix (at least 8 characters) of a local key.
Expected<std::string> resolve(cache::Store& store, const std::string& ns, const std::string& key) {
  auto keys = store.keys_with_prefix(ns, key, 2);
  if (!keys.ok()) return keys.status();
  for (const auto& k : *keys)
    if (k == key) return k;
  if (keys->size() == 1 && key.size() >= 8) return (*keys)[0];
  if (keys->size() > 1 && key.size() >= 8) return Status::InvalidArgument("`" + key + "` is ambiguous in namespace `" + ns + "`");
  return Status::NotFound("no entry `" + key + "` in namespace `" + ns + "` of " + store.path());
}

}  // namespace

int run_cache_transfer(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto parsed = parse(args);
  if (!parsed.ok()) {
    err << "mlk cache: " << parsed.status().message() << "\n(see `mlk cache --help`)\n";
    return 2;
  }
  const Options& o = *parsed;
  auto fail = [&](const Status& s) {
    err << "mlk cache " << o.command << ": " << s.message() << "\n";
    return s.exit_code();
  };
  RemoteOptions ro;
  ro.url = o.remote;
  const char* token = std::getenv("MLK_TOKEN");
  ro.token = token ? token : "";
  ro.ns = o.ns == cache::kDefaultNamespace ? "" : o.ns;
  auto remote = RemoteStore::Open(ro);
  if (!remote.ok()) return fail(remote.status());
  std::string path = cache::default_store_path(o.cache);
  if (is_remote_url(path)) return fail(Status::Usage("--cache (or $MLK_CACHE) must be a store path here, the server is --remote"));
  cache::StoreOptions so;
  so.create_if_missing = o.command == "pull";
  auto store = cache::Store::Open(path, so);
  if (!store.ok()) return fail(store.status());
  if (o.command == "push") {
    auto key = resolve(**store, o.ns, o.key);
    if (!key.ok()) return fail(key.status());
    auto rep = (*remote)->push(**store, o.ns, *key);
    if (!rep.ok()) return fail(rep.status());
    out << "pushed " << o.ns << "/" << *key << " to " << o.remote << ": " << rep->files << " files, " << rep->blobs_sent
        << " blobs sent (" << cache::human_bytes(rep->bytes) << "), " << rep->blobs_skipped << " already there\n";
    return 0;
  }
  auto rep = (*remote)->pull(**store, o.ns, o.key);
  if (!rep.ok()) return fail(rep.status());
  out << "pulled " << o.key << " from " << o.remote << " into " << path << " (namespace " << o.ns << "): " << rep->files
      << " files, " << cache::human_bytes(rep->bytes) << ", verified\n";
  return 0;
}

}  // namespace mlk::cli
