"""The example models, computed by `mlk run` (Halide JIT and --reference), against
independent numpy implementations.

usage: examples_vs_numpy.py MLK_BINARY EXAMPLES_DIR WORK_DIR
Prints one line per case and "N passed, M failed"; exits 1 on any failure.
"""
import math
import os
import subprocess
import sys

import numpy as np
from safetensors.numpy import load_file, save_file

MLK, EXAMPLES, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(WORK, exist_ok=True)
rng = np.random.default_rng(7)
results = []

# Tolerances of docs/numerics.md, for float32 results with short reductions.
TOL = {np.float32: (1e-4, 1e-5), np.float16: (2e-3, 2e-3), np.float64: (1e-10, 1e-10)}


def run(tl, fn, inputs, dims=None, reference=False):
    path_in = os.path.join(WORK, f"{fn}_in.safetensors")
    path_out = os.path.join(WORK, f"{fn}_out{'_ref' if reference else ''}.safetensors")
    save_file(inputs, path_in)
    cmd = [MLK, "run", os.path.join(EXAMPLES, tl), "--fn", fn, "--inputs", path_in, "--output", path_out]
    if dims:
        cmd += ["--dims", ",".join(f"{k}={v}" for k, v in dims.items())]
    if reference:
        cmd.append("--reference")
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()}")
    return load_file(path_out)["output"]


def case(name, tl, fn, inputs, expected, dims=None, tol=None):
    for reference in (False, True):
        label = f"{name} ({'reference' if reference else 'halide'})"
        try:
            got = run(tl, fn, inputs, dims, reference)
            rtol, atol = tol or TOL[expected.dtype.type]
            assert got.dtype == expected.dtype, f"dtype {got.dtype} != {expected.dtype}"
            assert got.shape == expected.shape, f"shape {got.shape} != {expected.shape}"
            if expected.dtype.kind in "iub":
                ok = np.array_equal(got, expected)
            else:
                ok = np.allclose(got.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=atol)
            err = float(np.max(np.abs(got.astype(np.float64) - expected.astype(np.float64)))) if got.size else 0.0
            assert ok, f"max abs error {err:.3g} over tolerance rtol={rtol} atol={atol}"
            results.append((label, True, f"max abs error {err:.3g}"))
        except Exception as e:  # noqa: BLE001 - report every failure and go on
            results.append((label, False, str(e)))


f32 = np.float32


def randn(*shape, dtype=f32):
    return rng.standard_normal(shape).astype(dtype)


# rmsnorm
x, w, eps = randn(2, 5, 64), randn(64), np.array(1e-5, dtype=f32)
ms = (x.astype(np.float64) ** 2).mean(axis=2, keepdims=True)
case("rmsnorm", "norms.tl", "rmsnorm", {"x": x, "w": w, "eps": eps},
     (x / np.sqrt(ms + 1e-5) * w).astype(f32))

# layernorm
x, g, b = randn(7, 33), randn(33), randn(33)
mu = x.astype(np.float64).mean(axis=1, keepdims=True)
var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
case("layernorm", "norms.tl", "layernorm", {"x": x, "gamma": g, "beta": b},
     ((x - mu) / np.sqrt(var + 1e-5) * g + b).astype(f32))


def np_softmax(z, axis):
    z = z.astype(np.float64)
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# softmax, by hand and builtin, with large logits (stability)
x = (randn(6, 40) * 30 + 500).astype(f32)
case("softmax builtin", "softmax.tl", "softmax_builtin", {"x": x}, np_softmax(x, 1).astype(f32))
case("softmax by hand", "softmax.tl", "softmax_by_hand", {"x": x}, np_softmax(x, 1).astype(f32))

# MLP with tanh-GELU
N, D, F = 6, 16, 24
x, w1, b1, w2, b2 = randn(N, D), randn(D, F) * 0.3, randn(F), randn(F, D) * 0.3, randn(D)
h = x.astype(np.float64) @ w1 + b1
h = 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h ** 3)))
case("mlp", "mlp.tl", "mlp", {"x": x, "w1": w1, "b1": b1, "w2": w2, "b2": b2}, (h @ w2 + b2).astype(f32))

# attention with causal mask
B, S, Dm, H = 2, 7, 16, 4
q, k, v = randn(B, S, Dm), randn(B, S, Dm), randn(B, S, Dm)
scale = np.array(1 / math.sqrt(Dm // H), dtype=f32)
split = lambda t: t.astype(np.float64).reshape(B, S, H, Dm // H).transpose(0, 2, 1, 3)
scores = split(q) @ split(k).transpose(0, 1, 3, 2) * scale
scores = np.where(np.tril(np.ones((S, S), dtype=bool)), scores, -1e30)
att = np_softmax(scores, 3) @ split(v)
case("attention", "attention.tl", "attention", {"q": q, "k": k, "v": v, "scale": scale},
     att.transpose(0, 2, 1, 3).reshape(B, S, Dm).astype(f32), dims={"H": H})

# batched QK^T
q, k = randn(3, 9, 8), randn(3, 9, 8)
case("qk_scores", "attention.tl", "qk_scores", {"q": q, "k": k},
     (q.astype(np.float64) @ k.astype(np.float64).transpose(0, 2, 1)).astype(f32))

# grouped-query KV expansion
kv = randn(1, 2, 3, 4)
case("expand_kv (repeat_interleave)", "attention.tl", "expand_kv", {"kv": kv}, np.repeat(kv, 3, axis=1), dims={"G": 3})

# embedding lookup (gather), F16 table
table, ids = randn(11, 6, dtype=np.float16), rng.integers(0, 11, size=(2, 5)).astype(np.int32)
case("embed (gather)", "embedding.tl", "embed", {"table": table, "ids": ids}, table[ids])

# mixed precision: F16 storage, F32 arithmetic
x, w = randn(5, 12, dtype=np.float16), randn(12, 7, dtype=np.float16)
case("project_f16 (cast)", "embedding.tl", "project_f16", {"x": x, "w": w},
     np.maximum(x.astype(np.float32) @ w.astype(np.float32), 0).astype(np.float16))

# a gather index out of range is a clear run-time error, never a silent read
try:
    run("embedding.tl", "embed", {"table": table, "ids": np.array([[0, 11]], dtype=np.int32)})
    results.append(("gather out of range (halide)", False, "no error"))
except RuntimeError as e:
    ok = "gather index 11" in str(e) and "outside [0, 11)" in str(e)
    results.append(("gather out of range (halide)", ok, str(e)[-120:]))

failed = [r for r in results if not r[1]]
for label, ok, note in results:
    print(f"{'ok  ' if ok else 'FAIL'} {label}: {note}")
print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
sys.exit(1 if failed else 0)
