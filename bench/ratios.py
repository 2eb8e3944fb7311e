"""The ratio table of a Google Benchmark run of build/mlk_bench_suite.

Reads the suite's JSON output (--benchmark_format=json, or --benchmark_out),
where each benchmark is named "KERNEL/VARIANT" (VARIANT: mlk, default,
Adams2019, Li2018, Mullapudi2016, openblas), and prints a Markdown table of
mlk's median time and its speedup over each peer (peer time / mlk time;
above 1: mlk is faster). With repetitions (--benchmark_repetitions=N) the
median aggregate is used, else the single run.

With --python-peers it also times a Python peer of every kernel of the suite
file, in this process: PyTorch (CPU) when `import torch` works, else numpy
(which calls OpenBLAS for matmuls), and says which. Inputs are random, of the
suite's shapes; the kernels are written independently of mlk.

usage: python bench/ratios.py GB.json [--suite bench/suite.json] [--python-peers] [--min-time S]
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS = ["default", "Adams2019", "Li2018", "Mullapudi2016", "openblas"]
UNIT_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


def read_gbench(path):
    """{kernel: {variant: (ms, label) or (None, error)}} from a Google Benchmark JSON file."""
    with open(path) as f:
        doc = json.load(f)
    out, has_median = {}, set()
    for b in doc.get("benchmarks", []):
        name = b.get("run_name", b["name"])
        if name.endswith("/real_time"):  # UseRealTime() adds it
            name = name[: -len("/real_time")]
        if "/" not in name:
            continue
        kernel, variant = name.rsplit("/", 1)
        if b.get("error_occurred"):
            out.setdefault(kernel, {})[variant] = (None, b.get("error_message", "error"))
            continue
        ms = b["real_time"] * UNIT_MS[b.get("time_unit", "ns")]
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                out.setdefault(kernel, {})[variant] = (ms, b.get("label", ""))
                has_median.add((kernel, variant))
        elif (kernel, variant) not in has_median:
            out.setdefault(kernel, {})[variant] = (ms, b.get("label", ""))
    return doc.get("context", {}), out


def median_ms(fn, min_time):
    fn()
    ts, end = [], time.perf_counter() + min_time
    while len(ts) < 3 or time.perf_counter() < end:
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)) * 1e3


def python_peer(fn, dims, rng):
    """(library name, a zero-argument callable) computing `fn` at `dims`, or None."""
    try:
        import torch
        lib, xp = f"torch {torch.__version__} (CPU, {torch.get_num_threads()} threads)", "torch"
    except ImportError:
        lib, xp = f"numpy {np.__version__} (torch is not installed)", "numpy"

    def t(*shape):
        a = rng.uniform(-1, 1, shape).astype(np.float32)
        return torch.from_numpy(a) if xp == "torch" else a

    def T(x, a, b):  # swap two axes
        return x.transpose(a, b) if xp == "torch" else np.swapaxes(x, a, b)

    def softmax(x, axis):
        if xp == "torch":
            return torch.softmax(x, dim=axis)
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)

    sqrt = torch.sqrt if xp == "torch" else np.sqrt
    tanh = torch.tanh if xp == "torch" else np.tanh
    d = dims
    if fn == "sgemm":
        a, b = t(d["M"], d["K"]), t(d["K"], d["N"])
        return lib, lambda: a @ b
    if fn == "qk_scores":
        q, k = t(d["B"], d["S"], d["E"]), t(d["B"], d["S"], d["E"])
        return lib, lambda: q @ T(k, 1, 2)
    if fn in ("softmax_builtin", "softmax_by_hand"):
        x = t(d["N"], d["C"])
        return lib, lambda: softmax(x, 1)
    if fn == "rmsnorm":
        x, w = t(d["B"], d["S"], d["D"]), t(d["D"])
        return lib, lambda: x / sqrt((x * x).mean(2, keepdims=True) + 1e-5) * w
    if fn == "layernorm":
        x, g, b = t(d["N"], d["D"]), t(d["D"]), t(d["D"])

        def ln():
            mu = x.mean(1, keepdims=True)
            xc = x - mu
            return xc / sqrt((xc * xc).mean(1, keepdims=True) + 1e-5) * g + b
        return lib, ln
    if fn == "mlp":
        x, w1, b1, w2, b2 = t(d["N"], d["D"]), t(d["D"], d["F"]), t(d["F"]), t(d["F"], d["D"]), t(d["D"])

        def mlp():
            h = x @ w1 + b1
            h = 0.5 * h * (1 + tanh(0.7978845608 * (h + 0.044715 * h * h * h)))
            return h @ w2 + b2
        return lib, mlp
    if fn == "attention":
        B, S, D, H = d["B"], d["S"], d["D"], d["H"]
        q, k, v = t(B, S, D), t(B, S, D), t(B, S, D)
        mask = np.tril(np.ones((S, S), dtype=bool))
        if xp == "torch":
            mask = torch.from_numpy(mask)

        def heads(x):
            return T(x.reshape(B, S, H, D // H), 1, 2)

        def attn():
            s = heads(q) @ T(heads(k), 2, 3) * (1.0 / math.sqrt(D // H))
            s = torch.where(mask, s, -1e30) if xp == "torch" else np.where(mask, s, np.float32(-1e30))
            return T(softmax(s, 3) @ heads(v), 1, 2).reshape(B, S, D)
        return lib, attn
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("gbench_json")
    ap.add_argument("--suite", default=os.path.join(ROOT, "bench", "suite.json"))
    ap.add_argument("--python-peers", action="store_true")
    ap.add_argument("--min-time", type=float, default=1.0, help="seconds per Python peer")
    args = ap.parse_args()
    context, results = read_gbench(args.gbench_json)
    with open(args.suite) as f:
        suite = {}
        for k in json.load(f)["kernels"]:
            dims = k.get("dims", {})
            if isinstance(dims, str):
                dims = {n: int(v) for n, v in (item.split("=") for item in dims.split(","))}
            k["dims"] = dims
            # The benchmark's name: the suite's name, else the kernel id as mlk writes it.
            kid = f"{k['fn']} [{','.join(f'{n}={dims[n]}' for n in sorted(dims))}] {k.get('target', 'host')}"
            suite[k.get("name") or kid] = k
    peers = [p for p in PEERS if any(p in v for v in results.values())]
    py_name = None
    py = {}
    if args.python_peers:
        rng = np.random.default_rng(1)
        for kernel in results:
            spec = suite.get(kernel)
            peer = spec and python_peer(spec["fn"], spec["dims"], rng)
            if peer:
                py_name, fn = peer
                print(f"[ratios] timing {kernel} with {py_name}", file=sys.stderr)
                py[kernel] = median_ms(fn, args.min_time)
    cols = peers + (["python"] if py else [])
    host = context.get("host_name", "?")
    print(f"mlk_bench_suite on {host}, {context.get('num_cpus', '?')} CPUs, {context.get('date', '')}")
    if py_name:
        print(f"python peer: {py_name}")
    print()
    print("| kernel | mlk ms | " + " | ".join(f"vs {c}" for c in cols) + " |")
    print("| --- | --- | " + " | ".join("---" for _ in cols) + " |")
    for kernel, v in results.items():
        mlk_ms, label = v.get("mlk", (None, "missing"))
        what = label.split(":")[0] if mlk_ms is not None else "failed"
        row = [kernel, f"{mlk_ms:.4g} ({what})" if mlk_ms is not None else "n/a"]
        for c in cols:
            peer_ms = py.get(kernel) if c == "python" else v.get(c, (None, ""))[0]
            row.append(f"{peer_ms / mlk_ms:.2f}x" if peer_ms and mlk_ms else "-")
        print("| " + " | ".join(row) + " |")
    print("\n(peer time / mlk time: above 1, mlk is faster; '-': not applicable or failed)")


if __name__ == "__main__":
    main()
