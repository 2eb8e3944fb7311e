// The publishing gates on `mlk verify` reports (docs/verification.md), over
// a real server: `mlk cache push --require-verified` refuses an entry whose
// report does not pass and sends nothing; a release namespace of `mlk serve`
// (ApiOptions::require_verified) stores only entries whose report passes;
// the report is read defensively from entry metadata.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sstream>

#include "../cache/test_util.h"
#include "base/json.h"
#include "base/signing.h"
#include "cache/entry_meta.h"
#include "cache/signatures.h"
#include "cli/cache_cli.h"
#include "client/cli_cache.h"
#include "client/remote_store.h"
#include "lang/frontend.h"
#include "lang/ir_printer.h"
#include "runtime/resolve.h"
#include "targets/detect.h"
#include "service/server.h"
#include "service/service_db.h"

namespace mlk {
namespace {

using cache::testing::bytes_of;
using cache::testing::IsOk;
using cache::testing::open_store;
using cache::testing::TempDir;
using cache::testing::test_provenance;

// The provenance of an entry a tune on this machine stored.
cache::Provenance tuned_here() {
  cache::Provenance p = test_provenance("mlk tune");
  p.origin = cache::kOriginLocal;
  return p;
}

// Entry metadata with a report that passed `passed` (absent: no report).
std::string meta_with(const std::string& passed) {
  return R"({"fn":"sgemm","verify_report":{"format":"mlk-verify-1","pass":true,"passed":[)" + passed + R"(]}})";
}

struct CliRun {
  int code;
  std::string out, err;
};
CliRun cache_cli(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  int code = cli::run_cache_cli(args, out, err);
  return {code, out.str(), err.str()};
}

class Gates : public ::testing::Test {
 protected:
  void start(std::map<std::string, std::vector<std::string>> release = {}) {
    verifier = *create_signing_key();
    service::ServeOptions o;
    o.store_path = dir.file("serve.db");
    o.port = 0;
    o.threads = 2;
    for (const auto& [ns, levels] : release) o.api.trusted_verifiers[ns] = {verifier.public_key};
    o.api.require_verified = std::move(release);
    o.api.trusted_signers = signers;
    auto s = service::Server::Start(o);
    ASSERT_TRUE(IsOk(s));
    server = std::move(*s);
    auto db = service::open_service_db(o.store_path, false);
    token = service::create_token(**db, "alpha", service::kScopeRead | service::kScopeWriteBlobs |
                                                     service::kScopeWriteEntries, "")->token;
    setenv("MLK_TOKEN", token.c_str(), 1);
    auto local = open_store(dir.file("local.db"));
    ASSERT_TRUE(IsOk(local->put_entry("default", unverified, R"({"fn":"sgemm"})", tuned_here(),
                                      {{"libsgemm.so", bytes_of(2000, 1)}})));
    ASSERT_TRUE(IsOk(local->put_entry("default", cheap, meta_with(R"("types","identity")"), tuned_here(),
                                      {{"libsgemm.so", bytes_of(2000, 2)}})));
    ASSERT_TRUE(IsOk(local->put_entry("default", full, meta_with(R"("types","identity","envelope","memory")"),
                                      tuned_here(), {{"libsgemm.so", bytes_of(2000, 3)}})));
    // The same levels, in a report the trusted verifier signed for this entry.
    const std::map<std::string, std::string> files = {{"libsgemm.so", bytes_of(2000, 4)}};
    const std::string meta = meta_with(R"("types","identity","envelope","memory")");
    auto st = cache::statement_of_files(signed_full, files, meta);
    ASSERT_TRUE(IsOk(st));
    ASSERT_TRUE(IsOk(local->put_entry("default", signed_full, *cache::sign_report(meta, *st, verifier),
                                      tuned_here(), files)));
  }
  void TearDown() override { unsetenv("MLK_TOKEN"); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server->port()); }
  CliRun push(const std::string& key, const std::string& levels) {
    std::vector<std::string> a = {"push", key, "--cache", dir.file("local.db"), "--remote", url()};
    if (!levels.empty()) a.insert(a.end(), {"--require-verified", levels});
    return cache_cli(a);
  }
  // Entries and blobs the server holds: "blobs/entries".
  std::string held() {
    auto s = open_store(dir.file("serve.db"));
    auto st = s->stats();
    return std::to_string(st->blobs) + "/" + std::to_string(st->entries);
  }

  TempDir dir;
  std::unique_ptr<service::Server> server;
  std::string token;
  const std::string unverified = std::string(64, 'a'), cheap = std::string(64, 'b'), full = std::string(64, 'c'),
                    signed_full = std::string(64, 'd');
  SigningKey verifier;
  std::map<std::string, std::vector<std::string>> signers;
};

TEST_F(Gates, GatedPushOfAnUnverifiedEntryIsRefusedAndSendsNothing) {
  start();
  CliRun r = push(unverified, "envelope");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "mlk cache push: refused: entry default/aaaaaaaaaaaaaaaa has no verification report (run `mlk "
                   "verify` first); nothing was pushed\n");
  EXPECT_EQ(held(), "0/0");
  r = push(cheap, "envelope,memory");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "mlk cache push: refused: entry default/bbbbbbbbbbbbbbbb is not verified at envelope,memory (its "
                   "report passes: types,identity); nothing was pushed\n");
  EXPECT_EQ(held(), "0/0");
  r = push(full, "envelope,memory");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(held(), "1/1");
  r = push(cheap, "cheap");  // types and identity: this one passes them
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(held(), "2/2");
}

// Second review, finding 11: the gate read whatever report an entry carried,
// so an entry pulled from a server passed with the report its writer wrote.
// Without keys only a report a tune here wrote counts; with
// --trusted-signers, a report one of those keys signed for this entry.
TEST_F(Gates, Round2_Finding11_ThePushGateReadsOnlyReportsMadeHereOrSignedByATrustedKey) {
  start();
  cache::Provenance pulled = test_provenance("mlk tune");
  pulled.origin = "http://elsewhere:8080";
  const std::string meta = meta_with(R"("types","identity","envelope","memory")");
  const std::string self_reported = std::string(64, 'e'), vouched = std::string(64, 'f');
  const std::map<std::string, std::string> files = {{"libsgemm.so", bytes_of(2000, 5)}};
  auto local = open_store(dir.file("local.db"));
  ASSERT_TRUE(IsOk(local->put_entry("default", self_reported, meta, pulled, {{"libsgemm.so", bytes_of(2000, 6)}})));
  auto st = cache::statement_of_files(vouched, files, meta);
  ASSERT_TRUE(IsOk(st));
  ASSERT_TRUE(IsOk(local->put_entry("default", vouched, *cache::sign_report(meta, *st, verifier), pulled, files)));
  CliRun r = push(self_reported, "envelope");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("was not tuned on this machine (origin `http://elsewhere:8080`)"), std::string::npos) << r.err;
  EXPECT_EQ(held(), "0/0");
  r = push(vouched, "envelope");  // signed, but no key named: still the writer's word
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(held(), "0/0");
  r = cache_cli({"push", self_reported, "--cache", dir.file("local.db"), "--remote", url(), "--require-verified",
                 "envelope", "--trusted-signers", verifier.public_key});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(held(), "0/0");
  r = cache_cli({"push", vouched, "--cache", dir.file("local.db"), "--remote", url(), "--require-verified", "envelope",
                 "--trusted-signers", verifier.public_key});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(held(), "1/1");
}

TEST_F(Gates, BadLevelIsAUsageError) {
  start();
  CliRun r = push(full, "fast");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "mlk cache push: --require-verified: unknown verification level `fast` (levels: types, identity, "
                   "envelope, memory, equivalence; or all, cheap)\n");
}

TEST_F(Gates, ReleaseNamespaceStoresOnlyVerifiedEntries) {
  start({{"alpha", {"envelope"}}});
  CliRun r = push(unverified, "");  // no client-side gate: the server's refuses
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("namespace `alpha` accepts only verified entries: entry aaaaaaaaaaaaaaaa has no verification "
                       "report (run `mlk verify` first)"),
            std::string::npos)
      << r.err;
  r = push(cheap, "");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("entry bbbbbbbbbbbbbbbb is not verified at envelope (its report passes: types,identity)"),
            std::string::npos)
      << r.err;
  // The levels pass, but the report is self-written (issue 28, finding 5).
  r = push(full, "");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("entry cccccccccccccccc's verification report is unsigned"), std::string::npos) << r.err;
  auto s = open_store(dir.file("serve.db"));
  EXPECT_EQ(s->list()->size(), 0u);  // blobs may be staged; no entry is bound
  r = push(signed_full, "");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(s->list()->size(), 1u);
}

TEST(VerifiedMeta, ReadDefensively) {
  auto m = cache::parse_entry_meta(meta_with(R"("types","envelope")"));
  ASSERT_TRUE(IsOk(m));
  EXPECT_TRUE(m->verification.present);
  EXPECT_EQ(m->verification.str(), "types,envelope");
  auto none = cache::parse_entry_meta(R"({"fn":"f"})");
  ASSERT_TRUE(IsOk(none));
  EXPECT_EQ(none->verification.str(), "unverified");
  auto bad = cache::parse_entry_meta(R"({"verify_report":"yes"})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "entry metadata: `verify_report` must be an object, got string");
  bad = cache::parse_entry_meta(R"({"verify_report":{"passed":[1]}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "entry metadata: `verify_report.passed[]` must be a string, got number");
  bad = cache::parse_entry_meta(R"({"verify_report":{}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "entry metadata: `verify_report.passed` is missing");
  auto lv = cache::parse_required_levels("memory,types,cheap");
  ASSERT_TRUE(IsOk(lv));
  EXPECT_EQ(*lv, (std::vector<std::string>{"types", "identity", "memory"}));
  EXPECT_EQ(cache::parse_required_levels("").status().message(),
            "unknown verification level `` (levels: types, identity, envelope, memory, equivalence; or all, cheap)");
}

TEST_F(Gates, CacheLsShowsTheVerifiedLevels) {
  start();
  CliRun r = cache_cli({"ls", "--cache", dir.file("local.db")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("PRODUCER     VERIFIED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("mlk tune     types,identity,envelope,memory"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("mlk tune     types,identity\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("mlk tune     unverified\n"), std::string::npos) << r.out;
}

// `mlk cache push --sign KEYFILE` signs the entry (stored signed locally)
// and a signed namespace (`mlk serve --trusted-signers`) takes it; unsigned
// or foreign-signed pushes are refused naming the entry and the signer.
TEST_F(Gates, SignedNamespaceTakesOnlyEntriesPushedWithATrustedKey) {
  auto signer = create_signing_key(), stranger = create_signing_key();
  ASSERT_TRUE(IsOk(write_private_key(dir.file("signer.pem"), *signer)));
  ASSERT_TRUE(IsOk(write_private_key(dir.file("stranger.pem"), *stranger)));
  signers["alpha"] = {signer->public_key};
  start();
  CliRun r = push(unverified, "");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("namespace `alpha` accepts only entries signed by its trusted signers: entry aaaaaaaaaaaaaaaa "
                       "is unsigned"),
            std::string::npos)
      << r.err;
  r = cache_cli({"push", unverified, "--cache", dir.file("local.db"), "--remote", url(), "--sign", dir.file("stranger.pem")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("is signed by key " + stranger->key_id + ", which is not trusted"), std::string::npos) << r.err;
  r = cache_cli({"push", unverified, "--cache", dir.file("local.db"), "--remote", url(), "--sign", dir.file("signer.pem")});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("signed default/" + unverified + " with key " + signer->key_id), std::string::npos) << r.out;
  EXPECT_EQ(open_store(dir.file("serve.db"))->list()->size(), 1u);
  r = cache_cli({"push", unverified, "--cache", dir.file("local.db"), "--remote", url(), "--sign", dir.file("nope.pem")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--sign: cannot read"), std::string::npos) << r.err;
}

// Second review, finding 1: `mlk cache push KEY --sign K` signed whatever the
// local store held, and that store is the mirror into which `mlk run`,
// `mlk.load` and `mlk cache pull` copy entries any writer of a server bound.
// An entry pulled (or imported) is re-signed only when a key of
// --trusted-signers signed it (key rotation); one made here is signed as before.
TEST_F(Gates, Round2_Finding1_PushSignRefusesBytesAWriterChose) {
  auto signer = create_signing_key(), next = create_signing_key();
  ASSERT_TRUE(IsOk(write_private_key(dir.file("signer.pem"), *signer)));
  ASSERT_TRUE(IsOk(write_private_key(dir.file("next.pem"), *next)));
  start();
  ASSERT_EQ(push(unverified, "").code, 0);  // a writer's unsigned entry on the server
  CliRun r = cache_cli({"pull", unverified, "--cache", dir.file("mirror.db"), "--remote", url()});
  ASSERT_EQ(r.code, 0) << r.err;
  r = cache_cli({"push", unverified, "--cache", dir.file("mirror.db"), "--remote", url(), "--sign", dir.file("signer.pem")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("entry default/aaaaaaaaaaaaaaaa came from " + url() + "#alpha, so --sign would vouch for bytes a "
                       "writer there chose"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(cache::signer_ids(open_store(dir.file("mirror.db"))->show_entry("default", unverified)->manifest.meta_json), "");
  r = cache_cli({"push", unverified, "--cache", dir.file("mirror.db"), "--remote", url(), "--sign", dir.file("signer.pem"),
                 "--trusted-signers", signer->public_key});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("is unsigned"), std::string::npos) << r.err;
  r = cache_cli({"push", unverified, "--cache", dir.file("mirror.db"), "--remote", url(), "--trusted-signers",
                 signer->public_key});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--trusted-signers goes with --sign"), std::string::npos) << r.err;
  // An entry of unknown origin (stored before origins were recorded) is refused the same.
  ASSERT_TRUE(IsOk(open_store(dir.file("old.db"))->put_entry("default", unverified, R"({"fn":"sgemm"})",
                                                             test_provenance("mlk tune"), {{"libsgemm.so", bytes_of(2000, 1)}})));
  r = cache_cli({"push", unverified, "--cache", dir.file("old.db"), "--remote", url(), "--sign", dir.file("signer.pem")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("has no recorded origin"), std::string::npos) << r.err;
  // Made here: signed and pushed as before (with --trusted-signers too).
  r = cache_cli({"push", unverified, "--cache", dir.file("local.db"), "--remote", url(), "--sign", dir.file("signer.pem"),
                 "--trusted-signers", next->public_key});
  ASSERT_EQ(r.code, 0) << r.err;
  // Rotation: pulled elsewhere, re-signed with the next key because the old one signed it.
  r = cache_cli({"pull", unverified, "--cache", dir.file("mirror2.db"), "--remote", url()});
  ASSERT_EQ(r.code, 0) << r.err;
  r = cache_cli({"push", unverified, "--cache", dir.file("mirror2.db"), "--remote", url(), "--sign", dir.file("next.pem"),
                 "--trusted-signers", signer->public_key});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("signed default/" + unverified + " with key " + next->key_id), std::string::npos) << r.out;
  // The re-signature keeps the old one's namespace and sequence (the review of
  // finding 11's fix): re-signing never makes an old build newer than what
  // replaced it.
  auto sigs = nlohmann::json::parse(
      open_store(dir.file("mirror2.db"))->show_entry("default", unverified)->manifest.meta_json)["signatures"];
  ASSERT_EQ(sigs.size(), 2u) << sigs.dump();
  EXPECT_EQ(sigs[0]["ns"], "alpha");
  EXPECT_EQ(sigs[1]["ns"], "alpha");
  EXPECT_EQ(sigs[0]["seq"], sigs[1]["seq"]) << sigs.dump();
  // A version-1 signature (no namespace) is carried over only for an entry
  // pulled from the namespace it is pushed to (the third review): one that
  // came from anywhere else (another namespace, an archive) is refused.
  const std::map<std::string, std::string> files = {{"libsgemm.so", bytes_of(2000, 7)}};
  const std::string meta = R"({"fn":"sgemm"})";
  auto st = cache::statement_of_files(unverified, files, meta);
  ASSERT_TRUE(IsOk(st));
  nlohmann::json v1 = nlohmann::json::parse(meta);
  v1["signatures"] = {{{"key_id", signer->key_id}, {"public_key", signer->public_key}, {"sig", *sign_bytes(*signer, *st)}}};
  for (const auto& [origin, carried] : {std::pair<std::string, bool>{url() + "#dev", false}, {"import:x.db", false},
                                        {url() + "#alpha", true}}) {
    const std::string store = dir.file("v1-" + std::to_string(carried) + std::to_string(origin.size()) + ".db");
    cache::Provenance prov = test_provenance("mlk tune");
    prov.origin = origin;
    ASSERT_TRUE(IsOk(open_store(store)->put_entry("default", unverified, v1.dump(), prov, files)));
    r = cache_cli({"push", unverified, "--cache", store, "--remote", url(), "--sign", dir.file("next.pem"),
                   "--trusted-signers", signer->public_key});
    EXPECT_EQ(r.code, carried ? 0 : 1) << origin << ": " << r.err;
    if (!carried) EXPECT_NE(r.err.find("with a version-1 signature"), std::string::npos) << r.err;
  }
}

// Review 12 of issue 49, M2: the nearest-shape search chose a candidate by
// the metadata a server's listing answered, then checked only that the entry
// it read was signed. A writer put, at the key of a signed kernel of another
// fn already in the runtime's mirror, metadata naming this fn near the
// call's shape: the signed kernel of `g` was then served for `f`. The entry
// read must now say what the listing said.
TEST_F(Gates, Review12_M2_TheNearestShapeIsCheckedAgainstTheSignedEntryNotTheListing) {
  start();
  auto signer = *create_signing_key();
  auto fe = compile_source("p.tl", "public fn f [N](x: Tensor[F32, [N]]) -> Tensor[F32, [N]] = x\n");
  ASSERT_TRUE(fe.ok());
  const std::string fhash = ir::function_hash(fe.module, *fe.module.find("f"));
  const Profile host = host_profile();
  const std::string k = std::string(64, 'e');
  // The mirror: a kernel of `g`, signed for the team's namespace.
  const std::map<std::string, std::string> files = {{"libg.so", bytes_of(2000, 7)}, {"manifest.json", R"({"requires":{"cpu_features":[]}})"}};
  const std::string g_meta = R"({"fn":"g","target":")" + host.name + R"(","program_hash":"00","dims":{"N":8}})";
  auto signed_meta = cache::sign_entry(k, files, g_meta, signer, cache::SignatureScope{"alpha"});
  ASSERT_TRUE(IsOk(signed_meta));
  setenv("MLK_LOCAL_CACHE", dir.file("mirror.db").c_str(), 1);
  ASSERT_TRUE(IsOk(open_store(dir.file("mirror.db"))->put_entry("default", k, *signed_meta, tuned_here(), files)));
  // The server: at the same key, metadata that lists it as `f` at N=16.
  const std::string f_meta = R"({"fn":"f","target":")" + host.name + R"(","program_hash":")" + fhash +
                             R"(","dims":{"N":16}})";
  ASSERT_TRUE(IsOk(open_store(dir.file("writer.db"))->put_entry("default", k, f_meta, tuned_here(),
                                                                {{"libf.so", bytes_of(2000, 8)}, {"manifest.json", R"({"requires":{"cpu_features":[]}})"}})));
  CliRun r = cache_cli({"push", k, "--cache", dir.file("writer.db"), "--remote", url()});
  ASSERT_EQ(r.code, 0) << r.err;
  auto cc = client::CliCache::Open(url(), "default", "test", false, "", "");
  ASSERT_TRUE(IsOk(cc));
  auto found = rt::find_tuned({.cache = cc->get(), .ns = "default", .module = &fe.module, .fn = "f", .fhash = fhash,
                               .profile = host, .dims = {{"N", 8}}, .require = rt::Require::kTuned,
                               .trusted = {signer.public_key}, .cpu = detect_cpu()});
  unsetenv("MLK_LOCAL_CACHE");
  ASSERT_FALSE(found.ok()) << "served entry " << found->key.substr(0, 16) << " for `f`";
  EXPECT_NE(found.status().message().find(k.substr(0, 16) + ": its stored metadata is not that of `f` at N=16 as listed"),
            std::string::npos)
      << found.status().message();
}

// Review 12, L1: the server takes documents nested 64 levels deep, then
// answers them inside wrappers of its own, which its clients parsed at 64
// levels: one writer's deeply nested metadata made every reader's query of
// that fn fail (and the runtime stop using the server). Clients read
// answers kMaxAnswerDepth deep.
TEST_F(Gates, Review12_L1_ClientsReadAnswersThatWrapTheDeepestDocumentTheServerTakes) {
  start();
  std::string deep = "1";
  for (int i = 0; i < kMaxJsonDepth - 3; ++i) deep = "[" + deep + "]";
  const std::string k = std::string(64, 'f');
  ASSERT_TRUE(IsOk(open_store(dir.file("writer.db"))->put_entry(
      "default", k, R"({"fn":"deepfn","target":"t","program_hash":"h","deep":)" + deep + "}", tuned_here(),
      {{"lib.so", bytes_of(100, 9)}})));
  CliRun r = cache_cli({"push", k, "--cache", dir.file("writer.db"), "--remote", url()});
  ASSERT_EQ(r.code, 0) << r.err;
  client::RemoteOptions o;
  o.url = url();
  o.token = token;
  auto rs = client::RemoteStore::Open(o);
  ASSERT_TRUE(IsOk(rs));
  auto listed = (*rs)->query("deepfn", "t", "h");
  ASSERT_TRUE(IsOk(listed));
  EXPECT_EQ(listed->size(), 1u);
  EXPECT_TRUE(IsOk((*rs)->get_entry(k)));
}

}  // namespace
}  // namespace mlk
