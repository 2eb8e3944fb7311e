// A full disk (simulated with PRAGMA max_page_count) and a read-only store:
// clear IOErrors naming the path and the cause, and no partial entries.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

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

TEST(Limits, DiskFullLeavesNoPartialEntry) {
  TempDir dir;
  std::string path = dir.file("c.db");
  {
    auto s = open_store(path);
    ASSERT_TRUE(IsOk(s->put_entry("default", "before", "{}", test_provenance(), {{"f", bytes_of(20000, 1)}})));
  }
  StoreOptions o;
  o.max_page_count = 1;  // SQLite raises it to the current size: the file cannot grow
  auto s = open_store(path, o);
  // Many files, so that some blobs fit in free pages before the disk "fills".
  std::map<std::string, std::string> files;
  for (int i = 0; i < 20; ++i) files["part" + std::to_string(i)] = bytes_of(10000, 100 + i);
  Status st = s->put_entry("default", "big", "{}", test_provenance(), files);
  ASSERT_TRUE(HasCode(st, Code::kIOError));
  EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("full"), std::string::npos) << st.message();
  EXPECT_TRUE(HasCode(s->get_entry("default", "big"), Code::kNotFound));
  auto stats = s->stats();
  ASSERT_TRUE(IsOk(stats));
  EXPECT_EQ(stats->entries, 1);
  EXPECT_EQ(stats->blobs, 1);  // none of the new blobs stayed behind
  EXPECT_TRUE(HasCode(s->put_blob(bytes_of(100000, 2)), Code::kIOError));
  EXPECT_TRUE(IsOk(s->get_entry("default", "before")));
  // Making room works: after gc the space is reused.
  ASSERT_TRUE(IsOk(s->gc(0)));
  EXPECT_TRUE(IsOk(s->put_entry("default", "small", "{}", test_provenance(), {{"f", bytes_of(5000, 3)}})));
  auto v = s->verify();
  ASSERT_TRUE(IsOk(v));
  EXPECT_TRUE(v->consistent()) << v->summary();
}

void expect_read_only_error(const Status& st, const std::string& path) {
  EXPECT_TRUE(HasCode(st, Code::kIOError));
  EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("read-only"), std::string::npos) << st.message();
}

void check_read_only_store(Store& s, const std::string& path, const std::string& archive) {
  EXPECT_TRUE(s.read_only());
  expect_read_only_error(s.put_entry("default", "new", "{}", test_provenance(), {{"f", "x"}}), path);
  expect_read_only_error(s.put_blob("x").status(), path);
  expect_read_only_error(s.rm("default", "k"), path);
  expect_read_only_error(s.pin("default", "k"), path);
  expect_read_only_error(s.gc(0).status(), path);
  expect_read_only_error(s.import_from(archive).status(), path);
  // Reads work (without recording recency), and so does export.
  auto a = s.get_entry("default", "k");
  ASSERT_TRUE(IsOk(a));
  EXPECT_EQ(a->files.at("f"), "bytes");
  EXPECT_EQ(s.list()->size(), 1u);
  EXPECT_TRUE(s.verify()->consistent());
  EXPECT_TRUE(HasCode(s.get_entry("default", "new"), Code::kNotFound));
}

TEST(Limits, ReadOnlyStore) {
  TempDir dir;
  std::string path = dir.file("c.db");
  std::string archive = dir.file("a.mlkcache");
  {
    auto s = open_store(path);
    ASSERT_TRUE(IsOk(s->put_entry("default", "k", "{}", test_provenance(), {{"f", "bytes"}})));
    ASSERT_TRUE(IsOk(s->put_entry("other", "x", "{}", test_provenance(), {{"g", "more"}})));
    ASSERT_TRUE(IsOk(s->export_to(archive, "other")));
    ASSERT_TRUE(IsOk(s->rm("other", "x")));
  }
  ASSERT_EQ(chmod(path.c_str(), 0444), 0);
  if (geteuid() != 0) {
    // Permissions stop writes: SQLite opens the file read-only by itself.
    auto s = open_store(path);
    check_read_only_store(*s, path, archive);
  }
  // As root permissions do not stop writes; the option does (SQLITE_OPEN_READONLY).
  StoreOptions ro;
  ro.read_only = true;
  auto s = open_store(path, ro);
  check_read_only_store(*s, path, archive);
  StoreOptions no_create = ro;
  EXPECT_TRUE(HasCode(Store::Open(dir.file("absent.db"), no_create), Code::kNotFound));
  s.reset();
  ASSERT_EQ(chmod(path.c_str(), 0644), 0);
  auto rw = open_store(path);
  EXPECT_EQ(rw->stats()->entries, 1);
}

}  // namespace
}  // namespace mlk::cache
