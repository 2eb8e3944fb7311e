// Candidates measured elsewhere: `mlk tune --export-candidates`, the runner
// of mlk-measure and `--import-measurements`, on CPU candidates (the same
// path CUDA candidates take, where only the device differs).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "artifact/candidate_set.h"
#include "autotune/candidate_export.h"
#include "base/child.h"
#include "base/files.h"
#include "base/sha256.h"
#include "cache/store.h"
#include "runtime/candidate_runner.h"
#include "targets/cuda_driver.h"
#include "targets/detect.h"
#include "tests/test_support.h"

namespace mlk::tune {
namespace {

namespace fs = std::filesystem;

const DimEnv kShape = {{"M", 64}, {"K", 64}, {"N", 64}};

// A time that depends on the schedule alone: the "same times" both paths see.
double fake_ms(const Schedule& s) { return 1.0 + std::stoul(s.hash().substr(0, 4), nullptr, 16) / 65536.0; }

struct Exported {
  ir::Module module = testing_support::sgemm_module();
  std::string dir, source;
  TuneRequest request;
  TuneResult local;
};

// Tunes sgemm with fake times (nothing timed, everything verified), then
// exports its best `count` candidates to a fresh folder.
std::unique_ptr<Exported> tune_and_export(const std::string& name, int count) {
  auto e = std::make_unique<Exported>();
  e->dir = testing_support::scratch_dir("mlk_export_test", name);
  e->source = e->dir + ".tl";
  std::ofstream(e->source) << "public fn sgemm [M, K, N](a: Tensor[F32, [M, K]], b: Tensor[F32, [K, N]]) -> "
                              "Tensor[F32, [M, N]] =\n  matmul(a, b)\n";
  TuneOptions o;
  o.trials = 8;
  o.seed = 3;
  o.progress = false;
  o.autoschedulers = false;
  o.cases_for_export = true;
  o.measurer = [](const MeasureSetup&, const Schedule& s) -> Expected<Measurement> {
    Measurement m;
    m.verdict = Measurement::Verdict::kOk;
    m.median_ms = fake_ms(s);
    m.times_ms = {m.median_ms};
    return m;
  };
  e->request = TuneRequest{.module = &e->module, .fn = "sgemm", .source = e->source, .profile = host_profile(),
                           .dims = kShape, .opts = o, .work_dir = e->dir + ".work"};
  auto r = tune_function(e->module, "sgemm", host_profile(), kShape, o);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return nullptr;
  e->local = *r;
  auto line = export_candidates(e->request, e->local, e->dir, count);
  EXPECT_TRUE(line.ok()) << line.status().message();
  if (!line.ok()) return nullptr;
  return e;
}

std::string write_measurements(const Measurements& m, const std::string& dir) {
  const std::string path = dir + "/measurements.json";
  EXPECT_TRUE(write_file(path, measurements_json(m)).ok());
  return path;
}

TEST(CandidateExport, TheImportedWinnerIsTheLocalWinnerGivenTheSameTimes) {
  auto e = tune_and_export("same_winner", 4);
  ASSERT_TRUE(e);
  auto set = read_candidate_set(e->dir);
  ASSERT_TRUE(set.ok()) << set.status().message();
  ASSERT_EQ(set->candidates.size(), 4u);
  EXPECT_EQ(set->cases.size(), 4u) << "two input sets at the verification and the ragged shape";
  EXPECT_TRUE(std::any_of(set->candidates.begin(), set->candidates.end(),
                          [](const Candidate& c) { return c.origin == "naive"; }));
  // The runner checks and times every candidate for real on this CPU ...
  auto m = rt::run_candidates(e->dir, {});
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_EQ(m->results.size(), 4u);
  for (auto& r : m->results) {
    EXPECT_EQ(r.verdict, "ok") << r.id << ": " << r.detail;
    EXPECT_GT(r.median_ms, 0);
    // ... and here its times are replaced by the ones the local search saw.
    auto c = std::find_if(set->candidates.begin(), set->candidates.end(), [&](const Candidate& k) { return k.id == r.id; });
    r.median_ms = fake_ms(*Schedule::from_json(c->schedule_json));
  }
  auto imported = import_measurements(e->request, write_measurements(*m, e->dir), e->dir);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_EQ(imported->best.hash(), e->local.best.hash());
  EXPECT_TRUE(imported->measured);
  EXPECT_EQ(imported->measured_on, m->device);
  EXPECT_EQ(imported->trials, 4);
  // Stored: the measured library itself, measured: true, with the device.
  auto store = cache::Store::Open(e->dir + ".db");
  ASSERT_TRUE(store.ok()) << store.status().message();
  TuneRequest into = e->request;
  into.store = store->get();
  auto out = store_tuned(into, *imported);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_NE(out->json.find("\"measured_on\""), std::string::npos) << out->json;
  EXPECT_NE(out->summary_line.find("measured on cpu"), std::string::npos) << out->summary_line;
  // Review 7 of issue 49: stored as made here (origin `local`), signing
  // tools signed the measured folder's library. Its origin names the folder.
  auto entry = (*store)->get_entry(cache::kDefaultNamespace, out->key);
  ASSERT_TRUE(entry.ok()) << entry.status().message();
  EXPECT_EQ(entry->info.manifest.provenance.origin, "import:" + imported->measured_artifact_dir);
}

TEST(CandidateExport, TheRunnerRefusesAWrongOutputAndSaysWhere) {
  auto e = tune_and_export("wrong", 3);
  ASSERT_TRUE(e);
  rt::RunnerOptions o;
  o.fault = [](const std::string& id, HostTensor& out) {
    if (id == "c01") out.set(5, out.get(5) + 1.0);
  };
  auto m = rt::run_candidates(e->dir, o);
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_EQ(m->results.size(), 3u);
  EXPECT_EQ(m->results[0].verdict, "ok");
  EXPECT_EQ(m->results[1].verdict, "wrong");
  EXPECT_NE(m->results[1].detail.find("verification shape"), std::string::npos) << m->results[1].detail;
  EXPECT_NE(m->results[1].detail.find("first at [0, 5]"), std::string::npos) << m->results[1].detail;
  EXPECT_TRUE(m->results[1].times_ms.empty()) << "a wrong candidate is not timed";
  EXPECT_EQ(m->results[2].verdict, "ok");
  // The import never picks it, however fast it claims to be.
  m->results[1].median_ms = 1e-6;
  auto imported = import_measurements(e->request, write_measurements(*m, e->dir), e->dir);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_NE(imported->best.hash(), m->results[1].schedule_hash);
}

TEST(CandidateExport, DamagedSetsAndOtherSetsAreRefusedByName) {
  auto e = tune_and_export("damaged", 2);
  ASSERT_TRUE(e);
  auto m = rt::run_candidates(e->dir, {});
  ASSERT_TRUE(m.ok()) << m.status().message();
  const std::string file = write_measurements(*m, e->dir);
  // A case's data changed after the export: the runner names the file.
  const std::string data = e->dir + "/data/case0_in0.bin";
  auto bytes = read_file(data);
  ASSERT_TRUE(bytes.ok());
  std::string changed = *bytes;
  changed[0] ^= 1;
  ASSERT_TRUE(write_file(data, changed).ok());
  auto bad = rt::run_candidates(e->dir, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Status::Code::kCorruption);
  EXPECT_NE(bad.status().message().find("data/case0_in0.bin does not match its sha256"), std::string::npos)
      << bad.status().message();
  ASSERT_TRUE(write_file(data, *bytes).ok());
  // Measurements of another set (candidates.json edited) are refused.
  auto text = read_file(e->dir + "/candidates.json");
  ASSERT_TRUE(write_file(e->dir + "/candidates.json", *text + " ").ok());
  auto other = import_measurements(e->request, file, e->dir);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("measured another candidate set"), std::string::npos)
      << other.status().message();
  ASSERT_TRUE(write_file(e->dir + "/candidates.json", *text).ok());
  // Another problem: the set of sgemm at 64^3 is not of sgemm at 32^3.
  TuneRequest r = e->request;
  r.dims = {{"M", 32}, {"K", 32}, {"N", 32}};
  auto wrong_shape = import_measurements(r, file, e->dir);
  ASSERT_FALSE(wrong_shape.ok());
  EXPECT_NE(wrong_shape.status().message().find("holds candidates of `sgemm` for"), std::string::npos)
      << wrong_shape.status().message();
  // A library swapped after it was measured is not stored.
  auto lib = read_file(e->dir + "/c00/libsgemm.so");
  ASSERT_TRUE(lib.ok());
  auto imported = import_measurements(e->request, file, e->dir);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  imported->measured_library_sha256 = sha256_hex("another library");
  auto stored = store_tuned(e->request, *imported);
  ASSERT_FALSE(stored.ok());
  EXPECT_NE(stored.status().message().find("is not the library that was measured"), std::string::npos)
      << stored.status().message();
}

// Second review, low: a worker allocated a tensor of the shape a pack
// declares before it checked the file's size, so a header claiming 2^36
// elements took the worker's memory. Checked here in a child bounded to
// 2 GiB: the claim is refused by its size, nothing of it allocated.
TEST(CandidateExport, Round2_Low_DeclaredShapesAreCheckedBeforeAnythingIsAllocated) {
  auto e = tune_and_export("huge", 1);
  ASSERT_TRUE(e);
  const std::string path = e->dir + "/candidates.json";
  auto text = read_file(path);
  ASSERT_TRUE(text.ok());
  nlohmann::json j = nlohmann::json::parse(*text);
  auto grow = [](nlohmann::json& spec) { spec["shape"] = std::vector<int64_t>{int64_t{1} << 18, int64_t{1} << 18}; };
  grow(j["cases"][0]["inputs"][0]);
  ASSERT_TRUE(write_file(path, j.dump(1)).ok());
  auto run = [&] {
    return text_from_child(
        [&]() -> Expected<std::string> {
          auto m = rt::run_candidates(e->dir, {});
          return m.ok() ? Expected<std::string>("measured") : Expected<std::string>(m.status());
        },
        "reading the set", ChildLimits{.time_s = 120, .memory_bytes = int64_t{2} << 30});
  };
  auto r = run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kCorruption) << r.status().message();
  EXPECT_NE(r.status().message().find("shape needs 274877906944"), std::string::npos) << r.status().message();
  // The timing shape likewise: more than this machine can hold is refused before inputs are drawn.
  ASSERT_TRUE(write_file(path, *text).ok());
  j = nlohmann::json::parse(*text);
  grow(j["timing"]["inputs"][0]);
  ASSERT_TRUE(write_file(path, j.dump(1)).ok());
  r = run();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("more than half this machine's memory"), std::string::npos) << r.status().message();
  // Review 7 of issue 49: every case could name one data file, each read a
  // copy of it; a file named by a second tensor is refused.
  j = nlohmann::json::parse(*text);
  j["cases"][0]["expected"] = j["cases"][0]["inputs"][0];
  ASSERT_TRUE(write_file(path, j.dump(1)).ok());
  r = run();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is named by another tensor too"), std::string::npos) << r.status().message();
}

TEST(CandidateExport, CudaCandidatesWithoutADriverAreAClearError) {
  if (cuda::driver().ok()) GTEST_SKIP() << "this machine has a CUDA driver";
  auto e = tune_and_export("nodriver", 1);
  ASSERT_TRUE(e);
  // The same set, said to be for cuda_sm90: the runner needs the driver first.
  auto text = read_file(e->dir + "/candidates.json");
  ASSERT_TRUE(text.ok());
  std::string t = *text;
  const std::string from = "\"profile\": \"" + host_profile().name + "\"";
  ASSERT_NE(t.find(from), std::string::npos) << t.substr(0, 400);
  t.replace(t.find(from), from.size(), "\"profile\": \"cuda_sm90\"");
  ASSERT_TRUE(write_file(e->dir + "/candidates.json", t).ok());
  auto m = rt::run_candidates(e->dir, {});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Status::Code::kUnsupported);
  EXPECT_NE(m.status().message().find("the candidates are for cuda_sm90"), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find("libcuda.so.1"), std::string::npos) << m.status().message();
}

TEST(CandidatePack, RoundTripsASetAndRefusesHostilePacks) {
  auto e = tune_and_export("pack", 1);
  ASSERT_TRUE(e);
  auto pack = pack_candidate_set(e->dir);
  ASSERT_TRUE(pack.ok()) << pack.status().message();
  const std::string out = e->dir + ".unpacked";
  ASSERT_TRUE(unpack_candidate_set(*pack, out).ok());
  auto m = rt::run_candidates(out, {});  // the unpacked set runs as the original
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->results.at(0).verdict, "ok") << m->results[0].detail;
  auto refused = [&](const std::string& bytes, const std::string& why) {
    const std::string dir = e->dir + ".hostile";
    fs::remove_all(dir);
    Status s = unpack_candidate_set(bytes, dir);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << why;
    EXPECT_NE(s.message().find(why), std::string::npos) << s.message();
  };
  auto with = [](const std::string& header, const std::string& body) {
    return "mlk-candidate-pack 1\n" + std::to_string(header.size()) + "\n" + header + body;
  };
  refused(with(R"({"files":[{"path":"../escape","size":1}]})", "x"), "`../escape` is not a plain relative path");
  refused(with(R"({"files":[{"path":"/etc/x","size":1}]})", "x"), "is not a plain relative path");
  refused(with(R"({"files":[{"path":"a/b/c","size":1}]})", "x"), "is not a plain relative path");
  refused(with(R"({"files":[{"path":"a","size":5}]})", "x"), "add up to more than the pack holds");
  refused(with(R"({"files":[{"path":"a","size":1}]})", "xy"), "add up to less than the pack holds");
  refused("mlk-candidate-pack 1\n999999\n{}", "the header is longer than the pack");
  refused("garbage", "does not start with `mlk-candidate-pack 1`");
  EXPECT_FALSE(fs::exists(e->dir + ".hostile/../escape"));
}

}  // namespace
}  // namespace mlk::tune
