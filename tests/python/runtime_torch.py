"""The mlk Python module from PyTorch: per-block golden tests against torch
(rmsnorm, softmax, attention, MLP, and F16 / mixed precision), a migration test
(one block of a torch model replaced by an mlk kernel), and bad calls, each a
clear Python exception. Runs in the venv (the installed mlk package, PyTorch 2.x).

usage: runtime_torch.py MLK_BINARY EXAMPLES_DIR MODULE_DIR WORK_DIR
"""
import os
import shutil
import subprocess
import sys

MLK, EXAMPLES, MODULE_DIR, WORK = sys.argv[1:5]
if MODULE_DIR != "-":  # "-": the installed mlk package
    sys.path.insert(0, MODULE_DIR)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import mlk  # noqa: E402

shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
store = os.path.join(WORK, "cache.db")
results = []
torch.manual_seed(0)


def check(name, cond, note=""):
    results.append((name, bool(cond), note))


def tune(tl, fn, dims):
    p = subprocess.run([MLK, "tune", os.path.join(EXAMPLES, tl), "--fn", fn, "--dims", dims, "--target", "host",
                        "--trials", "1", "--time", "20", "--cache", store, "-q"], capture_output=True, text=True)
    check("tune %s" % fn, p.returncode == 0, p.stderr[-400:])


tune("norms.tl", "rmsnorm", "B=2,S=16,D=64")
tune("softmax.tl", "softmax_builtin", "N=32,C=64")
tune("attention.tl", "attention", "B=1,S=16,D=32,H=4")
tune("mlp.tl", "mlp", "N=16,D=32,F=64")
tune("embedding.tl", "project_f16", "N=16,D=32,F=24")

norms = mlk.load(os.path.join(EXAMPLES, "norms.tl"), target="host", cache=store)
softmax = mlk.load(os.path.join(EXAMPLES, "softmax.tl"), target="host", cache=store)
attn = mlk.load(os.path.join(EXAMPLES, "attention.tl"), target="host", cache=store)
mlp = mlk.load(os.path.join(EXAMPLES, "mlp.tl"), target="host", cache=store)
emb = mlk.load(os.path.join(EXAMPLES, "embedding.tl"), target="host", cache=store)

# Tolerance envelopes per dtype (docs/numerics.md): F32 results of short
# reductions, F16 results rounded once from F32 accumulation.
TOL = {torch.float32: dict(rtol=2e-5, atol=2e-5), torch.float16: dict(rtol=2e-3, atol=2e-3)}


def close(name, got, want):
    ok = isinstance(got, torch.Tensor) and got.dtype == want.dtype and got.shape == want.shape and \
        torch.allclose(got, want, **TOL[want.dtype])
    err = (got.float() - want.float()).abs().max().item() if isinstance(got, torch.Tensor) and got.shape == want.shape else None
    check(name, ok, "max abs err %s, dtype %s" % (err, getattr(got, "dtype", type(got))))


# --- golden per block ---------------------------------------------------------
x, w = torch.randn(2, 16, 64), torch.randn(64)
eps = 1e-6
close("rmsnorm vs torch", norms.rmsnorm(x, w, eps), x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w)
k = norms.rmsnorm.kernel(x, w, eps)
check("selection says exact", "tuned at exactly B=2,D=64,S=16" in k.selection, k.selection)
x2 = torch.randn(3, 5, 48)
w2 = torch.randn(48)
close("rmsnorm at another shape", norms.rmsnorm(x2, w2, eps),
      x2 * torch.rsqrt(x2.pow(2).mean(-1, keepdim=True) + eps) * w2)

s = torch.randn(32, 64) * 4
close("softmax vs torch", softmax.softmax_builtin(s), torch.softmax(s, dim=-1))

q, kk, v = torch.randn(1, 16, 32), torch.randn(1, 16, 32), torch.randn(1, 16, 32)
scale = 32 ** -0.5 * 2


def torch_attention(q, k, v, scale, H):
    B, S, D = q.shape
    sh = lambda t: t.reshape(B, S, H, D // H).transpose(1, 2)  # noqa: E731
    sc = sh(q) @ sh(k).transpose(-1, -2) * scale
    sc = sc.masked_fill(torch.triu(torch.ones(S, S, dtype=torch.bool), 1), -1e30)
    return (torch.softmax(sc, -1) @ sh(v)).transpose(1, 2).reshape(B, S, D)


close("attention vs torch", attn.attention(q, kk, v, scale, dims={"H": 4}), torch_attention(q, kk, v, scale, 4))

xm, w1, b1, w2m, b2 = torch.randn(16, 32), torch.randn(32, 64) * 0.2, torch.randn(64), torch.randn(64, 32) * 0.2, torch.randn(32)
close("mlp vs torch", mlp.mlp(xm, w1, b1, w2m, b2), F.gelu(xm @ w1 + b1, approximate="tanh") @ w2m + b2)

xh, wh = torch.randn(16, 32).half(), (torch.randn(32, 24) * 0.2).half()
close("F16 projection (F32 accumulation) vs torch", emb.project_f16(xh, wh), torch.relu(xh.float() @ wh.float()).half())

# --- migration: one block of a torch model replaced by the mlk kernel ----------
class RMSNorm(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class MlkRMSNorm(torch.nn.Module):
    def __init__(self, ref):
        super().__init__()
        self.weight = ref.weight

    def forward(self, x):
        return norms.rmsnorm(x.contiguous(), self.weight.detach(), 1e-6)


model = torch.nn.Sequential(torch.nn.Linear(64, 64), RMSNorm(64), torch.nn.Linear(64, 64)).eval()
inp = torch.randn(2, 16, 64)
with torch.no_grad():
    want = model(inp)
    model[1] = MlkRMSNorm(model[1])
    got = model(inp)
close("migrated model output", got, want)

# --- bad calls: each a clear exception, never a crash ------------------------------
def refused(name, fn, text, exc=mlk.BoundaryError):
    try:
        fn()
    except exc as e:
        check(name, text in str(e), "message: %s" % e)
        return
    except Exception as e:  # noqa: BLE001
        check(name, False, "raised %s: %s" % (type(e).__name__, e))
        return
    check(name, False, "no exception")


refused("wrong dtype", lambda: norms.rmsnorm(x.double(), w, eps),
        "argument 0 `x` of `rmsnorm`: dtype float64 but the signature declares F32")
refused("wrong rank", lambda: norms.rmsnorm(x[0], w, eps), "argument 0 `x` of `rmsnorm`: rank 2 but the signature declares rank 3")
refused("inconsistent dims", lambda: norms.rmsnorm(x, torch.randn(63), eps), "w.shape[0] = 63 but D = 64, bound by x.shape[2]")
refused("refinement violated", lambda: attn.attention(q[:, :, :30].contiguous(), kk[:, :, :30].contiguous(),
                                                      v[:, :, :30].contiguous(), scale, dims={"H": 4}), "D mod H = 0")
refused("non-contiguous input", lambda: norms.rmsnorm(x.transpose(0, 1), w, eps), "not contiguous")
refused("requires grad", lambda: norms.rmsnorm(x.clone().requires_grad_(), w, eps),
        "argument 0 `x` of `rmsnorm`: requires grad; mlk kernels have no autograd")
# A module's weight (an nn.Parameter) with grad mode on is refused, naming it and
# how to pass it; under no_grad() or inference_mode() no gradient is lost, so it is taken.
refused("a parameter with grad mode on: named", lambda: norms.rmsnorm(x, torch.nn.Parameter(w), eps),
        "argument 1 `w` of `rmsnorm`: requires grad; mlk kernels have no autograd (pass w.detach(), "
        "call under torch.no_grad(), or train through mlk.torch.function)")
plain = norms.rmsnorm(x, w, eps)
with torch.no_grad():
    got = norms.rmsnorm(x, torch.nn.Parameter(w), eps)
check("under torch.no_grad() a parameter is taken", torch.equal(got, plain))
with torch.inference_mode():
    got = norms.rmsnorm(x.clone(), torch.nn.Parameter(w.clone()), eps)
check("... and under torch.inference_mode()", torch.equal(got, plain))
leaf = torch.zeros_like(plain).requires_grad_()
refused("an out= that requires grad, grad mode on", lambda: norms.rmsnorm(x, w, eps, out=leaf),
        "the output: requires grad; mlk kernels have no autograd (pass out.detach(), or call under torch.no_grad())")
with torch.no_grad():
    same = norms.rmsnorm(x, w, eps, out=leaf)
check("... taken under no_grad(), written in place", same is leaf and torch.equal(leaf.detach(), plain))
refused("too few arguments", lambda: norms.rmsnorm(x, w), "`rmsnorm` takes 3 arguments, got 2")
refused("not a tensor", lambda: norms.rmsnorm([1.0], w, eps), "argument 0 `x` of `rmsnorm`: a list, not a tensor")
refused("missing unbound dim", lambda: attn.attention(q, kk, v, scale), "H")
refused("no tuned artifact for the profile under require='tuned'",
        lambda: mlk.load(os.path.join(EXAMPLES, "norms.tl"), target="host", cache=os.path.join(WORK, "empty.db"),
                         require="tuned").rmsnorm(x, w, eps),
        "under policy host;require=tuned:\n  host: no artifact cache at", mlk.NotFoundError)
refused("require='exact' refuses another shape", lambda: mlk.load(
    os.path.join(EXAMPLES, "norms.tl"), target="host", cache=store, require="exact").rmsnorm(x[:, :3].contiguous(), w, eps),
    "tuned for host at exactly B=2,D=64,S=3", mlk.NotFoundError)
refused("a bad require", lambda: mlk.load(os.path.join(EXAMPLES, "norms.tl"), require="fast"), "expected 'any'", ValueError)
# `mlk tune` stored the cheap verification levels (types, identity) with each winner.
vk = mlk.load(os.path.join(EXAMPLES, "norms.tl"), target="host", cache=store, require="verified:types").rmsnorm.kernel(
    x, w, eps)
check("require='verified:types' takes the artifact whose stored report passed types", "verified: " in vk.selection and
      vk.source != "default-jit", vk.selection)
refused("require='verified:envelope' passes over an artifact verified only at the cheap levels",
        lambda: mlk.load(os.path.join(EXAMPLES, "norms.tl"), target="host", cache=store,
                         require="verified:envelope").rmsnorm(x, w, eps),
        "require=verified:envelope", mlk.NotFoundError)

# A first call always works: on an empty cache the default schedule (JIT) runs, and says so.
fresh = mlk.load(os.path.join(EXAMPLES, "norms.tl"), target="host", cache=os.path.join(WORK, "never_created.db"))
k = fresh.rmsnorm.kernel(x, w, eps)
check("a fresh user's first call runs the default schedule (JIT), and says so",
      "default schedule (JIT), not tuned" in k.selection and k.source == "default-jit", k.selection)
close("... and computes rmsnorm", fresh.rmsnorm(x, w, eps), x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w)
check("... without creating a store", not os.path.exists(os.path.join(WORK, "never_created.db")))
check("a tuned artifact says it is tuned", norms.rmsnorm.kernel(x, w, eps).source == "exact",
      norms.rmsnorm.kernel(x, w, eps).selection)

# An `mlk build -o DIR` directory loads directly.
built = os.path.join(WORK, "rmsnorm_built")
p = subprocess.run([MLK, "build", os.path.join(EXAMPLES, "norms.tl"), "--fn", "rmsnorm", "--target", "host",
                    "--dims", "B=2,S=16,D=64", "--no-cache", "-o", built], capture_output=True, text=True)
check("mlk build -o DIR", p.returncode == 0, p.stderr[-400:])
from_dir = mlk.load(built)
k = from_dir.rmsnorm.kernel(x, w, eps)
check("mlk.load(DIR) uses the directory's artifact", k.source == "directory" and built in k.selection, k.selection)
close("... and computes rmsnorm", from_dir.rmsnorm(x, w, eps), x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w)
check("BoundaryError is a ValueError", issubclass(mlk.BoundaryError, ValueError))
# The process survived every bad call and still computes.
close("still correct after bad calls", norms.rmsnorm(x, w, eps), x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w)

# One thread pool (issue 52): inside PyTorch, an mlk kernel's parallel loops
# run on PyTorch's OpenMP team, so Halide starts no pool of its own beside
# PyTorch's spinning threads; without torch, Halide's pool runs them (which
# shows that the count sees a pool start). Each in a fresh process.
POOL = r"""
import os, sys
sys.path[:0] = [p for p in sys.argv[3:] if p != "-"]
if sys.argv[1] == "torch":
    import torch
    torch.set_num_threads(2)
    torch.ones(1 << 22).add_(1)  # above torch's grain: PyTorch's OpenMP team started
import numpy as np
import mlk
ops = mlk.load(os.path.join(sys.argv[2], "norms.tl"), target="host")
x, w = np.random.rand(16, 256, 512).astype(np.float32), np.ones(512, np.float32)
ops.rmsnorm.kernel(x, w, 1e-6)  # compiled, not run
before = len(os.listdir("/proc/self/task"))
y = ops.rmsnorm(x, w, 1e-6)
want = x / np.sqrt((x * x).mean(axis=2, keepdims=True) + 1e-6)
torch_loaded = any("libtorch_cpu" in line for line in open("/proc/self/maps"))  # plain: mlk imported no torch
print(before, len(os.listdir("/proc/self/task")), float(np.abs(y - want).max()), int(torch_loaded))
"""
if len(os.sched_getaffinity(0)) >= 2:
    counts = {}
    for mode in ("torch", "plain"):
        p = subprocess.run([sys.executable, "-c", POOL, mode, EXAMPLES, MODULE_DIR], capture_output=True, text=True,
                           env=dict(os.environ, MLK_CACHE=os.path.join(WORK, "pool.db")))
        counts[mode] = [float(v) for v in p.stdout.split()] if p.returncode == 0 else None
        check("rmsnorm in a fresh process %s (%s)" % (mode, p.stderr[-300:]),
              counts[mode] is not None and counts[mode][2] < 1e-4)
    check("with torch loaded, Halide starts no pool: PyTorch's OpenMP team runs the loops (threads before, "
          "after, error, torch loaded: %s)" % counts["torch"],
          counts["torch"] is not None and counts["torch"][0] == counts["torch"][1] and counts["torch"][3] == 1)
    check("without torch (never imported, by mlk either), Halide's pool runs them (%s)" % counts["plain"],
          counts["plain"] is not None and counts["plain"][1] > counts["plain"][0] and counts["plain"][3] == 0)

failed = [r for r in results if not r[1]]
for name, ok, note in results:
    print("%s %s%s" % ("PASS" if ok else "FAIL", name, "" if ok else ": " + note))
print("%d checks, %d failed" % (len(results), len(failed)))
sys.exit(1 if failed else 0)
