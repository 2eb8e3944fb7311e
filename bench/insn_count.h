// Instruction counts of a kernel call: a second signal beside timing that a
// busy machine cannot disturb. The artifact is run by a small helper program
// (mlk-count, bench/count_main.cpp, built next to mlk) on the same random
// inputs as `mlk bench` uses, on one thread (HL_NUM_THREADS=1, so that no
// worker spins), and only its calls are counted: by the CPU's counters
// (perf_event_open, what `perf stat` reads) where this machine allows it,
// else under `valgrind --tool=callgrind` with collection switched on for the
// calls alone, which is exact and repeatable. Used by `mlk bench
// --count-instructions` (docs/ci.md).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "base/status.h"
#include "bench/suite.h"

namespace mlk::bench {

struct CountRequest {
  KernelSpec spec;          // the kernel (file, fn, target, dims)
  std::string store, ns;    // where the artifact is (a store path or a `mlk serve` URL)
  std::string key;          // the artifact's cache key
  uint64_t seed = 1;        // of the random inputs
  int calls = 2;            // counted calls (after one uncounted warm-up call)
  int64_t extra_per_call = 0;  // test seam: this many more instructions a call
  // The trust list `mlk bench` loaded the artifact under (public keys, 64
  // hex): the helper reads the store again and must load under it too.
  std::vector<std::string> trusted = {};
};

struct InsnCount {
  double instructions = 0;  // per call
  double cycles = 0;        // per call; 0 when the counter does not give them (callgrind)
  std::string counter;      // "perf" or "callgrind"
};

// The counting helper: `mlk-count` in the directory of the running program.
std::string count_helper_path();

// Counts one call of the artifact `r.key`. Errors name what is missing
// (the helper, valgrind, the artifact) or the helper's own message.
Expected<InsnCount> count_instructions(const CountRequest& r);

// The change of an instruction count, "+12.5%".
std::string insn_change_text(double ratio);

}  // namespace mlk::bench
