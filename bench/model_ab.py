"""Two ways of writing one model, timed side by side: all-MiniLM-L6-v2 as
examples/minilm/minilm.tl writes it now (records, std.nn, the binding derived
from its entry fn) against another program and its binding file, e.g. the
same model as it was written before records (a .tl file and a
.binding.json). Same weights, same padded token batch, same thread count,
interleaved rounds in one process; the best median per contender. The
embeddings of the two are checked against each other first.

usage: .venv/bin/python bench/model_ab.py --a-program OLD.tl --a-binding OLD.binding.json
           [--b-program examples/minilm/minilm.tl] [--b-entry encode] [--batch B] [--seq S] [--rounds R]
       the cache is $MLK_CACHE (tune each program's `layer` into it first for tuned numbers);
       docs/benchmarks.md records the result and the commands.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import mlk  # noqa: E402
from minilm_peers import MODEL_DIR, padded_batch  # noqa: E402
from peer_timing import cpu, median_ms  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a-program", required=True)
    ap.add_argument("--a-binding", default=None)
    ap.add_argument("--a-entry", default=None)
    ap.add_argument("--b-program", default=os.path.join(ROOT, "examples", "minilm", "minilm.tl"))
    ap.add_argument("--b-binding", default=None)
    ap.add_argument("--b-entry", default="encode")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    cache = os.environ.get("MLK_CACHE", "")
    w = os.path.join(MODEL_DIR, "model.safetensors")
    ids, mask = padded_batch(a.batch, a.seq)
    models = {
        "A " + os.path.basename(a.a_program): mlk.load_model(a.a_program, weights=w, binding=a.a_binding,
                                                             entry=a.a_entry, target="host", cache=cache),
        "B " + os.path.basename(a.b_program): mlk.load_model(a.b_program, weights=w, binding=a.b_binding,
                                                             entry=a.b_entry, target="host", cache=cache),
    }
    outs = {k: np.asarray(m(ids, mask)) for k, m in models.items()}
    (ka, oa), (kb, ob) = outs.items()
    cos = float(np.min(np.sum(oa * ob, axis=1) / (np.linalg.norm(oa, axis=1) * np.linalg.norm(ob, axis=1))))
    print("A vs B: max |diff| %.2e, min cosine %.9f" % (float(np.max(np.abs(oa - ob))), cos))
    if cos < 0.99999:
        sys.exit("model_ab.py: the two programs disagree (min cosine %.9f)" % cos)
    for k, m in models.items():
        print("%s kernels: %s" % (k, sorted(set(m.selections(ids, mask)))))
    calls = {k: (lambda m=m: m(ids, mask)) for k, m in models.items()}
    for fn in calls.values():
        fn()
    best = {k: float("inf") for k in calls}
    for _ in range(a.rounds):
        for k, fn in calls.items():
            best[k] = min(best[k], median_ms(fn, 5))
    name, flags = cpu()
    print("CPU: %s (%s); batch %d x %d tokens; %s threads" % (name, ", ".join(flags), a.batch, a.seq,
                                                             os.environ.get("OMP_NUM_THREADS", "all")))
    for k, v in best.items():
        print("%-28s %8.2f ms" % (k, v))
    print("B / A time: %.3f (below 1: B is faster)" % (best[kb] / best[ka]))


main()
