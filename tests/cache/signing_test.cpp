// Ed25519 keys and signatures (base/signing.h) and what mlk signs with them
// (cache/signatures.h): round trips, a flipped byte anywhere fails, key
// files are private, trust lists, and that the statement over an entry
// covers what the loader and the resolver read but not the attachments.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "../cache/test_util.h"
#include "base/signing.h"
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
  auto signed_meta = cache::add_signature(meta, *st, *k);
  ASSERT_TRUE(IsOk(signed_meta));
  std::string signer;
  EXPECT_TRUE(IsOk(cache::check_signed("entry K", *st, *signed_meta, {k->public_key}, &signer)));
  EXPECT_EQ(signer, k->key_id);
  EXPECT_EQ(cache::signer_ids(*signed_meta), k->key_id);
  EXPECT_EQ(cache::check_signed("entry K", *st, meta, {k->public_key}).message(),
            "entry K is unsigned (sign it with `--sign KEYFILE`: docs/signing.md)");
  EXPECT_EQ(cache::check_signed("entry K", *st, *signed_meta, {stranger->public_key}).message(),
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
    Status s = cache::check_signed("entry K", other, *signed_meta, {k->public_key});
    EXPECT_NE(s.message().find("does not verify"), std::string::npos) << s.message();
  }
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

}  // namespace
}  // namespace mlk
