// Ed25519 keys and signatures (base/signing.h) and what mlk signs with them
// (cache/signatures.h): round trips, a flipped byte anywhere fails, key
// files are private, trust lists, and that the statement over an entry
// covers what the loader and the resolver read but not the attachments.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "../cache/test_util.h"
#include "base/signing.h"
#include "cache/hit_dir.h"
#include "cache/signatures.h"

namespace mlk {
namespace {

using cache::testing::IsOk;
using cache::testing::TempDir;

TEST(Signing, SignAndVerifyRoundTripAndAFlippedByteFails) {
  auto k = create_signing_key();
  ASSERT_TRUE(IsOk(k));
  EXPECT_TRUE(is_public_key_hex(k->public_key));
  EXPECT_EQ(k->key_id, key_id_of(k->public_key));
  EXPECT_EQ(k->key_id.size(), 16u);
  const std::string msg = "the manifest's canonical bytes";
  auto sig = sign_bytes(*k, msg);
  ASSERT_TRUE(IsOk(sig));
  EXPECT_EQ(sig->size(), 128u);
  EXPECT_TRUE(IsOk(verify_signature(k->public_key, msg, *sig)));
  std::string flipped = msg;
  flipped[3] ^= 1;
  Status bad = verify_signature(k->public_key, flipped, *sig);
  EXPECT_EQ(bad.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(bad.message().find("the signature by key " + k->key_id + " does not verify"), std::string::npos) << bad.message();
  std::string sig2 = *sig;
  sig2[10] = sig2[10] == '0' ? '1' : '0';
  EXPECT_FALSE(verify_signature(k->public_key, msg, sig2).ok());
  auto other = create_signing_key();
  EXPECT_FALSE(verify_signature(other->public_key, msg, *sig).ok());
  EXPECT_NE(verify_signature(k->public_key, msg, "zz").message().find("malformed"), std::string::npos);
}

TEST(Signing, KeyFilesArePrivateNeverReplacedAndLoadBack) {
  TempDir dir;
  auto k = create_signing_key();
  ASSERT_TRUE(IsOk(write_private_key(dir.file("k.pem"), *k)));
  struct stat st;
  ASSERT_EQ(stat(dir.file("k.pem").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  Status again = write_private_key(dir.file("k.pem"), *k);
  EXPECT_EQ(again.code(), Status::Code::kIOError);
  EXPECT_NE(again.message().find("never replaced"), std::string::npos) << again.message();
  auto back = load_signing_key(dir.file("k.pem"));
  ASSERT_TRUE(IsOk(back));
  EXPECT_EQ(back->public_key, k->public_key);
  EXPECT_TRUE(IsOk(verify_signature(k->public_key, "x", *sign_bytes(*back, "x"))));
  cache::testing::write_file(dir.file("junk.pem"), "not a key");
  auto junk = load_signing_key(dir.file("junk.pem"));
  ASSERT_FALSE(junk.ok());
  EXPECT_EQ(junk.status().message(), dir.file("junk.pem") + " is not a PEM private key (make one with `mlk key create`)");
}

TEST(Signing, TrustListsTakeKeysAndPubFiles) {
  TempDir dir;
  auto a = create_signing_key(), b = create_signing_key();
  cache::testing::write_file(dir.file("b.pub"), b->public_key + "  b\n");
  auto keys = parse_trusted_keys(a->public_key + "," + dir.file("b.pub") + "," + a->public_key);
  ASSERT_TRUE(IsOk(keys));
  EXPECT_EQ(*keys, (std::vector<std::string>{a->public_key, b->public_key}));
  auto bad = parse_trusted_keys("nonsense");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("trusted key `nonsense` is neither"), std::string::npos);
}

TEST(EntrySignatures, CoverFilesKeyAndMetaButNotTheAttachments) {
  auto k = create_signing_key(), stranger = create_signing_key();
  std::map<std::string, std::string> files = {
      {"libf.so", "native"}, {"manifest.json", R"({"format":"mlk-artifact-1","library":"libf.so"})"}};
  const std::string meta = R"({"fn":"f","dims":{"N":4}})";
  auto st = cache::entry_statement("K", *cache::statement_digests(files), meta);
  ASSERT_TRUE(IsOk(st));
  const cache::SignatureCheck here{{"team"}};
  auto signed_meta = cache::add_signature(meta, *st, *k, {"team"});
  ASSERT_TRUE(IsOk(signed_meta));
  cache::SignedBy signer;
  EXPECT_TRUE(IsOk(cache::check_signed("entry K", *st, *signed_meta, {k->public_key}, here, &signer)));
  EXPECT_EQ(signer.key_id, k->key_id);
  EXPECT_EQ(cache::signer_ids(*signed_meta), k->key_id);
  EXPECT_EQ(cache::check_signed("entry K", *st, meta, {k->public_key}, here).message(),
            "entry K is unsigned (sign it with `--sign KEYFILE`: docs/signing.md)");
  EXPECT_EQ(cache::check_signed("entry K", *st, *signed_meta, {stranger->public_key}, here).message(),
            "entry K is signed by key " + k->key_id + ", which is not trusted");
  // A report attached to manifest.json and the metadata keeps the statement.
  auto f2 = files;
  f2["manifest.json"] = R"({"format":"mlk-artifact-1", "library":"libf.so","verify_report":{"passed":[]}})";
  EXPECT_EQ(*cache::entry_statement("K", *cache::statement_digests(f2), *signed_meta), *st);
  // Any change to a file, the manifest's fields, the key or the metadata breaks it.
  auto f3 = files;
  f3["libf.so"] = "nativf";
  auto f4 = files;
  f4["manifest.json"] = R"({"format":"mlk-artifact-1","library":"libg.so"})";
  for (const auto& other : {*cache::entry_statement("K", *cache::statement_digests(f3), meta),
                            *cache::entry_statement("K", *cache::statement_digests(f4), meta),
                            *cache::entry_statement("K2", *cache::statement_digests(files), meta),
                            *cache::entry_statement("K", *cache::statement_digests(files), R"({"fn":"f","dims":{"N":8}})")}) {
    Status s = cache::check_signed("entry K", other, *signed_meta, {k->public_key}, here);
    EXPECT_NE(s.message().find("does not verify"), std::string::npos) << s.message();
  }
}

// Issue 49, finding 11: a signature binds the namespace it was made for and
// its sequence; a dev namespace's signature is not one for release, and
// relabelling either breaks it.
TEST(EntrySignatures, Round2_Finding11_ASignatureIsForOneNamespaceAndOneSequence) {
  auto k = create_signing_key();
  const std::string meta = R"({"fn":"f"})";
  const std::string st = *cache::entry_statement("K", {{"a", std::string(64, '0')}}, meta);
  auto dev = cache::add_signature(meta, st, *k, {"dev", 1000});
  ASSERT_TRUE(IsOk(dev));
  cache::SignedBy by;
  EXPECT_TRUE(IsOk(cache::check_signed("entry K", st, *dev, {k->public_key}, {{"dev"}}, &by)));
  EXPECT_EQ(by.ns, "dev");
  EXPECT_EQ(by.seq, 1000);
  EXPECT_FALSE(by.v1);
  EXPECT_EQ(cache::check_signed("entry K", st, *dev, {k->public_key}, {{"release"}}).message(),
            "entry K is signed by key " + k->key_id + " for namespace `dev`, not for `release` (a signature binds "
            "the namespace it was made for: sign it for this one)");
  // Relabelling the namespace or the sequence breaks the signature.
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"\"ns\":\"dev\"", "\"ns\":\"release\""},
                                 {"\"seq\":1000", "\"seq\":9000"}}) {
    std::string relabelled = *dev;
    ASSERT_NE(relabelled.find(from), std::string::npos) << relabelled;
    relabelled.replace(relabelled.find(from), from.size(), to);
    Status s = cache::check_signed("entry K", st, relabelled, {k->public_key}, {{"dev", "release"}});
    EXPECT_NE(s.message().find("does not verify"), std::string::npos) << s.message();
  }
  // A version-1 signature (the statement itself) counts only where asked for.
  nlohmann::json v1 = nlohmann::json::parse(meta);
  v1["signatures"] = {{{"key_id", k->key_id}, {"public_key", k->public_key}, {"sig", *sign_bytes(*k, st)}}};
  EXPECT_EQ(cache::check_signed("entry K", st, v1.dump(), {k->public_key}, {{"dev"}}).message(),
            "entry K is signed by key " + k->key_id + " with a version-1 signature, which binds no namespace or "
            "sequence; re-sign it (`mlk cache push KEY --sign KEYFILE --trusted-signers " + k->key_id +
            "`: docs/signing.md)");
  EXPECT_TRUE(IsOk(cache::check_signed("entry K", st, v1.dump(), {k->public_key}, {{"dev"}, true}, &by)));
  EXPECT_TRUE(by.v1);
  // Review 18 of issue 49 (low): a signature's namespace is a namespace's
  // name, never a writer's free text that a refusal would print.
  nlohmann::json spoof = nlohmann::json::parse(*dev);
  spoof["signatures"][0]["ns"] = "\x1b]0;signed\x07";
  Status s = cache::check_signed("entry K", st, spoof.dump(), {k->public_key}, {{"release"}});
  EXPECT_EQ(s.message().find('\x1b'), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(".ns must be a namespace name"), std::string::npos) << s.message();
}

TEST(ReportSignatures, BoundToTheirEntryAndTheirVerifier) {
  auto v = create_signing_key(), stranger = create_signing_key();
  const std::string meta = R"({"fn":"f","verify_report":{"passed":["types"]}})";
  const std::string st = *cache::entry_statement("K", {{"a", std::string(64, '0')}}, meta);
  const std::string other = *cache::entry_statement("K2", {{"a", std::string(64, '0')}}, meta);
  EXPECT_NE(cache::check_report_signed("entry K", st, meta, {v->public_key}).message().find("report is unsigned"),
            std::string::npos);
  auto signed_meta = cache::sign_report(meta, st, *v);
  ASSERT_TRUE(IsOk(signed_meta));
  EXPECT_TRUE(IsOk(cache::check_report_signed("entry K", st, *signed_meta, {v->public_key})));
  EXPECT_NE(cache::check_report_signed("entry K2", other, *signed_meta, {v->public_key}).message().find("does not verify"),
            std::string::npos);
  EXPECT_NE(cache::check_report_signed("entry K", st, *signed_meta, {stranger->public_key})
                .message()
                .find("which is not a trusted verifier"),
            std::string::npos);
  std::string widened = *signed_meta;
  widened.replace(widened.find("[\"types\"]"), 9, "[\"types\",\"memory\"]");
  EXPECT_NE(cache::check_report_signed("entry K", st, widened, {v->public_key}).message().find("does not verify"),
            std::string::npos);
}

// Issue 49, finding 5: a candidate pack's signature binds its digest and the
// namespace, and counts only for a trusted key.
TEST(PackSignatures, Round2_Finding5_BoundToThePackAndTheNamespace) {
  auto k = create_signing_key(), stranger = create_signing_key();
  const std::string pack = std::string(64, 'a'), other = std::string(64, 'b');
  nlohmann::json payload = {{"kind", "candidates"}, {"pack_signature", nlohmann::json::parse(*cache::sign_pack(pack, "team", *k))}};
  EXPECT_TRUE(IsOk(cache::check_pack_signed(pack, payload.dump(), {k->public_key}, {"team"})));
  EXPECT_NE(cache::check_pack_signed(other, payload.dump(), {k->public_key}, {"team"}).message().find("does not verify"),
            std::string::npos);
  EXPECT_EQ(cache::check_pack_signed(pack, payload.dump(), {k->public_key}, {"prod"}).message(),
            "the candidate pack " + pack.substr(0, 16) + " is signed by key " + k->key_id +
                " for namespace `team`, not for `prod`");
  EXPECT_EQ(cache::check_pack_signed(pack, payload.dump(), {stranger->public_key}, {"team"}).message(),
            "the candidate pack " + pack.substr(0, 16) + " is signed by key " + k->key_id + ", which is not trusted");
  EXPECT_EQ(cache::check_pack_signed(pack, R"({"kind":"candidates"})", {k->public_key}, {"team"}).message(),
            "the candidate pack " + pack.substr(0, 16) +
                " is unsigned (`mlk tune --sign-packs KEYFILE` signs the packs it sends)");
  payload["pack_signature"]["ns"] = "prod";  // relabelled
  EXPECT_NE(cache::check_pack_signed(pack, payload.dump(), {k->public_key}, {"prod"}).message().find("does not verify"),
            std::string::npos);
}


// Review 17 of issue 49 (low): `mlk build -o DIR` and `mlk tune -o DIR`
// copied a hit byte for byte, its manifest.json's directory signature and
// report too, so a writer stored an old or another team's signed directory
// again and a runtime trusting that key loaded it as signed; a name with `/`
// placed files in DIR's subfolders, and a link at a name was written
// through. Written by cache::write_hit_dir now.
TEST(HitDir, Review17_L1_ACopiedHitCarriesNoSignatureAndStaysInItsFolder) {
  TempDir d;
  const std::string dir = d.path() + "/out";
  const std::string outside = d.path() + "/outside";
  cache::testing::write_file(outside, "kept");
  std::filesystem::create_directories(dir);
  ASSERT_EQ(symlink(outside.c_str(), (dir + "/kernel.so").c_str()), 0);
  nlohmann::json m = {{"fn", "f"}, {"signatures", {{{"key", "k"}}}}, {"verify_report", {{"passed", {"types"}}}}};
  ASSERT_TRUE(IsOk(cache::write_hit_dir({{"manifest.json", m.dump()}, {"kernel.so", "new"}}, dir)));
  auto written = nlohmann::json::parse(cache::testing::read_file(dir + "/manifest.json"));
  EXPECT_EQ(written, (nlohmann::json{{"fn", "f"}})) << written.dump();
  EXPECT_EQ(cache::testing::read_file(dir + "/kernel.so"), "new");
  EXPECT_EQ(cache::testing::read_file(outside), "kept") << "written through the link";
  // A manifest with neither is written as stored.
  ASSERT_TRUE(IsOk(cache::write_hit_dir({{"manifest.json", "{\"fn\":\"g\"}"}}, dir)));
  EXPECT_EQ(cache::testing::read_file(dir + "/manifest.json"), "{\"fn\":\"g\"}");
  Status s = cache::write_hit_dir({{"manifest.json", "{}"}, {"sub/x", "y"}}, dir + "2");
  EXPECT_EQ(s.message(), "the cached artifact lists file `sub/x`, which is not a plain file name; nothing was written to " +
                             dir + "2");
  EXPECT_FALSE(std::filesystem::exists(dir + "2"));
}

}  // namespace
}  // namespace mlk
