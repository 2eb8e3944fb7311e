"""What the Python benchmarks against peers share: the CPU as /proc/cpuinfo
names it (model and the vector flags that matter), and a median time."""
import statistics
import time


def cpu():
    """(model name, [present flags among avx2, fma, f16c, avx512f, avx512_bf16, avx512_fp16, amx_bf16])."""
    name, flags = "?", []
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            name = line.split(":", 1)[1].strip()
        if line.startswith("flags"):
            have = line.split(":", 1)[1].split()
            flags = [f for f in ("avx2", "fma", "f16c", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16") if f in have]
            break
    return name, flags


# Thread pools spin after their last task before they sleep (OpenMP's
# blocktime in MKL's and PyTorch's, OpenBLAS's and ONNX Runtime's own): a
# contender timed right after another shares the cores with the other's
# spinning threads. Each timed block therefore starts after SETTLE_S of
# sleep and one untimed call.
SETTLE_S = 0.3


def median_ms(fn, reps):
    """The median of `reps` timed calls of fn(), in milliseconds, after the
    previous contender's threads have settled (SETTLE_S) and one untimed call."""
    time.sleep(SETTLE_S)
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)
