// The pieces of the shared backend that need no server (cache/s3_blobs.h,
// cache/blob_lru.h, cache/pg.h, cache/pg_store.h): --blobs parsing and its
// errors, the local blob cache (re-hash on read, LRU eviction, no partial
// files), and the errors for a database or a bucket that cannot be reached.
// The backend against a real PostgreSQL and S3 endpoint is
// tests/python/serve_cluster.py.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "base/files.h"
#include "base/sha256.h"
#include "cache/blob_lru.h"
#include "cache/pg.h"
#include "cache/pg_store.h"
#include "cache/s3_blobs.h"
#include "test_util.h"

namespace mlk::cache {
namespace {

using testing::HasCode;
using testing::IsOk;
using testing::TempDir;

TEST(S3Spec, ParsesBucketEndpointRegionAndCredentials) {
  auto s = parse_s3_spec("s3://kernels?endpoint=http://127.0.0.1:9000/&region=eu-west-1&prefix=mlk&access_key=k&secret_key=s");
  ASSERT_TRUE(IsOk(s));
  EXPECT_EQ(s->bucket, "kernels");
  EXPECT_EQ(s->endpoint, "http://127.0.0.1:9000");
  EXPECT_EQ(s->region, "eu-west-1");
  EXPECT_EQ(s->prefix, "mlk/");
  EXPECT_EQ(s->access_key, "k");
  EXPECT_EQ(s->secret_key, "s");
}

TEST(S3Spec, EveryMistakeIsNamed) {
  const std::string tail = "; expected s3://BUCKET?endpoint=http://HOST:PORT[&region=REGION]";
  auto err = [](const std::string& spec) { return parse_s3_spec(spec).status().message(); };
  EXPECT_EQ(err("http://b"), "--blobs `http://b`: not an s3:// URL" + tail);
  EXPECT_EQ(err("s3://?endpoint=http://h"), "--blobs `s3://?endpoint=http://h`: no bucket name, or a `/` in it" + tail);
  EXPECT_EQ(err("s3://b"), "--blobs `s3://b`: endpoint= must be an http:// or https:// URL" + tail);
  EXPECT_EQ(err("s3://b?endpoint"), "--blobs `s3://b?endpoint`: `endpoint` is not NAME=VALUE" + tail);
  EXPECT_EQ(err("s3://b?endpoint=http://h&colour=red"),
            "--blobs `s3://b?endpoint=http://h&colour=red`: unknown parameter `colour` (endpoint, region, prefix, "
            "access_key, secret_key)" + tail);
  unsetenv("AWS_ACCESS_KEY_ID");
  unsetenv("AWS_SECRET_ACCESS_KEY");
  EXPECT_EQ(err("s3://b?endpoint=http://h"),
            "--blobs `s3://b?endpoint=http://h`: no credentials: set $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY" + tail);
  EXPECT_TRUE(HasCode(parse_s3_spec("s3://b"), Status::Code::kInvalidArgument));
}

TEST(S3Blobs, AnUnreachableEndpointIsIOErrorNamingIt) {
  auto spec = parse_s3_spec("s3://b?endpoint=http://127.0.0.1:1&access_key=k&secret_key=s");
  ASSERT_TRUE(IsOk(spec));
  S3Blobs blobs(*spec);
  auto got = blobs.get(sha256_hex("x"));
  EXPECT_TRUE(HasCode(got, Status::Code::kIOError));
  EXPECT_EQ(got.status().message().rfind("blob store s3://b at http://127.0.0.1:1 is unavailable: GET cas/" +
                                             sha256_hex("x") + ": ",
                                         0),
            0u)
      << got.status().message();
  EXPECT_TRUE(HasCode(blobs.put_if_absent(sha256_hex("x"), "x"), Status::Code::kIOError));
}

TEST(PgConn, AServerThatIsNotThereIsIOError) {
  auto c = pg::Conn::Open("postgresql://mlk@127.0.0.1:1/mlk?connect_timeout=2");
  EXPECT_TRUE(HasCode(c, Status::Code::kIOError));
  EXPECT_NE(c.status().message().find("cannot connect to PostgreSQL ("), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("); check --store and that the server is up"), std::string::npos);
  EXPECT_EQ(pg::lock_key("ns/a"), pg::lock_key("ns/a"));
  EXPECT_NE(pg::lock_key("ns/a"), pg::lock_key("ns/b"));
  EXPECT_GT(pg::lock_key("ns/a"), 0);
}

TEST(SharedBackend, NeedsAPostgresUrlAndABucket) {
  EXPECT_EQ(open_shared_backend("/tmp/x.db", "s3://b", "", 0).status().message(),
            "--store `/tmp/x.db` is not a postgresql:// URL");
  EXPECT_EQ(open_shared_backend("postgresql://h/db", "", "", 0).status().message(),
            "--store postgresql://... needs --blobs s3://BUCKET?endpoint=... for the blob bytes");
  EXPECT_TRUE(is_postgres_url("postgres://h/db"));
  EXPECT_FALSE(is_postgres_url("http://h"));
}

TEST(BlobLru, ServesOnlyBytesThatHashToTheirDigest) {
  TempDir dir;
  auto lru = BlobLru::Open(dir.file("blobs"), 1000);
  ASSERT_TRUE(IsOk(lru));
  std::string a = testing::bytes_of(300, 1), da = sha256_hex(a);
  (*lru)->put(da, a);
  EXPECT_EQ((*lru)->get(da), a);
  EXPECT_EQ((*lru)->files(), 1);
  // Damage the file: the next read drops it and reports a miss.
  std::string damaged = a;
  damaged[10] ^= 1;
  ASSERT_TRUE(IsOk(write_file(dir.file("blobs/" + da), damaged)));
  EXPECT_EQ((*lru)->get(da), std::nullopt);
  EXPECT_EQ((*lru)->files(), 0);
  EXPECT_NE(access(dir.file("blobs/" + da).c_str(), F_OK), 0);
}

// Review 12 of issue 49, L4: the blob cache made its parent folders 0777 and
// took any folder (a link, one in a folder others may write to) as its own,
// though it holds other teams' blobs and serves part-reads unhashed. Now its
// folders are made private, and a folder others could replace, or a link in
// its place, is refused, naming why.
TEST(BlobLru, Review12_L4_TheFolderMustBeWhereNoOtherUserCanReplaceIt) {
  TempDir dir;
  ASSERT_TRUE(IsOk(BlobLru::Open(dir.file("made/deep/blobs"), 1000)));
  struct stat st {};
  ASSERT_EQ(stat(dir.file("made/deep").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 077, 0u) << "a parent made here is private";
  ASSERT_EQ(mkdir(dir.file("open").c_str(), 0700), 0);
  ASSERT_EQ(chmod(dir.file("open").c_str(), 0777), 0);
  auto open = BlobLru::Open(dir.file("open/blobs"), 1000);
  ASSERT_FALSE(open.ok());
  EXPECT_NE(open.status().message().find("is writable by other users and not sticky"), std::string::npos)
      << open.status().message();
  ASSERT_EQ(mkdir(dir.file("elsewhere").c_str(), 0700), 0);
  ASSERT_EQ(symlink(dir.file("elsewhere").c_str(), dir.file("link").c_str()), 0);
  auto link = BlobLru::Open(dir.file("link"), 1000);
  ASSERT_FALSE(link.ok());
  EXPECT_NE(link.status().message().find("not usable as the blob cache directory"), std::string::npos)
      << link.status().message();
}

TEST(BlobLru, EvictsTheLeastRecentlyUsedAndTakesOverItsFolder) {
  TempDir dir;
  std::string d[4];
  {
    auto lru = BlobLru::Open(dir.file("blobs"), 1000);
    ASSERT_TRUE(IsOk(lru));
    for (int i = 0; i < 3; ++i) {
      std::string b = testing::bytes_of(400, i);
      d[i] = sha256_hex(b);
      (*lru)->put(d[i], b);
      if (i == 1) EXPECT_TRUE((*lru)->get(d[0]).has_value());  // 0 is now more recent than 1
    }
    EXPECT_EQ((*lru)->bytes(), 800);
    EXPECT_TRUE((*lru)->get(d[0]).has_value());
    EXPECT_FALSE((*lru)->get(d[1]).has_value());  // the least recently used went first
    EXPECT_TRUE((*lru)->get(d[2]).has_value());
  }
  // A killed replica's temporary file is removed; the blobs are kept.
  ASSERT_TRUE(IsOk(write_file(dir.file("blobs/" + d[0] + ".tmp.1.2"), "partial")));
  auto again = BlobLru::Open(dir.file("blobs"), 1000);
  ASSERT_TRUE(IsOk(again));
  EXPECT_EQ((*again)->bytes(), 800);
  EXPECT_NE(access(dir.file("blobs/" + d[0] + ".tmp.1.2").c_str(), F_OK), 0);
  auto off = BlobLru::Open(dir.file("none"), 0);
  ASSERT_TRUE(IsOk(off));
  (*off)->put(d[0], "x");
  EXPECT_EQ((*off)->files(), 0);
  EXPECT_NE(access(dir.file("none").c_str(), F_OK), 0);  // disabled: no folder either
}

}  // namespace
}  // namespace mlk::cache
