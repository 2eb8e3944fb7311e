// The TuningLog alone (autotune/tuning_log.h), with hand-made trials: what
// one run appends the next run of the same problem reads back, a log of
// another problem is refused, and a torn or damaged line is handled as the
// contract says.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "autotune/tuning_log.h"
#include "base/log.h"

namespace mlk::tune {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::HasSubstr;

std::string fresh_path(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("mlk_tuning_log_test_" + std::to_string(getpid()));
  fs::create_directories(d);
  fs::remove(d / name);
  return (d / name).string();
}

const json kHeader = {{"fn", "f"}, {"ir", "abc"}, {"dims", {{"N", 8}}}, {"profile", "cpu_avx2"}, {"seed", 1}};

Trial trial(int index, const std::string& origin, double ms) {
  Trial t;
  t.index = index;
  t.origin = origin;
  Directive d;  // a distinct schedule per trial
  d.op = "vectorize";
  d.vars = {"x"};
  d.factors = {8 << index};
  t.schedule.stages["out"] = {d};
  t.m.verdict = Measurement::Verdict::kOk;
  t.m.median_ms = ms;
  t.m.times_ms = {ms, ms};
  return t;
}

TEST(TuningLog, WhatARunAppendsTheNextRunReadsBack) {
  const std::string path = fresh_path("round_trip.jsonl");
  const Trial a = trial(0, "default", 2.5), b = trial(1, "mutation", 1.25);
  {
    auto log = TuningLog::Open(path, kHeader);
    ASSERT_TRUE(log.ok()) << log.status().message();
    EXPECT_TRUE((*log)->earlier().empty()) << "a missing file is an empty log";
    (*log)->Append(a);
    (*log)->Append(b);
    (*log)->AppendFinal(b.schedule.hash(), {1.0, 1.5});
  }
  auto again = TuningLog::Open(path, kHeader);
  ASSERT_TRUE(again.ok()) << again.status().message();
  const auto& earlier = (*again)->earlier();
  ASSERT_EQ(earlier.size(), 2u);
  ASSERT_TRUE(earlier.count(b.schedule.hash()));
  EXPECT_EQ(earlier.at(b.schedule.hash()).m.median_ms, 1.25);
  EXPECT_EQ(earlier.at(a.schedule.hash()).origin, "default");
  ASSERT_TRUE((*again)->finals().count(b.schedule.hash()));
  EXPECT_EQ((*again)->finals().at(b.schedule.hash()), (std::vector<double>{1.0, 1.5}));
}

TEST(TuningLog, ALogOfAnotherProblemIsRefused) {
  const std::string path = fresh_path("other.jsonl");
  ASSERT_TRUE(TuningLog::Open(path, kHeader).ok());
  json other = kHeader;
  other["seed"] = 2;
  auto log = TuningLog::Open(path, other);
  ASSERT_FALSE(log.ok());
  EXPECT_EQ(log.status().code(), Status::Code::kInvalidArgument) << log.status().message();
}

TEST(TuningLog, ATornLastLineIsCutOffAndADamagedLineIsNamed) {
  const std::string path = fresh_path("torn.jsonl");
  {
    auto log = TuningLog::Open(path, kHeader);
    ASSERT_TRUE(log.ok());
    (*log)->Append(trial(0, "default", 2.0));
  }
  std::ofstream(path, std::ios::app) << "{\"index\": 1, \"orig";  // killed mid-write
  auto torn = TuningLog::Open(path, kHeader);
  ASSERT_TRUE(torn.ok()) << torn.status().message();
  EXPECT_EQ((*torn)->earlier().size(), 1u);

  const std::string damaged = fresh_path("damaged.jsonl");
  {
    auto log = TuningLog::Open(damaged, kHeader);
    ASSERT_TRUE(log.ok());
  }
  std::ofstream(damaged, std::ios::app) << "not json\n" << trial_json(trial(0, "default", 2.0)).dump() << "\n";
  auto bad = TuningLog::Open(damaged, kHeader);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Status::Code::kCorruption);
  EXPECT_EQ(bad.status().message(), damaged + ":2: not a JSON line");
}

// A trial's knobs are checked where the log is read (issue 54): a stage or
// knob the tuning problem lacks is a damaged log, named by its line, never
// taken unchecked into the search.
TEST(TuningLog, KnobsAreCheckedWhereTheLogIsRead) {
  const std::string path = fresh_path("knobs.jsonl");
  Trial t = trial(0, "default", 2.0);
  t.knobs = {{"matmul9", {{"tn", 4}}}};
  {
    auto log = TuningLog::Open(path, kHeader);
    ASSERT_TRUE(log.ok());
    (*log)->Append(trial(1, "default", 3.0));
    (*log)->Append(t);
  }
  auto unchecked = TuningLog::Open(path, kHeader);
  ASSERT_TRUE(unchecked.ok()) << unchecked.status().message();
  auto check = [](const Knobs& k) {
    return k.count("matmul9") ? Status::InvalidArgument("knobs: unknown stage `matmul9`") : Status::Ok();
  };
  auto checked = TuningLog::Open(path, kHeader, check);
  ASSERT_FALSE(checked.ok());
  EXPECT_EQ(checked.status().code(), Status::Code::kCorruption);
  EXPECT_EQ(checked.status().message(),
            path + ":3: knobs: unknown stage `matmul9`; remove the log or choose another --log");
}

// The progress line of a trial (issue 53, item 6): a measured one gives its
// time; a failed one its verdict and why, in one line; one the cost model
// ranked (built for a GPU, not run) says its time is an estimate.
std::string progress_line(const Trial& t, const TrialProgress& p) {
  std::string line;
  LogSink old = set_log_sink([&line](LogLevel, std::string_view l) { line = std::string(l); });
  log_trial_progress(t, p);
  set_log_sink(old);
  return line;
}

TEST(TuningLog, AProgressLineSaysWhyATrialFailedAndWhatIsAnEstimate) {
  TrialProgress p{"f host", 3, 8, 0.5, true, 0.4, 0.8, 12};
  EXPECT_EQ(progress_line(trial(2, "mutation", 0.5), p),
            "[tune f host] trial 3/8 mutation  ok      0.500 ms  best 0.400 ms (2.000x over naive)  ETA 12s");
  Trial bad = trial(2, "mutation", 0);
  bad.m.verdict = Measurement::Verdict::kWrong;
  bad.m.detail = "output[3, 7] = 1.5 but the reference gives 2.25 (atol 1e-5, rtol 1e-4)\nmore detail";
  EXPECT_EQ(progress_line(bad, p), "[tune f host] trial 3/8 mutation  wrong   (output[3, 7] = 1.5 but the reference "
                                   "gives 2.25 (atol 1e-5, rtol 1e-4))  best 0.400 ms (2.000x over naive)  ETA 12s");
  bad.m.detail = std::string(300, 'x');
  EXPECT_THAT(progress_line(bad, p), HasSubstr("(" + std::string(97, 'x') + "...)"));
  Trial est = trial(2, "mutation", 0.5);
  est.m.times_ms.clear();  // built, not run: the cost model's estimate
  EXPECT_EQ(progress_line(est, p),
            "[tune f host] trial 3/8 mutation  ok      ~0.500 ms (estimate)  best ~0.400 ms (2.000x over naive)  ETA 12s");
}

}  // namespace
}  // namespace mlk::tune
