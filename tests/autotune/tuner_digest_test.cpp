// The search pinned: for a fixed seed, a trial cap, no autoschedulers and a
// fake measurer whose times depend on the schedule alone, the candidates the
// tuner tries (origin, schedule, in trial order), the times it records and
// the winner hash to one digest. A change to the search strategy, the cost
// models' ranking or the loop that wires them changes the digest; a pure
// refactoring of the tuner must leave it as pinned here. Fixed profiles, not
// `host`, so that the digest does not depend on the machine's CPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "autotune/tuner.h"
#include "base/sha256.h"
#include "targets/detect.h"
#include "tests/test_support.h"

namespace mlk::tune {
namespace {

// A time from the schedule alone: 1 to 11 ms, from its hash; a schedule
// whose hash starts with 0 or 1 is wrong (about one in eight).
Measurement fake_time(const Schedule& s) {
  Measurement r;
  r.verdict = s.hash()[0] <= '1' ? Measurement::Verdict::kWrong : Measurement::Verdict::kOk;
  if (!r.ok()) {
    r.detail = "wrong by the test's fake";
    return r;
  }
  r.median_ms = 1.0 + static_cast<double>(std::stoul(s.hash().substr(0, 8), nullptr, 16) % 1000) / 100;
  r.times_ms = {r.median_ms, r.median_ms, r.median_ms};
  return r;
}

// The search as one text: a line per trial, then the winner.
std::string search_text(const std::string& profile_name, int trials) {
  auto profile = find_profile(profile_name);
  EXPECT_TRUE(profile.ok()) << profile.status().message();
  if (!profile.ok()) return "";
  TuneOptions o;
  o.trials = trials;
  o.time_s = 3600;  // the trial cap, never the clock, ends the search
  o.seed = 9;
  o.progress = false;
  o.autoschedulers = false;
  o.measurer = [](const MeasureSetup&, const Schedule& s) { return fake_time(s); };
  auto r = tune_function(testing_support::sgemm_module(), "sgemm", *profile, {{"M", 96}, {"K", 128}, {"N", 80}}, o);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return "";
  std::string text;
  char line[256];
  for (const Trial& t : r->log) {
    std::snprintf(line, sizeof line, "%d %s %s %d %.4f\n", t.index, t.origin.c_str(), t.schedule.hash().c_str(),
                  static_cast<int>(t.m.verdict), t.m.median_ms);
    text += line;
  }
  std::snprintf(line, sizeof line, "best %s %s %.4f default %.4f\n", r->best_origin.c_str(),
                r->best.hash().c_str(), r->best_ms, r->default_ms);
  return text + line;
}

TEST(TunerDigest, TheSearchIsAsPinned) {
  const std::string avx2 = search_text("cpu_avx2", 24);
  ASSERT_FALSE(avx2.empty());
  EXPECT_EQ(search_text("cpu_avx2", 24), avx2) << "the same seed and times give the same search";
  EXPECT_EQ(sha256_hex(avx2), "5d7dc2980527e82a2c1a551f137affc79b2e38bd33bcffb44cf80fbab75b201c") << avx2;
}

// A CPU profile is tuned only where it runs (every machine of this kind
// runs cpu_avx2; cpu_avx512 needs AVX-512).
TEST(TunerDigest, TheSearchIsAsPinnedOnAvx512) {
  auto profile = find_profile("cpu_avx512");
  ASSERT_TRUE(profile.ok());
  const Runnable rn = can_run(*profile, detect_cpu(), detect_cuda());
  if (!rn.ok) GTEST_SKIP() << "cpu_avx512 does not run here: " << rn.reason;
  const std::string avx512 = search_text("cpu_avx512", 24);
  ASSERT_FALSE(avx512.empty());
  EXPECT_EQ(sha256_hex(avx512), "0280d43c54f3f62154651e74420594d4b022623e1f0eddd8eb5b1847cbdb6da1") << avx512;
}

}  // namespace
}  // namespace mlk::tune
