// Damaged bytes are never served: through the seam (a blob's bytes change
// under its digest) and by editing the database file itself.
#include <gtest/gtest.h>

#include <random>

#include "base/files.h"
#include "cache/store.h"
#include "tests/cache/test_util.h"

namespace mlk::cache {
namespace {

using testing::bytes_of;
using testing::HasCode;
using testing::IsOk;
using testing::open_store;
using testing::TempDir;
using testing::test_provenance;
using Code = Status::Code;

TEST(Corruption, DamagedBlobIsQuarantinedAndItsEntriesNeverServed) {
  TempDir dir;
  auto s = open_store(dir.file("c.db"));
  std::string kernel = bytes_of(8000, 1), other = bytes_of(500, 2);
  ASSERT_TRUE(IsOk(s->put_entry("default", "a", "{}", test_provenance(), {{"kernel.so", kernel}, {"x", other}})));
  ASSERT_TRUE(IsOk(s->put_entry("team-b", "b", "{}", test_provenance(), {{"k", kernel}})));
  ASSERT_TRUE(IsOk(s->put_entry("default", "c", "{}", test_provenance(), {{"x", other}})));
  ASSERT_TRUE(IsOk(s->corrupt_blob_for_testing(sha256_hex(kernel), 4000)));

  auto a = s->get_entry("default", "a");
  EXPECT_TRUE(HasCode(a, Code::kCorruption));
  EXPECT_NE(a.status().message().find(sha256_hex(kernel)), std::string::npos) << a.status().message();
  EXPECT_NE(a.status().message().find("quarantined"), std::string::npos) << a.status().message();
  // Quarantined: the blob and both entries that used it are gone, the rest stays.
  EXPECT_TRUE(HasCode(s->get_entry("default", "a"), Code::kNotFound));
  EXPECT_TRUE(HasCode(s->get_entry("team-b", "b"), Code::kNotFound));
  EXPECT_TRUE(HasCode(s->get_blob(sha256_hex(kernel)), Code::kNotFound));
  auto c = s->get_entry("default", "c");
  ASSERT_TRUE(IsOk(c));
  EXPECT_EQ(c->files.at("x"), other);
  auto st = s->stats();
  EXPECT_EQ(st->quarantined, 3);  // one blob, two entries
  EXPECT_EQ(st->entries, 1);
  EXPECT_TRUE(s->verify()->consistent());

  // Putting the good bytes again makes the artifact available again.
  ASSERT_TRUE(IsOk(s->put_entry("default", "a", "{}", test_provenance(), {{"kernel.so", kernel}, {"x", other}})));
  EXPECT_EQ(s->get_entry("default", "a")->files.at("kernel.so"), kernel);
}

TEST(Corruption, GetBlobQuarantines) {
  TempDir dir;
  auto s = open_store(dir.file("c.db"));
  std::string bytes = bytes_of(100, 3);
  auto d = s->put_blob(bytes);
  ASSERT_TRUE(IsOk(d));
  ASSERT_TRUE(IsOk(s->corrupt_blob_for_testing(*d, 0)));
  EXPECT_TRUE(HasCode(s->get_blob(*d), Code::kCorruption));
  EXPECT_TRUE(HasCode(s->get_blob(*d), Code::kNotFound));
  EXPECT_EQ(s->stats()->quarantined, 1);
}

TEST(Corruption, PutHealsADamagedCopy) {
  TempDir dir;
  auto s = open_store(dir.file("c.db"));
  std::string bytes = bytes_of(1000, 4);
  ASSERT_TRUE(IsOk(s->put_entry("default", "a", "{}", test_provenance(), {{"f", bytes}})));
  ASSERT_TRUE(IsOk(s->corrupt_blob_for_testing(sha256_hex(bytes), 999)));
  ASSERT_TRUE(IsOk(s->put_blob(bytes)));  // dedup compares bytes, finds the copy damaged, replaces it
  auto a = s->get_entry("default", "a");
  ASSERT_TRUE(IsOk(a));
  EXPECT_EQ(a->files.at("f"), bytes);
}

TEST(Corruption, VerifyFindsAndQuarantines) {
  TempDir dir;
  auto s = open_store(dir.file("c.db"));
  std::string bytes = bytes_of(2000, 5);
  ASSERT_TRUE(IsOk(s->put_entry("default", "a", "{}", test_provenance(), {{"f", bytes}})));
  ASSERT_TRUE(IsOk(s->put_entry("default", "b", "{}", test_provenance(), {{"g", "fine"}})));
  ASSERT_TRUE(IsOk(s->put_blob("unreferenced")));
  auto clean = s->verify();
  ASSERT_TRUE(IsOk(clean));
  EXPECT_TRUE(clean->consistent()) << clean->summary();
  EXPECT_EQ(clean->blobs_checked, 3);
  EXPECT_EQ(clean->entries_checked, 2);
  EXPECT_EQ(clean->unreferenced_blobs, 1);

  ASSERT_TRUE(IsOk(s->corrupt_blob_for_testing(sha256_hex(bytes), 10)));
  auto bad = s->verify();
  ASSERT_TRUE(IsOk(bad));
  EXPECT_FALSE(bad->consistent());
  ASSERT_EQ(bad->corrupt_blobs.size(), 1u);
  EXPECT_EQ(bad->corrupt_blobs[0].substr(0, 64), sha256_hex(bytes));
  EXPECT_EQ(bad->quarantined_now, 2);  // the blob and entry a
  EXPECT_NE(bad->summary().find("NOT consistent"), std::string::npos);
  auto after = s->verify();
  EXPECT_TRUE(after->consistent()) << after->summary();
  EXPECT_TRUE(IsOk(s->get_entry("default", "b")));
}

// Finds every occurrence of `needle` in the file and flips one byte of each.
int flip_in_file(const std::string& path, const std::string& needle, size_t at) {
  std::string file = testing::read_file(path);
  int n = 0;
  for (size_t pos = file.find(needle); pos != std::string::npos; pos = file.find(needle, pos + 1)) {
    file[pos + at] = static_cast<char>(file[pos + at] ^ 0x01);
    ++n;
  }
  testing::write_file(path, file);
  return n;
}

TEST(Corruption, FlippedBlobBytesInTheFile) {
  TempDir dir;
  std::string path = dir.file("c.db");
  std::string marker = "MARKER-" + bytes_of(64, 9) + "-END";
  std::string payload = bytes_of(300, 10) + marker + bytes_of(300, 11);
  {
    auto s = open_store(path);
    ASSERT_TRUE(IsOk(s->put_entry("default", "k", "{}", test_provenance(), {{"kernel.so", payload}})));
  }  // closing checkpoints the WAL into the file
  ASSERT_EQ(flip_in_file(path, marker, 20), 1);
  auto s = open_store(path);
  auto a = s->get_entry("default", "k");
  EXPECT_TRUE(HasCode(a, Code::kCorruption));
  EXPECT_TRUE(HasCode(s->get_entry("default", "k"), Code::kNotFound));
  EXPECT_TRUE(s->verify()->consistent());
}

TEST(Corruption, FlippedKeyOrManifestInTheFile) {
  TempDir dir;
  std::string path = dir.file("c.db");
  std::string key = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  std::string key2 = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";
  {
    auto s = open_store(path);
    ASSERT_TRUE(IsOk(s->put_entry("default", key, "{}", test_provenance(), {{"kernel.so", "k1"}})));
    ASSERT_TRUE(IsOk(s->put_entry("default", key2, "{}", test_provenance(), {{"unusualname.so", "k2"}})));
  }
  // The key's row and its index entry both change: the record no longer
  // matches its hash, so the entry is not served under the new key either.
  ASSERT_GE(flip_in_file(path, key, 63), 1);  // ...ef -> ...eg
  std::string flipped = key;
  flipped[63] = static_cast<char>(flipped[63] ^ 0x01);
  // A renamed file in the manifest (and the reference index).
  ASSERT_GE(flip_in_file(path, "unusualname", 0), 1);
  auto s = open_store(path);
  EXPECT_FALSE(s->get_entry("default", key).ok());
  EXPECT_TRUE(HasCode(s->get_entry("default", flipped), Code::kCorruption));
  EXPECT_TRUE(HasCode(s->get_entry("default", key2), Code::kCorruption));
  EXPECT_TRUE(s->verify()->consistent());
}

// Random damage anywhere in the file: every call either fails or returns
// exactly the bytes that were put.
TEST(Corruption, RandomFileDamageNeverServesBadBytes) {
  TempDir dir;
  std::string path = dir.file("c.db");
  std::map<std::string, std::map<std::string, std::string>> expected;
  {
    auto s = open_store(path);
    for (int i = 0; i < 12; ++i) {
      std::string key = sha256_hex("key" + std::to_string(i));
      std::map<std::string, std::string> files = {{"kernel.so", bytes_of(500 + 700 * i, i)},
                                                  {"schedule.json", "{\"i\":" + std::to_string(i) + "}"},
                                                  {"shared", bytes_of(3000, 99)}};
      ASSERT_TRUE(IsOk(s->put_entry("default", key, "{}", test_provenance(), files)));
      expected[key] = files;
    }
  }
  std::string original = testing::read_file(path);
  std::mt19937 rng(20240601);
  int served = 0, refused = 0;
  for (int trial = 0; trial < 40; ++trial) {
    std::string damaged = original;
    int flips = 1 + static_cast<int>(rng() % 8);
    for (int f = 0; f < flips; ++f) damaged[rng() % damaged.size()] ^= static_cast<char>(1 + rng() % 255);
    std::string copy = dir.file("copy" + std::to_string(trial) + ".db");
    testing::write_file(copy, damaged);
    auto s = Store::Open(copy);
    if (!s.ok()) {
      ++refused;
      continue;
    }
    (void)(*s)->list();
    for (const auto& [key, files] : expected) {
      auto a = (*s)->get_entry("default", key);
      if (!a.ok()) {
        ++refused;
        continue;
      }
      ++served;
      EXPECT_EQ(a->files, files) << "trial " << trial << ": damaged bytes served for " << key;
    }
    auto v = (*s)->verify();
    if (v.ok()) (void)v->summary();
  }
  EXPECT_GT(served, 0);
  EXPECT_GT(refused, 0);
}

TEST(Corruption, ReadOnlyStoreRefusesButDoesNotQuarantine) {
  TempDir dir;
  std::string path = dir.file("c.db");
  std::string bytes = bytes_of(1000, 6);
  {
    auto s = open_store(path);
    ASSERT_TRUE(IsOk(s->put_entry("default", "a", "{}", test_provenance(), {{"f", bytes}})));
    ASSERT_TRUE(IsOk(s->corrupt_blob_for_testing(sha256_hex(bytes), 1)));
  }
  StoreOptions ro;
  ro.read_only = true;
  auto s = open_store(path, ro);
  EXPECT_TRUE(HasCode(s->get_entry("default", "a"), Code::kCorruption));
  EXPECT_TRUE(HasCode(s->get_entry("default", "a"), Code::kCorruption));  // still there, still refused
  auto v = s->verify();
  ASSERT_TRUE(IsOk(v));
  EXPECT_FALSE(v->consistent());
  EXPECT_EQ(v->quarantined_now, 0);
}

}  // namespace
}  // namespace mlk::cache
