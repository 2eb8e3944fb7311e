"""Training through mlk blocks in PyTorch (mlk.torch.function; scenario 7):

1. torch.autograd.gradcheck of the attention, FFN and LayerNorm blocks
   (tests/python/bert_blocks.tl, the blocks of examples/minilm's layer, in
   F64) at odd shapes, and their gradients against PyTorch autograd's.
2. The boundary is unchanged: wrong dtypes are refused in the forward,
   requires_grad in a plain call.
3. A small BERT-style encoder (2 layers, random init, a synthetic
   classification task, fixed seed) trained for 200 steps with AdamW, once in
   plain PyTorch and once with its attention and FFN blocks swapped for mlk
   blocks: the two loss curves agree within the F32 envelope of
   docs/numerics.md at every step, and both fall.

Runs under any python3 with torch (1.13 or 2.x) and the mlk package (in CI:
the venv, the installed package, PyTorch 2.x). Default (untuned) JIT schedules.

usage: torch_training.py SOURCE_DIR MODULE_DIR WORK_DIR
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
BLOCKS = os.path.join(SRC, "tests", "python", "bert_blocks.tl")
with open(BLOCKS) as f:
    text = f.read()
F64_BLOCKS = os.path.join(WORK, "bert_blocks_f64.tl")
with open(F64_BLOCKS, "w") as f:
    f.write(text.replace("F32", "F64"))
print("mlk from", os.path.dirname(mlk.__file__), "; torch", torch.__version__)


# --- the blocks in PyTorch (the reference) ----------------------------------------
def torch_attention(x, mask, wq, bq, wk, bk, wv, bv, wo, bo, scale, heads):
    B, S, D = x.shape
    E = D // heads

    def split(t):
        return t.view(B, S, heads, E).transpose(1, 2)
    q, k, v = split(F.linear(x, wq, bq)), split(F.linear(x, wk, bk)), split(F.linear(x, wv, bv))
    scores = q @ k.transpose(-1, -2) * scale
    scores = scores.masked_fill(mask[:, None, None, :] == 0, -1e30)
    return F.linear((torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, S, D), wo, bo)


def torch_ffn(x, wi, bi, wf, bf):
    return F.linear(F.gelu(F.linear(x, wi, bi)), wf, bf)


def torch_add_layer_norm(x, residual, g, b, eps):
    return F.layer_norm(x + residual, (x.shape[-1],), g, b, eps)


# --- 1. gradcheck and autograd's values, in F64 ----------------------------------
ops64 = mlk.load(F64_BLOCKS, cache=os.path.join(WORK, "f64.db"))
gen = torch.Generator().manual_seed(1)


def r64(*shape):
    return torch.randn(*shape, dtype=torch.float64, generator=gen).requires_grad_()


B, S, D, H, FF = 3, 5, 6, 2, 7  # odd where the types allow (D mod H = 0)
mask = torch.ones(B, S, dtype=torch.int64)
mask[1, 3:] = 0
mask[2, 1:] = 0
cases = {
    "attention_block": ([r64(B, S, D), mask] + [r64(D, D) if i % 2 == 0 else r64(D) for i in range(8)]
                        + [1 / math.sqrt(D // H)],
                        lambda *a: torch_attention(*a, heads=H)),
    "ffn_block": ([r64(B, S, D), r64(FF, D), r64(FF), r64(D, FF), r64(D)], torch_ffn),
    "add_layer_norm": ([r64(B, S, D), r64(B, S, D), r64(D), r64(D), 1e-5], torch_add_layer_norm),
}
for name, (args, ref) in cases.items():
    block = mlk.torch.function(getattr(ops64, name), dims={"H": H} if name == "attention_block" else None)
    # F64 through erf (the FFN's GELU): the compiled erf is a polynomial approximation, within
    # 1e-6 of the true one (docs/numerics.md, kF64ErfAtol); its VJP rule is the true derivative.
    bound = 1e-5 if name == "ffn_block" else 1e-12
    try:
        ok = torch.autograd.gradcheck(block.apply, tuple(args), eps=1e-6, atol=max(bound, 1e-7), rtol=1e-5)
        check("gradcheck: %s (F64)" % name, ok)
    except Exception as e:  # noqa: BLE001
        check("gradcheck: %s (F64)" % name, False, str(e)[:2000])
    # The values against autograd's, for one random cotangent.
    g = torch.randn(B, S, D, dtype=torch.float64, generator=gen)
    tensors = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    got = torch.autograd.grad(block.apply(*args), tensors, g)
    want = torch.autograd.grad(ref(*args), tensors, g)
    # Relative to the largest gradient element (some are 0 in exact arithmetic: a key bias
    # moves every score of a row alike, so softmax cancels its gradient).
    worst = max(float((a - b).abs().max() / (1 + b.abs().max())) for a, b in zip(got, want))
    check("vjp = autograd: %s (F64, %d gradients, worst %.1e; bound %.0e)" % (name, len(got), worst, bound),
          worst < bound)

# --- 2. the boundary --------------------------------------------------------------
ffn64 = mlk.torch.function(ops64.ffn_block)
args = cases["ffn_block"][0]
raises("a wrong dtype is refused in the forward", lambda: ffn64.apply(args[0].float(), *args[1:]),
       mlk.BoundaryError, "argument 0 `x` of `ffn_block`")
raises("a plain call still refuses requires_grad", lambda: ops64.ffn_block(*args),
       mlk.BoundaryError, "requires grad")
raises("function() names a dimension no parameter binds", lambda: mlk.torch.function(ops64.attention_block),
       ValueError, "`attention_block` has dimension H that no parameter binds: give its value with dims={..}")
raises("function() takes an mlk fn", lambda: mlk.torch.function(torch_ffn), TypeError,
       "mlk.torch.function takes an mlk fn")
first = dict(ops64.ffn_block._vjps)
ffn64.apply(*args).sum().backward()
split = first.get("split")
check("the forward keeps what the backward reads (vjp_split, derived once): no vjp fn recomputes the forward",
      sorted(first) == ["split"] and ops64.ffn_block._vjps["split"] is split
      and (split.fwd.__name__, split.bwd.__name__, split.wrt) == ("ffn_block__fwd", "ffn_block__bwd", [0, 1, 2, 3, 4])
      and len(split.fwd._sig["results"]) > 1, str(sorted(first)))
# A few parameters need one: the same backward, the others dropped; the same gradients.
few = [args[0].detach(), args[1], args[2].detach(), args[3], args[4].detach()]
got = torch.autograd.grad(ffn64.apply(*few).sum(), [few[1], few[3]])
want = torch.autograd.grad(ffn64.apply(*args).sum(), [args[1], args[3]])
check("a few parameters: their gradients, the same", all(torch.equal(a, b) for a, b in zip(got, want)))
# The vjp fns (what register's ops and a parameter with no gradient use): one for several parameters.
together = mlk.torch._vjp(ops64.ffn_block, [1, 3])
g1 = torch.ones(B, S, D, dtype=torch.float64)
by_vjp = together(*[a.detach() for a in args], g1)
check("the vjp fn of a few parameters is one fn (ffn_block__vjp__wi__wf) with their cotangents",
      together.__name__ == "ffn_block__vjp__wi__wf" and len(by_vjp) == 2
      and all(torch.allclose(a, b, rtol=1e-12, atol=1e-12) for a, b in zip(by_vjp, want)))

# A parameter whose path has a non-differentiable op: the others still get their gradients.
PARTIAL = os.path.join(WORK, "partial.tl")
with open(PARTIAL, "w") as f:
    f.write("public fn q [N](x: Tensor[F64, [N]], w: Tensor[F64, [N]]) -> Tensor[F64, [N]] =\n"
            "  w * cast(cast(x, I32), F64)\n"
            "public fn clash [N](x: Tensor[F64, [N]]) -> Tensor[F64, [N]] = x * x\n"
            "public fn clash__vjp__x [N](x: Tensor[F64, [N]]) -> Tensor[F64, [N]] = x\n")
partial = mlk.load(PARTIAL, cache=os.path.join(WORK, "f64.db"))
q = mlk.torch.function(partial.q)
xq, wq_ = torch.randn(5, dtype=torch.float64) * 3, torch.randn(5, dtype=torch.float64, requires_grad=True)
gw = torch.autograd.grad(q.apply(xq, wq_).sum(), wq_)[0]
check("a differentiable parameter gets its gradient when another has none", torch.equal(gw, xq.to(torch.int32).double()))
raises("a parameter with no gradient says why, when one is needed",
       lambda: q.apply(xq.clone().requires_grad_(), wq_).sum().backward(), mlk.BoundaryError,
       "`q` has no gradient for `x`:")
check("the missing gradient is found once: the answer is kept, not derived again",
      partial.q._vjps["split"] is None and isinstance(partial.q._vjps[(0, 1)], str)
      and "`q` has no gradient for `x`, `w`:" in partial.q._vjps[(0, 1)], repr(partial.q._vjps.get((0, 1)))[:300])
raises("a public fn named like a vjp fn but of another signature is refused",
       lambda: mlk.torch._vjp(partial.clash, [0]),
       mlk.BoundaryError, "`clash__vjp__x` is a public fn of")

# A program that defines a vjp fn itself (to tune it with the rest): that one is used,
# the others are derived; the gradients are the same.
OWN = os.path.join(WORK, "own_vjp_f64.tl")
with open(OWN, "w") as f:
    f.write(text.replace("F32", "F64") + "\npublic fn ffn_block__vjp__wi = vjp(ffn_block, wrt=[wi])\n"
            "public fn ffn_block__vjp = vjp(ffn_block, wrt=[x, wi, bi, wf, bf])\n"
            "public fn ffn_block__fwd, ffn_block__bwd = vjp_split(ffn_block, wrt=[x, wi, bi, wf, bf])\n")
own = mlk.load(OWN, cache=os.path.join(WORK, "f64.db"))
own_ffn = mlk.torch.function(own.ffn_block)
got = torch.autograd.grad(own_ffn.apply(*args).sum(), args[1:])
want = torch.autograd.grad(ffn64.apply(*args).sum(), args[1:])
check("a program's own vjp_split is used; the same gradients",
      own.ffn_block._vjps["split"].fwd is own.ffn_block__fwd and own.ffn_block._vjps["split"].bwd is own.ffn_block__bwd
      and all(torch.equal(a, b) for a, b in zip(got, want)))
g1 = torch.ones(B, S, D, dtype=torch.float64)
plain = [a.detach() for a in args]
check("a program's own vjp fns are used (every parameter, one parameter), another derived; the same cotangents",
      mlk.torch._vjp(own.ffn_block, [0, 1, 2, 3, 4]) is own.ffn_block__vjp
      and mlk.torch._vjp(own.ffn_block, [1]) is own.ffn_block__vjp__wi
      and mlk.torch._vjp(own.ffn_block, [2])._ops is not own
      and torch.allclose(own.ffn_block__vjp__wi(*plain, g1), want[0], rtol=1e-12, atol=1e-12)
      and torch.allclose(mlk.torch._vjp(own.ffn_block, [2])(*plain, g1), want[1], rtol=1e-12, atol=1e-12))

# --- 3. training, scenario 7 literally ---------------------------------------------
ops = mlk.load(BLOCKS, cache=os.path.join(WORK, "f32.db"))
V, S, D, H, FF, C, LAYERS, BATCH, STEPS = 20, 8, 32, 4, 64, 2, 2, 16, 200
mlk_attention = mlk.torch.function(ops.attention_block, dims={"H": H})
mlk_ffn = mlk.torch.function(ops.ffn_block)


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(D, D) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.fi, self.fo = nn.Linear(D, FF), nn.Linear(FF, D)

    def forward(self, x, mask, use_mlk):
        w = (x, mask, self.q.weight, self.q.bias, self.k.weight, self.k.bias, self.v.weight, self.v.bias,
             self.o.weight, self.o.bias, 1 / math.sqrt(D // H))
        a = mlk_attention.apply(*w) if use_mlk else torch_attention(*w, heads=H)
        x = self.ln1(x + a)
        w = (x, self.fi.weight, self.fi.bias, self.fo.weight, self.fo.bias)
        return self.ln2(x + (mlk_ffn.apply(*w) if use_mlk else torch_ffn(*w)))


class Encoder(nn.Module):
    def __init__(self, use_mlk):
        super().__init__()
        self.use_mlk = use_mlk
        self.tok = nn.Embedding(V, D)
        self.pos = nn.Parameter(torch.randn(S, D) * 0.1)
        self.layers = nn.ModuleList(Layer() for _ in range(LAYERS))
        self.head = nn.Linear(D, C)

    def forward(self, ids, mask):
        x = self.tok(ids) + self.pos
        for layer in self.layers:
            x = layer(x, mask, self.use_mlk)
        return self.head(x[:, 0])


# The task: does token 3 occur more often than token 4 among the kept tokens?
data_gen = torch.Generator().manual_seed(7)
batches = []
for _ in range(8):
    ids = torch.randint(1, V, (BATCH, S), generator=data_gen)
    lengths = torch.randint(S // 2, S + 1, (BATCH,), generator=data_gen)
    m = (torch.arange(S)[None, :] < lengths[:, None]).to(torch.int64)
    label = (((ids == 3) * m).sum(1) > ((ids == 4) * m).sum(1)).to(torch.int64)
    batches.append((ids, m, label))


def train(use_mlk):
    torch.manual_seed(0)
    model = Encoder(use_mlk)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    losses = []
    for step in range(STEPS):
        ids, m, label = batches[step % len(batches)]
        loss = F.cross_entropy(model(ids, m), label)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


pure = train(False)
mixed = train(True)
env = mlk.testing.envelope("F32", FF)  # docs/numerics.md: the longest reduction is the FFN's
rtol, atol = env["rtol"], env["atol"]
worst = max(range(STEPS), key=lambda i: abs(pure[i] - mixed[i]) - (atol + rtol * abs(pure[i])))
bad = [i for i in range(STEPS) if abs(pure[i] - mixed[i]) > atol + rtol * abs(pure[i])]
print("losses (pure, mlk) at steps 0, 50, 100, 150, 199:",
      ", ".join("%.5f/%.5f" % (pure[i], mixed[i]) for i in (0, 50, 100, 150, 199)))
check("training: the loss curves agree at every step (rtol %.0e, atol %.1e; worst at step %d: %.6f vs %.6f)"
      % (rtol, atol, worst, pure[worst], mixed[worst]), not bad, "%d steps outside: %s" % (len(bad), bad[:10]))
first, last = sum(pure[:8]) / 8, sum(pure[-8:]) / 8
check("training: the pure loss falls (%.3f -> %.3f)" % (first, last), last < 0.5 * first)
first, last = sum(mixed[:8]) / 8, sum(mixed[-8:]) / 8
check("training: the mlk loss falls (%.3f -> %.3f)" % (first, last), last < 0.5 * first)

failed = [x for x in results if not x[1]]
for name, ok, note in results:
    print("%s %s%s" % ("ok  " if ok else "FAIL", name, "" if ok else "\n     " + note))
print("%d checks, %d failed" % (len(results), len(failed)))
sys.exit(1 if failed else 0)
