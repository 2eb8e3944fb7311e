// Damaged JSON from a store: a cache hit whose metadata has a field of the
// wrong type, and an artifact whose manifest.json is malformed, are Corruption
// naming the field, never an exception out of nlohmann::json.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "autotune/cached_tune.h"
#include "cache/key.h"
#include "lang/frontend.h"
#include "artifact/manifest.h"
#include "targets/detect.h"
#include "artifact/loaded.h"

namespace mlk {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("mlk_stored_entry_test_" + std::to_string(getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

TEST(StoredEntry, ACacheHitWithMistypedMetadataIsCorruptionNamingTheField) {
  auto fe = compile_source("mm.tl",
                           "public fn sgemm [M, K, N](a: Tensor[F32, [M, K]], b: Tensor[F32, [K, N]]) -> Tensor[F32, [M, N]] =\n"
                           "  matmul(a, b)\n");
  ASSERT_TRUE(fe.ok());
  auto host = resolve_profile("host");
  ASSERT_TRUE(host.ok());
  DimEnv dims = {{"M", 16}, {"K", 16}, {"N", 16}};
  fs::path dir = fresh_dir("hit");
  auto store = cache::Store::Open((dir / "cache.db").string());
  ASSERT_TRUE(store.ok()) << store.status().message();
  std::string key = cache::cache_key(tune::key_inputs(fe.module, "sgemm", dims, *host));
  cache::Provenance prov;
  prov.producer = "mlk tune";
  ASSERT_TRUE((*store)->put_entry("default", key, R"({"fn":"sgemm","best_ms":"fast","default_ms":2})", prov,
                                  {{"schedule.json", "{}"}}).ok());
  tune::TuneOptions opts;
  opts.progress = false;
  auto r = tune::tune_cached({.module = &fe.module,
                              .fn = "sgemm",
                              .source = "mm.tl",
                              .profile = *host,
                              .dims = dims,
                              .opts = opts,
                              .store = store->get(),
                              .work_dir = (dir / "work").string()});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kCorruption);
  EXPECT_EQ(r.status().message(), "cache entry " + key.substr(0, 16) +
                                      ": entry metadata: `best_ms` must be a number, got string; remove it with "
                                      "`mlk cache rm " + key.substr(0, 16) + "` and tune again");
}

const char* kGoodManifest =
    R"({"format":"mlk-artifact-1","abi_version":1,"library":"libk.so","entry_symbol":"mlk_k",)"
    R"("files":{"libk.so":"00"},"signature":{"unbound_dims":["H"]}})";

TEST(StoredEntry, ArtifactManifestFieldsAreCheckedAndNamed) {
  auto ok = parse_artifact_manifest(kGoodManifest, "m.json");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->library, "libk.so");
  EXPECT_EQ(ok->abi_version, 1);
  EXPECT_EQ(ok->unbound_dims, std::vector<std::string>{"H"});
  struct Case {
    std::string text, message;
  } cases[] = {
      {"[]", "m.json: not an mlk artifact manifest (not a JSON object)"},
      {R"({"format":7})", "m.json: not an mlk artifact manifest (`format` is not \"mlk-artifact-1\")"},
      {R"({"format":"mlk-artifact-1","files":[]})", "m.json: `files` must be an object of file name -> sha256"},
      {R"({"format":"mlk-artifact-1","files":{"libk.so":5}})", "m.json: `files.libk.so` must be a sha256 string, got number"},
      {R"({"format":"mlk-artifact-1","files":{"../x":"00"}})", "m.json: `files`: `../x` is not a plain file name"},
      {R"({"format":"mlk-artifact-1","files":{"libk.so":"00"},"library":1})", "m.json: `library` must be a non-empty string"},
      {R"({"format":"mlk-artifact-1","files":{"libk.so":"00"},"library":"other.so","entry_symbol":"e"})",
       "m.json: `library` other.so is not listed in `files`"},
      {R"({"format":"mlk-artifact-1","files":{"libk.so":"00"},"library":"libk.so","entry_symbol":"e","abi_version":"1"})",
       "m.json: `abi_version` must be an integer"},
      {R"({"format":"mlk-artifact-1","files":{"libk.so":"00"},"library":"libk.so","entry_symbol":"e","abi_version":1,"signature":{"unbound_dims":"H"}})",
       "m.json: `signature.unbound_dims` must be a list of dimension names"},
  };
  for (const auto& c : cases) {
    auto m = parse_artifact_manifest(c.text, "m.json");
    ASSERT_FALSE(m.ok()) << c.text;
    EXPECT_EQ(m.status().code(), Status::Code::kCorruption) << c.text;
    EXPECT_EQ(m.status().message(), c.message) << c.text;
  }
}

TEST(StoredEntry, LoadingAnArtifactWithAMistypedManifestIsCorruption) {
  fs::path dir = fresh_dir("artifact");
  std::ofstream(dir / "manifest.json") << R"({"format":"mlk-artifact-1","files":{"libk.so":5},"library":"libk.so"})";
  auto a = LoadedArtifact::Load(dir.string());
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), Status::Code::kCorruption);
  EXPECT_EQ(a.status().message(), dir.string() + "/manifest.json: `files.libk.so` must be a sha256 string, got number");
}

}  // namespace
}  // namespace mlk
