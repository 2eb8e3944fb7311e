"""all-MiniLM-L6-v2 under the bf16 policy, in one process: the model with its
weights packed once (mlk.load_model's default: each step's weights packed
into BF16 pairs by the first call) against the same model whose kernels make
the pairs from the weights within each call, as every kernel did before
packing ($MLK_PACK_WEIGHTS=off when it is loaded; docs/runtime.md),
interleaved rounds, medians. Checks that both give the same bits first.

usage: .venv-bench/bin/python bench/minilm_packed.py BUILD_DIR [--batch B] [--rounds R]
docs/benchmarks.md (M23) records the result.
"""
import os
import sys
import time

BUILD = os.path.abspath(sys.argv[1])
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(BUILD, "python"))


def arg(name, default):
    return int(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


B, ROUNDS = arg("--batch", 8), arg("--rounds", 9)

import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(2)
import mlk  # noqa: E402
from minilm_peers import MODEL_DIR, padded_batch  # noqa: E402
from peer_timing import cpu  # noqa: E402


def load():
    return mlk.load_model(os.path.join(ROOT, "examples/minilm/minilm.tl"),
                          weights=os.path.join(MODEL_DIR, "model.safetensors"), target="host",
                          precision="bf16", entry="encode")


def main():
    ids, mask = padded_batch(B, 128)
    tids, tmask = torch.from_numpy(ids), torch.from_numpy(mask)
    os.environ["MLK_PACK_WEIGHTS"] = "off"
    per_call = load()
    os.environ.pop("MLK_PACK_WEIGHTS")
    packed = load()
    a, b = np.asarray(per_call(tids, tmask)), np.asarray(packed(tids, tmask))
    print("packed once vs within each call: max |diff| %.3g" % float(np.abs(a - b).max()))
    times = {"within each call": [], "packed once": []}
    calls = max(3, 40 // B)
    for r in range(ROUNDS):
        order = [("within each call", per_call), ("packed once", packed)]
        for name, m in (order if r % 2 == 0 else order[::-1]):
            t0 = time.perf_counter()
            for _ in range(calls):
                m(tids, tmask)
            times[name].append((time.perf_counter() - t0) / calls * 1000)
    name, flags = cpu()
    print("CPU: %s (%s); batch %d x 128 tokens, %d rounds of %d calls" % (name, ", ".join(flags), B, ROUNDS, calls))
    med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
    for k, v in med.items():
        print("%-17s %8.2f ms (median)" % (k, v))
    print("packed once: %.2fx faster" % (med["within each call"] / med["packed once"]))


main()
