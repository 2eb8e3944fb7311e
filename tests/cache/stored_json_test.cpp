// The readers of JSON that comes from a store or a cache server (entry
// manifests, entry metadata) and the memory estimate: malformed input is a
// Status naming the field, never an exception.
#include <gtest/gtest.h>

#include <string>

#include "cache/entry_meta.h"
#include "cache/manifest.h"
#include "lang/frontend.h"
#include "tests/test_support.h"
#include "lang/memory_budget.h"

namespace mlk {
namespace {

const std::string kDigest(64, 'a');

std::string manifest_with(const std::string& files, const std::string& meta, const std::string& prov) {
  return R"({"files":)" + files + R"(,"meta":)" + meta + R"(,"provenance":)" + prov + "}";
}
const std::string kFiles = R"({"k.so":{"digest":")" + kDigest + R"(","size":3}})";
const std::string kProv = R"({"producer":"p","host":"h","time":1,"toolchain":{"mlk":"0.1.0"},"measured":true})";

TEST(StoredJson, AWellFormedManifestIsRead) {
  auto m = cache::manifest_from_json(manifest_with(kFiles, "{}", kProv));
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->files.at("k.so").size, 3);
  EXPECT_EQ(m->provenance.toolchain.at("mlk"), "0.1.0");
}

TEST(StoredJson, ManifestFieldsOfTheWrongTypeAreNamed) {
  struct Case {
    std::string text, message;
  } cases[] = {
      {manifest_with(R"({"k.so":{"digest":"x","size":"big"}})", "{}", kProv), "manifest: `files.k.so.size` must be an integer, got string"},
      {manifest_with(R"({"k.so":{"digest":5,"size":1}})", "{}", kProv), "manifest: `files.k.so.digest` must be a string, got number"},
      {manifest_with(R"({"k.so":{"size":1}})", "{}", kProv), "manifest: `files.k.so.digest` is missing"},
      {manifest_with(R"(["k.so"])", "{}", kProv), "manifest: `files` must be an object of file name -> {digest, size}, got array"},
      {manifest_with(kFiles, "[]", kProv), "manifest: `meta` must be a JSON object, got array"},
      {manifest_with(kFiles, "{}", R"({"producer":"p","host":"h","time":"now","toolchain":{},"measured":true})"),
       "manifest: `provenance.time` must be an integer, got string"},
      {manifest_with(kFiles, "{}", R"({"producer":"p","host":"h","time":1,"toolchain":{"mlk":1},"measured":true})"),
       "manifest: `provenance.toolchain.mlk` must be a string, got number"},
      {manifest_with(kFiles, "{}", R"({"producer":"p","host":"h","time":1,"toolchain":{},"measured":"yes"})"),
       "manifest: `provenance.measured` must be true or false, got string"},
      {manifest_with(R"({"k.so":{"digest":"x","size":18446744073709551615}})", "{}", kProv),
       "manifest: `files.k.so.size` must be an integer, got number"},
      {"[1,2]", "manifest is not a JSON object"},
      {"{\"files\":", "manifest is not valid JSON (["},  // the parser's words follow
      {std::string(100, '[') + std::string(100, ']'), "manifest is not valid JSON (nested deeper than 64 levels of arrays and objects)"},
  };
  for (const auto& c : cases) {
    auto m = cache::manifest_from_json(c.text);
    ASSERT_FALSE(m.ok()) << c.text;
    if (c.message.back() == '[')
      EXPECT_EQ(m.status().message().substr(0, c.message.size()), c.message) << c.text;
    else
      EXPECT_EQ(m.status().message(), c.message) << c.text;
  }
}

TEST(StoredJson, EntryMetadataIsReadAndItsBadFieldsAreCorruptionNamingThem) {
  auto ok = cache::parse_entry_meta(R"({"fn":"sgemm","dims":{"M":16},"best_ms":1.5,"measured":false,"other":[1]})");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->fn, "sgemm");
  EXPECT_EQ(ok->dims.at("M"), 16);
  EXPECT_EQ(*ok->best_ms, 1.5);
  EXPECT_FALSE(ok->measured);
  EXPECT_FALSE(ok->default_ms.has_value());
  struct Case {
    std::string text, message;
  } cases[] = {
      {"[1]", "entry metadata must be a JSON object, got array"},
      {"{\"fn\":", "entry metadata is not valid JSON"},
      {R"({"fn":5})", "entry metadata: `fn` must be a string, got number"},
      {R"({"best_ms":"fast"})", "entry metadata: `best_ms` must be a number, got string"},
      {R"({"dims":[16]})", "entry metadata: `dims` must be an object of dimension name -> integer, got array"},
      {R"({"dims":{"M":"x"}})", "entry metadata: `dims.M` must be an integer, got string"},
      {R"({"measured":1})", "entry metadata: `measured` must be true or false, got number"},
  };
  for (const auto& c : cases) {
    auto m = cache::parse_entry_meta(c.text);
    ASSERT_FALSE(m.ok()) << c.text;
    EXPECT_EQ(m.status().code(), Status::Code::kCorruption) << c.text;
    EXPECT_EQ(m.status().message(), c.message) << c.text;
  }
}

const ir::Function& sgemm(const ir::Module& m) { return *m.find("sgemm"); }

using testing_support::sgemm_module;

TEST(MemoryBudget, CountsTheTunersInputSetsAndResultsAndRefusesWhatDoesNotFit) {
  ir::Module m = sgemm_module();
  DimEnv d = {{"M", 16384}, {"K", 16384}, {"N", 16384}};  // 1 GiB per matrix
  TensorBytes t = tensor_bytes(sgemm(m), d);
  EXPECT_EQ(t.inputs, 2LL << 30);
  EXPECT_EQ(t.result, 1LL << 30);
  EXPECT_FALSE(t.overflow);
  // One timing set (2 GiB of inputs exceed 256 MiB) and the verification set:
  // 4 GiB of inputs, plus the reference and a candidate's output: 6 GiB.
  EXPECT_TRUE(check_tuning_memory(sgemm(m), d, "x", 6LL << 30).ok());
  Status s = check_tuning_memory(sgemm(m), d, "--dims " + dims_label(d), (6LL << 30) - 1);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "--dims K=16384,M=16384,N=16384 needs about 6.0 GiB for the inputs and outputs of `sgemm` (2 sets of "
            "inputs of 2.0 GiB, 2 results of 1.0 GiB); this machine has 6.0 GiB of memory; choose smaller dimensions");
  // Small shapes keep 3 timing sets (+1): 16x16 f32 is 2 KiB of inputs.
  EXPECT_EQ(tuner_timing_sets(2048), 3);
}

TEST(MemoryBudget, AByteCountBeyond64BitsIsRefusedEvenWithUnknownMemory) {
  ir::Module m = sgemm_module();
  DimEnv d = {{"M", 3037000500}, {"K", 3037000500}, {"N", 1}};  // M*K*4 > 2^63
  EXPECT_TRUE(tensor_bytes(sgemm(m), d).overflow);
  Status s = check_tuning_memory(sgemm(m), d, "--dims " + dims_label(d), /*available=*/0);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("needs more than 8.0 EiB (the byte count of a tensor overflows 64 bits)"), std::string::npos)
      << s.message();
  // Unknown memory (0) and a representable size: nothing to refuse.
  EXPECT_TRUE(check_tuning_memory(sgemm(m), {{"M", 1 << 20}, {"K", 1 << 20}, {"N", 1}}, "x", 0).ok());
  EXPECT_GT(physical_memory_bytes(), 0);
}

}  // namespace
}  // namespace mlk
