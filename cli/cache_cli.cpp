#include "cli/cache_cli.h"

#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/time.h"
#include "cache/paths.h"
#include "cache/sizes.h"
#include "cache/store.h"

namespace mlk::cli {

const char kCacheUsageText[] =
    "usage: mlk cache COMMAND [ARGS] [--cache PATH] [--namespace NAME]\n"
    "\n"
    "Inspects and maintains the artifact cache, a content-addressed SQLite store of\n"
    "compiled kernels, schedules and tuning logs (docs/cache.md).\n"
    "\n"
    "commands:\n"
    "  ls                  list entries: namespace, key, bytes, files, pin, last use, producer\n"
    "  show KEY            print an entry's manifest and provenance as JSON\n"
    "  verify [--repair]   re-hash every blob and entry, check references and the database\n"
    "                      file; damaged items are quarantined; --repair also drops entries\n"
    "                      with missing blobs and rebuilds the reference index\n"
    "  gc --max-size SIZE  evict least recently used unpinned entries until the store (or,\n"
    "                      with --namespace, that namespace's charged bytes) is within SIZE;\n"
    "                      SIZE is bytes, or a number with K, M or G (powers of 1024): 512M\n"
    "  export FILE         write the entries (all, or those of --namespace) to a new\n"
    "                      single-file archive\n"
    "  import FILE         add the entries of an archive, verifying every byte; keys that\n"
    "                      are already here are kept\n"
    "  rm KEY              remove an entry (and the blobs only it used)\n"
    "  pin KEY             keep an entry through gc\n"
    "  unpin KEY           let gc evict it again\n"
    "  push KEY --remote URL  copy an entry and its blobs to a `mlk serve` (token from\n"
    "                      $MLK_TOKEN; on the server, namespace \"default\" is the token's team)\n"
    "  pull KEY --remote URL  copy an entry from a `mlk serve` into the store, verified\n"
    "\n"
    "KEY may be a unique prefix of at least 8 characters.\n"
    "\n"
    "options:\n"
    "  --cache PATH        the store; default $MLK_CACHE, else $XDG_CACHE_HOME/mlk/cache.db,\n"
    "                      else ~/.cache/mlk/cache.db\n"
    "  --namespace NAME    the namespace (team); ls, gc, export and import default to all\n"
    "                      namespaces, show, rm, pin and unpin to \"default\"\n"
    "\n"
    "Exit status: 0 success; 1 corruption found (verify) or bad input (no such key, a\n"
    "damaged, read-only or full store); 2 bad usage; 3 internal error (mlk bug).\n";

namespace {

using cache::default_store_path;
using cache::EntryInfo;
using cache::human_bytes;
using cache::kDefaultNamespace;
using cache::parse_size;
using cache::Provenance;
using cache::Store;
using cache::StoreOptions;
using cache::validate_namespace;
using nlohmann::json;

struct Options {
  std::string command;
  std::vector<std::string> positional;
  std::string cache;
  std::optional<std::string> ns;
  std::optional<std::string> max_size;
  bool repair = false;
};

Expected<Options> parse(const std::vector<std::string>& args) {
  Options o;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    std::optional<std::string> inline_value;
    if (a.rfind("--", 0) == 0 && a.find('=') != std::string::npos) {
      inline_value = a.substr(a.find('=') + 1);
      a = a.substr(0, a.find('='));
    }
    auto value = [&]() -> Expected<std::string> {
      if (inline_value) return *inline_value;
      if (i + 1 >= args.size()) return Status::Usage(a + " needs a value");
      return args[++i];
    };
    if (a == "--cache" || a == "--namespace" || a == "--max-size") {
      auto v = value();
      if (!v.ok()) return v.status();
      if (v->empty()) return Status::Usage(a + " needs a non-empty value");
      if (a == "--cache") o.cache = *v;
      if (a == "--namespace") o.ns = *v;
      if (a == "--max-size") o.max_size = *v;
    } else if (a == "--repair" && !inline_value) {
      o.repair = true;
    } else if (a.size() > 1 && a[0] == '-') {
      return Status::Usage("unknown option `" + args[i] + "`");
    } else if (o.command.empty()) {
      o.command = a;
    } else {
      o.positional.push_back(a);
    }
  }
  if (o.command.empty()) return Status::Usage("no command (ls, show, verify, gc, export, import, rm, pin, unpin)");
  static const std::map<std::string, size_t> kArity = {{"ls", 0},     {"show", 1},   {"verify", 0}, {"gc", 0},   {"export", 1},
                                                       {"import", 1}, {"rm", 1},     {"pin", 1},    {"unpin", 1}};
  auto it = kArity.find(o.command);
  if (it == kArity.end()) return Status::Usage("unknown command `" + o.command + "`");
  if (o.positional.size() != it->second) {
    if (it->second == 0) return Status::Usage(o.command + " takes no arguments, got `" + o.positional[0] + "`");
    const char* what = o.command == "export" || o.command == "import" ? "FILE" : "KEY";
    return Status::Usage(o.command + " takes one " + what + (o.positional.empty() ? "" : ", got " + std::to_string(o.positional.size())));
  }
  if (o.max_size && o.command != "gc") return Status::Usage("--max-size belongs to `gc`");
  if (o.command == "gc" && !o.max_size) return Status::Usage("gc needs --max-size SIZE (e.g. 10G)");
  if (o.repair && o.command != "verify") return Status::Usage("--repair belongs to `verify`");
  if (o.ns) {
    Status s = validate_namespace(*o.ns);
    if (!s.ok()) return Status::Usage("--namespace: " + s.message());
  }
  return o;
}

std::string entries(int64_t n) { return std::to_string(n) + (n == 1 ? " entry" : " entries"); }

json entry_json(const EntryInfo& e) {
  json files = json::object();
  for (const auto& [name, ref] : e.manifest.files) files[name] = {{"digest", ref.digest}, {"size", ref.size}};
  const Provenance& p = e.manifest.provenance;
  return json{{"namespace", e.ns},
              {"key", e.key},
              {"size", e.size},
              {"pinned", e.pinned},
              {"created", iso_time(e.created)},
              {"last_used", iso_time(e.last_used)},
              {"files", files},
              {"meta", json::parse(e.manifest.meta_json, nullptr, false)},
              {"provenance",
               {{"producer", p.producer},
                {"host", p.host},
                {"time", iso_time(p.time)},
                {"toolchain", p.toolchain},
                {"timings", p.measured ? "measured" : "estimated"}}}};
}

// An exact key, or a unique prefix of at least 8 characters.
Expected<std::string> resolve_key(Store& store, const std::string& ns, const std::string& key) {
  auto keys = store.keys_with_prefix(ns, key, 3);
  if (!keys.ok()) return keys.status();
  for (const auto& k : *keys)
    if (k == key) return k;
  if (keys->empty()) return Status::NotFound("no entry `" + key + "` in namespace `" + ns + "` of " + store.path());
  if (key.size() < 8)
    return Status::NotFound("no entry `" + key + "` in namespace `" + ns + "` (a key prefix needs at least 8 characters)");
  if (keys->size() > 1)
    return Status::InvalidArgument("`" + key + "` is ambiguous in namespace `" + ns + "`: it starts " + (*keys)[0] +
                                   ", " + (*keys)[1] + (keys->size() > 2 ? " and more" : ""));
  return (*keys)[0];
}

Status list(Store& store, const Options& o, std::ostream& out) {
  auto listed = store.list(o.ns);
  if (!listed.ok()) return listed.status();
  char line[512];
  if (listed->empty()) {
    out << "no entries" << (o.ns ? " in namespace `" + *o.ns + "`" : std::string()) << " in " << store.path() << "\n";
  } else {
    std::snprintf(line, sizeof line, "%-16s %-64s %12s %5s %3s %-20s %s\n", "NAMESPACE", "KEY", "BYTES", "FILES", "PIN",
                  "LAST USED", "PRODUCER");
    out << line;
  }
  for (const auto& e : *listed) {
    std::snprintf(line, sizeof line, "%-16s %-64s %12" PRId64 " %5zu %3s %-20s %s\n", e.ns.c_str(), e.key.c_str(), e.size,
                  e.manifest.files.size(), e.pinned ? "yes" : "-", iso_time(e.last_used).c_str(),
                  e.damaged ? "DAMAGED (run `mlk cache verify`)" : e.manifest.provenance.producer.c_str());
    out << line;
  }
  auto usage = store.usage();
  auto stats = store.stats();
  if (usage.ok() && stats.ok()) {
    for (const auto& u : *usage)
      if (!o.ns || u.ns == *o.ns)
        out << "namespace " << u.ns << ": " << entries(u.entries) << ", " << u.bytes << " bytes charged ("
            << human_bytes(u.bytes) << ")\n";
    out << "store: " << stats->blobs << " blobs, " << stats->blob_bytes << " bytes (" << human_bytes(stats->blob_bytes)
        << ")\n";
  }
  return Status::Ok();
}

int fail(std::ostream& err, const Status& s) {
  err << "mlk cache: " << s.message() << "\n";
  return s.exit_code();
}

}  // namespace

int run_cache_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  for (const auto& a : args)
    if (a == "--help" || a == "-h") {
      out << kCacheUsageText;
      return 0;
    }
  auto parsed = parse(args);
  if (!parsed.ok()) {
    err << "mlk cache: " << parsed.status().message() << "\n(see `mlk cache --help`)\n";
    return 2;
  }
  const Options& o = *parsed;
  int64_t max_size = 0;
  if (o.max_size) {
    auto sz = parse_size(*o.max_size);
    if (!sz.ok()) {
      err << "mlk cache: " << sz.status().message() << "\n(see `mlk cache --help`)\n";
      return 2;
    }
    max_size = *sz;
  }

  std::string path = default_store_path(o.cache);
  StoreOptions so;
  so.create_if_missing = o.command == "import";
  auto opened = Store::Open(path, so);
  if (!opened.ok()) {
    bool nothing_there = opened.status().code() == Status::Code::kNotFound;
    if (nothing_there && (o.command == "ls" || o.command == "verify" || o.command == "gc")) {
      out << "no cache store at " << path << " (nothing has been cached yet)\n";
      return 0;
    }
    return fail(err, opened.status());
  }
  Store& store = **opened;
  const std::string ns = o.ns.value_or(kDefaultNamespace);

  if (o.command == "ls") {
    Status s = list(store, o, out);
    return s.ok() ? 0 : fail(err, s);
  }
  if (o.command == "show" || o.command == "rm" || o.command == "pin" || o.command == "unpin") {
    auto key = resolve_key(store, ns, o.positional[0]);
    if (!key.ok()) return fail(err, key.status());
    if (o.command == "show") {
      auto e = store.show_entry(ns, *key);
      if (!e.ok()) return fail(err, e.status());
      out << entry_json(*e).dump(2) << "\n";
      return 0;
    }
    Status s = o.command == "rm" ? store.rm(ns, *key) : o.command == "pin" ? store.pin(ns, *key) : store.unpin(ns, *key);
    if (!s.ok()) return fail(err, s);
    const char* done = o.command == "rm" ? "removed" : o.command == "pin" ? "pinned" : "unpinned";
    out << done << " " << ns << "/" << *key << "\n";
    return 0;
  }
  if (o.command == "verify") {
    auto rep = store.verify(o.repair);
    if (!rep.ok()) return fail(err, rep.status());
    out << rep->summary();
    return rep->consistent() ? 0 : 1;
  }
  if (o.command == "gc") {
    auto rep = o.ns ? store.gc_namespace(*o.ns, max_size) : store.gc(max_size);
    if (!rep.ok()) return fail(err, rep.status());
    out << "evicted " << entries(rep->entries_evicted) << ", deleted " << rep->blobs_deleted << " blobs; "
        << (o.ns ? "namespace " + *o.ns : std::string("store")) << ": " << human_bytes(rep->bytes_before) << " -> "
        << human_bytes(rep->bytes_after) << " (limit " << human_bytes(max_size) << ")\n";
    if (!rep->within_limit)
      err << "mlk cache: note: still over the limit: the remaining " << human_bytes(rep->bytes_after)
          << " belong to pinned entries (`mlk cache unpin KEY` lets gc evict one)\n";
    return 0;
  }
  if (o.command == "export") {
    auto rep = store.export_to(o.positional[0], o.ns);
    if (!rep.ok()) return fail(err, rep.status());
    out << "exported " << entries(rep->entries) << " (" << rep->blobs << " blobs, " << human_bytes(rep->bytes) << ") to "
        << o.positional[0] << "\n";
    return 0;
  }
  if (o.command == "import") {
    auto rep = store.import_from(o.positional[0], o.ns);
    if (!rep.ok()) return fail(err, rep.status());
    out << "imported " << entries(rep->imported) << " from " << o.positional[0];
    if (rep->skipped) out << "; kept " << rep->skipped << " already present";
    out << "\n";
    return 0;
  }
  MLK_CHECK(false, "a parsed cache command has no handler");
  return 2;
}

}  // namespace mlk::cli
