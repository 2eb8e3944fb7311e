#include "cli/cache_cli.h"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/time.h"
#include "cache/entry_meta.h"
#include "cache/paths.h"
#include "cache/sizes.h"
#include "cache/store.h"
#include "cli/transfer_cli.h"
#include "cli/usage.h"
#include "client/remote_store.h"
#include "base/json.h"

namespace mlk::cli {

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

const char* kCacheEpilogue =
    "KEY may be a unique prefix of at least 8 characters.\n"
    "\n"
    "Exit status: 0 success; 1 corruption found (verify) or bad input (no such key, a\n"
    "damaged, read-only or full store); 2 bad usage; 3 internal error (mlk bug).\n";

FlagSetter store_namespace(std::optional<std::string>& out) {
  return [&out](const std::string& flag, const std::string& value) -> Status {
    Status s = validate_namespace(value);
    if (!s.ok()) return Status::Usage(flag + ": " + s.message());
    out = value;
    return Status::Ok();
  };
}

FlagSetter store_size(std::optional<int64_t>& out) {
  return [&out](const std::string&, const std::string& value) -> Status {
    auto sz = parse_size(value);
    if (!sz.ok()) return sz.status();
    out = *sz;
    return Status::Ok();
  };
}

// The subcommands: their words (a name, then one word per positional
// argument) and the flags that belong to them.
std::vector<Form> subcommands() {
  return {
      {"ls", {"--json"}, "list entries: namespace, key, bytes, files, pin, last use, producer, verified"},
      {"show KEY", {}, "print an entry's manifest and provenance as JSON"},
      {"verify", {"--repair"}, "re-hash every blob and entry, check references and the database file; damaged items are quarantined"},
      {"gc", {"!--max-size"},
       "evict least recently used unpinned entries until the store (or, with --namespace, that namespace's charged "
       "bytes) is within SIZE"},
      {"export FILE", {}, "write the entries (all, or those of --namespace) to a new single-file archive"},
      {"import FILE", {}, "add the entries of an archive, verifying every byte; keys that are already here are kept"},
      {"rm KEY", {}, "remove an entry (and the blobs only it used)"},
      {"pin KEY", {}, "keep an entry through gc"},
      {"unpin KEY", {}, "let gc evict it again"},
      {"push KEY", {"!--remote", "--require-verified", "--sign", "--trusted-signers"},
       "copy an entry and its blobs to a `mlk serve` (token from $MLK_TOKEN; on the server, namespace \"default\" is "
       "the token's team); says the namespace it landed in"},
      {"pull KEY", {"!--remote"}, "copy an entry from a `mlk serve` into the store, verified"},
  };
}

CommandSpec spec(CacheArgs& o) {
  return {
      .name = "cache",
      .summary = "inspect and maintain the artifact cache",
      .forms = {{"COMMAND [ARGS]", {"--cache", "--namespace"}}},
      .description = "Inspects and maintains the artifact cache, a content-addressed SQLite store of\n"
                     "compiled kernels, schedules and tuning logs (docs/cache.md).\n",
      .subcommands = subcommands(),
      .flags_heading = "options:",
      .flags =
          {
              cache_flag(o.cache, CacheFlag::kStoreFile),
              {.name = "--namespace", .metavar = "NAME",
               .help = "the namespace (team); ls, gc, export and import default to all namespaces, show, rm, pin, "
                       "unpin, push and pull to \"default\"",
               .set = store_namespace(o.ns)},
              {.name = "--max-size", .metavar = "SIZE",
               .help = "gc: the limit; bytes, or a number with K, M or G (powers of 1024): 512M",
               .set = store_size(o.max_size), .required_note = " (e.g. 10G)"},
              {.name = "--json",
               .help = "ls: print one JSON object (the entries, the namespaces' charged bytes, the blobs) "
                       "instead of the table",
               .set = set_bool(o.json)},
              {.name = "--repair",
               .help = "verify: also drop entries with missing blobs and rebuild the reference index",
               .set = set_bool(o.repair)},
              {.name = "--remote", .metavar = "URL", .help = "push, pull: the `mlk serve`, e.g. http://cache:8080",
               .set = store(o.remote), .required_note = " (the `mlk serve`, e.g. http://cache:8080)"},
              {.name = "--require-verified", .metavar = "LEVELS",
               .help = "push: refuse (and push nothing) unless the entry's `mlk verify` report passed these levels "
                       "(types, identity, envelope, memory, equivalence; all; cheap)",
               .set = store(o.require_verified)},
              {.name = "--sign", .metavar = "KEYFILE",
               .help = "push: sign the entry with this Ed25519 key (`mlk key create`) and store it signed before "
                       "pushing; only an entry made in this store, or one a key of --trusted-signers signed "
                       "(docs/signing.md)",
               .set = store(o.sign)},
              {.name = "--trusted-signers", .metavar = "KEYS",
               .help = "push --sign: an entry pulled or imported from elsewhere is re-signed only when one of these "
                       "keys (64 hex or KEY.pub files, comma-separated) signed it: key rotation. push "
                       "--require-verified: an entry not tuned here passes only with a report one of them signed",
               .set = store(o.trusted_signers)},
          },
      .epilogue = kCacheEpilogue,
      .positional =
          [&o](const std::string& arg) {
            if (o.command.empty()) o.command = arg;
            else o.positional.push_back(arg);
            return Status::Ok();
          },
  };
}

// The subcommand, its arguments and which flags go with it.
Status check_args(const CommandSpec& s, const CacheArgs& o, const ParsedFlags& seen) {
  if (o.command.empty()) return Status::Usage("no command (ls, show, verify, gc, export, import, rm, pin, unpin, push, pull)");
  const Form* form = nullptr;
  for (const auto& f : s.subcommands)
    if (f.words.substr(0, f.words.find(' ')) == o.command) form = &f;
  if (!form) return Status::Usage("unknown command `" + o.command + "`");
  const size_t arity = std::count(form->words.begin(), form->words.end(), ' ');
  if (o.positional.size() != arity) {
    if (arity == 0) return Status::Usage(o.command + " takes no arguments, got `" + o.positional[0] + "`");
    const std::string what = form->words.substr(form->words.find(' ') + 1);
    return Status::Usage(o.command + " takes one " + what +
                         (o.positional.empty() ? "" : ", got " + std::to_string(o.positional.size())));
  }
  if (Status st = check_subcommand_flags(s, o.command, seen); !st.ok()) return st;
  if (!o.remote.empty() && !client::is_remote_url(o.remote))
    return Status::Usage("--remote: `" + o.remote + "` is not an http:// URL");
  return Status::Ok();
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
              {"meta", parse_json(e.manifest.meta_json)},
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

// The levels `mlk verify` passed (docs/verification.md); "?" when the metadata is unreadable.
std::string verified_levels(const EntryInfo& e) {
  auto v = cache::parse_verified(e.manifest.meta_json.empty() ? "{}" : e.manifest.meta_json);
  return v.ok() ? v->str() : "?";
}

// One entry of `ls --json`: the table's columns, each under its own name;
// producer and verified are null for a damaged entry.
json entry_row_json(const EntryInfo& e) {
  return json{{"namespace", e.ns},
              {"key", e.key},
              {"size", e.size},
              {"file_count", e.manifest.files.size()},
              {"pinned", e.pinned},
              {"created", iso_time(e.created)},
              {"last_used", iso_time(e.last_used)},
              {"damaged", e.damaged},
              {"producer", e.damaged ? json(nullptr) : json(e.manifest.provenance.producer)},
              {"verified", e.damaged ? json(nullptr) : json(verified_levels(e))}};
}

// The `ls --json` document of `store` (an empty one, "exists": false and no
// blobs, when there is no store at `path`). The namespaces' usage and the
// blob counts are null when the store cannot report them.
json list_json(const std::string& path, Store* store, const std::vector<EntryInfo>& listed,
               const std::optional<std::string>& ns) {
  json rows = json::array(), namespaces = json::array(), blobs = 0, blob_bytes = 0;
  for (const auto& e : listed) rows.push_back(entry_row_json(e));
  if (store) {
    auto usage = store->usage();
    auto stats = store->stats();
    if (!usage.ok()) namespaces = nullptr;
    else
      for (const auto& u : *usage)
        if (!ns || u.ns == *ns) namespaces.push_back({{"namespace", u.ns}, {"entries", u.entries}, {"bytes", u.bytes}});
    blobs = stats.ok() ? json(stats->blobs) : json(nullptr);
    blob_bytes = stats.ok() ? json(stats->blob_bytes) : json(nullptr);
  }
  return json{{"format", "mlk-cache-ls-1"}, {"store", path},           {"exists", store != nullptr},
              {"entries", rows},            {"namespaces", namespaces}, {"blobs", blobs},
              {"blob_bytes", blob_bytes}};
}

Status list(Store& store, const CacheArgs& o, std::ostream& out) {
  auto listed = store.list(o.ns);
  if (!listed.ok()) return listed.status();
  if (o.json) {
    out << list_json(store.path(), &store, *listed, o.ns).dump() << "\n";
    return Status::Ok();
  }
  char line[512];
  if (listed->empty()) {
    out << "no entries" << (o.ns ? " in namespace `" + *o.ns + "`" : std::string()) << " in " << store.path() << "\n";
  } else {
    std::snprintf(line, sizeof line, "%-16s %-64s %12s %5s %3s %-20s %-12s %s\n", "NAMESPACE", "KEY", "BYTES", "FILES",
                  "PIN", "LAST USED", "PRODUCER", "VERIFIED");
    out << line;
  }
  for (const auto& e : *listed) {
    const std::string verified = verified_levels(e);
    std::snprintf(line, sizeof line, "%-16s %-64s %12" PRId64 " %5zu %3s %-20s %-12s %s\n", e.ns.c_str(), e.key.c_str(),
                  e.size, e.manifest.files.size(), e.pinned ? "yes" : "-", iso_time(e.last_used).c_str(),
                  e.damaged ? "DAMAGED (run `mlk cache verify`)" : e.manifest.provenance.producer.c_str(),
                  e.damaged ? "-" : verified.c_str());
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

CommandSpec cache_command_spec() {
  static CacheArgs scratch;
  return spec(scratch);
}

int run_cache_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CacheArgs o;
  const CommandSpec s = spec(o);
  for (const auto& a : args)
    if (a == "--help" || a == "-h") {
      out << usage_text(s);
      return 0;
    }
  auto parsed = parse_command_line(s, args);
  Status st = parsed.ok() ? check_args(s, o, *parsed) : parsed.status();
  if (!st.ok()) {
    err << "mlk cache: " << st.message() << "\n(see `mlk cache --help`)\n";
    return 2;
  }
  // push and pull talk HTTP through the client (client/remote_store.h).
  if (o.command == "push" || o.command == "pull") return run_cache_transfer(o, out, err);
  const int64_t max_size = o.max_size.value_or(0);

  std::string path = default_store_path(o.cache);
  StoreOptions so;
  so.create_if_missing = o.command == "import";
  auto opened = Store::Open(path, so);
  if (!opened.ok()) {
    bool nothing_there = opened.status().code() == Status::Code::kNotFound;
    if (nothing_there && (o.command == "ls" || o.command == "verify" || o.command == "gc")) {
      (o.json ? err : out) << "no cache store at " << path << " (nothing has been cached yet)\n";
      if (o.json) out << list_json(path, nullptr, {}, o.ns).dump() << "\n";
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
