"""SGEMM: mlk's tuned kernel (examples/mlp.tl `sgemm`, from the artifact
cache, exactly at the shape) against MKL (through PyTorch 2.x) and OpenBLAS
(through numpy), on the same matrices, both cores each, in one process,
interleaved in rounds; the best median per contender.

usage: .venv-bench/bin/python bench/sgemm_peers.py BUILD_DIR CACHE [--rounds R] [--target PROFILE] [--shapes M,K,N ...]
       (tune first: build/mlk tune examples/mlp.tl --fn sgemm --target PROFILE --dims M=1024,K=1024,N=1024 --cache CACHE)
--target: the profile of mlk's artifact (default host). For AVX2 code on an
AVX-512 machine, give cpu_avx2 and restrict the peers the same way:
MKL_ENABLE_INSTRUCTIONS=AVX2 OPENBLAS_CORETYPE=Haswell.
Prints per shape the milliseconds and GFLOP/s of each contender and mlk's
ratio to the best peer, with the CPU model and flags; docs/benchmarks.md
records the result.
"""
import os
import sys

BUILD, CACHE = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
ROUNDS = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 5
TARGET = sys.argv[sys.argv.index("--target") + 1] if "--target" in sys.argv else "host"
SHAPES = [(1024, 1024, 1024), (512, 4096, 4096)]
if "--shapes" in sys.argv:
    SHAPES = [tuple(int(x) for x in s.split(",")) for s in sys.argv[sys.argv.index("--shapes") + 1:]]
sys.path.insert(0, os.path.join(BUILD, "python"))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")
import numpy as np  # noqa: E402
import torch  # noqa: E402

import mlk  # noqa: E402
from peer_timing import cpu, median_ms  # noqa: E402

torch.set_num_threads(2)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ops = mlk.load(os.path.join(ROOT, "examples/mlp.tl"), target=TARGET, cache=CACHE, require="exact")
    name, flags = cpu()
    print("CPU: %s (%s); mlk target %s; torch %s (MKL %s); numpy %s; 2 threads each; MKL_ENABLE_INSTRUCTIONS=%s "
          "OPENBLAS_CORETYPE=%s" % (name, ", ".join(flags), TARGET, torch.__version__, torch.backends.mkl.is_available(),
                                    np.__version__, os.environ.get("MKL_ENABLE_INSTRUCTIONS", "-"),
                                    os.environ.get("OPENBLAS_CORETYPE", "-")))
    for (m, k, n) in SHAPES:
        a, b = torch.randn(m, k), torch.randn(k, n)
        an, bn = a.numpy(), b.numpy()
        got = ops.sgemm(a, b)
        err = (got - a @ b).abs().max().item()
        print("%dx%dx%d: mlk kernel %s; max |mlk - MKL| %.2e" % (m, k, n, ops.sgemm.kernel(a, b).source, err))
        # Each allocates its result, as a call from Python does (mlk's
        # functions return a new tensor).
        contenders = {"mlk": lambda: ops.sgemm(a, b), "MKL (torch)": lambda: torch.matmul(a, b),
                      "OpenBLAS (numpy)": lambda: np.matmul(an, bn)}
        for f in contenders.values():
            f()
        best = {c: float("inf") for c in contenders}
        for _ in range(ROUNDS):
            for c, f in contenders.items():
                best[c] = min(best[c], median_ms(f, 7))
        peer = min(v for c, v in best.items() if c != "mlk")
        for c, v in best.items():
            print("  %-18s %8.2f ms  %6.1f GFLOP/s" % (c, v, 2.0 * m * k * n / v / 1e6))
        print("  mlk / best peer: %.2fx" % (peer / best["mlk"]))


main()
