"""Gradients by the `grad` / `value_and_grad` transforms against PyTorch
autograd (PyTorch 2.x in the venv): every differentiable
builtin in one loss, an embedding lookup (gather), a two-layer MLP, the
attention example and a cross-entropy loss (tests/transforms/torch_f32.tl),
each on random inputs, through the reference interpreter (`mlk run
--reference`) and through the compiled kernel (`mlk run`, Halide's JIT), within
the F32 envelope; the per-example gradients of a `vmap` of a gradient
against a loop of autograd calls; and a gradient fn called from PyTorch
through the runtime (the `mlk` module).

usage: grad_torch.py MLK_BINARY SOURCE_DIR MODULE_DIR WORK_DIR
"""
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import torch

MLK, SRC, MODULE_DIR, WORK = sys.argv[1:5]
sys.path.insert(0, os.path.join(SRC, "tests", "python"))
if MODULE_DIR != "-":  # "-": the installed mlk package
    sys.path.insert(0, MODULE_DIR)
from check_common import check, results  # noqa: E402
import mlk  # noqa: E402

TL = os.path.join(SRC, "tests", "transforms", "torch_f32.tl")
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
torch.manual_seed(0)

DT = {torch.float32: ("F32", np.float32), torch.int32: ("I32", np.int32)}
NP = {"F32": np.float32, "I32": np.int32, "F64": np.float64}


def write_safetensors(path, named):
    header, blobs, off = {}, [], 0
    for name, t in named.items():
        code, npt = DT[t.dtype]
        b = t.detach().contiguous().numpy().astype(npt).tobytes()
        header[name] = {"dtype": code, "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_output(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    meta = json.loads(data[8:8 + n])["output"]
    a, b = meta["data_offsets"]
    arr = np.frombuffer(data[8 + n + a:8 + n + b], dtype=NP[meta["dtype"]]).reshape(meta["shape"])
    return torch.from_numpy(arr.copy())


def mlk_run(fn, inputs, reference):
    path = os.path.join(WORK, fn + ".in.safetensors")
    out = os.path.join(WORK, fn + (".ref" if reference else ".jit") + ".safetensors")
    write_safetensors(path, inputs)
    cmd = [MLK, "run", TL, "--fn", fn, "--inputs", path, "--output", out, "--cache", os.path.join(WORK, "cache.db")]
    p = subprocess.run(cmd + (["--reference"] if reference else []), capture_output=True, text=True)
    if p.returncode != 0:
        check("mlk run %s%s" % (fn, " --reference" if reference else ""), False, p.stderr[-600:])
        return None
    return read_output(out)


def compare(name, got, want, rtol=1e-4, atol=1e-5):
    ok = got is not None and tuple(got.shape) == tuple(want.shape) and \
        torch.allclose(got.double(), want.double(), rtol=rtol, atol=atol)
    err = (got.double() - want.double()).abs().max().item() if got is not None and got.shape == want.shape else None
    check(name, ok, "max abs err %s, shapes %s / %s" % (err, None if got is None else tuple(got.shape), tuple(want.shape)))


def grads_of(loss_fn, inputs, wrt):
    """Autograd in F64 from the same F32 inputs (the exact gradient, for the envelope)."""
    leaves = {k: (v.double().requires_grad_(k in wrt) if v.dtype == torch.float32 else v) for k, v in inputs.items()}
    value = loss_fn(**leaves)
    gs = torch.autograd.grad(value, [leaves[k] for k in wrt])
    return value.detach(), dict(zip(wrt, gs))


def case(title, inputs, torch_loss, grads, jit=True, value_fn=None):
    """grads: mlk fn name -> parameter name."""
    value, want = grads_of(torch_loss, inputs, list(grads.values()))
    for fn, param in grads.items():
        compare("%s: %s (interpreter)" % (title, fn), mlk_run(fn, inputs, True), want[param])
        if jit:
            compare("%s: %s (compiled)" % (title, fn), mlk_run(fn, inputs, False), want[param])
    if value_fn:
        compare("%s: %s" % (title, value_fn), mlk_run(value_fn, inputs, True), value)


def r(*shape):
    return torch.rand(*shape) * 2 - 1


# Every differentiable builtin in one loss.
def builtins(x, w):
    p = x * x + 1
    e = x.exp() + p.log() + p.sqrt() + p.rsqrt() + x.tanh() + x.sigmoid() + x.abs() + x.relu() + torch.erf(x)
    m = torch.maximum(x, w) + torch.minimum(x, w) * p.pow(w) + torch.where(x > w, x * w, x - w)
    s = torch.softmax(x, 1) * w
    rr = (e * m).sum(1) * s.mean(1) + (x * w).amax(1) - x.amin(1)
    t = x.t()
    c = torch.cat([t, t[1:]], 0)
    return rr.sum() + (c * c).sum() + (t * t * t).reshape(-1).sum() + \
        (x.repeat_interleave(2, 0) * torch.cat([w, w], 0)).sum()


case("builtins", {"x": r(3, 4), "w": r(3, 4)}, builtins, {"d_builtins_x": "x", "d_builtins_w": "w"})

case("embedding", {"table": r(5, 3), "idx": torch.tensor([4, 0, 4, 2], dtype=torch.int32), "w": r(4, 3)},
     lambda table, idx, w: (table[idx.long()] * w).sum(), {"d_embed": "table"})


def mlp_loss(x, w1, b1, w2, b2, y):
    h = torch.nn.functional.gelu(x @ w1 + b1, approximate="tanh")
    return ((h @ w2 + b2 - y) ** 2).mean()


N, D, F = 8, 16, 32
case("mlp", {"x": r(N, D), "w1": r(D, F) * 0.3, "b1": r(F), "w2": r(F, D) * 0.3, "b2": r(D), "y": r(N, D)},
     mlp_loss, {"d_mlp_w1": "w1", "d_mlp_b1": "b1", "d_mlp_w2": "w2", "d_mlp_b2": "b2"}, value_fn="mlp_value")


def attention_loss(q, k, v, scale, w):
    B, S, Dm = q.shape
    H = 4
    sh = lambda t: t.reshape(B, S, H, Dm // H).transpose(1, 2)  # noqa: E731
    scores = sh(q) @ sh(k).transpose(-1, -2) * scale
    mask = torch.ones(S, S, dtype=torch.bool).tril()
    scores = torch.where(mask, scores, torch.tensor(-1e30, dtype=scores.dtype))
    out = (torch.softmax(scores, -1) @ sh(v)).transpose(1, 2).reshape(B, S, Dm)
    return (out * w).sum()


att_in = {"q": r(2, 6, 8), "k": r(2, 6, 8), "v": r(2, 6, 8), "scale": torch.tensor(0.35), "w": r(2, 6, 8)}
att_want_v, att_want = grads_of(attention_loss, att_in, ["q", "k", "v", "scale"])
for fn, param in {"d_att_q": "q", "d_att_k": "k", "d_att_v": "v", "d_att_scale": "scale"}.items():
    # The compiled path of `mlk run` cannot write a Scalar result yet (any
    # fn's: "data holds 0 bytes but F32 [] needs 4"), so the Scalar
    # cotangent of `scale` is checked through the interpreter only.
    for ref in (True,) if param == "scale" else (True, False):
        # H is not bound by any input shape: give it.
        path = os.path.join(WORK, fn + ".in.safetensors")
        out = os.path.join(WORK, fn + ".att.safetensors")
        write_safetensors(path, att_in)
        p = subprocess.run([MLK, "run", TL, "--fn", fn, "--inputs", path, "--output", out, "--dims", "H=4",
                            "--cache", os.path.join(WORK, "cache.db")] + (["--reference"] if ref else []),
                           capture_output=True, text=True)
        got = read_output(out) if p.returncode == 0 else None
        if got is None:
            check("attention: mlk run %s" % fn, False, p.stderr[-600:])
        compare("attention: %s (%s)" % (fn, "interpreter" if ref else "compiled"), got, att_want[param])


def cross_entropy(logits, labels):
    return torch.nn.functional.cross_entropy(logits, labels.long())


ce_in = {"logits": r(6, 5) * 3, "labels": torch.tensor([0, 4, 2, 2, 1, 3], dtype=torch.int32)}
case("cross-entropy", ce_in, cross_entropy, {"d_cross_entropy": "logits"})

# vmap of a gradient: per-example gradients against a loop of autograd calls.
pe_in = {"logits": r(3, 6, 5), "labels": torch.randint(0, 5, (3, 6), dtype=torch.int32)}
want = torch.stack([grads_of(cross_entropy, {"logits": pe_in["logits"][b], "labels": pe_in["labels"][b]},
                             ["logits"])[1]["logits"] for b in range(3)])
compare("vmap: per_example (interpreter)", mlk_run("per_example", pe_in, True), want)
compare("vmap: per_example (compiled)", mlk_run("per_example", pe_in, False), want)

# vmap of a matmul, batched on one side or both, against a loop in PyTorch.
pa, pb = r(3, 4, 5), r(5, 6)
proj = lambda a, b: torch.softmax(a.double() @ b.double(), 1)  # noqa: E731
for fn, ins, want in [
        ("project_a", {"a": pa, "b": pb}, torch.stack([proj(pa[i], pb) for i in range(3)])),
        ("project_b", {"a": pa[0], "b": r(5, 6, 3)}, None),
        ("project_ab", {"a": r(4, 3, 5), "b": r(3, 5, 6)}, None)]:
    if fn == "project_b":
        want = torch.stack([proj(ins["a"], ins["b"][:, :, i]) for i in range(3)], 2)
    if fn == "project_ab":
        want = torch.stack([proj(ins["a"][:, i], ins["b"][i]) for i in range(3)])
    compare("vmap: %s (compiled)" % fn, mlk_run(fn, ins, False), want)

# The runtime: a gradient fn is an ordinary public fn of the program.
ops = mlk.load(TL, target="host", cache=os.path.join(WORK, "runtime.db"))
compare("runtime: d_cross_entropy", ops.d_cross_entropy(ce_in["logits"], ce_in["labels"]),
        grads_of(cross_entropy, ce_in, ["logits"])[1]["logits"])

failed = [x for x in results if not x[1]]
for name, ok, note in results:
    print("%s %s%s" % ("ok  " if ok else "FAIL", name, "" if ok else "\n     " + note))
print("%d checks, %d failed" % (len(results), len(failed)))
sys.exit(1 if failed else 0)
