"""The value and gradients of a two-layer MLP's loss (bench/grad_mlp.tl, the
`value_and_grad` transform: one public fn with five results) through mlk's runtime against
PyTorch autograd's forward + backward on the same inputs, the same thread
count, in one process, interleaved in rounds; the best median per contender.
The gradients are checked against autograd's first.

usage: .venv/bin/python bench/grad_mlp.py [--threads N] [--rounds R]   (the installed mlk package)
       (tune first: build/mlk tune bench/grad_mlp.tl --target host --budget 240 --cache C.db,
        then run with MLK_CACHE=C.db)
"""
import os
import sys


def arg(name, default):
    return int(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


THREADS, ROUNDS = arg("--threads", 2), arg("--rounds", 5)
N, D, F = 256, 512, 2048
HERE = os.path.dirname(os.path.abspath(__file__))

import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(THREADS)
import mlk  # noqa: E402
from peer_timing import cpu, median_ms  # noqa: E402


def main():
    torch.manual_seed(0)
    x, y = torch.randn(N, D), torch.randn(N, D)
    w1, b1 = torch.randn(D, F) / D ** 0.5, torch.randn(F) * 0.1
    w2, b2 = torch.randn(F, D) / F ** 0.5, torch.randn(D) * 0.1
    params = [w1, b1, w2, b2]
    ops = mlk.load(os.path.join(HERE, "grad_mlp.tl"), target="host", cache=os.environ.get("MLK_CACHE", ""))
    args = [t.numpy() for t in (x, w1, b1, w2, b2, y)]

    def mlk_step():
        return list(ops.step(*args))

    def torch_step():
        ps = [p.clone().requires_grad_(True) for p in params]
        h = torch.nn.functional.gelu(x @ ps[0] + ps[1], approximate="tanh")
        loss = ((h @ ps[2] + ps[3] - y) ** 2).mean()
        return [loss.detach()] + list(torch.autograd.grad(loss, ps))

    got, want = mlk_step(), torch_step()
    names = ["loss", "d_w1", "d_b1", "d_w2", "d_b2"]
    for name, g, w in zip(names, got, want):
        g = torch.as_tensor(np.asarray(g))
        rel = (g - w).abs().max().item() / max(w.abs().max().item(), 1e-30)
        print("%-5s max |mlk - autograd| / max |autograd| = %.2e" % (name, rel))
        if rel > 1e-3:
            sys.exit("mlk's %s differs from autograd's: not timing" % name)
    print("mlk kernel:", ops.step.kernel(*args).selection)
    contenders = {"mlk (1 fn)": mlk_step, "PyTorch autograd": torch_step}
    for fn in contenders.values():
        fn()
    best = {k: float("inf") for k in contenders}
    for _ in range(ROUNDS):
        for k, fn in contenders.items():
            best[k] = min(best[k], median_ms(fn, 5))
    name, flags = cpu()
    print("CPU: %s (%s), %d threads; N=%d D=%d F=%d; torch %s" % (name, ", ".join(flags), THREADS, N, D, F,
                                                                  torch.__version__))
    for k, v in best.items():
        print("%-17s %8.2f ms   mlk is %.2fx faster" % (k, v, v / best["mlk (1 fn)"]))


main()
