// `mlk cache` through run_cache_cli (cli/cache_cli.h) with captured output:
// every command, exit codes 0/1/2, and SIZE parsing (cache/sizes.h).
#include <gtest/gtest.h>

#include <sstream>

#include "cache/sizes.h"
#include "cache/store.h"
#include "cli/cache_cli.h"
#include "tests/cache/test_util.h"

namespace mlk::cache {
namespace {

using testing::bytes_of;
using testing::IsOk;
using testing::open_store;
using testing::TempDir;
using testing::test_provenance;

struct CliResult {
  int code;
  std::string out, err;
};

CliResult cli(std::vector<std::string> args) {
  std::ostringstream out, err;
  int code = cli::run_cache_cli(args, out, err);
  return {code, out.str(), err.str()};
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

class CacheCli : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.file("c.db");
    auto s = open_store(path_);
    ASSERT_TRUE(IsOk(s->put_entry("default", key_a_, R"({"signature":"f"})", test_provenance("mlk autotune"),
                                  {{"kernel.so", bytes_of(3000, 1)}})));
    ASSERT_TRUE(IsOk(s->put_entry("team-b", key_b_, "{}", test_provenance("mlk compile"), {{"k", bytes_of(1000, 2)}})));
  }
  std::vector<std::string> with_cache(std::vector<std::string> args) {
    args.push_back("--cache");
    args.push_back(path_);
    return args;
  }
  TempDir dir_;
  std::string path_;
  std::string key_a_ = sha256_hex("a"), key_b_ = sha256_hex("b");
};

TEST_F(CacheCli, LsAllAndOneNamespace) {
  CliResult r = cli(with_cache({"ls"}));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, key_a_) && contains(r.out, key_b_)) << r.out;
  EXPECT_TRUE(contains(r.out, "mlk autotune")) << r.out;
  EXPECT_TRUE(contains(r.out, "namespace default: 1 entry, 3000 bytes charged")) << r.out;
  EXPECT_TRUE(contains(r.out, "store: 2 blobs, 4000 bytes")) << r.out;
  r = cli(with_cache({"ls", "--namespace", "team-b"}));
  EXPECT_EQ(r.code, 0);
  EXPECT_FALSE(contains(r.out, key_a_));
  EXPECT_TRUE(contains(r.out, key_b_));
  r = cli(with_cache({"--namespace=nobody", "ls"}));
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(contains(r.out, "no entries in namespace `nobody`")) << r.out;
}

TEST_F(CacheCli, ShowByKeyAndPrefix) {
  CliResult r = cli(with_cache({"show", key_a_}));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "\"signature\": \"f\"")) << r.out;
  EXPECT_TRUE(contains(r.out, "\"kernel.so\"")) << r.out;
  EXPECT_TRUE(contains(r.out, "\"timings\": \"measured\"")) << r.out;
  EXPECT_TRUE(contains(r.out, sha256_hex(bytes_of(3000, 1)))) << r.out;
  r = cli(with_cache({"show", key_a_.substr(0, 10)}));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, key_a_));
  r = cli(with_cache({"show", key_a_.substr(0, 4)}));  // too short for a prefix
  EXPECT_EQ(r.code, 1);
  r = cli(with_cache({"show", key_b_}));  // lives in team-b
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(contains(r.err, "no entry")) << r.err;
  r = cli(with_cache({"show", key_b_, "--namespace", "team-b"}));
  EXPECT_EQ(r.code, 0) << r.err;
}

TEST_F(CacheCli, PinUnpinRm) {
  EXPECT_EQ(cli(with_cache({"pin", key_a_})).code, 0);
  EXPECT_TRUE(open_store(path_)->show_entry("default", key_a_)->pinned);
  CliResult r = cli(with_cache({"gc", "--max-size", "0"}));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "pinned")) << r.err;  // still over the limit: says why
  EXPECT_EQ(open_store(path_)->stats()->entries, 1);
  EXPECT_EQ(cli(with_cache({"unpin", key_a_})).code, 0);
  r = cli(with_cache({"rm", key_a_}));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "removed default/" + key_a_));
  EXPECT_EQ(cli(with_cache({"rm", key_a_})).code, 1);
  EXPECT_EQ(cli(with_cache({"pin", "nope-nope-nope"})).code, 1);
}

TEST_F(CacheCli, GcWithSizes) {
  CliResult r = cli(with_cache({"gc", "--max-size", "3K"}));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "evicted 1 entry")) << r.out;  // the older entry, a (3000 bytes)
  EXPECT_EQ(open_store(path_)->stats()->blob_bytes, 1000);
  r = cli(with_cache({"gc", "--max-size=0", "--namespace", "team-b"}));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(open_store(path_)->stats()->entries, 0);
}

TEST_F(CacheCli, VerifyExitsOneOnCorruption) {
  CliResult r = cli(with_cache({"verify"}));
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "store is consistent")) << r.out;
  ASSERT_TRUE(IsOk(open_store(path_)->corrupt_blob_for_testing(sha256_hex(bytes_of(3000, 1)), 5)));
  r = cli(with_cache({"verify"}));
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(contains(r.out, "corrupt blobs: 1")) << r.out;
  r = cli(with_cache({"verify"}));  // the damage was quarantined by the first run
  EXPECT_EQ(r.code, 0) << r.out;
}

TEST_F(CacheCli, ExportImport) {
  std::string archive = dir_.file("a.mlkcache");
  CliResult r = cli(with_cache({"export", archive}));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "exported 2 entries")) << r.out;
  EXPECT_EQ(cli(with_cache({"export", archive})).code, 1);  // exists
  r = cli({"import", archive, "--cache", dir_.file("new/other.db")});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "imported 2 entries")) << r.out;
  r = cli({"import", archive, "--cache", dir_.file("new/other.db")});
  EXPECT_TRUE(contains(r.out, "imported 0 entries from " + archive + "; kept 2 already present")) << r.out;
  EXPECT_EQ(cli({"import", dir_.file("missing"), "--cache", dir_.file("new/other.db")}).code, 1);
}

TEST_F(CacheCli, MissingStore) {
  CliResult r = cli({"ls", "--cache", dir_.file("none.db")});
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(contains(r.out, "no cache store")) << r.out;
  EXPECT_EQ(cli({"verify", "--cache", dir_.file("none.db")}).code, 0);
  EXPECT_EQ(cli({"show", "abc", "--cache", dir_.file("none.db")}).code, 1);
  EXPECT_FALSE(std::filesystem::exists(dir_.file("none.db")));  // reading never creates a store
}

TEST_F(CacheCli, BadUsageExitsTwo) {
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
           {},
           {"frobnicate"},
           {"ls", "extra"},
           {"show"},
           {"show", "a", "b"},
           {"gc"},
           {"gc", "--max-size", "12X"},
           {"gc", "--max-size", "-1"},
           {"gc", "--max-size"},
           {"ls", "--max-size", "1K"},
           {"ls", "--repair"},
           {"ls", "--bogus"},
           {"ls", "--namespace", "bad ns"},
           {"ls", "--cache="},
       }) {
    CliResult r = cli(with_cache(args));
    EXPECT_EQ(r.code, 2) << ::testing::PrintToString(args) << " " << r.out << r.err;
    EXPECT_TRUE(contains(r.err, "mlk cache: ")) << r.err;
  }
  CliResult h = cli({"--help"});
  EXPECT_EQ(h.code, 0);
  EXPECT_TRUE(contains(h.out, "usage: mlk cache"));
}

TEST(ParseSize, SuffixesAndErrors) {
  EXPECT_EQ(*parse_size("0"), 0);
  EXPECT_EQ(*parse_size("1234"), 1234);
  EXPECT_EQ(*parse_size("1234B"), 1234);
  EXPECT_EQ(*parse_size("64K"), 64 * 1024);
  EXPECT_EQ(*parse_size("64k"), 64 * 1024);
  EXPECT_EQ(*parse_size("512M"), 512LL << 20);
  EXPECT_EQ(*parse_size("10G"), 10LL << 30);
  EXPECT_EQ(*parse_size("10GiB"), 10LL << 30);
  EXPECT_EQ(*parse_size("10gb"), 10LL << 30);
  for (const char* bad : {"", "G", "1.5G", "-1", "10T", "10 G", "10GG", "99999999999999999999", "9999999999999G"})
    EXPECT_EQ(parse_size(bad).status().code(), Status::Code::kUsage) << bad;
}

TEST(HumanBytes, Units) {
  EXPECT_EQ(human_bytes(0), "0 B");
  EXPECT_EQ(human_bytes(1023), "1023 B");
  EXPECT_EQ(human_bytes(1536), "1.5 KiB");
  EXPECT_EQ(human_bytes(10LL << 30), "10.0 GiB");
}

}  // namespace
}  // namespace mlk::cache
