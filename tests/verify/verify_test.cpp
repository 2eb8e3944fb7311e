// `mlk verify`'s levels (verify/verify.h) on real artifacts: good kernels of
// every example pass; injected defects (test seams of scheduler/test_faults.h
// and a hand-edited manifest) are each caught by the level meant to catch
// them, with a counterexample; the algorithm hash is stable and
// schedule-independent; reports merge when verification is staged.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/files.h"
#include "lang/frontend.h"
#include "lang/ir_printer.h"
#include "runtime/runtime.h"
#include "scheduler/algorithm.h"
#include "artifact/build.h"
#include "targets/detect.h"
#include "../test_support.h"
#include "verify/verify.h"

namespace mlk {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using verify::Level;
using verify::LevelReport;
using verify::Report;

// $MLK_TEST_FAULT set for one scope.
struct Fault {
  explicit Fault(const char* f) { setenv("MLK_TEST_FAULT", f, 1); }
  ~Fault() { unsetenv("MLK_TEST_FAULT"); }
};

ir::Module module_of(const std::string& text) {
  auto fe = compile_source("t.tl", text);
  EXPECT_TRUE(fe.ok()) << fe.rendered();
  return fe.module;
}

// The files of `fn` built for `p` (default schedule unless `s`).
std::map<std::string, std::string> build(const ir::Module& m, const std::string& fn, const DimEnv& dims,
                                         std::optional<Schedule> s = std::nullopt, Profile p = host_profile()) {
  static int n = 0;
  BuildRequest req;
  req.module = &m;
  req.fn = fn;
  req.profile = p;
  req.dims = dims;
  req.schedule = s;
  req.out_dir = testing_support::scratch_dir("verify_test", fn + std::to_string(n++));
  auto res = build_artifact(req);
  EXPECT_TRUE(res.ok()) << res.status().message();
  std::map<std::string, std::string> files;
  if (!res.ok()) return files;
  for (const auto& f : res->files) files[f] = *read_file(req.out_dir + "/" + f);
  files["manifest.json"] = res->manifest_json;
  return files;
}

Report run(const ir::Module& m, const std::string& fn, const DimEnv& dims, const std::map<std::string, std::string>& files,
           std::vector<Level> levels = verify::all_levels()) {
  auto r = verify::verify_artifact({.module = &m, .fn = fn, .profile = host_profile(), .dims = dims, .files = files,
                                    .levels = levels});
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : Report{};
}

const LevelReport& level(const Report& r, Level l) {
  for (const auto& x : r.levels)
    if (x.level == l) return x;
  static LevelReport none;
  ADD_FAILURE() << "no level " << verify::level_name(l) << " in the report";
  return none;
}

// tests/verify/defects.tl: perm3 (a transpose that is not an involution),
// sum16 (an F16 sum), scale (x * 2.0).
const std::string kProgram = *read_file(std::string(MLK_SOURCE_DIR) + "/tests/verify/defects.tl");

TEST(Verify, EveryExampleKernelPassesEveryLevelItModels) {
  struct Case {
    const char* file;
    const char* fn;
    DimEnv dims;
  };
  const std::vector<Case> cases = {
      {"mlp.tl", "sgemm", {{"M", 8}, {"K", 16}, {"N", 8}}},
      {"mlp.tl", "mlp", {{"N", 4}, {"D", 8}, {"F", 16}}},
      {"norms.tl", "rmsnorm", {{"B", 1}, {"S", 4}, {"D", 16}}},
      {"norms.tl", "layernorm", {{"N", 4}, {"D", 16}}},
      {"softmax.tl", "softmax_by_hand", {{"N", 4}, {"C", 8}}},
      {"softmax.tl", "softmax_builtin", {{"N", 4}, {"C", 8}}},
      {"attention.tl", "attention", {{"B", 1}, {"S", 4}, {"D", 8}, {"H", 2}}},
      {"attention.tl", "qk_scores", {{"B", 2}, {"S", 4}, {"E", 8}}},
      {"attention.tl", "expand_kv", {{"B", 1}, {"KV", 2}, {"S", 4}, {"E", 8}, {"G", 2}}},
      {"embedding.tl", "embed", {{"V", 16}, {"D", 8}, {"B", 2}, {"S", 4}}},
      {"embedding.tl", "project_f16", {{"N", 4}, {"D", 16}, {"F", 8}}},
      {"embedding.tl", "first_tokens", {{"S", 8}, {"D", 4}, {"P", 3}}},
      {"embedding.tl", "pair", {{"N", 4}, {"D", 3}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.file) + " " + c.fn);
    ir::Module m = testing_support::load_example(c.file);
    Report r = run(m, c.fn, c.dims, build(m, c.fn, c.dims));
    for (const auto& l : r.levels) {
      EXPECT_TRUE(l.pass) << verify::level_name(l.level) << ": " << l.counterexample;
      EXPECT_FALSE(l.evidence.empty());
    }
  }
}

// A gather reads at data-dependent indices: both sides choose among the
// table's rows by the index's value, and a lowering that reads the next row
// is caught with the index that shows it.
TEST(Verify, AGatherIsProvedAndAWrongRowIsCaught) {
  ir::Module m = testing_support::load_example("embedding.tl");
  const DimEnv dims = {{"V", 3}, {"D", 2}, {"B", 1}, {"S", 3}};
  Report good = run(m, "embed", dims, build(m, "embed", dims));
  EXPECT_TRUE(level(good, Level::kEquivalence).pass) << level(good, Level::kEquivalence).counterexample;
  Fault f("gather_next_row");
  Report bad = run(m, "embed", dims, build(m, "embed", dims));
  const LevelReport& eq = level(bad, Level::kEquivalence);
  ASSERT_FALSE(eq.pass);
  EXPECT_THAT(eq.counterexample, HasSubstr("at B=1,D=2,S=3,V=3, element [0, 0, 0] differs"));
}

// What bounded equivalence does not model is said, not passed.
TEST(Verify, AFloatToIntegerCastIsNotChecked) {
  ir::Module m = module_of(kProgram);
  Report r = run(m, "quantize", {{"N", 4}}, build(m, "quantize", {{"N", 4}}));
  const LevelReport& eq = level(r, Level::kEquivalence);
  EXPECT_FALSE(eq.pass);
  EXPECT_THAT(eq.counterexample, HasSubstr("not checked: a float-to-integer cast is not modelled"));
}

TEST(Verify, SwappedTransposeAxesAreCaughtByBoundedEquivalence) {
  Fault f("transpose_axes");
  ir::Module m = module_of(kProgram);
  const DimEnv dims = {{"A", 3}, {"B", 3}, {"C", 3}};
  Report r = run(m, "perm3", dims, build(m, "perm3", dims));
  EXPECT_TRUE(level(r, Level::kTypes).pass);
  EXPECT_TRUE(level(r, Level::kIdentity).pass);  // built and re-lowered with the same seam
  const LevelReport& eq = level(r, Level::kEquivalence);
  ASSERT_FALSE(eq.pass);
  const std::string want =
      "at A=3,B=3,C=3, element [0, 0, 1] differs: the typed IR computes x[9], the lowered algorithm x[3]; e.g. with x[3] = ";
  EXPECT_EQ(eq.counterexample.substr(0, want.size()), want);
  EXPECT_NE(eq.counterexample.find(", x[9] = "), std::string::npos) << eq.counterexample;
  EXPECT_FALSE(r.pass());
}

TEST(Verify, AnUnguardedTailIsCaughtByMemorySafety) {
  Fault f("unguarded_tail");
  ir::Module m = module_of(kProgram);
  const DimEnv dims = {{"N", 13}};
  auto split = Schedule::from_json(R"({"stages": {"output": [{"op": "split", "vars": ["a0", "xo", "xi"], "factors": [8]}]}})");
  ASSERT_TRUE(split.ok());
  Report r = run(m, "scale", dims, build(m, "scale", dims, *split), {Level::kMemory, Level::kEquivalence});
  EXPECT_EQ(level(r, Level::kMemory).counterexample,
            "at the dims (N=13): the call failed (a bounds assertion or a refused shape): `scale` failed (code -4): "
            "Input buffer in_x is accessed at 15, which is beyond the max (12) in dimension 0");
  EXPECT_TRUE(level(r, Level::kEquivalence).pass);  // the algorithm is right; its schedule is not
  // Without Halide's assertions the overrun reaches the guard page.
  Profile unchecked = host_profile();
  unchecked.halide_target = "host-no_asserts";
  Report u = run(m, "scale", dims, build(m, "scale", dims, *split, unchecked), {Level::kMemory});
  const std::string& ce = level(u, Level::kMemory).counterexample;
  EXPECT_EQ(ce.substr(0, 40), "at the dims (N=13): an access past the e") << ce;
  EXPECT_NE(ce.find("hit the guard page"), std::string::npos) << ce;
}

TEST(Verify, AnF16SumAccumulatedInF16IsCaughtByTheErrorEnvelope) {
  Fault f("f16_accumulate");
  ir::Module m = module_of(kProgram);
  const DimEnv dims = {{"N", 2}, {"K", 4096}};
  Report r = run(m, "sum16", dims, build(m, "sum16", dims));
  const LevelReport& env = level(r, Level::kEnvelope);
  ASSERT_FALSE(env.pass);
  const std::string want = "worst: element [0] of the ties inputs: got 2048, reference 3414, error 1.37e+03, bound ";
  EXPECT_EQ(env.counterexample.substr(0, want.size()), want);
  EXPECT_TRUE(level(r, Level::kIdentity).pass);
  EXPECT_TRUE(level(r, Level::kEquivalence).pass);  // real arithmetic does not see rounding
  EXPECT_TRUE(level(r, Level::kMemory).pass);
}

TEST(Verify, AHandEditedArtifactOfAnotherAlgorithmIsCaughtByIdentity) {
  ir::Module two = module_of(kProgram);
  std::string text3 = kProgram;
  text3.replace(text3.find("2.0"), 3, "3.0");
  ir::Module three = module_of(text3);
  const DimEnv dims = {{"N", 8}};
  auto files = build(three, "scale", dims);
  // The manifest edited to claim the program with 2.0.
  json man = json::parse(files["manifest.json"]);
  man["ir_hash"] = ir::function_hash(two, *two.find("scale"));
  files["manifest.json"] = man.dump();
  Report r = run(two, "scale", dims, files, {Level::kTypes, Level::kIdentity});
  EXPECT_TRUE(level(r, Level::kTypes).pass);
  auto h2 = summarize_algorithm(two, "scale");
  ASSERT_TRUE(h2.ok());
  EXPECT_EQ(level(r, Level::kIdentity).counterexample,
            "the artifact's algorithm hash is " + man["algorithm_hash"].get<std::string>() + ", the typed IR lowers to " +
                h2->hash + ": the artifact was compiled from a different algorithm");
  man.erase("algorithm_hash");
  files["manifest.json"] = man.dump();
  r = run(two, "scale", dims, files, {Level::kIdentity});
  EXPECT_EQ(level(r, Level::kIdentity).counterexample,
            "the artifact records no algorithm_hash (built by an mlk without it; rebuild it)");
}

TEST(Verify, AlgorithmHashIsStableAndIndependentOfTheSchedule) {
  ir::Module m = testing_support::load_example("norms.tl");
  auto a = summarize_algorithm(m, "rmsnorm"), b = summarize_algorithm(m, "rmsnorm"), c = summarize_algorithm(m, "layernorm");
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->text, b->text);  // a second lowering in the same process
  EXPECT_NE(a->hash, c->hash);
  const DimEnv dims = {{"B", 1}, {"S", 4}, {"D", 16}};
  auto split = Schedule::from_json(R"({"stages": {"output": [{"op": "split", "vars": ["a2", "xo", "xi"], "factors": [8]}]}})");
  ASSERT_TRUE(split.ok());
  for (auto files : {build(m, "rmsnorm", dims), build(m, "rmsnorm", dims, *split)})
    EXPECT_EQ(json::parse(files["manifest.json"])["algorithm_hash"], a->hash);
}

// A level that could not run here (a CUDA artifact without a GPU) is
// neither a pass nor a failure: the verdict says so, and the stored report
// leaves it out, keeping an earlier result of that level.
TEST(Verify, ALevelNotRunIsNeitherPassNorFailAndIsNotStored) {
  Report r{.fn = "f", .target = "cuda_sm90", .dims = "N=4"};
  r.levels.push_back({.level = Level::kTypes, .pass = true, .checked = "c", .guarantee = "g"});
  r.levels.push_back({.level = Level::kEnvelope, .not_run = "no GPU here", .checked = "c", .guarantee = "g"});
  EXPECT_FALSE(r.pass());
  EXPECT_FALSE(r.failed());
  EXPECT_EQ(r.verdict(), "INCOMPLETE (envelope not run here)");
  EXPECT_NE(r.to_text().find("  envelope: not run (0.000 s)\n    checked: c\n    guarantee: g\n    not run: no GPU here\n"),
            std::string::npos);
  EXPECT_EQ(r.to_text().find("FAIL"), std::string::npos);
  json j = json::parse(r.to_json());
  EXPECT_EQ(j["not_run"], json({"envelope"}));
  EXPECT_EQ(j["passed"], json({"types"}));
  EXPECT_FALSE(j["levels"][1].contains("pass"));
  auto stored = verify::attach_report(R"({"verify_report": {"fn": "f", "target": "cuda_sm90", "dims": "N=4",
      "levels": [{"level": "envelope", "pass": true, "checked": "on a GPU"}]}})", r);
  ASSERT_TRUE(stored.ok());
  json rep = json::parse(*stored)["verify_report"];
  EXPECT_EQ(rep["passed"], json({"types", "envelope"}));
  EXPECT_EQ(rep["levels"][1]["checked"], "on a GPU");
  EXPECT_TRUE(rep["pass"].get<bool>());
  EXPECT_FALSE(rep.contains("not_run"));
  // When no level ran, nothing is stored: the text comes back as it was.
  Report none{.fn = "f", .target = "cuda_sm90", .dims = "N=4"};
  none.levels.push_back({.level = Level::kMemory, .not_run = "no GPU here"});
  const std::string kept = R"({"verify_report": {"fn": "g", "levels": []}, "x": 1})";
  auto same = verify::attach_report(kept, none, 2);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(*same, kept);
  r.levels[0].pass = false;
  EXPECT_TRUE(r.failed());
  EXPECT_EQ(r.verdict(), "FAIL");
}

TEST(Verify, ReportsNameEveryLevelAndMergeWhenStaged) {
  ir::Module m = testing_support::sgemm_module();
  const DimEnv dims = {{"M", 4}, {"K", 4}, {"N", 4}};
  auto files = build(m, "sgemm", dims);
  Report cheap = run(m, "sgemm", dims, files, {Level::kTypes, Level::kIdentity});
  Report env = run(m, "sgemm", dims, files, {Level::kEnvelope});
  auto once = verify::attach_report(files["manifest.json"], cheap);
  ASSERT_TRUE(once.ok());
  auto twice = verify::attach_report(*once, env);
  ASSERT_TRUE(twice.ok());
  json rep = json::parse(*twice)["verify_report"];
  EXPECT_EQ(rep["passed"], json({"types", "identity", "envelope"}));
  EXPECT_EQ(rep["levels"].size(), 3u);
  EXPECT_EQ(rep["fn"], "sgemm");
  for (const auto& l : rep["levels"]) {
    EXPECT_FALSE(l["checked"].get<std::string>().empty());
    EXPECT_FALSE(l["guarantee"].get<std::string>().empty());
    EXPECT_TRUE(l["seconds"].is_number());
  }
  // A pass at another shape is not merged: it says nothing of this one.
  Report other = env;
  other.dims = "K=8,M=8,N=8";
  auto elsewhere = verify::attach_report(*once, other);
  ASSERT_TRUE(elsewhere.ok());
  EXPECT_EQ(json::parse(*elsewhere)["verify_report"]["passed"], json({"envelope"}));
  EXPECT_NE(cheap.to_text().find("verify sgemm [K=4,M=4,N=4] host: PASS\n  types: pass ("), std::string::npos);
  EXPECT_EQ(verify::parse_levels("memory,types").value(), (std::vector<Level>{Level::kTypes, Level::kMemory}));
  EXPECT_EQ(verify::parse_levels("fast").status().message(),
            "unknown verification level `fast` (levels: types, identity, envelope, memory, equivalence; or all, cheap)");
  // A dimension missing is the caller's mistake, named.
  auto bad = verify::verify_artifact({.module = &m, .fn = "sgemm", .profile = host_profile(), .dims = {{"M", 4}},
                                      .files = files, .levels = {Level::kTypes}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "verification runs at a concrete shape: --dims must give `K` (e.g. --dims K=4)");
}

// Review 6 of issue 49: `mlk verify --artifact DIR` took every file of DIR,
// so a library beside the listed ones (reachable through $ORIGIN) went into
// the sandbox with the artifact. Now only manifest.json and what it lists.
TEST(Verify, AnArtifactDirectoryIsItsManifestAndTheFilesItLists) {
  namespace fs = std::filesystem;
  const std::string dir = testing_support::scratch_dir("mlk_verify_dir", "art");
  fs::create_directories(dir);
  auto put = [&](const std::string& name, const std::string& text) {
    ASSERT_TRUE(write_file(dir + "/" + name, text).ok());
  };
  put("manifest.json", R"({"files": {"k.so": "x"}})");
  put("k.so", "listed");
  put("libevil.so", "beside it");
  auto files = verify::read_artifact_dir(dir);
  ASSERT_TRUE(files.ok()) << files.status().message();
  EXPECT_EQ(files->size(), 2u);
  EXPECT_EQ(files->at("k.so"), "listed");
  EXPECT_EQ(files->count("libevil.so"), 0u);
  put("manifest.json", R"({"files": {"../k.so": "x"}})");
  EXPECT_EQ(verify::read_artifact_dir(dir).status().message(),
            dir + "/manifest.json lists `../k.so`, which is not a plain file name of the directory");
  put("manifest.json", R"({"files": {"gone.so": "x"}})");
  EXPECT_EQ(verify::read_artifact_dir(dir).status().code(), Status::Code::kNotFound);
  // Review 7: a listed file swapped for a link (to the verifier's key, say)
  // is refused, never read through.
  put("secret.pem", "the verifier's key");
  fs::remove(dir + "/k.so");
  fs::create_symlink(dir + "/secret.pem", dir + "/k.so");
  put("manifest.json", R"({"files": {"k.so": "x"}})");
  EXPECT_EQ(verify::read_artifact_dir(dir).status().message(), dir + "/k.so is not a plain file of the directory (" +
                                                                    std::string(std::strerror(ELOOP)) + ")");
  fs::remove(dir + "/manifest.json");
  EXPECT_EQ(verify::read_artifact_dir(dir).status().message(),
            dir + " has no manifest.json (not an artifact directory)");
}

TEST(Verify, RuntimePolicyCanRequireAVerifiedLevel) {
  auto p = rt::TargetPolicy::Parse("host;require=verified:envelope,memory");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->require, rt::Require::kTuned);
  EXPECT_EQ(p->verified, (std::vector<std::string>{"envelope", "memory"}));
  EXPECT_EQ(p->str(), "host;require=verified:envelope,memory");
  auto bad = rt::TargetPolicy::Parse("host;require=verified:fast");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "target policy `host;require=verified:fast`: unknown verification level `fast` (levels: types, identity, "
            "envelope, memory, equivalence; or all, cheap)");
}

}  // namespace
}  // namespace mlk
