// The Measurer interface (autotune/measurer.h): a function's measurements
// and errors passed through, the measurers chosen by profile and options,
// and what the tuner's loop does with a measurer's error (with fake
// measurers): the search stops with it, what was recorded before it stays
// in the log, and a TuningTask says it stopped.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>

#include "autotune/measure_cuda.h"
#include "autotune/measurer.h"
#include "autotune/tuner.h"
#include "targets/detect.h"
#include "tests/test_support.h"

namespace mlk::tune {
namespace {

Measurement ok_ms(double ms) {
  Measurement m;
  m.verdict = Measurement::Verdict::kOk;
  m.median_ms = ms;
  m.times_ms = {ms, ms, ms};
  return m;
}

TEST(Measurer, AFunctionMeasurerPassesMeasurementsAndErrorsThrough) {
  int calls = 0;
  FunctionMeasurer f(
      [&](const MeasureSetup&, const Schedule& s) -> Expected<Measurement> {
        ++calls;
        if (s.autoscheduler == "gone") return Status::IOError("the server is gone");
        return ok_ms(2.5);
      },
      3);
  EXPECT_EQ(f.concurrency(), 3);
  EXPECT_TRUE(f.measures());
  MeasureSetup setup;
  Schedule s;
  auto m = f.measure(setup, s);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->median_ms, 2.5);
  s.autoscheduler = "gone";
  auto e = f.measure(setup, s);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), Status::Code::kIOError);
  EXPECT_EQ(e.status().message(), "the server is gone");
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(FunctionMeasurer(nullptr, 0).concurrency(), 1) << "at least one";
}

TEST(Measurer, MeasurersAreChosenByProfileAndOptions) {
  const Profile host = host_profile();
  TuneOptions o;
  auto local = make_measurers(host, o);
  ASSERT_TRUE(local.ok()) << local.status().message();
  EXPECT_NE(dynamic_cast<LocalMeasurer*>(local->search.get()), nullptr);
  EXPECT_NE(dynamic_cast<LocalMeasurer*>(local->final_round.get()), nullptr);
  EXPECT_EQ(local->search->concurrency(), 1);

  o.measurer = [](const MeasureSetup&, const Schedule&) { return ok_ms(1); };
  o.parallel_measurements = 4;
  auto fn = make_measurers(host, o);
  ASSERT_TRUE(fn.ok());
  EXPECT_NE(dynamic_cast<FunctionMeasurer*>(fn->search.get()), nullptr);
  EXPECT_EQ(fn->search->concurrency(), 4);
  EXPECT_NE(dynamic_cast<FunctionMeasurer*>(fn->final_round.get()), nullptr);
  o.final_round_here = true;
  auto here = make_measurers(host, o);
  ASSERT_TRUE(here.ok());
  EXPECT_NE(dynamic_cast<LocalMeasurer*>(here->final_round.get()), nullptr) << "final_round_here: measured here";

  auto sm90 = find_profile("cuda_sm90");
  ASSERT_TRUE(sm90.ok());
  auto workers = make_measurers(*sm90, o);
  ASSERT_TRUE(workers.ok());
  EXPECT_NE(dynamic_cast<FunctionMeasurer*>(workers->search.get()), nullptr) << "GPU workers measure the search";
  EXPECT_EQ(workers->search->concurrency(), 4);
  EXPECT_EQ(workers->final_round, nullptr) << "no final round on GPU profiles";
  o.measurer = nullptr;
  auto gpu = make_measurers(*sm90, o);
  ASSERT_TRUE(gpu.ok());
  EXPECT_EQ(gpu->final_round, nullptr) << "no final round on GPU profiles";
  EXPECT_EQ(gpu->search->concurrency(), 1);
  const Runnable r = cuda_measurable(*sm90);
  EXPECT_EQ(gpu->search->measures(), r.ok);
  if (!r.ok) {
    EXPECT_NE(gpu->search->why_not_measured().find(r.reason), std::string::npos);
  }
}

// A tuning of sgemm whose fake measurer fails from its `fail_from`-th search
// call on (counted from 1), or in the final round when fail_from is 0. The
// times are within 2x of each other, so the final round measures several.
struct FailingRun {
  Expected<TuneResult> result = Status::Internal("not run");
  int calls = 0;
  int logged_trials = 0;
};

FailingRun tune_failing(int fail_from, int parallel) {
  const std::string dir = testing_support::scratch_dir("measurer_test", "fail");
  std::filesystem::create_directories(dir);
  const std::string log = dir + "/tuning.jsonl";
  TuneOptions o;
  o.trials = 8;
  o.seed = 2;
  o.progress = false;
  o.autoschedulers = false;
  o.log_path = log;
  o.parallel_measurements = parallel;
  std::atomic<int> calls{0};
  o.measurer = [&](const MeasureSetup& setup, const Schedule& s) -> Expected<Measurement> {
    const bool final = setup.min_time_s >= 1.0 && setup.cutoff_ms == 0;
    const int n = final ? 0 : ++calls;
    if (final ? fail_from == 0 : fail_from > 0 && n >= fail_from)
      return Status::Unsupported(final ? "the final round's job failed" : "no worker with device key `k` took the job");
    return ok_ms(1.0 + static_cast<double>(std::stoul(s.hash().substr(0, 6), nullptr, 16) % 100) / 100);
  };
  FailingRun out;
  out.result = tune_function(testing_support::sgemm_module(), "sgemm", host_profile(),
                             {{"M", 32}, {"K", 32}, {"N", 32}}, o);
  out.calls = calls;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);)
    if (line.find("\"header\"") == std::string::npos && line.find("\"final\"") == std::string::npos)
      ++out.logged_trials;
  std::filesystem::remove_all(dir);
  return out;
}

TEST(Tuner, AMeasurerErrorStopsTheSearchWithIt) {
  const FailingRun r = tune_failing(3, 1);
  ASSERT_FALSE(r.result.ok());
  EXPECT_EQ(r.result.status().code(), Status::Code::kUnsupported);
  EXPECT_EQ(r.result.status().message(), "no worker with device key `k` took the job");
  EXPECT_EQ(r.calls, 3) << "nothing measured after the error";
  EXPECT_EQ(r.logged_trials, 2) << "the trials before it are logged, to resume from";
}

TEST(Tuner, AMeasurerErrorInAParallelWindowStopsTheSearchAfterTheTrialsBeforeIt) {
  const FailingRun r = tune_failing(2, 2);
  ASSERT_FALSE(r.result.ok());
  EXPECT_EQ(r.result.status().message(), "no worker with device key `k` took the job");
  EXPECT_LE(r.calls, 3) << "trial 0 alone, then one window of two; none after it";
  EXPECT_EQ(r.logged_trials, 1) << "only trial 0: the window's trials are recorded up to the failed one";
}

TEST(Tuner, AMeasurerErrorInTheFinalRoundIsTheResult) {
  const FailingRun r = tune_failing(0, 1);
  ASSERT_FALSE(r.result.ok());
  EXPECT_EQ(r.result.status().message(), "the final round's job failed");
  EXPECT_EQ(r.logged_trials, 8) << "the search itself went through";
}

TEST(TuningTask, SaysItStoppedAndWhy) {
  TuneOptions o;
  o.trials = 8;
  o.progress = false;
  o.autoschedulers = false;
  o.measurer = [](const MeasureSetup&, const Schedule&) -> Expected<Measurement> {
    return Status::IOError("the server is gone");
  };
  auto task = TuningTask::Start(testing_support::sgemm_module(), "sgemm", host_profile(),
                                {{"M", 16}, {"K", 16}, {"N", 16}}, o);
  ASSERT_TRUE(task.ok()) << task.status().message();
  EXPECT_TRUE(task->stopped().ok());
  Status st = task->advance(60);
  EXPECT_EQ(st.message(), "the server is gone");
  EXPECT_TRUE(task->converged());
  EXPECT_EQ(task->stopped().message(), "the server is gone");
  EXPECT_EQ(task->trials(), 0);
  EXPECT_EQ(task->advance(60).message(), "the server is gone") << "nothing more is tried";
  auto r = task->finish();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "the server is gone");
}

}  // namespace
}  // namespace mlk::tune
