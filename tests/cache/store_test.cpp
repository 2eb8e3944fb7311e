// Store basics: opening, round trips, dedup, namespaces, size accounting,
// replacement, rm and pins, the fault seam, export and import.
#include <gtest/gtest.h>
#include <sqlite3.h>

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

std::string pragma(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr);
  std::string out;
  if (sqlite3_step(st) == SQLITE_ROW) out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

TEST(StoreOpen, CreatesDirectoriesAndUsesWal) {
  TempDir dir;
  std::string path = dir.file("a/b/cache.db");
  {
    auto s = open_store(path);
    EXPECT_EQ(s->path(), path);
    EXPECT_FALSE(s->read_only());
  }
  EXPECT_EQ(pragma(path, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(pragma(path, "SELECT v FROM meta WHERE k='format'"), "mlk-cache");
  EXPECT_TRUE(IsOk(Store::Open(path)));  // reopen
}

TEST(StoreOpen, ClearErrors) {
  TempDir dir;
  StoreOptions no_create;
  no_create.create_if_missing = false;
  auto missing = Store::Open(dir.file("none.db"), no_create);
  EXPECT_TRUE(HasCode(missing, Code::kNotFound));
  EXPECT_NE(missing.status().message().find(dir.file("none.db")), std::string::npos);

  EXPECT_TRUE(HasCode(Store::Open(dir.path()), Code::kInvalidArgument));
  EXPECT_TRUE(HasCode(Store::Open(""), Code::kInvalidArgument));

  testing::write_file(dir.file("garbage.db"), std::string(8192, 'x'));
  auto garbage = Store::Open(dir.file("garbage.db"));
  EXPECT_TRUE(HasCode(garbage, Code::kCorruption));
  EXPECT_NE(garbage.status().message().find("garbage.db"), std::string::npos);

  sqlite3* db = nullptr;
  sqlite3_open(dir.file("other.db").c_str(), &db);
  sqlite3_exec(db, "CREATE TABLE t(x)", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  auto other = Store::Open(dir.file("other.db"));
  EXPECT_TRUE(HasCode(other, Code::kInvalidArgument));
  EXPECT_NE(other.status().message().find("not an mlk cache store"), std::string::npos);
  EXPECT_EQ(pragma(dir.file("other.db"), "SELECT count(*) FROM sqlite_master"), "1");  // left alone
}

// What a namespace is charged for its manifests is read from each entry's
// record_bytes (the hostile benchmark of issue 49: a quota check read every
// manifest of the namespace, up to --max-manifest each). A store made before
// the column gets it when opened to write; its old rows, NULL there, are
// counted from their manifests, and a read-only open reads around it.
TEST(StoreOpen, ManifestBytesAreRecordedAndOlderStoresStillCount) {
  TempDir dir;
  const std::string path = dir.file("c.db");
  Manifest m;
  m.meta_json = R"({"note":"a manifest of some size"})";
  m.provenance = testing::test_provenance();
  int64_t charged = 0;
  {
    auto s = open_store(path);
    ASSERT_TRUE(IsOk(s->put_entry("ns", "k1", m)));
    charged = *s->namespace_bytes("ns");
    EXPECT_GT(charged, 0);
  }
  EXPECT_EQ(pragma(path, "SELECT record_bytes FROM entries WHERE key='k1'"), std::to_string(charged));
  // Made before the column: drop it, as such a store never had it.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "ALTER TABLE entries DROP COLUMN record_bytes", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  {
    StoreOptions ro;
    ro.read_only = true;
    auto s = open_store(path, ro);
    EXPECT_EQ(*s->namespace_bytes("ns"), charged);
  }
  auto s = open_store(path);
  EXPECT_EQ(*s->namespace_bytes("ns"), charged);  // the old row: NULL, counted from its manifest
  ASSERT_TRUE(IsOk(s->put_entry("ns", "k2", m)));
  EXPECT_EQ(*s->namespace_bytes("ns"), 2 * charged);
  auto usage = s->usage();
  ASSERT_TRUE(IsOk(usage));
  ASSERT_EQ(usage->size(), 1u);
  ASSERT_TRUE(IsOk(s->rm("ns", "k1")));
  EXPECT_EQ(*s->namespace_bytes("ns"), charged);
}

// Review 17 of issue 49 (low): provenance is a writer's word that tools
// print; a host holding terminal escapes rewrote what `mlk run` showed.
// No store takes control characters in it (the server answers 400).
TEST(StoreOpen, Review17_L4_ProvenanceWithControlCharactersIsRefused) {
  TempDir dir;
  auto s = open_store(dir.file("c.db"));
  Manifest m;
  m.meta_json = "{}";
  m.provenance = testing::test_provenance();
  m.provenance.host = "ci\x1b]0;signed by key 1234\x07";
  Status st = s->put_entry("ns", "k", m);
  EXPECT_TRUE(HasCode(st, Code::kInvalidArgument));
  EXPECT_EQ(st.message(), "provenance host contains a control character");
  m.provenance.host = "ci\xc2\x9b" "2J";  // C1 (CSI) as UTF-8
  EXPECT_EQ(s->put_entry("ns", "k", m).message(), "provenance host contains a control character");
  m.provenance.host = "ci-\xc3\xa9";  // other UTF-8 is words
  EXPECT_TRUE(IsOk(s->put_entry("ns", "k", m)));
  m.provenance.toolchain["mlk"] = "0.1\r";
  EXPECT_EQ(s->put_entry("ns", "k", m).message(), "provenance toolchain version of `mlk` contains a control character");
  m.provenance.toolchain["mlk"] = "0.1";
  EXPECT_TRUE(IsOk(s->put_entry("ns", "k", m)));
}

// An archive is a store others may open with --cache: what a tune here
// stored (origin `local`) is not local to them, so an export marks it
// (issue 49, finding 11, the review of the fix). Other origins are kept.
TEST(StoreOpen, AnExportedEntryIsNotLocalInTheArchive) {
  TempDir dir;
  Manifest m;
  m.meta_json = "{}";
  m.provenance = testing::test_provenance();
  m.provenance.origin = kOriginLocal;
  auto s = open_store(dir.file("c.db"));
  ASSERT_TRUE(IsOk(s->put_entry("ns", "mine", m)));
  m.provenance.origin = "http://elsewhere:8080";
  ASSERT_TRUE(IsOk(s->put_entry("ns", "pulled", m)));
  ASSERT_TRUE(IsOk(s->export_to(dir.file("all.mlkc"))));
  auto archive = open_store(dir.file("all.mlkc"));
  EXPECT_EQ(archive->show_entry("ns", "mine")->manifest.provenance.origin, "export");
  EXPECT_EQ(archive->show_entry("ns", "pulled")->manifest.provenance.origin, "http://elsewhere:8080");
  EXPECT_EQ(s->show_entry("ns", "mine")->manifest.provenance.origin, kOriginLocal);
}

TEST(Store, BlobRoundTrip) {
  TempDir dir;
  auto s = open_store(dir.file("c.db"));
  for (std::string bytes : {std::string(), std::string("a\0b", 3), bytes_of(100000, 1)}) {
    auto d = s->put_blob(bytes);
    ASSERT_TRUE(IsOk(d));
    EXPECT_EQ(*d, sha256_hex(bytes));
    auto back = s->get_blob(*d);
    ASSERT_TRUE(IsOk(back));
    EXPECT_EQ(*back, bytes);
  }
  EXPECT_TRUE(HasCode(s->get_blob(sha256_hex("never stored")), Code::kNotFound));
  EXPECT_TRUE(HasCode(s->get_blob("not-a-digest"), Code::kInvalidArgument));
}

TEST(Store, EntryRoundTrip) {
  TempDir dir;
  auto s = open_store(dir.file("c.db"));
  std::map<std::string, std::string> files = {{"kernel.so", bytes_of(5000, 2)},
                                              {"schedule.json", "{\"tile\": [32, 8]}"},
                                              {"empty", ""},
                                              {"ptx/kernel.ptx", bytes_of(700, 3)}};
  Provenance p = test_provenance("mlk autotune");
  ASSERT_TRUE(IsOk(s->put_entry("default", "k1", R"j({"signature": "f(x)", "ms": 0.25})j", p, files)));
  auto a = s->get_entry("default", "k1");
  ASSERT_TRUE(IsOk(a));
  EXPECT_EQ(a->files, files);
  EXPECT_EQ(a->info.ns, "default");
  EXPECT_EQ(a->info.key, "k1");
  EXPECT_EQ(a->info.size, 5000 + 17 + 0 + 700);
  EXPECT_EQ(a->info.manifest.meta_json, R"j({"ms":0.25,"signature":"f(x)"})j");
  const Provenance& q = a->info.manifest.provenance;
  EXPECT_EQ(q.producer, "mlk autotune");
  EXPECT_EQ(q.toolchain, p.toolchain);
  EXPECT_TRUE(q.measured);
  EXPECT_FALSE(q.host.empty());  // filled in
  EXPECT_GT(q.time, 1600000000);
  for (const auto& [name, bytes] : files) {
    EXPECT_EQ(a->info.manifest.files.at(name).digest, sha256_hex(bytes));
    EXPECT_EQ(a->info.manifest.files.at(name).size, static_cast<int64_t>(bytes.size()));
  }
  auto shown = s->show_entry("default", "k1");
  ASSERT_TRUE(IsOk(shown));
  EXPECT_EQ(shown->manifest.files, a->info.manifest.files);
  EXPECT_TRUE(HasCode(s->get_entry("default", "k2"), Code::kNotFound));
  EXPECT_TRUE(HasCode(s->get_entry("other", "k1"), Code::kNotFound));
}

TEST(Store, RejectsBadInput) {
  TempDir dir;
  auto s = open_store(dir.file("c.db"));
  Provenance p = test_provenance();
  EXPECT_TRUE(HasCode(s->put_entry("bad ns", "k", "{}", p, {}), Code::kInvalidArgument));
  EXPECT_TRUE(HasCode(s->put_entry("-x", "k", "{}", p, {}), Code::kInvalidArgument));
  EXPECT_TRUE(HasCode(s->put_entry("default", "", "{}", p, {}), Code::kInvalidArgument));
  EXPECT_TRUE(HasCode(s->put_entry("default", "a key", "{}", p, {}), Code::kInvalidArgument));
  EXPECT_TRUE(HasCode(s->put_entry("default", "k", "[1]", p, {}), Code::kInvalidArgument));
  EXPECT_TRUE(HasCode(s->put_entry("default", "k", "{", p, {}), Code::kInvalidArgument));
  EXPECT_TRUE(HasCode(s->put_entry("default", "k", "{}", p, {{"../x", "b"}}), Code::kInvalidArgument));
  EXPECT_TRUE(HasCode(s->put_entry("default", "k", "{}", p, {{"/abs", "b"}}), Code::kInvalidArgument));
  auto st = s->stats();
  ASSERT_TRUE(IsOk(st));
  EXPECT_EQ(st->entries, 0);
  EXPECT_EQ(st->blobs, 0);  // the rejected file's blob was rolled back too
}

TEST(Store, PutEntryByDigestNeedsTheBlobs) {
  TempDir dir;
  auto s = open_store(dir.file("c.db"));
  auto d = s->put_blob("kernel bytes");
  ASSERT_TRUE(IsOk(d));
  Manifest m;
  m.files["kernel.so"] = {*d, 12};
  m.provenance = test_provenance();
  ASSERT_TRUE(IsOk(s->put_entry("default", "k", m)));
  EXPECT_EQ(s->get_entry("default", "k")->files.at("kernel.so"), "kernel bytes");

  Manifest missing = m;
  missing.files["other"] = {sha256_hex("absent"), 6};
  EXPECT_TRUE(HasCode(s->put_entry("default", "k2", missing), Code::kNotFound));
  Manifest wrong_size = m;
  wrong_size.files["kernel.so"].size = 13;
  EXPECT_TRUE(HasCode(s->put_entry("default", "k3", wrong_size), Code::kInvalidArgument));
  EXPECT_TRUE(HasCode(s->show_entry("default", "k2"), Code::kNotFound));
  EXPECT_TRUE(HasCode(s->show_entry("default", "k3"), Code::kNotFound));
}

TEST(Store, DeduplicatesBlobs) {
  TempDir dir;
  auto s = open_store(dir.file("c.db"));
  std::string shared = bytes_of(4096, 7);
  ASSERT_TRUE(IsOk(s->put_blob(shared)));
  ASSERT_TRUE(IsOk(s->put_blob(shared)));
  ASSERT_TRUE(IsOk(s->put_entry("default", "a", "{}", test_provenance(), {{"x", shared}, {"y", shared}})));
  ASSERT_TRUE(IsOk(s->put_entry("team-b", "b", "{}", test_provenance(), {{"z", shared}})));
  auto st = s->stats();
  ASSERT_TRUE(IsOk(st));
  EXPECT_EQ(st->blobs, 1);
  EXPECT_EQ(st->blob_bytes, 4096);
  EXPECT_EQ(st->entries, 2);
}

TEST(Store, NamespacesAreIsolated) {
  TempDir dir;
  auto s = open_store(dir.file("c.db"));
  ASSERT_TRUE(IsOk(s->put_entry("team-a", "k", "{}", test_provenance("a"), {{"f", "from a"}})));
  ASSERT_TRUE(IsOk(s->put_entry("team-b", "k", "{}", test_provenance("b"), {{"f", "from b"}})));
  EXPECT_EQ(s->get_entry("team-a", "k")->files.at("f"), "from a");
  EXPECT_EQ(s->get_entry("team-b", "k")->files.at("f"), "from b");
  EXPECT_TRUE(HasCode(s->get_entry(kDefaultNamespace, "k"), Code::kNotFound));
  ASSERT_TRUE(IsOk(s->rm("team-a", "k")));
  EXPECT_TRUE(HasCode(s->get_entry("team-a", "k"), Code::kNotFound));
  EXPECT_EQ(s->get_entry("team-b", "k")->files.at("f"), "from b");
  auto a = s->list("team-a");
  auto b = s->list("team-b");
  auto all = s->list();
  ASSERT_TRUE(IsOk(a) && IsOk(b) && IsOk(all));
  EXPECT_EQ(a->size(), 0u);
  EXPECT_EQ(b->size(), 1u);
  EXPECT_EQ(all->size(), 1u);
}

TEST(Store, SizeAccountingIsExact) {
  TempDir dir;
  auto s = open_store(dir.file("c.db"));
  std::string shared = bytes_of(1000, 1), a1 = bytes_of(300, 2), b1 = bytes_of(50, 3);
  // Charged per reference: team-a references `shared` twice (two entries).
  ASSERT_TRUE(IsOk(s->put_entry("team-a", "e1", "{}", test_provenance(), {{"s", shared}, {"a", a1}})));
  ASSERT_TRUE(IsOk(s->put_entry("team-a", "e2", "{}", test_provenance(), {{"s", shared}})));
  ASSERT_TRUE(IsOk(s->put_entry("team-b", "e1", "{}", test_provenance(), {{"s", shared}, {"b", b1}})));
  // ... and for each entry's stored manifest (its record).
  auto record = [&](const std::string& ns, const std::string& key) {
    auto e = s->show_entry(ns, key);
    EXPECT_EQ(e->record_bytes, static_cast<int64_t>(cache::manifest_to_json(e->manifest).size()));
    return e->record_bytes;
  };
  const int64_t ra = record("team-a", "e1") + record("team-a", "e2"), rb = record("team-b", "e1");
  EXPECT_EQ(*s->namespace_bytes("team-a"), 1000 + 300 + 1000 + ra);
  EXPECT_EQ(*s->namespace_bytes("team-b"), 1000 + 50 + rb);
  EXPECT_EQ(*s->namespace_bytes("nobody"), 0);
  auto u = s->usage();
  ASSERT_TRUE(IsOk(u));
  ASSERT_EQ(u->size(), 2u);
  EXPECT_EQ((*u)[0].ns, "team-a");
  EXPECT_EQ((*u)[0].entries, 2);
  EXPECT_EQ((*u)[0].bytes, 2300);
  EXPECT_EQ((*u)[0].record_bytes, ra);
  EXPECT_EQ((*u)[0].charged(), 2300 + ra);
  EXPECT_EQ((*u)[1].bytes, 1050);
  EXPECT_EQ(s->stats()->blob_bytes, 1000 + 300 + 50);  // stored once each
  auto listed = s->list("team-a");
  ASSERT_TRUE(IsOk(listed));
  int64_t sum = 0;
  for (const auto& e : *listed) sum += e.size;
  EXPECT_EQ(sum, 2300);

  const int64_t re2 = record("team-a", "e2");
  ASSERT_TRUE(IsOk(s->rm("team-a", "e1")));  // `a` is now unreferenced and deleted
  EXPECT_EQ(*s->namespace_bytes("team-a"), 1000 + re2);
  EXPECT_EQ(s->stats()->blob_bytes, 1000 + 50);
  ASSERT_TRUE(IsOk(s->rm("team-b", "e1")));
  EXPECT_EQ(s->stats()->blob_bytes, 1000);  // still used by team-a/e2
  EXPECT_TRUE(HasCode(s->rm("team-b", "e1"), Code::kNotFound));
}

TEST(Store, ReplacingAnEntryKeepsItsPinAndDropsOldBlobs) {
  TempDir dir;
  auto s = open_store(dir.file("c.db"));
  ASSERT_TRUE(IsOk(s->put_entry("default", "k", "{}", test_provenance(), {{"f", "old bytes"}})));
  ASSERT_TRUE(IsOk(s->pin("default", "k")));
  ASSERT_TRUE(IsOk(s->put_entry("default", "k", "{}", test_provenance(), {{"f", "new bytes!"}})));
  auto a = s->get_entry("default", "k");
  ASSERT_TRUE(IsOk(a));
  EXPECT_EQ(a->files.at("f"), "new bytes!");
  EXPECT_TRUE(a->info.pinned);
  EXPECT_EQ(s->stats()->blobs, 1);
  EXPECT_TRUE(HasCode(s->get_blob(sha256_hex("old bytes")), Code::kNotFound));
  ASSERT_TRUE(IsOk(s->unpin("default", "k")));
  EXPECT_FALSE(s->show_entry("default", "k")->pinned);
  EXPECT_TRUE(HasCode(s->pin("default", "nope"), Code::kNotFound));
  EXPECT_TRUE(HasCode(s->unpin("default", "nope"), Code::kNotFound));
}

TEST(Store, ListOrderAndPrefixes) {
  TempDir dir;
  auto s = open_store(dir.file("c.db"));
  for (const char* k : {"aaaa1111", "aaaa2222", "bbbb"})
    ASSERT_TRUE(IsOk(s->put_entry("default", k, "{}", test_provenance(), {{"f", k}})));
  ASSERT_TRUE(IsOk(s->get_entry("default", "aaaa1111")));  // most recently used now
  auto l = s->list();
  ASSERT_TRUE(IsOk(l));
  ASSERT_EQ(l->size(), 3u);
  EXPECT_EQ((*l)[0].key, "aaaa1111");
  EXPECT_EQ((*l)[1].key, "bbbb");
  EXPECT_EQ((*l)[2].key, "aaaa2222");
  EXPECT_EQ(*s->keys_with_prefix("default", "aaaa", 10), (std::vector<std::string>{"aaaa1111", "aaaa2222"}));
  EXPECT_EQ(*s->keys_with_prefix("default", "b", 10), (std::vector<std::string>{"bbbb"}));
  EXPECT_TRUE(s->keys_with_prefix("other", "a", 10)->empty());
}

TEST(Store, FaultSeamRollsBackAPut) {
  TempDir dir;
  StoreOptions o;
  bool fail = true;
  o.fault = [&](std::string_view point) {
    return fail && point == "put_entry:blobs" ? Status::IOError("injected failure") : Status::Ok();
  };
  auto s = open_store(dir.file("c.db"), o);
  Status st = s->put_entry("default", "k", "{}", test_provenance(), {{"f", bytes_of(1000, 1)}});
  EXPECT_TRUE(HasCode(st, Code::kIOError));
  EXPECT_EQ(st.message(), "injected failure");
  EXPECT_EQ(s->stats()->blobs, 0);
  EXPECT_EQ(s->stats()->entries, 0);
  fail = false;
  EXPECT_TRUE(IsOk(s->put_entry("default", "k", "{}", test_provenance(), {{"f", bytes_of(1000, 1)}})));
  EXPECT_TRUE(s->verify()->consistent());
}

TEST(Store, ExportAndImport) {
  TempDir dir;
  auto s = open_store(dir.file("c.db"));
  ASSERT_TRUE(IsOk(s->put_entry("default", "k1", R"({"x":1})", test_provenance(), {{"f", bytes_of(3000, 1)}, {"g", "g"}})));
  ASSERT_TRUE(IsOk(s->put_entry("default", "k2", "{}", test_provenance(), {{"f", bytes_of(3000, 1)}})));
  ASSERT_TRUE(IsOk(s->put_entry("team-b", "k3", "{}", test_provenance(), {{"h", "hhh"}})));
  ASSERT_TRUE(IsOk(s->pin("default", "k2")));

  std::string archive = dir.file("all.mlkcache");
  auto rep = s->export_to(archive);
  ASSERT_TRUE(IsOk(rep));
  EXPECT_EQ(rep->entries, 3);
  EXPECT_EQ(rep->blobs, 3);
  EXPECT_EQ(rep->bytes, 3000 + 1 + 3);
  EXPECT_FALSE(std::filesystem::exists(archive + "-wal"));  // a single file
  EXPECT_EQ(pragma(archive, "PRAGMA journal_mode"), "delete");
  EXPECT_TRUE(HasCode(s->export_to(archive), Code::kInvalidArgument));  // never overwrites

  auto t = open_store(dir.file("other.db"));
  auto imp = t->import_from(archive);
  ASSERT_TRUE(IsOk(imp));
  EXPECT_EQ(imp->imported, 3);
  EXPECT_EQ(imp->skipped, 0);
  for (auto [ns, key] : std::vector<std::pair<std::string, std::string>>{{"default", "k1"}, {"default", "k2"}, {"team-b", "k3"}}) {
    auto a = s->get_entry(ns, key);
    auto b = t->get_entry(ns, key);
    ASSERT_TRUE(IsOk(a) && IsOk(b));
    EXPECT_EQ(a->files, b->files);
    EXPECT_EQ(a->info.manifest.meta_json, b->info.manifest.meta_json);
    // The producer's provenance, marked as not made in this store (signing tools look at it).
    EXPECT_EQ(b->info.manifest.provenance.origin, "import:" + archive);
    cache::Provenance p = b->info.manifest.provenance;
    p.origin = "";
    EXPECT_EQ(a->info.manifest.provenance, p);
    EXPECT_EQ(a->info.pinned, b->info.pinned);
  }
  auto again = t->import_from(archive);
  ASSERT_TRUE(IsOk(again));
  EXPECT_EQ(again->imported, 0);
  EXPECT_EQ(again->skipped, 3);

  std::string only_b = dir.file("b.mlkcache");
  ASSERT_TRUE(IsOk(s->export_to(only_b, "team-b")));
  auto u = open_store(dir.file("third.db"));
  EXPECT_EQ(u->import_from(only_b)->imported, 1);
  EXPECT_EQ(u->list()->size(), 1u);

  EXPECT_TRUE(HasCode(u->import_from(dir.file("missing.mlkcache")), Code::kNotFound));
  testing::write_file(dir.file("junk.mlkcache"), "not an archive at all, not at all, not at all, not at all");
  EXPECT_FALSE(u->import_from(dir.file("junk.mlkcache")).ok());
}

TEST(Store, ImportOfADamagedArchiveImportsNothing) {
  TempDir dir;
  std::string archive = dir.file("a.mlkcache");
  {
    auto s = open_store(dir.file("c.db"));
    for (int i = 0; i < 5; ++i)
      ASSERT_TRUE(IsOk(s->put_entry("default", "k" + std::to_string(i), "{}", test_provenance(), {{"f", bytes_of(2000, i)}})));
    ASSERT_TRUE(IsOk(s->export_to(archive)));
  }
  {
    auto a = open_store(archive);
    ASSERT_TRUE(IsOk(a->corrupt_blob_for_testing(sha256_hex(bytes_of(2000, 3)), 100)));
  }
  auto t = open_store(dir.file("t.db"));
  auto imp = t->import_from(archive);
  EXPECT_TRUE(HasCode(imp, Code::kCorruption));
  EXPECT_NE(imp.status().message().find("nothing was imported"), std::string::npos);
  EXPECT_EQ(t->stats()->entries, 0);
  EXPECT_EQ(t->stats()->blobs, 0);
}

}  // namespace
}  // namespace mlk::cache
