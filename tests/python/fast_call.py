"""A Python call's fast path (python/fast_call.cpp) and the JIT store
(runtime/jit_store.h), from PyTorch:

- torch CPU tensors and numbers in: one crossing (mlk._mlk.fast_call) gives
  the same bytes as the general path;
- whatever the fast path does not handle it declines untouched
  (NotImplemented), and the call then raises the general path's error: a
  tensor that requires grad, a non-contiguous or misaligned one, another
  dtype, a bool tensor, numpy arrays; a good call after a bad one is fast;
- a second process on the same cache loads the default schedule's kernel
  from the JIT store instead of compiling it, and says so.

usage: fast_call.py EXAMPLES_DIR MODULE_DIR WORK_DIR
"""
import os
import shutil
import subprocess
import sys

EXAMPLES, MODULE_DIR, WORK = sys.argv[1:4]
if MODULE_DIR != "-":  # "-": the installed mlk package
    sys.path.insert(0, MODULE_DIR)
import numpy as np  # noqa: E402
import torch  # noqa: E402

import mlk  # noqa: E402
from mlk import _mlk  # noqa: E402

shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
store = os.path.join(WORK, "cache.db")
results = []


def check(name, cond, note=""):
    results.append((name, bool(cond), note))


def refused(name, call, text):
    try:
        call()
    except mlk.BoundaryError as e:
        check(name, text in str(e), "message: %s" % e)
        return
    except Exception as e:  # noqa: BLE001
        check(name, False, "raised %s: %s" % (type(e).__name__, e))
        return
    check(name, False, "no exception")


norms = mlk.load(os.path.join(EXAMPLES, "norms.tl"), target="host", cache=store)
rms = norms.rmsnorm
x, w = torch.randn(2, 8, 64), torch.randn(64)

# A call goes through the fast path (counted by a wrapper of mlk._mlk.fast_call).
taken = []
real_fast_call = _mlk.fast_call


def counting(plan, args):
    r = real_fast_call(plan, args)
    taken.append(r is not NotImplemented)
    return r


_mlk.fast_call = counting
rms(torch.randn(2, 8, 64), torch.randn(64), 1e-6)
check("rms(x, w, eps) takes the fast path", taken == [True], repr(taken))
rms(torch.randn(2, 8, 64), torch.randn(64), 1e-6, dims={})
check("... and dims= the general one", taken == [True], repr(taken))
_mlk.fast_call = real_fast_call
records = mlk.load(os.path.join(os.path.dirname(EXAMPLES), "tests", "records", "scenario3.tl"), cache=store)
check("a fn with record parameters has no plan", all(getattr(records, n)._plan is None
                                                       for n in records._program.public_fns
                                                       if getattr(records, n)._sig["records"]))
check("... and there is one such fn", any(getattr(records, n)._sig["records"] for n in records._program.public_fns))

# The fast path and the general path (dims={} takes the general path) agree.
fast = _mlk.fast_call(rms._plan, (x, w, 1e-6))
check("torch tensors and a float take the fast path", isinstance(fast, torch.Tensor), repr(type(fast)))
general = rms(x, w, 1e-6, dims={})
check("... with the general path's bytes", isinstance(fast, torch.Tensor) and torch.equal(fast, general))
check("a call is the fast path's result", torch.equal(rms(x, w, 1e-6), general))
as_int = _mlk.fast_call(rms._plan, (x, w, 0))
check("an int for an F32 scalar takes the fast path", isinstance(as_int, torch.Tensor) and
      torch.equal(as_int, rms(x, w, 0.0, dims={})))
other = torch.randn(3, 5, 64)
check("another shape is planned too", torch.equal(rms(other, w, 1e-6), rms(other, w, 1e-6, dims={})))

big_x = torch.randn(8, 64, 64)  # at least 16,384 elements: owned records, the GIL released
check("a large call takes the fast path too", isinstance(_mlk.fast_call(rms._plan, (big_x, w, 1e-6)), torch.Tensor))
check("... with the general path's bytes", torch.equal(_mlk.fast_call(rms._plan, (big_x, w, 1e-6)),
                                                       rms(big_x, w, 1e-6, dims={})))

# Declined, untouched; the general path raises its own error.
declined = [
    ("a tensor that requires grad", (x.clone().requires_grad_(), w, 1e-6)),
    ("a tensor with torch's negative bit", (torch._neg_view(x), w, 1e-6)),
    ("a non-contiguous tensor", (x.transpose(0, 1), w, 1e-6)),
    ("another dtype", (x.double(), w, 1e-6)),
    ("numpy arrays", (x.numpy(), w.numpy(), 1e-6)),
    ("a bool for the scalar", (x, w, True)),
    ("too few arguments", (x, w)),
]
for name, args in declined:
    check("the fast path declines %s" % name, _mlk.fast_call(rms._plan, args) is NotImplemented)
refused("... which then raises the general path's error (requires grad)",
        lambda: rms(x.clone().requires_grad_(), w, 1e-6), "argument 0 `x` of `rmsnorm`: requires grad")
refused("... (not contiguous)", lambda: rms(x.transpose(0, 1), w, 1e-6),
        "argument 0 `x` of `rmsnorm`: not contiguous: strides")
refused("... (dtype)", lambda: rms(x.double(), w, 1e-6), "argument 0 `x` of `rmsnorm`")
check("numpy arrays still run (the general path)", np.allclose(rms(x.numpy(), w.numpy(), 1e-6), general.numpy()))
check("a good call after the bad ones is fast again", isinstance(_mlk.fast_call(rms._plan, (x, w, 1e-6)),
                                                                  torch.Tensor))

# The JIT store: this process compiled rmsnorm's default schedule and kept
# it; a second process loads it.
k = rms.kernel(x, w, 1e-6)
check("the first process compiled and kept the kernel", "compiled and kept in the JIT store " + store + ".jit/"
      in k.selection, k.selection)
child = subprocess.run([sys.executable, "-c", """
import sys, torch
sys.path[:0] = [p for p in [%r] if p != "-"]
import mlk
ops = mlk.load(%r, target="host", cache=%r)
print(ops.rmsnorm.kernel(torch.randn(2, 8, 64), torch.randn(64), 1e-6).selection)
""" % (MODULE_DIR, os.path.join(EXAMPLES, "norms.tl"), store)], capture_output=True, text=True)
check("a second process loads it from the JIT store", child.returncode == 0 and
      "loaded from the JIT store (compiled earlier) " + store + ".jit/" in child.stdout, child.stdout + child.stderr)

failed = [r for r in results if not r[1]]
for name, ok, note in results:
    print("%s %s%s" % ("ok  " if ok else "FAIL", name, "" if ok else " -- " + note))
print("%d checks, %d failed" % (len(results), len(failed)))
sys.exit(1 if failed else 0)
