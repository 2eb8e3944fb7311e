// mlk-fma-peak: the machine's F32 FMA peak, measured with a register-only
// loop (no loads or stores in the timed loop), on N threads at once.
// Benchmarks state their GFLOP/s as a share of this number.
//
// Each thread runs 12 independent accumulator chains (more than the FMA
// latency times the FMA ports of any x86 core in scope), with the widest
// vector the CPU has: AVX-512 where cpuid says avx512f (on Zen 4 it runs on
// 256-bit units, at the same rate as AVX2), else AVX2+FMA. Both widths are
// timed where both exist and the faster is the peak.
//
// usage: mlk-fma-peak [--threads N] [--seconds S]
// Prints one line per width: "avx2: 226.4 GFLOP/s on 2 threads", then
// "peak: ...".
#include <immintrin.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kChains = 12;

// 2 * lanes * kChains flops per iteration; the chains unrolled so that
// every accumulator stays in a register.
__attribute__((target("avx2,fma"))) float loop_avx2(int64_t iters) {
  __m256 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_ps(1.0f + 1e-3f * i);
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f);
  for (int64_t it = 0; it < iters; ++it)
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], m, c);
  __m256 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm256_add_ps(s, acc[i]);
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0];
}

__attribute__((target("avx512f"))) float loop_avx512(int64_t iters) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(1.0f + 1e-3f * i);
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-6f);
  for (int64_t it = 0; it < iters; ++it)
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], m, c);
  __m512 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

// GFLOP/s of `loop` on `threads` threads, each running `iters` iterations;
// the best of three timings.
double gflops(float (*loop)(int64_t), int lanes, int threads, int64_t iters) {
  double best = 0;
  volatile float sink = 0;
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<std::thread> ts;
    std::vector<float> results(threads);
    auto t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t) ts.emplace_back([&, t] { results[t] = loop(iters); });
    for (auto& t : ts) t.join();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (float r : results) sink = sink + r;
    double flops = 2.0 * lanes * kChains * static_cast<double>(iters) * threads;
    if (flops / s / 1e9 > best) best = flops / s / 1e9;
  }
  return best;
}

// Iterations that take about `seconds` on one thread.
int64_t calibrate(float (*loop)(int64_t), double seconds) {
  int64_t iters = 1 << 20;
  for (;;) {
    auto t0 = std::chrono::steady_clock::now();
    volatile float v = loop(iters);
    (void)v;
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0.05) return static_cast<int64_t>(static_cast<double>(iters) * seconds / s) + 1;
    iters *= 4;
  }
}

}  // namespace

int main(int argc, char** argv) {
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  double seconds = 0.5;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (a == "--seconds" && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: mlk-fma-peak [--threads N] [--seconds S]\n"
                   "  the F32 FMA peak of this CPU on N threads (default: all), register-only loop\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  if (threads < 1 || seconds <= 0) {
    std::fprintf(stderr, "mlk-fma-peak: --threads must be >= 1 and --seconds > 0\n");
    return 2;
  }
  __builtin_cpu_init();
  double peak = 0;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    double g = gflops(loop_avx2, 8, threads, calibrate(loop_avx2, seconds));
    std::printf("avx2: %.1f GFLOP/s on %d threads\n", g, threads);
    peak = g > peak ? g : peak;
  }
  if (__builtin_cpu_supports("avx512f")) {
    double g = gflops(loop_avx512, 16, threads, calibrate(loop_avx512, seconds));
    std::printf("avx512: %.1f GFLOP/s on %d threads\n", g, threads);
    peak = g > peak ? g : peak;
  }
  if (peak == 0) {
    std::fprintf(stderr, "mlk-fma-peak: the CPU has neither AVX2+FMA nor AVX-512\n");
    return 1;
  }
  std::printf("peak: %.1f GFLOP/s on %d threads\n", peak, threads);
  return 0;
}
