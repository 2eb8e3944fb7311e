// Tuning a whole program under one budget (autotune/program_tune.h): the
// scheduler's gain, a search that does not depend on how its budget is
// sliced, and a program run that was interrupted resuming every unfinished
// job from its log, storing each, then answering from the cache.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "autotune/program_tune.h"
#include "base/signing.h"
#include "cache/store.h"
#include "lang/frontend.h"
#include "targets/detect.h"
#include "tests/test_support.h"

namespace mlk::tune {
namespace {

using testing_support::scratch_dir;

const char* kProgram =
    "public fn sgemm [M, K, N](a: Tensor[F32, [M, K]], b: Tensor[F32, [K, N]]) -> Tensor[F32, [M, N]] =\n"
    "  matmul(a, b)\n"
    "public fn rowsum [N, D](x: Tensor[F32, [N, D]]) -> Tensor[F32, [N]] =\n"
    "  sum(x, axes=[1])\n";

ir::Module program() {
  auto fe = compile_source("two.tl", kProgram);
  EXPECT_TRUE(fe.ok());
  return fe.module;
}

TuneOptions small_opts(int trials) {
  TuneOptions o;
  o.trials = trials;
  o.seed = 5;
  o.progress = false;
  o.autoschedulers = false;
  return o;
}

TEST(ProgramTune, GainFavoursFallingAndLargeTimesAndUntriedJobs) {
  EXPECT_TRUE(std::isinf(expected_gain(0, 0, 0, 0, 0.2))) << "a job with no passing candidate goes first";
  // Same best time and seconds: the one whose best fell in its last slice.
  EXPECT_GT(expected_gain(2.0, 1.0, 5, 10, 0.2), expected_gain(1.0, 1.0, 5, 10, 0.2));
  // No recent drop: the larger best time for the seconds spent (more to gain).
  EXPECT_GT(expected_gain(10, 10, 5, 10, 0.2), expected_gain(1, 1, 5, 10, 0.2));
  EXPECT_GT(expected_gain(1, 1, 5, 5, 0.2), expected_gain(1, 1, 5, 50, 0.2));
  // A best time that rose (re-measured noise) is not a negative rate.
  EXPECT_DOUBLE_EQ(expected_gain(1.0, 2.0, 5, 10, 0.2), expected_gain(2.0, 2.0, 5, 10, 0.2));
  EXPECT_DOUBLE_EQ(program_slice_s({.budget_s = 600}, 3), 50);
  EXPECT_DOUBLE_EQ(program_slice_s({.budget_s = 10}, 3), 5);
  EXPECT_DOUBLE_EQ(program_slice_s({.budget_s = 6000}, 3), 60);
  EXPECT_DOUBLE_EQ(program_slice_s({.budget_s = 600, .slice_s = 7}, 3), 7);
}

Trial trial(double at_s, double ms, bool ok = true) {
  Trial t;
  t.at_s = at_s;
  t.m.median_ms = ms;
  t.m.verdict = ok ? Measurement::Verdict::kOk : Measurement::Verdict::kError;
  return t;
}

TEST(ProgramTune, TheBestSoFarCurveStepsWhereTheBestImprovesAndSaysWhenItWasWithinFivePercent) {
  const std::vector<Trial> log = {trial(1, 10), trial(2, 1, false), trial(5, 12), trial(8, 5.1), trial(70, 5.0)};
  const std::vector<CurvePoint> c = best_so_far(log);
  ASSERT_EQ(c.size(), 3u) << "a failed trial and a slower one are not steps";
  EXPECT_DOUBLE_EQ(c[0].at_s, 1);
  EXPECT_DOUBLE_EQ(c[1].best_ms, 5.1);
  EXPECT_DOUBLE_EQ(c[2].at_s, 70);
  EXPECT_DOUBLE_EQ(best_at(c, 0.5), 0) << "nothing passed yet";
  EXPECT_DOUBLE_EQ(best_at(c, 60), 5.1);
  EXPECT_DOUBLE_EQ(best_at(c, 100), 5.0);
  EXPECT_DOUBLE_EQ(seconds_to_within(c, 0.05), 8) << "5.1 is within 5% of 5.0";
  EXPECT_DOUBLE_EQ(seconds_to_within(c, 0.01), 70);
  EXPECT_DOUBLE_EQ(seconds_to_within({}, 0.05), -1);

  ProgramJobResult fast, slow, hit;
  fast.curve = c;
  slow.curve = best_so_far({trial(1, 10), trial(90, 5)});
  const ConvergenceSummary s = summarize_convergence({fast, slow, hit});
  EXPECT_EQ(s.jobs, 2) << "a cache hit has no curve and does not count";
  EXPECT_EQ(s.converged, 1);
}

// Given the same measurements (the first run's log, replayed), a search
// advanced in slices of about one trial evaluates the same candidates in the
// same order as one advanced all at once: a batch's picks left at the end of
// a slice are evaluated first in the next, not dropped. (Two runs that both
// measure would differ: the mutations start from the best measured so far.)
TEST(ProgramTune, TheSearchDoesNotDependOnHowItsBudgetIsSliced) {
  ir::Module m = program();
  const DimEnv dims = {{"M", 24}, {"K", 32}, {"N", 24}};
  TuneOptions o = small_opts(7);
  o.log_path = scratch_dir("mlk_program_tune_test", "sliced.jsonl");
  std::filesystem::create_directories(std::filesystem::path(o.log_path).parent_path());
  auto whole = tune_function(m, "sgemm", host_profile(), dims, o);
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  ASSERT_EQ(whole->log.size(), 7u);
  // Each trial carries the search seconds when it was recorded (the curve's clock).
  for (size_t i = 1; i < whole->log.size(); ++i) EXPECT_GE(whole->log[i].at_s, whole->log[i - 1].at_s) << i;
  EXPECT_GT(whole->log.back().at_s, 0);
  auto task = TuningTask::Start(m, "sgemm", host_profile(), dims, o);
  ASSERT_TRUE(task.ok()) << task.status().message();
  int slices = 0;
  while (!task->converged() && slices < 100) {
    task->advance(1e-6);  // one trial per slice: a slice always evaluates one
    ++slices;
  }
  EXPECT_EQ(slices, 7);
  EXPECT_EQ(task->resumed(), 7);
  auto sliced = task->finish();
  ASSERT_TRUE(sliced.ok()) << sliced.status().message();
  ASSERT_EQ(sliced->log.size(), whole->log.size());
  for (size_t i = 0; i < whole->log.size(); ++i)
    EXPECT_EQ(sliced->log[i].schedule.hash(), whole->log[i].schedule.hash()) << "trial " << i;
}

TEST(ProgramTune, AnInterruptedProgramResumesEachJobFromItsLogAndStoresIt) {
  ir::Module m = program();
  const std::string dir = scratch_dir("mlk_program_tune_test", "resume");
  std::filesystem::create_directories(dir);
  const std::string src = dir + "/two.tl";
  std::ofstream(src) << kProgram;
  auto store = cache::Store::Open(dir + "/cache.db");
  ASSERT_TRUE(store.ok()) << store.status().message();
  std::vector<TuneRequest> jobs;
  for (const auto& [fn, dims] : std::vector<std::pair<std::string, DimEnv>>{
           {"sgemm", {{"M", 24}, {"K", 32}, {"N", 24}}}, {"rowsum", {{"N", 40}, {"D", 48}}}})
    jobs.push_back({.module = &m, .fn = fn, .source = src, .profile = host_profile(), .dims = dims,
                    .opts = small_opts(5), .store = store->get(), .work_dir = dir + "/work"});
  // The interrupted run: three trials of sgemm logged, then the process gone
  // (the task dropped without finishing: nothing stored).
  std::filesystem::create_directories(dir + "/work");
  {
    TuneOptions o = small_opts(5);
    o.log_path = tuning_log_path(jobs[0]);
    auto task = TuningTask::Start(m, "sgemm", host_profile(), jobs[0].dims, o);
    ASSERT_TRUE(task.ok()) << task.status().message();
    while (task->trials() < 3) task->advance(1e-6);
  }
  auto first = tune_program(jobs, {.budget_s = 12, .slice_s = 2, .progress = false});
  ASSERT_EQ(first.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(first[i].status.ok()) << jobs[i].fn << ": " << first[i].status.message();
    EXPECT_FALSE(first[i].outcome.cached);
    EXPECT_EQ(first[i].outcome.key, tuning_key(jobs[i]));
    EXPECT_GE(first[i].trials, 1);
    EXPECT_GT(first[i].search_s, 0);
  }
  EXPECT_EQ(first[0].resumed, 3) << "the three logged trials are replayed, not measured again";
  EXPECT_EQ(first[1].resumed, 0);
  // Both were stored: a second program run answers from the cache alone.
  auto again = tune_program(jobs, {.budget_s = 20, .progress = false});
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(again[i].status.ok()) << again[i].status.message();
    EXPECT_TRUE(again[i].outcome.cached) << jobs[i].fn;
    EXPECT_EQ(again[i].search_s, 0);
  }
}

// A fn whose result is a scalar (a loss) is tuned, its stored artifact
// checked through the C ABI and stored like any other.
TEST(ProgramTune, AScalarResultIsBuiltCheckedAndStored) {
  auto fe = compile_source("total.tl", "public fn total [N](x: Tensor[F32, [N]]) -> Scalar[F32] = sum(x, axes=[0])\n");
  ASSERT_TRUE(fe.ok());
  const std::string dir = scratch_dir("mlk_program_tune_test", "scalar");
  std::filesystem::create_directories(dir);
  auto store = cache::Store::Open(dir + "/cache.db");
  ASSERT_TRUE(store.ok()) << store.status().message();
  std::vector<TuneRequest> jobs = {{.module = &fe.module, .fn = "total", .profile = host_profile(), .dims = {{"N", 1000}},
                                    .opts = small_opts(2), .store = store->get(), .work_dir = dir + "/work"}};
  auto r = tune_program(jobs, {.budget_s = 5, .progress = false});
  ASSERT_TRUE(r[0].status.ok()) << r[0].status.message();
  auto hit = lookup_tuned(jobs[0]);
  ASSERT_TRUE(hit.ok() && hit->has_value()) << "stored";
}

// Review 12 of issue 49, H1: `mlk tune -o DIR` copied any hit into DIR, and
// the store's hits include entries pulled from a server (a writer's bytes).
// Under a trust list ($MLK_TRUSTED_SIGNERS) a hit goes to -o only when it was
// tuned here or a trusted key signed it; otherwise it is tuned anew.
TEST(ProgramTune, Review12_H1_APulledUnsignedHitIsNotCopiedToOutUnderATrustList) {
  auto fe = compile_source("total.tl", "public fn total [N](x: Tensor[F32, [N]]) -> Scalar[F32] = sum(x, axes=[0])\n");
  ASSERT_TRUE(fe.ok());
  const std::string dir = scratch_dir("mlk_program_tune_test", "trusted_out");
  std::filesystem::create_directories(dir);
  auto store = cache::Store::Open(dir + "/cache.db");
  ASSERT_TRUE(store.ok()) << store.status().message();
  TuneRequest job{.module = &fe.module, .fn = "total", .profile = host_profile(), .dims = {{"N", 1000}},
                  .opts = small_opts(2), .store = store->get(), .work_dir = dir + "/work"};
  auto r = tune_program({job}, {.budget_s = 5, .progress = false});
  ASSERT_TRUE(r[0].status.ok()) << r[0].status.message();
  const std::string key = tuning_key(job);
  auto entry = (*store)->get_entry(job.ns, key);
  ASSERT_TRUE(entry.ok()) << entry.status().message();
  auto key_pair = create_signing_key();
  ASSERT_TRUE(key_pair.ok());
  job.out_dir = dir + "/out";
  auto copied = [&](const char* trust) {
    if (trust) setenv("MLK_TRUSTED_SIGNERS", trust, 1);
    else unsetenv("MLK_TRUSTED_SIGNERS");
    auto hit = lookup_tuned(job);
    unsetenv("MLK_TRUSTED_SIGNERS");
    EXPECT_TRUE(hit.ok()) << hit.status().message();
    return hit.ok() && hit->has_value();
  };
  EXPECT_TRUE(copied(key_pair->public_key.c_str())) << "tuned here: copied under a trust list";
  cache::Provenance pulled = entry->info.manifest.provenance;
  pulled.origin = "pull:http://127.0.0.1:9#default";
  ASSERT_TRUE((*store)->put_entry(job.ns, key, entry->info.manifest.meta_json, pulled, entry->files).ok());
  EXPECT_TRUE(copied(nullptr)) << "no trust list: a namespace's writers are trusted";
  EXPECT_FALSE(copied(key_pair->public_key.c_str())) << "pulled and unsigned: tuned anew";
}

TEST(ProgramTune, AJobThatFailsToStartIsReportedAndTheOthersStillTune) {
  ir::Module m = program();
  const std::string dir = scratch_dir("mlk_program_tune_test", "bad");
  std::vector<TuneRequest> jobs = {
      {.module = &m, .fn = "rowsum", .profile = host_profile(), .dims = {{"N", 8}}, .opts = small_opts(2),
       .work_dir = dir},
      {.module = &m, .fn = "rowsum", .profile = host_profile(), .dims = {{"N", 16}, {"D", 8}}, .opts = small_opts(2),
       .work_dir = dir}};
  auto r = tune_program(jobs, {.budget_s = 5, .progress = false});
  ASSERT_FALSE(r[0].status.ok());
  EXPECT_NE(r[0].status.message().find("needs a value for dimension `D`"), std::string::npos) << r[0].status.message();
  EXPECT_TRUE(r[1].status.ok()) << r[1].status.message();
}

}  // namespace
}  // namespace mlk::tune
