"""Kernel benchmark: mlk's tuned artifact against its peers, in one script.

For each kernel: `mlk tune` (into a benchmark cache), then in this process
the median time of
  - mlk tuned   (`mlk run --repeat`, the tuned artifact from the cache)
  - mlk default (`mlk run --no-cache --repeat`, the default schedule)
  - Halide's autoschedulers (their medians from the tuning log, same worker harness)
  - numpy (OpenBLAS for matmuls; numpy's own loops otherwise)
  - PyTorch CPU (Debian's python3-torch 1.13 through bench/torch_peer.py, or
    with --torch .venv-bench/bin/python PyTorch 2.x, which for attention is
    also timed with its fused scaled_dot_product_attention)
and the machine's copy bandwidth (numpy copyto of 256 MiB) for memory-bound
kernels. mlk and its peers are measured in interleaved rounds and the best
median of each is kept, since a shared machine's speed drifts. Prints a
Markdown table of times and ratios.

Run it with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (see
docs/benchmarks.md): they are set on some machines for old OpenBLAS builds
and slow a current numpy down.

usage: python bench/kernels.py MLK_BINARY [--trials N] [--time S] [--only NAME] [--torch PYTHON]
"""
import argparse
import json
import os
import subprocess
import tempfile
import time

import numpy as np
from safetensors.numpy import save_file

from peer_timing import cpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EX = os.path.join(ROOT, "examples")


def median_time(fn, min_reps=5, min_s=1.0):
    fn()
    ts, t_end = [], time.perf_counter() + min_s
    while len(ts) < min_reps or time.perf_counter() < t_end:
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)) * 1e3


def np_softmax(x):
    m = x.max(axis=1, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=1, keepdims=True)


def np_rmsnorm(x, w, eps):
    return x / np.sqrt((x * x).mean(axis=2, keepdims=True) + eps) * w


def np_layernorm(x, g, b):
    c = x - x.mean(axis=1, keepdims=True)
    return c / np.sqrt((c * c).mean(axis=1, keepdims=True) + np.float32(1e-5)) * g + b


def np_attention(q, k, v, scale, H):
    B, S, D = q.shape
    sh = lambda t: t.reshape(B, S, H, D // H).transpose(0, 2, 1, 3)  # noqa: E731
    sc = sh(q) @ sh(k).transpose(0, 1, 3, 2) * scale
    sc = np.where(np.triu(np.ones((S, S), bool), 1), np.float32(-1e30), sc)
    return (np_softmax_axis(sc, -1) @ sh(v)).transpose(0, 2, 1, 3).reshape(B, S, D)


def np_softmax_axis(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


TORCH_PYTHON = "/usr/bin/python3"


def torch_time(k, path, op=None):
    """PyTorch CPU's median (ms) of `op` (default: the kernel's fn) on the
    inputs in `path` (.npz) under TORCH_PYTHON, or None without it."""
    p = subprocess.run([TORCH_PYTHON, os.path.join(ROOT, "bench", "torch_peer.py"), op or k["fn"], path],
                       capture_output=True, text=True)
    return float(p.stdout.strip()) if p.returncode == 0 else None


def copy_bandwidth_gbs():
    a = np.ones(64 << 20, dtype=np.float32)
    b = np.empty_like(a)
    ms = median_time(lambda: np.copyto(b, a))
    return 2 * a.nbytes / (ms * 1e-3) / 1e9


def kernels(rng):
    f32 = np.float32
    r = lambda *s: rng.standard_normal(s).astype(f32)
    a1, b1 = r(1024, 1024), r(1024, 1024)
    a2, b2 = r(512, 4096), r(4096, 4096)
    sm = r(4096, 4096)
    x, w = r(8192, 1, 4096), r(4096)
    q, k = r(32, 512, 64), r(32, 512, 64)
    aq, ak, av = r(1, 512, 512), r(1, 512, 512), r(1, 512, 512)
    return [
        dict(name="sgemm 1024^3", tl="mlp.tl", fn="sgemm", dims="M=1024,K=1024,N=1024",
             inputs={"a": a1, "b": b1}, peer=("numpy/OpenBLAS", lambda: a1 @ b1), flops=2 * 1024 ** 3),
        dict(name="sgemm 512x4096x4096", tl="mlp.tl", fn="sgemm", dims="M=512,K=4096,N=4096",
             inputs={"a": a2, "b": b2}, peer=("numpy/OpenBLAS", lambda: a2 @ b2), flops=2 * 512 * 4096 * 4096),
        dict(name="softmax [4096, 4096]", tl="softmax.tl", fn="softmax_builtin", dims="N=4096,C=4096",
             inputs={"x": sm}, peer=("numpy", lambda: np_softmax(sm)), bytes=2 * sm.nbytes),
        dict(name="rmsnorm [8192, 4096]", tl="norms.tl", fn="rmsnorm", dims="B=8192,S=1,D=4096",
             inputs={"x": x, "w": w, "eps": np.array(1e-5, f32)},
             peer=("numpy", lambda: np_rmsnorm(x, w, f32(1e-5))), bytes=2 * x.nbytes),
        dict(name="layernorm [8192, 4096]", tl="norms.tl", fn="layernorm", dims="N=8192,D=4096",
             inputs={"x": x.reshape(8192, 4096), "gamma": w, "beta": w[::-1].copy()},
             peer=("numpy", lambda: np_layernorm(x.reshape(8192, 4096), w, w[::-1])), bytes=2 * x.nbytes),
        dict(name="batched QK^T [32, 512, 64]", tl="attention.tl", fn="qk_scores", dims="B=32,S=512,E=64",
             inputs={"q": q, "k": k}, peer=("numpy/OpenBLAS", lambda: q @ k.transpose(0, 2, 1)),
             flops=2 * 32 * 512 * 512 * 64),
        dict(name="attention [1, 512, 512], 8 heads", tl="attention.tl", fn="attention", dims="B=1,S=512,D=512,H=8",
             run_dims=["--dims", "H=8"], inputs={"q": aq, "k": ak, "v": av, "scale": np.array(0.125, f32)},
             peer=("numpy", lambda: np_attention(aq, ak, av, f32(0.125), 8)), flops=4 * 512 * 512 * 512),
    ]


def mlk_time(mlk, k, inp, extra):
    out = os.path.join(os.path.dirname(inp), "out.safetensors")
    p = subprocess.run([mlk, "run", os.path.join(EX, k["tl"]), "--fn", k["fn"], "--inputs", inp, "--output", out,
                        "--repeat", "20", *k.get("run_dims", []), *extra], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(p.stderr)
    line = [l for l in p.stdout.splitlines() if "median" in l][0]
    return float(line.split("median ")[1].split(" ms")[0]), line


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mlk")
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--time", type=int, default=150)
    ap.add_argument("--only")
    ap.add_argument("--torch", default=TORCH_PYTHON, help="the python whose torch is the PyTorch peer")
    args = ap.parse_args()
    globals()["TORCH_PYTHON"] = args.torch
    tv = subprocess.run([args.torch, os.path.join(ROOT, "bench", "torch_peer.py"), "--version"], capture_output=True,
                        text=True).stdout.strip() or "none"
    print(f"PyTorch peer: {tv} ({args.torch}); CPU: {cpu()}")
    work = tempfile.mkdtemp(prefix="mlk-bench-")
    store = os.path.join(work, "cache.db")
    rng = np.random.default_rng(0)
    bw = copy_bandwidth_gbs()
    print(f"copy bandwidth (numpy copyto, 256 MiB): {bw:.1f} GB/s\n")
    rows = []
    for k in kernels(rng):
        if args.only and args.only not in k["name"]:
            continue
        inp = os.path.join(work, "in.safetensors")
        save_file(k["inputs"], inp)
        t0 = time.time()
        p = subprocess.run([args.mlk, "tune", os.path.join(EX, k["tl"]), "--fn", k["fn"], "--dims", k["dims"],
                            "--target", "host", "--trials", str(args.trials), "--time", str(args.time),
                            "--cache", store, "--json", "-q"], capture_output=True, text=True)
        tune_s = time.time() - t0
        if p.returncode != 0:
            print(f"{k['name']}: tune failed: {p.stderr[-500:]}")
            continue
        summary = json.loads(p.stdout.strip().splitlines()[-1])[0]
        log = os.path.join(store + ".work", summary["key"] + ".tuning.jsonl")
        autos = {}
        with open(log) as f:
            for line in f:
                t = json.loads(line)
                a = t.get("schedule", {}).get("autoscheduler")
                if a and t.get("verdict") == "ok":
                    autos[a] = t["median_ms"]
        # Interleaved rounds, best median of each: this machine's speed drifts
        # (shared cores), and drift must hit mlk and its peers alike.
        peer_name, peer_fn = k["peer"]
        tuned = default = peer = torch_ms = sdpa_ms = float("inf")
        npz = os.path.join(work, "in.npz")
        np.savez(npz, **k["inputs"])
        for _ in range(3):
            tuned = min(tuned, mlk_time(args.mlk, k, inp, ["--cache", store])[0])
            default = min(default, mlk_time(args.mlk, k, inp, ["--no-cache"])[0])
            peer = min(peer, median_time(peer_fn))
            t = torch_time(k, npz)
            torch_ms = min(torch_ms, t) if t is not None else torch_ms
            if k["fn"] == "attention":
                t = torch_time(k, npz, "attention_sdpa")
                sdpa_ms = min(sdpa_ms, t) if t is not None else sdpa_ms
        best_auto = min(autos.values()) if autos else float("nan")
        row = dict(kernel=k["name"], tuned=tuned, default=default, peer=peer, peer_name=peer_name, torch=torch_ms,
                   auto=best_auto, autos=autos, tune_s=tune_s, winner=summary.get("best_origin"), torch_sdpa=sdpa_ms)
        if "flops" in k:
            row["gflops"] = k["flops"] / (tuned * 1e-3) / 1e9
        if "bytes" in k:
            row["gbs"] = k["bytes"] / (tuned * 1e-3) / 1e9
        rows.append(row)
        print(json.dumps(row), flush=True)
    print("\n| kernel | mlk tuned ms | default ms | best Halide autoscheduler ms | peer ms (peer) | PyTorch ms | tuned vs peer | tuned vs PyTorch | tuned vs best autoscheduler | throughput | tuning time | winner |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        thr = f"{r['gflops']:.1f} GFLOP/s" if "gflops" in r else f"{r['gbs']:.1f} GB/s ({100 * r['gbs'] / bw:.0f}% of copy)"
        print(f"| {r['kernel']} | {r['tuned']:.3f} | {r['default']:.3f} | {r['auto']:.3f} | {r['peer']:.3f} ({r['peer_name']}) "
              f"| {r['torch']:.3f} | {r['peer'] / r['tuned']:.2f}x | {r['torch'] / r['tuned']:.2f}x | {r['auto'] / r['tuned']:.2f}x "
              f"| {thr} | {r['tune_s']:.0f} s | {r['winner']} |")


if __name__ == "__main__":
    main()
