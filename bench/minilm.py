"""all-MiniLM-L6-v2 sentence embeddings: mlk (mlk.load_model on the real
weights, each step tuned at the shape when the cache has it) against the
peers of bench/minilm_peers.py (PyTorch eager, torch.compile, ONNX Runtime,
OpenVINO f32; OpenVINO bf16 and PyTorch autocast(bfloat16) where the CPU has
AVX512_BF16 or AMX, and so mlk under its bf16 precision policy,
docs/numerics.md), all on the same padded token batch, the same thread
count, in one process, interleaved in rounds; the best median per contender.

usage: .venv-bench/bin/python bench/minilm.py BUILD_DIR [--batch B] [--seq S] [--threads N] [--rounds R] [--bf16]
                                                       [--first-call-only] [--shipped] [--rules]
       (bench/setup_peers.sh installs .venv-bench; tune first with
        build/mlk tune examples/minilm/minilm.tl --target host --budget 150, and for mlk bf16 the same
        with --precision bf16; --bf16 runs mlk bf16 on a CPU without native BF16 products too)
--first-call-only: stop after mlk's first call (the time of a process's first
call; a second run on the same $MLK_CACHE loads the JIT store's kernels).
--shipped adds "mlk shipped": the model on an empty cache of its own, so that
each step runs the schedule shipped for this CPU family where there is one
(docs/runtime.md); --rules adds "mlk rules": the same with the shipped
schedules off ($MLK_SHIPPED_SCHEDULES=off), the rules' default everywhere
(what a family nothing was shipped for runs). Their kernels are listed.
Prints one line per contender (ms per batch, its ratio to mlk) with the CPU
model and flags; docs/benchmarks.md records the result.
"""
import os
import sys
import tempfile
import time

BUILD = os.path.abspath(sys.argv[1])


def arg(name, default):
    return int(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


B, S, THREADS, ROUNDS = arg("--batch", 8), arg("--seq", 128), arg("--threads", 2), arg("--rounds", 5)
sys.path.insert(0, os.path.join(BUILD, "python"))
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(THREADS)
os.environ.setdefault("OMP_NUM_THREADS", str(THREADS))
import mlk  # noqa: E402
from minilm_peers import MODEL_DIR, has_bf16, min_cosine, padded_batch, peers, race  # noqa: E402
from peer_timing import cpu  # noqa: E402


def main():
    ids, mask = padded_batch(B, S)
    tids, tmask = torch.from_numpy(ids), torch.from_numpy(mask)
    contenders, want = peers(ids, mask, THREADS)

    def load(precision, cache=""):
        return mlk.load_model(os.path.join(ROOT, "examples/minilm/minilm.tl"),
                              weights=os.path.join(MODEL_DIR, "model.safetensors"), target="host",
                              precision=precision, entry="encode", cache=cache)

    t0 = time.perf_counter()
    model = load("f32")

    def mlk_call():
        return model(tids, tmask)

    got = torch.as_tensor(np.asarray(mlk_call()))
    first = time.perf_counter() - t0
    print("mlk first call (load_model + first call; what the cache lacks is compiled now): %.2f s" % first)
    print("mlk vs PyTorch: max |diff| %.2e, min cosine %.9f" % ((want - got).abs().max().item(),
                                                                min_cosine(want, got)))
    print("mlk kernels:", model.selections(tids, tmask))
    if "--first-call-only" in sys.argv:
        return
    contenders = {"mlk": mlk_call, **contenders}
    for flag, name, shipped in (("--shipped", "mlk shipped", ""), ("--rules", "mlk rules", "off")):
        if flag not in sys.argv:
            continue
        work = tempfile.mkdtemp(prefix="minilm-")
        os.chmod(work, 0o700)
        os.environ["MLK_SHIPPED_SCHEDULES"] = shipped  # read at each step's first call
        m = load("f32", cache=os.path.join(work, "cache.db"))
        t0 = time.perf_counter()
        o = torch.as_tensor(np.asarray(m(tids, tmask)))
        print("%s first call: %.2f s; min cosine vs PyTorch %.9f" % (name, time.perf_counter() - t0, min_cosine(want, o)))
        print("%s kernels:" % name, m.selections(tids, tmask))
        os.environ.pop("MLK_SHIPPED_SCHEDULES")
        contenders[name] = (lambda mm: lambda: mm(tids, tmask))(m)
    if has_bf16() or "--bf16" in sys.argv:
        t0 = time.perf_counter()
        model16 = load("bf16")

        def mlk_bf16_call():
            return model16(tids, tmask)

        o = torch.as_tensor(np.asarray(mlk_bf16_call()))
        print("mlk bf16 first call: %.2f s" % (time.perf_counter() - t0))
        print("mlk bf16 vs PyTorch F32: max |diff| %.2e, min cosine %.6f; vs mlk F32: min cosine %.6f" % (
            (o - want).abs().max().item(), min_cosine(want, o), min_cosine(got, o)))
        print("mlk bf16 kernels:", model16.selections(tids, tmask))
        contenders["mlk bf16"] = mlk_bf16_call

    best = race(contenders, ROUNDS)
    name, flags = cpu()
    print("CPU: %s (%s), %d threads; batch %d x %d tokens; torch %s" % (name, ", ".join(flags), THREADS, B, S,
                                                                          torch.__version__))
    for k, v in best.items():
        print("%-14s %8.2f ms   mlk is %.2fx faster" % (k, v, v / best["mlk"]))
    peer = min((k for k in best if not k.startswith("mlk") and "bf16" not in k), key=lambda k: best[k])
    print("best F32 peer: %s, %.2f ms; mlk / best peer: %.2fx" % (peer, best[peer], best[peer] / best["mlk"]))
    if "mlk bf16" in best:
        peers16 = [k for k in best if not k.startswith("mlk") and "bf16" in k]
        if peers16:
            p16 = min(peers16, key=lambda k: best[k])
            print("best bf16 peer: %s, %.2f ms; mlk bf16 / best bf16 peer: %.2fx" % (
                p16, best[p16], best[p16] / best["mlk bf16"]))
        print("mlk bf16 / mlk F32: %.2fx" % (best["mlk"] / best["mlk bf16"]))


main()
