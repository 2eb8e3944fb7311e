// `mlk token`: create, list and revoke the access tokens of `mlk serve`
// (service/tokens.h), kept in the store file the server uses.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/time.h"
#include "cache/paths.h"
#include "cli/args.h"
#include "cli/command.h"
#include "service/service_db.h"
#include "service/tokens.h"

namespace mlk::cli {

namespace {

int fail(const Status& s) {
  std::fprintf(stderr, "mlk token: %s\n", s.message().c_str());
  return s.exit_code();
}

}  // namespace

int run_token(const std::vector<std::string>& args) {
  const Command& self = command("token");
  std::string sub, target, team, scopes_text, note, cache_flag;
  bool json_out = false;
  ArgReader r(args);
  while (!r.done()) {
    std::string a = r.next();
    if (a == "--json") {
      json_out = true;
    } else if (a == "--cache" || a == "--team" || a == "--scopes" || a == "--note") {
      auto v = r.value();
      if (!v.ok()) return usage_error(self, v.status().message());
      (a == "--cache" ? cache_flag : a == "--team" ? team : a == "--scopes" ? scopes_text : note) = *v;
    } else if (!a.empty() && a[0] == '-') {
      return usage_error(self, "unknown option `" + a + "`");
    } else if (sub.empty()) {
      sub = a;
    } else if (target.empty() && sub == "revoke") {
      target = a;
    } else {
      return usage_error(self, "unexpected argument `" + a + "`");
    }
  }
  if (sub != "create" && sub != "list" && sub != "revoke")
    return usage_error(self, sub.empty() ? "no command (create, list, revoke)" : "unknown command `" + sub + "`");
  if (sub != "create" && (!team.empty() || !scopes_text.empty() || !note.empty()))
    return usage_error(self, "--team, --scopes and --note belong to `create`");
  if (sub == "revoke" && target.empty()) return usage_error(self, "revoke needs a token ID or prefix (see `mlk token list`)");
  service::Scopes scopes = 0;
  if (sub == "create") {
    if (team.empty()) return usage_error(self, "create needs --team NAME (the namespace the token may use)");
    if (scopes_text.empty()) return usage_error(self, "create needs --scopes LIST (e.g. read,write-blobs,write-entries)");
    auto sc = service::parse_scopes(scopes_text);
    if (!sc.ok()) return usage_error(self, "--scopes: " + sc.status().message());
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
