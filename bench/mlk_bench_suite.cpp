// The Google Benchmark suite: every kernel of a suite file (default
// bench/suite.json) as mlk runs it (the tuned artifact from the cache, else
// the default schedule) and its peers (the default schedule, Halide's
// autoschedulers, OpenBLAS for matrix products), one benchmark each, named
// "KERNEL/VARIANT". Not a test; build it with
//   cmake --build build --target mlk_bench_suite
// and run, e.g.,
//   MLK_CACHE=~/.cache/mlk/cache.db build/mlk_bench_suite --benchmark_format=json > gb.json
//   .venv/bin/python bench/ratios.py gb.json
// Flags besides Google Benchmark's: --suite FILE, --cache PATH, --no-cache,
// --peers LIST (as for `mlk bench`). Kernels are compiled when their first
// benchmark runs and freed when the next kernel starts, so filtering with
// --benchmark_filter compiles only what runs.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench/suite.h"
#include "bench/variants.h"
#include "cache/paths.h"

#ifndef MLK_SOURCE_DIR
#define MLK_SOURCE_DIR "."
#endif

namespace {

using mlk::bench::PreparedKernel;

struct Suite {
  std::vector<std::unique_ptr<PreparedKernel>> kernels;
  mlk::bench::PrepareOptions opts;
  size_t prepared = SIZE_MAX;  // index of the kernel now compiled
  std::string prepare_error;
};

Suite& suite() {
  static Suite s;
  return s;
}

// The kernel `ki`, compiled; frees the previous one. Empty error on success.
const std::string& ensure_prepared(size_t ki) {
  Suite& s = suite();
  if (s.prepared != ki) {
    if (s.prepared != SIZE_MAX) s.kernels[s.prepared]->Release();
    s.prepared = ki;
    std::fprintf(stderr, "[mlk_bench_suite] preparing %s\n", s.kernels[ki]->name().c_str());
    mlk::Status st = s.kernels[ki]->Prepare(s.opts);
    s.prepare_error = st.ok() ? "" : st.message();
    if (st.ok()) std::fprintf(stderr, "[mlk_bench_suite] mlk: %s\n", s.kernels[ki]->mlk().how.c_str());
  }
  return s.prepare_error;
}

void run_variant(benchmark::State& state, size_t ki, const std::string& variant) {
  const std::string& err = ensure_prepared(ki);
  if (!err.empty()) {
    state.SkipWithError(err.c_str());
    return;
  }
  PreparedKernel& k = *suite().kernels[ki];
  mlk::bench::Variant* v = nullptr;
  if (variant == "mlk") v = &k.mlk();
  for (auto& p : k.peers())
    if (p.name == variant) v = &p;
  if (!v || !v->run) {
    state.SkipWithError(v ? v->error.c_str() : "no such variant");
    return;
  }
  for (auto _ : state) {
    mlk::Status s = v->run();
    if (!s.ok()) {
      state.SkipWithError(s.message().c_str());
      break;
    }
  }
  state.SetLabel((variant == "mlk" ? k.variant() + ": " : std::string()) + v->how);
}

std::vector<std::string> split(const std::string& text) {
  if (text == "all") return mlk::bench::all_peer_names();
  std::vector<std::string> out;
  if (text == "none") return out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  std::string suite_path = std::string(MLK_SOURCE_DIR) + "/bench/suite.json", cache_flag;
  bool no_cache = false;
  std::vector<std::string> peers = mlk::bench::all_peer_names();
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* flag) -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "mlk_bench_suite: %s needs a value\n", flag);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--suite") suite_path = value("--suite");
    else if (a == "--cache") cache_flag = value("--cache");
    else if (a == "--peers") peers = split(value("--peers"));
    else if (a == "--no-cache") no_cache = true;
    else {
      std::fprintf(stderr, "mlk_bench_suite: unknown argument `%s` (flags: --suite FILE, --cache PATH, --no-cache, "
                           "--peers LIST, and Google Benchmark's --benchmark_*)\n", a.c_str());
      return 2;
    }
  }
  for (const auto& p : peers) {
    bool known = false;
    for (const auto& n : mlk::bench::all_peer_names()) known = known || n == p;
    if (!known) {
      std::fprintf(stderr, "mlk_bench_suite: unknown peer `%s`\n", p.c_str());
      return 2;
    }
  }
  auto specs = mlk::bench::read_suite(suite_path, "host");
  if (!specs.ok()) {
    std::fprintf(stderr, "mlk_bench_suite: %s\n", specs.status().message().c_str());
    return 1;
  }
  Suite& s = suite();
  s.opts.store_path = no_cache ? "" : mlk::cache::default_store_path(cache_flag);
  s.opts.peers = peers;
  std::fprintf(stderr, "[mlk_bench_suite] suite %s, cache %s\n", suite_path.c_str(),
               s.opts.store_path.empty() ? "(none)" : s.opts.store_path.c_str());
  for (const auto& spec : *specs) {
    auto k = PreparedKernel::Resolve(spec);
    if (!k.ok()) {
      std::fprintf(stderr, "mlk_bench_suite: %s\n", k.status().message().c_str());
      return 1;
    }
    size_t ki = s.kernels.size();
    s.kernels.push_back(std::move(k).value());
    std::vector<std::string> variants = {"mlk"};
    variants.insert(variants.end(), peers.begin(), peers.end());
    for (const auto& v : variants)
      benchmark::RegisterBenchmark((s.kernels[ki]->name() + "/" + v).c_str(),
                                   [ki, v](benchmark::State& st) { run_variant(st, ki, v); })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
