"""PyTorch CPU as a peer of bench/kernels.py: times one kernel on the inputs
of an .npz file and prints the median in ms. Runs under Debian's python3 with
python3-torch (the .venv has no torch: PyPI's wheels pull the CUDA stack), or
under .venv-bench's python for PyTorch 2.x (bench/setup_peers.sh), where
`attention_sdpa` (torch.nn.functional.scaled_dot_product_attention, causal,
PyTorch's fused CPU attention) exists too. `--version` prints torch's version.

usage: PYTHON bench/torch_peer.py KERNEL INPUTS.npz
       PYTHON bench/torch_peer.py --version
"""
import sys
import time

import numpy as np
import torch


def median_ms(fn, min_reps=5, min_s=1.0):
    fn()
    ts, end = [], time.perf_counter() + min_s
    while len(ts) < min_reps or time.perf_counter() < end:
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)) * 1e3


def attention(q, k, v, scale, H):
    B, S, D = q.shape
    sh = lambda t: t.reshape(B, S, H, D // H).transpose(1, 2)  # noqa: E731
    sc = sh(q) @ sh(k).transpose(-1, -2) * scale
    sc = sc.masked_fill(torch.triu(torch.ones(S, S, dtype=torch.bool), 1), -1e30)
    return (torch.softmax(sc, -1) @ sh(v)).transpose(1, 2).reshape(B, S, D)


def attention_sdpa(q, k, v, scale, H):
    B, S, D = q.shape
    sh = lambda t: t.reshape(B, S, H, D // H).transpose(1, 2)  # noqa: E731
    o = torch.nn.functional.scaled_dot_product_attention(sh(q), sh(k), sh(v), is_causal=True, scale=float(scale))
    return o.transpose(1, 2).reshape(B, S, D)


def main():
    if sys.argv[1] == "--version":
        print(torch.__version__)
        return
    name, path = sys.argv[1], sys.argv[2]
    t = {k: torch.from_numpy(v) for k, v in np.load(path).items()}
    ops = {
        "sgemm": lambda: t["a"] @ t["b"],
        "softmax_builtin": lambda: torch.softmax(t["x"], -1),
        "rmsnorm": lambda: t["x"] * torch.rsqrt(t["x"].pow(2).mean(-1, keepdim=True) + t["eps"]) * t["w"],
        "layernorm": lambda: torch.nn.functional.layer_norm(t["x"], t["x"].shape[-1:], t["gamma"], t["beta"], 1e-5),
        "qk_scores": lambda: t["q"] @ t["k"].transpose(1, 2),
        "attention": lambda: attention(t["q"], t["k"], t["v"], t["scale"], 8),
        "attention_sdpa": lambda: attention_sdpa(t["q"], t["k"], t["v"], t["scale"], 8),
    }
    with torch.no_grad():
        print("%.6f" % median_ms(ops[name]))


if __name__ == "__main__":
    main()
