"""Python call overhead of a tiny kernel: `mlk.load(...).add(a, b)` on
1-element torch tensors against `torch.add(a, b)`, both allocating their
result, on the same tensors, in one process, interleaved in rounds; and the
tuned kernel once more on the general path (`dims={}`), which the fast path
(python/fast_call.cpp: torch 2.x with DLPack's C exchange API) leaves.
Target (issue "fresh machine"): mlk at most 2x torch's overhead.

usage: /usr/bin/python3 bench/python_overhead.py BUILD_DIR [--rounds N] [--calls N]
Prints one line per contender (median ns per call over the rounds) and the
ratio, with the CPU model; docs/benchmarks.md records the result.
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

BUILD = os.path.abspath(sys.argv[1])
ROUNDS = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 15
CALLS = int(sys.argv[sys.argv.index("--calls") + 1]) if "--calls" in sys.argv else 20000
sys.path.insert(0, os.path.join(BUILD, "python"))
import torch  # noqa: E402

import mlk  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TL = os.path.join(HERE, "tiny_add.tl")
torch.set_num_threads(1)


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "?"


def per_call_ns(fn, calls):
    t0 = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    return (time.perf_counter_ns() - t0) / calls


def main():
    a, b = torch.randn(1), torch.randn(1)
    work = tempfile.mkdtemp(prefix="mlk_overhead_")
    store = os.path.join(work, "cache.db")
    # The tuned artifact (what a deployment runs) and, on an empty cache, the
    # default schedule with the JIT (what a first call runs).
    p = subprocess.run([os.path.join(BUILD, "mlk"), "tune", TL, "--fn", "add", "--dims", "N=1", "--target", "host",
                        "--trials", "1", "--no-autoschedulers", "--cache", store, "-q"], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("mlk tune failed: " + p.stderr)
    tuned = mlk.load(TL, target="host", cache=store).add
    jit = mlk.load(TL, target="host", cache=os.path.join(work, "empty.db")).add
    assert tuned.kernel(a, b).source == "exact", tuned.kernel(a, b).selection
    assert jit.kernel(a, b).source == "default-jit", jit.kernel(a, b).selection
    assert torch.equal(tuned(a, b), a + b) and torch.equal(jit(a, b), a + b)
    contenders = {"torch.add": lambda: torch.add(a, b), "mlk tuned": lambda: tuned(a, b),
                  "mlk default (JIT)": lambda: jit(a, b),
                  # dims= leaves the fast path (python/fast_call.cpp) to the general one
                  "mlk general path": lambda: tuned(a, b, dims={})}
    for f in contenders.values():  # warm-up
        per_call_ns(f, 1000)
    times = {k: [] for k in contenders}
    for _ in range(ROUNDS):
        for k, f in contenders.items():
            times[k].append(per_call_ns(f, CALLS))
    med = {k: statistics.median(v) for k, v in times.items()}
    print("CPU: %s; torch %s; %d rounds of %d calls, 1 thread" % (cpu_model(), torch.__version__, ROUNDS, CALLS))
    for k, v in med.items():
        print("%-18s %8.0f ns per call  (%.2fx torch.add)" % (k, v, v / med["torch.add"]))


if __name__ == "__main__":
    main()
