#include "bench/timing.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <chrono>
#include <cmath>
#include <thread>

namespace mlk::bench {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

constexpr int64_t kMaxBatch = 100000;
constexpr int64_t kMaxSamplesPerRound = 100000;

struct State {
  TimingResult r;
  double call_ms = 0;  // estimate from the warm-up
  bool failed() const { return !r.status.ok(); }
};

// One batch of `calls` calls; the elapsed milliseconds, or -1 on failure.
double time_batch(const Timed& t, State& s, int64_t calls) {
  auto t0 = Clock::now();
  for (int64_t i = 0; i < calls; ++i) {
    Status st = t.run();
    if (!st.ok()) {
      s.r.status = st;
      return -1;
    }
  }
  return ms_between(t0, Clock::now());
}

void warm_up(const Timed& t, State& s, const TimingOptions& o) {
  double best = 1e300;
  auto start = Clock::now();
  for (int calls = 0; calls < 2 || ms_between(start, Clock::now()) < o.warmup_s * 1000; ++calls) {
    double ms = time_batch(t, s, 1);
    if (ms < 0) return;
    best = std::min(best, ms);
  }
  s.call_ms = best;
  double per = std::max(best, 1e-6);
  s.r.calls_per_sample = std::clamp<int64_t>(static_cast<int64_t>(std::llround(o.sample_ms / per)), 1, kMaxBatch);
}

void run_round(const Timed& t, State& s, const TimingOptions& o) {
  s.r.round_sizes.push_back(0);
  if (t.before_round) t.before_round();
  if (s.call_ms < 10 && time_batch(t, s, s.r.calls_per_sample) < 0) return;  // untimed re-warm
  const double budget_ms = o.min_time_s * 1000 / std::max(1, o.rounds);
  auto start = Clock::now();
  for (int64_t n = 0; n < kMaxSamplesPerRound; ++n) {
    if (n >= t.min_samples_per_round && ms_between(start, Clock::now()) >= budget_ms) break;
    double ms = time_batch(t, s, s.r.calls_per_sample);
    if (ms < 0) return;
    s.r.samples_ms.push_back(ms / static_cast<double>(s.r.calls_per_sample));
    ++s.r.round_sizes.back();
    s.r.calls += s.r.calls_per_sample;
  }
}

// One A/B round: both re-warmed, then samples of `a` and `b` alternately,
// each pair in the opposite order of the one before (a b, b a, a b, ...),
// until both had their share of the time and their minimum of samples.
void run_paired_round(const Timed& a, const Timed& b, State& sa, State& sb, const TimingOptions& o) {
  sa.r.round_sizes.push_back(0);
  sb.r.round_sizes.push_back(0);
  if (a.before_round) a.before_round();
  if (b.before_round) b.before_round();
  for (auto [t, s] : {std::pair{&a, &sa}, std::pair{&b, &sb}})
    if (s->call_ms < 10 && time_batch(*t, *s, s->r.calls_per_sample) < 0) return;
  const double budget_ms = 2 * o.min_time_s * 1000 / std::max(1, o.rounds);
  const int min_samples = std::max(a.min_samples_per_round, b.min_samples_per_round);
  auto start = Clock::now();
  for (int64_t n = 0; n < kMaxSamplesPerRound; ++n) {
    if (n >= min_samples && ms_between(start, Clock::now()) >= budget_ms) break;
    for (int k = 0; k < 2; ++k) {
      const bool first_a = (n % 2 == 0) == (k == 0);
      const Timed& t = first_a ? a : b;
      State& s = first_a ? sa : sb;
      double ms = time_batch(t, s, s.r.calls_per_sample);
      if (ms < 0) return;
      s.r.samples_ms.push_back(ms / static_cast<double>(s.r.calls_per_sample));
      ++s.r.round_sizes.back();
      s.r.calls += s.r.calls_per_sample;
    }
  }
}

}  // namespace

std::vector<TimingResult> measure_interleaved(const std::vector<Timed>& items, const TimingOptions& opts) {
  std::vector<State> states(items.size());
  for (size_t i = 0; i < items.size(); ++i) warm_up(items[i], states[i], opts);
  for (int round = 0; round < opts.rounds; ++round)
    for (size_t i = 0; i < items.size(); ++i)
      if (!states[i].failed()) run_round(items[i], states[i], opts);
  std::vector<TimingResult> out;
  for (auto& s : states) out.push_back(std::move(s.r));
  return out;
}

std::vector<double> calibration_samples(int n) {
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  static std::vector<float> buf(size_t{4} << 20, 1.0f);  // 16 MiB, split between the threads
  const size_t part = buf.size() / static_cast<size_t>(threads);
  std::vector<double> sinks(static_cast<size_t>(threads));
  auto work = [&](int t, int k) {
    double x = 1.0 + k * 1e-9;
    for (int i = 0; i < 1000000; ++i) x = x * 0.9999999 + 1e-7;  // a dependent chain: latency, frequency
    float acc = 0;
    for (size_t i = part * static_cast<size_t>(t); i < part * static_cast<size_t>(t + 1); ++i) acc += buf[i];
    sinks[static_cast<size_t>(t)] = x + acc;
  };
  // Helpers wait for work on a condition variable between samples, as a
  // kernel's thread pool does, so that a core taken by another process delays
  // them as it delays mlk's kernels. They are started once: a thread started
  // per sample is often placed on its parent's core first.
  std::mutex mu;
  std::condition_variable cv;
  int generation = 0, done = 0;
  bool quit = false;
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t)
    pool.emplace_back([&, t] {
      int seen = 0;
      for (;;) {
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return quit || generation != seen; });
          if (quit) return;
          seen = generation;
        }
        work(t, seen);
        std::lock_guard<std::mutex> lock(mu);
        ++done;
        cv.notify_all();
      }
    });
  std::vector<double> out;
  for (int k = 0; k < n + 1; ++k) {  // the first run is a warm-up
    auto t0 = Clock::now();
    {
      std::lock_guard<std::mutex> lock(mu);
      done = 0;
      ++generation;
    }
    cv.notify_all();
    work(0, k);
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return done == threads - 1; });
    }
    if (k > 0) out.push_back(ms_between(t0, Clock::now()));
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    quit = true;
  }
  cv.notify_all();
  for (auto& th : pool) th.join();
  volatile double sink = 0;
  for (double v : sinks) sink = sink + v;
  return out;
}

std::vector<TimingResult> measure_paired(const Timed& a, const Timed& b, const TimingOptions& opts) {
  std::vector<State> st(2);
  warm_up(a, st[0], opts);
  warm_up(b, st[1], opts);
  for (int round = 0; round < opts.rounds && !st[0].failed() && !st[1].failed(); ++round)
    run_paired_round(a, b, st[0], st[1], opts);
  return {std::move(st[0].r), std::move(st[1].r)};
}

}  // namespace mlk::bench
