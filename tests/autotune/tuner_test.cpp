// The autotuner with small budgets: it beats the default schedule on a
// matmul, survives crashing, hanging and wrong candidates without choosing
// them, replays from its log, and resumes an interrupted run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>

#include "autotune/cached_tune.h"
#include "autotune/tuner.h"
#include "lang/frontend.h"
#include "targets/detect.h"

namespace mlk::tune {
namespace {

namespace fs = std::filesystem;

ir::Module sgemm_module() {
  auto fe = compile_source("mm.tl",
                           "public fn sgemm [M, K, N](a: Tensor[F32, [M, K]], b: Tensor[F32, [K, N]]) -> Tensor[F32, [M, N]] =\n"
                           "  matmul(a, b)\n");
  EXPECT_TRUE(fe.ok());
  return fe.module;
}

std::string log_path(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("mlk_tuner_test_" + std::to_string(getpid()));
  fs::create_directories(d);
  fs::remove(d / name);
  return (d / name).string();
}

const DimEnv kShape = {{"M", 192}, {"K", 256}, {"N", 192}};

TEST(Tuner, BeatsTheDefaultScheduleOnAMatmul) {
  ir::Module m = sgemm_module();
  TuneOptions o;
  o.trials = 16;
  o.seed = 7;
  o.progress = false;
  o.autoschedulers = false;  // the rules' search alone must beat the default
  auto r = tune_function(m, "sgemm", host_profile(), kShape, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->measured);
  EXPECT_GT(r->default_ms, 0);
  EXPECT_LT(r->best_ms, r->default_ms) << "best " << r->best_ms << " ms from " << r->best_origin;
  EXPECT_NE(r->best_origin, "default");
  int verified = 0;
  for (const auto& t : r->log) verified += t.m.ok();
  EXPECT_GE(verified, 8);
}

TEST(Tuner, CrashingHangingAndWrongCandidatesAreSurvivedAndNeverChosen) {
  ir::Module m = sgemm_module();
  TuneOptions o;
  o.trials = 7;
  o.progress = false;
  o.timeout_s = 3;
  // Halide's three autoschedulers are trials 1-3: make one crash, one hang,
  // one compute a wrong answer.
  o.fault = [](const Schedule& s, HostTensor& out) {
    if (s.autoscheduler == "Adams2019") std::raise(SIGSEGV);
    if (s.autoscheduler == "Li2018") pause();
    if (s.autoscheduler == "Mullapudi2016") out.set(3, out.get(3) + 1.0);
  };
  auto r = tune_function(m, "sgemm", host_profile(), {{"M", 64}, {"K", 64}, {"N", 64}}, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::map<std::string, Measurement::Verdict> by;
  for (const auto& t : r->log) by[t.schedule.autoscheduler.empty() ? t.origin : t.schedule.autoscheduler] = t.m.verdict;
  EXPECT_EQ(by["Adams2019"], Measurement::Verdict::kCrash);
  EXPECT_EQ(by["Li2018"], Measurement::Verdict::kTimeout);
  EXPECT_EQ(by["Mullapudi2016"], Measurement::Verdict::kWrong);
  EXPECT_TRUE(r->best.autoscheduler.empty()) << "a faulty candidate won: " << r->best.autoscheduler;
  EXPECT_EQ(r->trials, 7) << "the run went on after the faults";
}

TEST(Tuner, SameSeedAndLogReplayTheSameSearch) {
  ir::Module m = sgemm_module();
  TuneOptions o;
  o.trials = 8;
  o.seed = 3;
  o.progress = false;
  o.autoschedulers = false;
  o.log_path = log_path("replay.jsonl");
  auto first = tune_function(m, "sgemm", host_profile(), {{"M", 64}, {"K", 64}, {"N", 64}}, o);
  ASSERT_TRUE(first.ok()) << first.status().message();
  auto again = tune_function(m, "sgemm", host_profile(), {{"M", 64}, {"K", 64}, {"N", 64}}, o);
  ASSERT_TRUE(again.ok()) << again.status().message();
  ASSERT_EQ(first->log.size(), again->log.size());
  for (size_t i = 0; i < first->log.size(); ++i) {
    EXPECT_EQ(first->log[i].schedule.hash(), again->log[i].schedule.hash()) << "trial " << i;
    EXPECT_TRUE(again->log[i].resumed);
  }
  EXPECT_EQ(first->best.hash(), again->best.hash());
  // A different seed explores differently.
  o.seed = 4;
  o.log_path = log_path("other_seed.jsonl");
  auto other = tune_function(m, "sgemm", host_profile(), {{"M", 64}, {"K", 64}, {"N", 64}}, o);
  ASSERT_TRUE(other.ok());
  std::set<std::string> a, b;
  for (const auto& t : first->log) a.insert(t.schedule.hash());
  for (const auto& t : other->log) b.insert(t.schedule.hash());
  EXPECT_NE(a, b);
}

TEST(Tuner, AnInterruptedRunResumesWhereItStopped) {
  ir::Module m = sgemm_module();
  TuneOptions o;
  o.trials = 4;
  o.seed = 11;
  o.progress = false;
  o.autoschedulers = false;
  o.log_path = log_path("resume.jsonl");
  auto part = tune_function(m, "sgemm", host_profile(), {{"M", 64}, {"K", 64}, {"N", 64}}, o);
  ASSERT_TRUE(part.ok()) << part.status().message();
  // Simulate a kill mid-write: a torn last line.
  { std::ofstream(o.log_path, std::ios::app) << "{\"trial\": 4, \"orig"; }
  o.trials = 9;
  auto full = tune_function(m, "sgemm", host_profile(), {{"M", 64}, {"K", 64}, {"N", 64}}, o);
  ASSERT_TRUE(full.ok()) << full.status().message();
  ASSERT_EQ(full->log.size(), 9u);
  for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(full->log[i].resumed) << i;
  for (size_t i = 4; i < 9; ++i) EXPECT_FALSE(full->log[i].resumed) << i;
  // The torn line was cut off, so the log stays readable: all of it replays.
  auto again = tune_function(m, "sgemm", host_profile(), {{"M", 64}, {"K", 64}, {"N", 64}}, o);
  ASSERT_TRUE(again.ok()) << again.status().message();
  for (const auto& t : again->log) EXPECT_TRUE(t.resumed) << t.index;
  // A log from another problem is refused, not silently mixed in.
  auto other = tune_function(m, "sgemm", host_profile(), {{"M", 32}, {"K", 64}, {"N", 64}}, o);
  ASSERT_FALSE(other.ok());
  EXPECT_THAT(other.status().message(), ::testing::HasSubstr("log of a different tuning run"));
}

TEST(Tuner, DimensionsNoInputBindsComeFromTheTuningShape) {
  auto fe = compile_source("kv.tl", "public fn expand [B, S, G](x: Tensor[F32, [B, S]]) -> Tensor[F32, [B * G, S]] =\n"
                                    "  repeat_interleave(x, G, axis=0)\n");
  ASSERT_TRUE(fe.ok());
  TuneOptions o;
  o.trials = 3;
  o.progress = false;
  o.autoschedulers = false;
  auto r = tune_function(fe.module, "expand", host_profile(), {{"B", 4}, {"S", 33}, {"G", 3}}, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_GT(r->best_ms, 0);
}

TEST(Tuner, GpuProfilesTuneWithoutAGpuAndSayTheyDidNotMeasure) {
  ir::Module m = sgemm_module();
  TuneOptions o;
  o.trials = 4;
  o.progress = false;
  auto prof = find_profile("cuda_sm90");
  ASSERT_TRUE(prof.ok());
  auto r = tune_function(m, "sgemm", *prof, {{"M", 256}, {"K", 256}, {"N", 256}}, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->measured);
  EXPECT_THAT(r->reference, ::testing::HasSubstr("no GPU"));
  EXPECT_GT(r->best_ms, 0);
}

}  // namespace
}  // namespace mlk::tune

namespace mlk::tune {
namespace {

std::string key_of(const std::string& src, const DimEnv& dims, const std::string& profile = "cpu_avx2") {
  auto fe = compile_source("k.tl", src);
  EXPECT_TRUE(fe.ok()) << fe.rendered();
  auto p = find_profile(profile);
  return cache::cache_key(key_inputs(fe.module, "f", dims, *p));
}

TEST(CacheKey, StableAcrossFormattingAndChangedByEverythingThatMatters) {
  const std::string src = "public fn f [N, D](x: Tensor[F32, [N, D]]) -> Tensor[F32, [N, D]] =\n  let y = x * 0.5\n  y + x\n";
  const std::string reformatted = "// the same program\npublic fn f[N,D](x:Tensor[F32,[N,D]])->Tensor[F32,[N,D]]=\n"
                                  "let half=x*0.50 // renamed, respelled\nhalf+x";
  const DimEnv dims = {{"N", 8}, {"D", 16}};
  std::string k = key_of(src, dims);
  EXPECT_EQ(k, key_of(src, dims));
  EXPECT_EQ(k, key_of(reformatted, dims));
  EXPECT_NE(k, key_of("public fn f [N, D](x: Tensor[F32, [N, D]]) -> Tensor[F32, [N, D]] =\n  x * 0.25 + x\n", dims));
  EXPECT_NE(k, key_of(src, {{"N", 8}, {"D", 32}}));
  EXPECT_NE(k, key_of(src, dims, "cpu_avx512"));
  EXPECT_NE(k, key_of(src, dims, "cuda_sm90"));
}

}  // namespace
}  // namespace mlk::tune
