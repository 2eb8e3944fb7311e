// The artifact cache as `mlk tune`, `mlk build` and `mlk run` see it: --cache
// VALUE (else $MLK_CACHE, else $MLK_SERVERS) is a store path, or the URL of a
// `mlk serve` (http://HOST:PORT), or several comma-separated (replicas,
// remote_store.h). With a URL the commands keep working on a local store,
// the mirror ($MLK_LOCAL_CACHE, else the default store path), synchronised
// with the server one key at a time: pull() before a lookup, push() after a
// put. The token comes from $MLK_TOKEN.
//
// A server that cannot be reached (after the client's retries) or refuses the
// token is reported once through the log sink (base/log.h; "...; using the
// local store PATH only") and the command goes on with the mirror: the server
// is an accelerator, never a reason to fail. Pulls and pushes are reported
// there too, as notes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cache/store.h"
#include "client/remote_store.h"

namespace mlk::client {

class CliCache {
 public:
  // `flag_value`: --cache as given ("" when absent). `ns`: --namespace; on the
  // server, "default" means the token's team. `who`: the command, for
  // messages ("mlk tune"). Without a URL and with create_if_missing false, a
  // store that does not exist is not created: store() is null (a miss).
  // `token`: the server's bearer token; "" = $MLK_TOKEN. `read_order`: the
  // namespaces pull() reads (set_read_order; `--namespaces LIST`); "" =
  // $MLK_NAMESPACES when set. A malformed one, or one given with a local
  // store (which has no grants to read through), is a usage error that
  // starts with `read_order_name` ("--namespaces: ..."); $MLK_NAMESPACES
  // is ignored by a local store.
  static Expected<std::unique_ptr<CliCache>> Open(const std::string& flag_value, const std::string& ns,
                                                  const std::string& who, bool create_if_missing,
                                                  const std::string& token = "", const std::string& read_order = "",
                                                  const std::string& read_order_name = "--namespaces");

  cache::Store* store() { return store_.get(); }
  const std::string& store_path() const { return store_path_; }
  bool remote() const { return remote_ != nullptr; }

  // Remote mode: when the local store lacks (ns, key) and the server has it
  // (in the read order's first namespace that has it), downloads it
  // (verified) into the local store and says so; true then.
  // Never fails: a miss is silent, a failure is reported once.
  bool pull(const std::string& key);
  // Remote mode: the namespaces pull() reads, in order, as "own,NS,...":
  // `own` is where this team writes (--namespace, else the token's team),
  // the others are namespaces other teams granted it read access to
  // (docs/api.md, "Grants"). Writes (push) always go to `own`. A shared
  // namespace that refuses the token (403: no grant, or a revoked one) is
  // reported as a warning and skipped, never a silent miss. Open() applies
  // its `read_order`, else $MLK_NAMESPACES when set. Usage error for a
  // malformed list (check_read_order).
  Status set_read_order(const std::string& csv, const std::string& token);
  // Remote mode: uploads (ns, key) from the local store; a failure is
  // reported (and returned), the local copy stays.
  Status push(const std::string& key);
  // Remote mode: the server's entries for (fn, target, program_hash) (see
  // RemoteStore::query); empty without a server or when it is down (a
  // failure is reported once, like pull()).
  std::vector<cache::EntryInfo> query(const std::string& fn, const std::string& target, const std::string& program_hash);

  // The namespace an entry signature made here is for (cache/signatures.h):
  // the local store's --namespace; with a server, the server's name of the
  // namespace this team writes (--namespace, else the token's team, asked
  // once of GET /v1/whoami; an error when the server cannot say).
  Expected<std::string> own_namespace();
  // The namespace a signature of entry `e` must be for to count when it is
  // loaded. A local store: its --namespace, whatever the entry's origin says.
  // With a server: for an entry pulled from it (origin_of_pull), the
  // namespace it came from when that is one this cache reads (its own or its
  // read order's); for one made or imported here, own_namespace(); none for
  // an entry pulled from another server or a namespace not read now (the
  // mirror is shared by every run of the user). Own namespace unknown (the
  // server down with --namespace default): said once as a warning.
  std::vector<std::string> signature_namespaces(const cache::EntryInfo& e);

 private:
  void server_down(const Status& why);
  std::string who_, ns_, store_path_;
  std::unique_ptr<cache::Store> store_;
  std::unique_ptr<RemoteStore> remote_;
  std::vector<std::unique_ptr<RemoteStore>> read_order_;  // null: remote_ (`own`)
  std::vector<std::string> read_labels_;
  bool down_ = false;
  bool warned_ = false;  // signature_namespaces() said it cannot tell
};

// The syntax of a read order: comma-separated namespace names, `own` among
// them exactly once. Usage errors: "the read order `alpha` must name `own`
// (where this team writes), e.g. own,shared-release", "`own` appears twice
// in the read order `own,own`", "read order `own,a/b`: namespace `a/b` must
// be ...".
Status check_read_order(const std::string& csv);

// Where the mirror of a remote cache lives: $MLK_LOCAL_CACHE, else $MLK_CACHE
// when it is a path, else $XDG_CACHE_HOME/mlk/cache.db, else
// ~/.cache/mlk/cache.db (cache/paths.h).
std::string local_mirror_path();

}  // namespace mlk::client
