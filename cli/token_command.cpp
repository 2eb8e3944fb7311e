// `mlk token`: create, list and revoke the access tokens of `mlk serve`
// (service/tokens.h), kept in the store file the server uses.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/time.h"
#include "cache/paths.h"
#include "cli/flags.h"
#include "cli/command.h"
#include "service/service_db.h"
#include "service/tokens.h"

namespace mlk::cli {

namespace {

int fail(const Status& s) {
  std::fprintf(stderr, "mlk token: %s\n", s.message().c_str());
  return s.exit_code();
}

struct TokenArgs {
  std::string sub, target, team, scopes_text, note, cache_flag;
  bool json_out = false;
};

CommandSpec spec(TokenArgs& a) {
  return {
      .name = "token",
      .summary = "create, list and revoke access tokens of `mlk serve`",
      .description =
          "Manages the access tokens of `mlk serve`, kept in the store file it serves (only\n"
          "a sha256 of each token is stored). `create` prints the new token on stdout, once.\n",
      .subcommands = {{"create", {"!--team", "!--scopes", "--note"}, "a token for one team, printed once"},
                      {"list", {"--json"}, "every token: id, prefix, team, scopes, created, state, note"},
                      {"revoke ID|PREFIX", {}, "revoke a token by its id or prefix (see `mlk token list`)"}},
      .flags =
          {
              {.name = "--team", .metavar = "NAME", .help = "the namespace the token may use", .set = store(a.team),
               .required_note = " (the namespace the token may use)"},
              {.name = "--scopes", .metavar = "LIST",
               .help = "comma-separated: read, write-blobs, write-entries, admin (admin: everything, in every "
                       "namespace, and /metrics)",
               .set = store(a.scopes_text), .required_note = " (e.g. read,write-blobs,write-entries)"},
              {.name = "--note", .metavar = "TEXT", .help = "a reminder of who or what the token is for",
               .set = store(a.note)},
              {.name = "--json", .help = "list: print a JSON array instead of the table", .set = set_bool(a.json_out)},
              {.name = "--cache", .metavar = "PATH", .help = "the store",
               .default_value = "$MLK_CACHE, else $XDG_CACHE_HOME/mlk/cache.db", .set = store(a.cache_flag)},
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
  if (a.sub != "create" && a.sub != "list" && a.sub != "revoke")
    return Status::Usage(a.sub.empty() ? "no command (create, list, revoke)" : "unknown command `" + a.sub + "`");
  if (Status st = check_subcommand_flags(s, a.sub, seen); !st.ok()) return st;
  if (a.sub == "revoke" && a.target.empty()) return Status::Usage("revoke needs a token ID or prefix (see `mlk token list`)");
  return Status::Ok();
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
  const std::string &sub = a.sub, &target = a.target, &team = a.team, &note = a.note, &cache_flag = a.cache_flag;
  const bool json_out = a.json_out;
  service::Scopes scopes = 0;
  if (sub == "create") {
    auto sc = service::parse_scopes(a.scopes_text);
    if (!sc.ok()) return usage_error("token", "--scopes: " + sc.status().message());
    scopes = *sc;
  }
  std::string path = cache::default_store_path(cache_flag);
  auto db = service::open_service_db(path, /*create_if_missing=*/sub == "create");
  if (!db.ok()) return fail(db.status());

  if (sub == "create") {
    auto t = service::create_token(**db, team, scopes, note);
    if (!t.ok()) return fail(t.status());
    std::printf("%s\n", t->token.c_str());
    std::fprintf(stderr, "mlk token: created token %lld (%s) for team `%s` with scopes %s in %s; it is shown only now\n",
                 static_cast<long long>(t->info.id), t->info.prefix.c_str(), team.c_str(),
                 service::scopes_string(scopes).c_str(), path.c_str());
    return 0;
  }
  if (sub == "revoke") {
    auto t = service::revoke_token(**db, target);
    if (!t.ok()) return fail(t.status());
    std::printf("revoked token %lld (%s) of team `%s`\n", static_cast<long long>(t->id), t->prefix.c_str(), t->team.c_str());
    return 0;
  }
  auto list = service::list_tokens(**db);
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
