"""Fns with several results through the command line and Python:

1. `mlk tune` tunes one (value_and_grad as one fn) and caches it; `mlk run
   --require tuned` runs the cached artifact and writes every result into one
   safetensors file ("output0", "output1", ..), equal to `--reference`'s
   within the F32 tolerance and to PyTorch autograd's gradients.
2. Through the mlk package: a tuple of results (numpy, torch), `out=` as a
   tuple of tensors, and the boundary's refusals naming the result.

usage: results.py MLK_BINARY MODULE_DIR WORK_DIR
"""
import os
import shutil
import subprocess
import sys

MLK, MODULE_DIR, WORK = sys.argv[1:4]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__))))
if MODULE_DIR != "-":
    sys.path.insert(0, MODULE_DIR)
import numpy as np  # noqa: E402
import torch  # noqa: E402
from safetensors.numpy import load_file, save_file  # noqa: E402

import mlk  # noqa: E402
from check_common import check, raises, results  # noqa: E402

shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
PROGRAM = os.path.join(WORK, "step.tl")
with open(PROGRAM, "w") as f:
    f.write("""fn loss [N, D](x: Tensor[F32, [N, D]], w: Tensor[F32, [D, D]], b: Tensor[F32, [D]]) -> Scalar[F32] =
  let h = tanh(matmul(x, w) + broadcast(b, [N, D], axes=[1]))
  mean(h * h, axes=[0, 1])
public fn step = value_and_grad(loss, wrt=[w, b])
tune step [N = 48, D = 40]
""")
CACHE = os.path.join(WORK, "cache.db")
rng = np.random.default_rng(7)
x = rng.standard_normal((48, 40)).astype(np.float32)
w = (rng.standard_normal((40, 40)) * 0.2).astype(np.float32)
b = rng.standard_normal(40).astype(np.float32)
INPUTS = os.path.join(WORK, "in.safetensors")
save_file({"x": x, "w": w, "b": b}, INPUTS)


def run(*args):
    p = subprocess.run([MLK] + list(args), capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


# --- 1. tune, run the cached artifact, the reference ------------------------------
code, out = run("tune", PROGRAM, "--target", "host", "--trials", "3", "--no-autoschedulers", "--cache", CACHE, "-q")
check("mlk tune tunes a fn with three results and caches it", code == 0 and "step [D=40,N=48] host:" in out, out[-1500:])
code, out = run("run", PROGRAM, "--fn", "step", "--inputs", INPUTS, "--output", os.path.join(WORK, "tuned.safetensors"),
                "--cache", CACHE, "--require", "tuned")
check("mlk run --require tuned runs the cached artifact", code == 0 and "tuned artifact" in out, out[-1500:])
code, ref_out = run("run", PROGRAM, "--fn", "step", "--inputs", INPUTS, "--output",
                    os.path.join(WORK, "ref.safetensors"), "--reference")
check("mlk run --reference computes every result", code == 0, ref_out[-1500:])
tuned, ref = load_file(os.path.join(WORK, "tuned.safetensors")), load_file(os.path.join(WORK, "ref.safetensors"))
check("one safetensors file holds every result, named output0..2 (%s)" % sorted(tuned),
      sorted(tuned) == ["output0", "output1", "output2"] == sorted(ref)
      and [tuned["output%d" % i].shape for i in range(3)] == [(), (40, 40), (40,)], out)
check("the tuned results equal the reference's within the F32 tolerance",
      all(np.allclose(tuned[k], ref[k], rtol=1e-4, atol=1e-5) for k in ref))
xt, wt, bt = (torch.tensor(a, dtype=torch.float64) for a in (x, w, b))
wt.requires_grad_()
bt.requires_grad_()
h = torch.tanh(xt @ wt + bt)
loss = (h * h).mean()
gw, gb = torch.autograd.grad(loss, [wt, bt])
check("and PyTorch autograd's value and gradients",
      abs(float(tuned["output0"]) - loss.item()) < 1e-5 and np.allclose(tuned["output1"], gw.numpy(), atol=1e-6)
      and np.allclose(tuned["output2"], gb.numpy(), atol=1e-6))

# --- 2. the package ---------------------------------------------------------------
ops = mlk.load(PROGRAM, cache=CACHE)
got = ops.step(x, w, b)
check("a call returns a tuple of numpy arrays, one per result",
      isinstance(got, tuple) and len(got) == 3 and all(isinstance(t, np.ndarray) for t in got)
      and all(np.allclose(a, tuned["output%d" % i]) for i, a in enumerate(got)))
got_t = ops.step(torch.tensor(x), torch.tensor(w), torch.tensor(b))
check("torch arguments give torch results", all(isinstance(t, torch.Tensor) for t in got_t)
      and all(np.allclose(a.numpy(), g) for a, g in zip(got_t, got)))
outs = (np.zeros((), np.float32), np.zeros((40, 40), np.float32), np.zeros(40, np.float32))
ops.step(x, w, b, out=outs)
check("out= takes a tuple of tensors, one per result", all(np.allclose(o, g) for o, g in zip(outs, got)))
raises("out= of the wrong length is refused", lambda: ops.step(x, w, b, out=outs[:2]), mlk.BoundaryError,
       "`step` has 3 results: `out` must be a tuple of 3 tensors")
raises("a wrong output names the result", lambda: ops.step(x, w, b, out=(outs[0], outs[1], outs[1])),
       mlk.BoundaryError, "output 2 of `step`: rank 2 but the signature declares rank 1")
raises("two outputs sharing memory are refused", lambda: ops.step(x, w, b, out=(outs[0], outs[1], outs[1][0])),
       mlk.BoundaryError, "output 2 of `step`: shares memory with output 1; each result needs its own")
raises("an output that is an argument is refused", lambda: ops.step(x, w, b, out=(outs[0], w, outs[2])),
       mlk.BoundaryError, "output 1 of `step`: shares memory with argument 1 `w`")
check("the shapes of every result, from the types", ops._program.result_shape("step", [[48, 40], [40, 40], [40]], {})
      == [[], [40, 40], [40]])
import mlk.torch  # noqa: E402
raises("mlk.torch.function refuses a fn with several results (its transforms take one)",
       lambda: mlk.torch.function(ops.step), TypeError,
       "mlk.torch.function takes a fn with one result; `step` has 3 (call it directly")
check("the signature lists every result", [r["dtype"] for r in ops._program.signature("step")["results"]] == ["F32"] * 3)

failed = [r for r in results if not r[1]]
for name, ok, note in results:
    print("%s %s%s" % ("ok  " if ok else "FAIL", name, "" if ok else "\n     " + note))
print("%d checks, %d failed" % (len(results), len(failed)))
sys.exit(1 if failed else 0)
