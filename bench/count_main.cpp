// mlk-count: the helper that `mlk bench --count-instructions` runs
// (bench/insn_count.h). Prepares one kernel exactly as `mlk bench` does (the
// artifact stored under --key, the same random inputs for --seed), makes one
// uncounted call, then counts --calls calls: with `--counter perf` by the
// CPU's counters (prints `instructions N` and `cycles N`; exit 4 when this
// machine gives none), with `--counter none` not at all, for callgrind to
// count the function mlk_counted_calls. Exit 1 with a message on stderr on
// any other failure.
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>

#include "base/signing.h"
#include "bench/suite.h"
#include "bench/variants.h"

namespace {

// The calls that are counted, and the test seam's extra instructions (a loop
// the compiler must keep: 3 instructions an iteration).
extern "C" __attribute__((noinline)) int mlk_counted_calls(mlk::bench::Variant* v, int calls, int64_t extra) {
  for (int i = 0; i < calls; ++i) {
    if (!v->run().ok()) return 1;
    for (int64_t j = 0; j < extra / 3; ++j) asm volatile("" ::: "memory");
  }
  return 0;
}

int open_counter(uint64_t config, int group) {
  perf_event_attr a;
  std::memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.type = PERF_TYPE_HARDWARE;
  a.config = config;
  a.disabled = group < 0;
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  return static_cast<int>(syscall(SYS_perf_event_open, &a, 0, -1, group, 0));
}

int fail(const std::string& m) {
  std::fprintf(stderr, "mlk-count: %s\n", m.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> a;
  for (int i = 1; i + 1 < argc; i += 2) a[argv[i]] = argv[i + 1];
  for (const char* need : {"--file", "--fn", "--target", "--key", "--counter"})
    if (!a.count(need)) return fail(std::string("missing ") + need);
  mlk::bench::KernelSpec spec{"", a["--file"], a["--fn"], a["--target"], {}, ""};
  std::stringstream ds(a["--dims"]);
  for (std::string item; std::getline(ds, item, ',');)
    if (auto eq = item.find('='); eq != std::string::npos) spec.dims[item.substr(0, eq)] = std::atoll(item.c_str() + eq + 1);
  const int calls = a.count("--calls") ? std::max(1, std::atoi(a["--calls"].c_str())) : 2;
  const int64_t extra = a.count("--extra") ? std::atoll(a["--extra"].c_str()) : 0;
  int leader = -1, cycles = -1;
  if (a["--counter"] == "perf") {
    leader = open_counter(PERF_COUNT_HW_INSTRUCTIONS, -1);
    if (leader < 0) return 4;  // no CPU counters here: the caller falls back to callgrind
    cycles = open_counter(PERF_COUNT_HW_CPU_CYCLES, leader);
  }
  auto k = mlk::bench::PreparedKernel::Resolve(spec);
  if (!k.ok()) return fail(k.status().message());
  mlk::bench::PrepareOptions po;
  po.store_path = a["--store"];
  po.ns = a.count("--ns") ? a["--ns"] : "default";
  po.artifact_key = a["--key"];
  po.seed = a.count("--seed") ? std::strtoull(a["--seed"].c_str(), nullptr, 10) : 1;
  // The parent's trust list: this process reads the store again (an entry
  // evicted meanwhile is pulled anew), so it checks the signature itself.
  if (a.count("--trusted")) {
    auto keys = mlk::parse_trusted_keys(a["--trusted"]);
    if (!keys.ok()) return fail("--trusted: " + keys.status().message());
    po.trusted = *keys;
  }
  if (auto s = (*k)->Prepare(po); !s.ok()) return fail(s.message());
  mlk::bench::Variant& v = (*k)->mlk();
  if (auto s = v.run(); !s.ok()) return fail(s.message());  // warm-up: first-call costs are not the kernel's
  if (leader >= 0) {
    ioctl(leader, PERF_EVENT_IOC_RESET, PERF_IOC_FLAG_GROUP);
    ioctl(leader, PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP);
  }
  int rc = mlk_counted_calls(&v, calls, extra);
  if (leader >= 0) {
    ioctl(leader, PERF_EVENT_IOC_DISABLE, PERF_IOC_FLAG_GROUP);
    uint64_t n = 0, c = 0;
    if (read(leader, &n, sizeof n) != sizeof n) return fail("cannot read the instruction counter");
    if (cycles >= 0 && read(cycles, &c, sizeof c) != sizeof c) c = 0;
    std::printf("instructions %llu\ncycles %llu\n", static_cast<unsigned long long>(n), static_cast<unsigned long long>(c));
  }
  return rc ? fail("the kernel failed") : 0;
}
