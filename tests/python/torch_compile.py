"""mlk fns as torch.library ops (mlk.torch.register) under torch.compile:

1. torch.library.opcheck of each op (schema, fake implementation, autograd
   registration) on the blocks of tests/python/bert_blocks.tl.
2. The fake implementation's shapes come from the typed signature, and a
   refinement it breaks is refused at trace time with the boundary's message.
3. A module that calls the mlk attention and FFN ops between PyTorch
   LayerNorms compiles with torch.compile(fullgraph=True) (which raises on
   any graph break), and its output and every parameter's gradient match
   eager PyTorch within the F32 envelope; a training step runs compiled.

Needs PyTorch 2.4 or later (torch.library.register_fake/register_autograd).

usage: torch_compile.py SOURCE_DIR MODULE_DIR WORK_DIR
"""
import math
import os
import shutil
import sys

SRC, MODULE_DIR, WORK = sys.argv[1:4]
sys.path.insert(0, os.path.join(SRC, "tests", "python"))
if MODULE_DIR != "-":
    sys.path.insert(0, MODULE_DIR)
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import mlk  # noqa: E402
import mlk.torch  # noqa: E402
from check_common import check, raises, results  # noqa: E402

shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(WORK, "inductor"))
print("mlk from", os.path.dirname(mlk.__file__), "; torch", torch.__version__)

B, S, D, H, FF = 2, 5, 16, 4, 24
ops = mlk.load(os.path.join(SRC, "tests", "python", "bert_blocks.tl"), cache=os.path.join(WORK, "cache.db"))
lib = mlk.torch.register(ops, namespace="mlk_test", dims={"H": H})
gen = torch.Generator().manual_seed(3)


def r(*shape, scale=0.3):
    return (torch.randn(*shape, generator=gen) * scale).requires_grad_()


mask = torch.ones(B, S, dtype=torch.int64)
mask[1, 3:] = 0
attn_args = [r(B, S, D), mask] + [r(D, D) if i % 2 == 0 else r(D) for i in range(8)] + [1 / math.sqrt(D // H)]
ffn_args = [r(B, S, D), r(FF, D), r(FF), r(D, FF), r(D)]
ln_args = [r(B, S, D), r(B, S, D), r(D), r(D), 1e-5]

# --- 1. opcheck --------------------------------------------------------------------
for name, args in [("attention_block", attn_args), ("ffn_block", ffn_args), ("add_layer_norm", ln_args)]:
    try:
        report = torch.library.opcheck(getattr(lib, name), args)
        check("opcheck: mlk_test::%s (%s)" % (name, ", ".join(k for k, v in report.items() if v == "SUCCESS")),
              all(v == "SUCCESS" for v in report.values()), str(report))
    except Exception as e:  # noqa: BLE001
        check("opcheck: mlk_test::%s" % name, False, str(e)[:1500])
check("each block's vjp_split is ops too (the forward with its residuals, the backward, the plain fn)",
      all(hasattr(lib, "%s__%s" % (b, part)) for b in ("ffn_block", "attention_block") for part in ("fwd", "bwd", "plain")))
# Training: the forward keeps its residuals, the backward reads them; no forward runs twice.
with torch.profiler.profile() as prof:
    lib.ffn_block(*ffn_args).sum().backward()
ran = sorted(e.name for e in prof.events() if e.name.startswith("mlk_test::"))
check("a training step runs mlk_test::ffn_block__fwd once and mlk_test::ffn_block__bwd once",
      ran.count("mlk_test::ffn_block__fwd") == 1 and ran.count("mlk_test::ffn_block__bwd") == 1
      and "mlk_test::ffn_block__plain" not in ran, str(ran))
with torch.profiler.profile() as prof, torch.no_grad():
    lib.ffn_block(*ffn_args)
ran = sorted(e.name for e in prof.events() if e.name.startswith("mlk_test::"))
check("inference (no gradient needed) runs the plain fn, no residuals", "mlk_test::ffn_block__plain" in ran
      and "mlk_test::ffn_block__fwd" not in ran, str(ran))
plain_args = [a.detach() for a in ffn_args]
kept = lib.ffn_block__fwd(*plain_args)
many = lib.ffn_block__bwd(*plain_args, *kept[1:], torch.ones(B, S, D))
check("the backward op returns a tuple of the parameters' shapes",
      isinstance(many, tuple) and [list(t.shape) for t in many] == [list(a.shape) for a in ffn_args])

# --- 1b. the ops' gradients: gradcheck in F64 -------------------------------------
F64 = os.path.join(WORK, "bert_blocks_f64.tl")
with open(os.path.join(SRC, "tests", "python", "bert_blocks.tl")) as f:
    f64_text = f.read().replace("F32", "F64")
with open(F64, "w") as f:
    f.write(f64_text)
lib64 = mlk.torch.register(mlk.load(F64, cache=os.path.join(WORK, "cache.db")), namespace="mlk_test64", dims={"H": H})


def d(t):
    return t.detach().double().requires_grad_() if isinstance(t, torch.Tensor) and t.is_floating_point() else t


for name, args in [("attention_block", attn_args), ("ffn_block", ffn_args), ("add_layer_norm", ln_args)]:
    a64 = [d(a) for a in args]
    bound = 1e-5 if name == "ffn_block" else 1e-7  # F64 erf: a polynomial within 1e-6 (docs/numerics.md)
    try:
        ok = torch.autograd.gradcheck(getattr(lib64, name), tuple(a64), eps=1e-6, atol=bound, rtol=1e-5)
        check("gradcheck: torch.ops.mlk_test64.%s (F64)" % name, ok)
    except Exception as e:  # noqa: BLE001
        check("gradcheck: torch.ops.mlk_test64.%s (F64)" % name, False, str(e)[:1500])

# Registering again: the same Ops gives the same ops; another program's clashing name is refused
# before anything is defined.
check("registering the same Ops again returns its ops", mlk.torch.register(ops, "mlk_test", dims={"H": H}) is lib)
raises("a name the namespace already has is refused",
       lambda: mlk.torch.register(mlk.load(F64, cache=os.path.join(WORK, "cache.db")), namespace="mlk_test",
                                  dims={"H": H}), ValueError, "namespace `mlk_test` already has `attention_block`")

# --- 2. the fake implementation ----------------------------------------------------
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

with FakeTensorMode() as mode:
    fx = torch.empty(3, 7, D)
    out = lib.ffn_block(fx, torch.empty(FF, D), torch.empty(FF), torch.empty(D, FF), torch.empty(D))
    check("fake: the result's shape from the signature (%s)" % list(out.shape), list(out.shape) == [3, 7, D])
    raises("fake: a shape the types refuse is refused at trace time",
           lambda: lib.ffn_block(fx, torch.empty(FF, D + 1), torch.empty(FF), torch.empty(D, FF), torch.empty(D)),
           mlk.BoundaryError, "`ffn_block`: wi.shape[1] = 17 but D = 16, bound by x.shape[2]")


# --- 2b. a program with its own vjp fns, and a fn with no backward ----------------
with open(os.path.join(SRC, "tests", "python", "bert_blocks.tl")) as f:
    own_text = f.read() + """
public fn q2 [N](x: Tensor[F32, [N]], w: Tensor[F32, [N]]) -> Tensor[F32, [N]] = w * cast(cast(x, I32), F32)
public fn lin [N, I, O](x: Tensor[F32, [N, I]], w: Tensor[F32, [O, I]], b: Tensor[F32, [O]]) -> Tensor[F32, [N, O]] =
  matmul(x, transpose(w, [1, 0])) + broadcast(b, [N, O], axes=[1])
public fn q2__vjp__w = vjp(q2, wrt=[w])
public fn rounded [N](x: Tensor[F32, [N]]) -> Tensor[F32, [N]] = cast(cast(x, I32), F32)
public fn odd_names [N](def: Tensor[F32, [N]], in: Tensor[F32, [N]]) -> Tensor[F32, [N]] = def * in
public fn squared(s: Scalar[F32]) -> Scalar[F32] = s * s
"""
own_path = os.path.join(WORK, "own_vjps.tl")
with open(own_path, "w") as f:
    f.write(own_text)
own = mlk.load(own_path, cache=os.path.join(WORK, "cache.db"))
import warnings  # noqa: E402

with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    lib2 = mlk.torch.register(own, namespace="mlk_test_own", dims={"H": H})
check("a fn with no tensor parameter is skipped with a warning naming it",
      not hasattr(lib2, "squared") and any("`squared` has no tensor parameter, so torch cannot dispatch it" in str(w.message)
                                           for w in said), str([str(w.message) for w in said]))
raises("result_shape counts the arguments", lambda: own._program.result_shape("rounded", [], {}), mlk.BoundaryError,
       "`rounded` takes 1 arguments, got 0")
check("a program's own vjp fn is one op, registered once (no duplicate definition; a fn with no vjp_split)",
      hasattr(lib2, "q2__vjp__w") and own.q2._vjps["split"] is None and own.q2._vjps[(1,)] is own.q2__vjp__w)
xq = torch.randn(5) * 3
wq2 = torch.randn(5, requires_grad=True)
got = torch.autograd.grad(lib2.q2(xq, wq2).sum(), wq2)[0]
check("the own vjp fn gives the gradient", torch.equal(got, xq.to(torch.int32).float()))
# A block whose backward reads no product (a linear layer): its split keeps nothing, the
# forward is the fn; the op still gives the result and autograd's gradients.
lx, lw, lb = torch.randn(6, 5, requires_grad=True), torch.randn(4, 5, requires_grad=True), torch.randn(4, requires_grad=True)
got_y = lib2.lin(lx, lw, lb)
want_y = F.linear(lx, lw, lb)
got = torch.autograd.grad((got_y * got_y).sum(), [lx, lw, lb])
want = torch.autograd.grad((want_y * want_y).sum(), [lx, lw, lb])
check("a split with no residuals (a linear layer): the result and every gradient",
      len(own.lin._vjps["split"].fwd._sig["results"]) == 1 and torch.allclose(got_y, want_y, atol=1e-5)
      and all(torch.allclose(a, b, rtol=1e-4, atol=1e-4) for a, b in zip(got, want)))
xr = torch.randn(5, requires_grad=True)
check("a fn with no derivative is still an op", torch.equal(lib2.rounded(xr.detach()), xr.detach().to(torch.int32).float()))
raises("its backward says why", lambda: lib2.rounded(xr).sum().backward(), mlk.BoundaryError,
       "`rounded` has no gradient for `x`:")
raises("naming the op and the checker's diagnostic", lambda: lib2.rounded(xr).sum().backward(), mlk.BoundaryError,
       "error: `cast` is not differentiable here")

xa, xb = torch.randn(5, requires_grad=True), torch.randn(5)
check("parameter names the schema parser refuses become positional (a0, a1) and work",
      torch.allclose(lib2.odd_names(xa, xb), xa * xb)
      and torch.allclose(torch.autograd.grad(lib2.odd_names(xa, xb).sum(), xa)[0], xb))
raises("registering again with other dims is refused",
       lambda: mlk.torch.register(own, namespace="mlk_test_own", dims={"H": H + 1}), ValueError,
       "is registered in `mlk_test_own` with dims=")

# Threads registering the same program at once all get the one namespace.
import threading  # noqa: E402

thread_ops = mlk.load(F64, cache=os.path.join(WORK, "cache.db"))
got_ns = []
threads = [threading.Thread(target=lambda: got_ns.append(
    mlk.torch.register(thread_ops, namespace="mlk_test_threads", dims={"H": H}))) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
check("four threads registering one program get the same ops (%d of 4)" % len(got_ns),
      len(got_ns) == 4 and all(n is got_ns[0] for n in got_ns))

# --- 3. torch.compile(fullgraph=True) ----------------------------------------------
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(D, D) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.fi, self.fo = nn.Linear(D, FF), nn.Linear(FF, D)

    def forward(self, x, mask):
        a = lib.attention_block(x, mask, self.q.weight, self.q.bias, self.k.weight, self.k.bias, self.v.weight,
                                self.v.bias, self.o.weight, self.o.bias, 1 / math.sqrt(D // H))
        x = self.ln1(x + a)
        return self.ln2(x + lib.ffn_block(x, self.fi.weight, self.fi.bias, self.fo.weight, self.fo.bias))


torch.manual_seed(0)
model = Block()
x = torch.randn(B, S, D, generator=gen)


def run(m):
    m.zero_grad()
    y = m(x, mask)
    (y * y).sum().backward()
    return y.detach(), {n.replace("_orig_mod.", ""): p.grad.clone() for n, p in m.named_parameters()}


want_y, want_g = run(model)
try:
    compiled = torch.compile(model, fullgraph=True)
    got_y, got_g = run(compiled)
    env = mlk.testing.envelope("F32", FF)
    ok = torch.allclose(got_y, want_y, rtol=env["rtol"], atol=env["atol"])
    check("compiled = eager: the output (rtol %.0e, atol %.1e)" % (env["rtol"], env["atol"]), ok,
          "max diff %.3e" % (got_y - want_y).abs().max())
    bad = [n for n in want_g if not torch.allclose(got_g[n], want_g[n], rtol=env["rtol"], atol=env["atol"])]
    check("compiled = eager: all %d parameters' gradients" % len(want_g), not bad, "differ: %s" % bad)
    explain = torch._dynamo.explain(model)(x, mask)
    check("no graph break (%d graphs, %d breaks)" % (explain.graph_count, explain.graph_break_count),
          explain.graph_break_count == 0 and explain.graph_count == 1, str(explain.break_reasons)[:800])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(5):
        loss = compiled(x, mask).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    check("a compiled training step runs and the loss falls (%.4f -> %.4f)" % (losses[0], losses[-1]),
          losses[-1] < losses[0])
except Exception as e:  # noqa: BLE001
    check("torch.compile(fullgraph=True) runs through the mlk ops", False, "%s: %s" % (type(e).__name__, str(e)[:3000]))

failed = [x for x in results if not x[1]]
for name, ok, note in results:
    print("%s %s%s" % ("ok  " if ok else "FAIL", name, "" if ok else "\n     " + note))
print("%d checks, %d failed" % (len(results), len(failed)))
sys.exit(1 if failed else 0)
