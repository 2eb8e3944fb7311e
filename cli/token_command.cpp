// `mlk token`: create, list and revoke the access tokens of `mlk serve`
// (service/tokens.h), kept in the store file the server uses
// or in the shared backend's database; and the read grants between teams.
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/time.h"
#include "cache/paths.h"
#include "cli/flags.h"
#include "cli/command.h"
#include "service/service_db.h"
#include "service/tables.h"
#include "service/tokens.h"

namespace mlk::cli {

namespace {

int fail(const Status& s) {
  std::fprintf(stderr, "mlk token: %s\n", s.message().c_str());
  return s.exit_code();
}

struct TokenArgs {
  std::string sub, target, team, scopes_text, note, cache_flag, store_flag, ns;
  bool json_out = false;
};

CommandSpec spec(TokenArgs& a) {
  return {
      .name = "token",
      .summary = "create, list and revoke access tokens of `mlk serve`",
      .description =
          "Manages the access tokens of `mlk serve`, kept in the store file it serves (only\n"
          "a sha256 of each token is stored). `create` prints the new token on stdout, once.\n"
          "`grant` lets another team read a namespace (never write it); `ungrant` revokes that,\n"
          "after which its reads get 403.\n",
      .subcommands = {{"create", {"!--team", "!--scopes", "--note"}, "a token for one team, printed once"},
                      {"list", {"--json"}, "every token: id, prefix, team, scopes, created, state, note"},
                      {"revoke ID|PREFIX", {}, "revoke a token by its id or prefix (see `mlk token list`)"},
                      {"grant", {"!--namespace", "!--team"}, "let team --team read namespace --namespace"},
                      {"ungrant", {"!--namespace", "!--team"}, "revoke that grant (its reads get 403 from now on)"},
                      {"grants", {"--json"}, "every grant: namespace, team, given, revoked"}},
      .flags =
          {
              {.name = "--team", .metavar = "NAME", .help = "the namespace the token may use (grant: the team given read access)", .set = store(a.team),
               .required_note = " (the namespace the token may use)"},
              {.name = "--scopes", .metavar = "LIST",
               .help = "comma-separated: read, write-blobs, write-entries, admin, worker (admin: everything, in every "
                       "namespace, and /metrics; worker: `mlk worker`'s registration, leases and results)",
               .set = store(a.scopes_text), .required_note = " (e.g. read,write-blobs,write-entries)"},
              {.name = "--note", .metavar = "TEXT", .help = "a reminder of who or what the token is for",
               .set = store(a.note)},
              {.name = "--namespace", .metavar = "NAME", .help = "grant, ungrant: the namespace to share",
               .set = store(a.ns), .required_note = " (the namespace to share)"},
              {.name = "--json", .help = "list, grants: print a JSON array instead of the table", .set = set_bool(a.json_out)},
              {.name = "--store", .metavar = "URL", .help = "the shared backend's database (postgresql://...) instead of a store file",
               .set = store(a.store_flag)},
              cache_flag(a.cache_flag, CacheFlag::kStoreFile),
          },
      .epilogue = "Clients send the token as `Authorization: Bearer TOKEN`; mlk reads it from $MLK_TOKEN.\n",
      .positional =
          [&a](const std::string& arg) {
            if (a.sub.empty()) a.sub = arg;
            else if (a.target.empty() && a.sub == "revoke") a.target = arg;
            else return Status::Usage("unexpected argument `" + arg + "`");
            return Status::Ok();
          },
  };
}

// The subcommand and what it needs, beyond the flags' own checks.
Status check_args(const CommandSpec& s, const TokenArgs& a, const ParsedFlags& seen) {
  if (a.sub != "create" && a.sub != "list" && a.sub != "revoke" && a.sub != "grant" && a.sub != "ungrant" && a.sub != "grants")
    return Status::Usage(a.sub.empty() ? "no command (create, list, revoke, grant, ungrant, grants)" : "unknown command `" + a.sub + "`");
  if (!a.cache_flag.empty() && !a.store_flag.empty()) return Status::Usage("give --cache PATH or --store URL, not both");
  if (!a.store_flag.empty() && !cache::is_postgres_url(a.store_flag))
    return Status::Usage("--store `" + a.store_flag + "` is not a postgresql:// URL (a store file is --cache PATH)");
  if (Status st = check_subcommand_flags(s, a.sub, seen); !st.ok()) return st;
  if (a.sub == "revoke" && a.target.empty()) return Status::Usage("revoke needs a token ID or prefix (see `mlk token list`)");
  return Status::Ok();
}

// grant, ungrant, grants (tables.h): read access between teams.
int run_grants(const TokenArgs& a, service::ServiceTables& tables, const std::string& where) {
  int64_t now = static_cast<int64_t>(std::time(nullptr));
  if (a.sub == "grant" || a.sub == "ungrant") {
    for (const std::string* n : {&a.ns, &a.team})
      if (Status v = cache::validate_namespace(*n); !v.ok()) return usage_error("token", v.message());
    if (a.ns == a.team) return usage_error("token", "team `" + a.team + "` reads its own namespace without a grant");
    Status st = a.sub == "grant" ? tables.grant(a.ns, a.team, now) : tables.revoke_grant(a.ns, a.team, now);
    if (!st.ok()) return fail(st);
    std::printf("%s team `%s` read access to namespace `%s` in %s\n", a.sub == "grant" ? "granted" : "revoked",
                a.team.c_str(), a.ns.c_str(), where.c_str());
    return 0;
  }
  auto list = tables.list_grants();
  if (!list.ok()) return fail(list.status());
  if (a.json_out) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& g : *list)
      rows.push_back({{"namespace", g.ns}, {"team", g.grantee}, {"created", iso_time(g.created)},
                      {"revoked", g.revoked ? nlohmann::json(iso_time(g.revoked)) : nlohmann::json(nullptr)}});
    std::printf("%s\n", rows.dump(2).c_str());
    return 0;
  }
  if (list->empty()) {
    std::printf("no grants in %s (give one with `mlk token grant --namespace NS --team TEAM`)\n", where.c_str());
    return 0;
  }
  std::printf("%-16s %-16s %-20s %s\n", "NAMESPACE", "TEAM", "GIVEN", "STATE");
  for (const auto& g : *list)
    std::printf("%-16s %-16s %-20s %s\n", g.ns.c_str(), g.grantee.c_str(), iso_time(g.created).c_str(),
                g.revoked ? ("revoked " + iso_time(g.revoked)).c_str() : "in force");
  return 0;
}

}  // namespace

CommandSpec token_spec() {
  static TokenArgs scratch;
  return spec(scratch);
}

int run_token(const std::vector<std::string>& args) {
  TokenArgs a;
  const CommandSpec s = spec(a);
  ParsedFlags seen;
  if (int bad = parse_or_usage_error(s, args, &seen)) return bad;
  if (Status st = check_args(s, a, seen); !st.ok()) return usage_error("token", st.message());
  const std::string &sub = a.sub, &target = a.target, &team = a.team, &note = a.note;
  const bool json_out = a.json_out;
  service::Scopes scopes = 0;
  if (sub == "create") {
    auto sc = service::parse_scopes(a.scopes_text);
    if (!sc.ok()) return usage_error("token", "--scopes: " + sc.status().message());
    scopes = *sc;
  }
  std::string path = a.store_flag.empty() ? cache::default_store_path(a.cache_flag) : a.store_flag;
  auto tables = service::open_tables(path, /*create_if_missing=*/sub == "create" || sub == "grant");
  if (!tables.ok()) return fail(tables.status());
  if (!a.store_flag.empty()) path = "the shared backend";  // the URL may hold a password
  if (sub == "grant" || sub == "ungrant" || sub == "grants") return run_grants(a, **tables, path);

  if (sub == "create") {
    auto t = (*tables)->create_token(team, scopes, note);
    if (!t.ok()) return fail(t.status());
    std::printf("%s\n", t->token.c_str());
    std::fprintf(stderr, "mlk token: created token %lld (%s) for team `%s` with scopes %s in %s; it is shown only now\n",
                 static_cast<long long>(t->info.id), t->info.prefix.c_str(), team.c_str(),
                 service::scopes_string(scopes).c_str(), path.c_str());
    return 0;
  }
  if (sub == "revoke") {
    auto t = (*tables)->revoke_token(target);
    if (!t.ok()) return fail(t.status());
    std::printf("revoked token %lld (%s) of team `%s`\n", static_cast<long long>(t->id), t->prefix.c_str(), t->team.c_str());
    return 0;
  }
  auto list = (*tables)->list_tokens();
  if (!list.ok()) return fail(list.status());
  if (json_out) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& t : *list)
      rows.push_back({{"id", t.id}, {"prefix", t.prefix}, {"team", t.team}, {"scopes", service::scopes_string(t.scopes)},
                      {"note", t.note}, {"created", iso_time(t.created)}, {"revoked", t.revoked}});
    std::printf("%s\n", rows.dump(2).c_str());
    return 0;
  }
  if (list->empty()) {
    std::printf("no tokens in %s (create one with `mlk token create --team NAME --scopes read`)\n", path.c_str());
    return 0;
  }
  std::printf("%-5s %-13s %-16s %-36s %-20s %-8s %s\n", "ID", "PREFIX", "TEAM", "SCOPES", "CREATED", "STATE", "NOTE");
  for (const auto& t : *list)
    std::printf("%-5lld %-13s %-16s %-36s %-20s %-8s %s\n", static_cast<long long>(t.id), t.prefix.c_str(), t.team.c_str(),
                service::scopes_string(t.scopes).c_str(), iso_time(t.created).c_str(), t.revoked ? "revoked" : "active",
                t.note.c_str());
  return 0;
}

}  // namespace mlk::cli
