"""The `vjp` transform compiled (Halide's JIT, the default schedules) against
PyTorch autograd's values, in F64 at odd shapes: the tensor-valued fns of
tests/transforms/ops_f64.tl (every differentiable builtin among them), each
through mlk.torch.function, whose backward derives and runs the fn's vjp fns,
for one random cotangent. tests/lang/transforms_test.cpp holds the same vjp
fns to central finite differences through the interpreter.

usage: vjp_torch.py SOURCE_DIR MODULE_DIR WORK_DIR
"""
import os
import re
import shutil
import sys

SRC, MODULE_DIR, WORK = sys.argv[1:4]
sys.path.insert(0, os.path.join(SRC, "tests", "python"))
if MODULE_DIR != "-":  # "-": the installed mlk package
    sys.path.insert(0, MODULE_DIR)
import torch  # noqa: E402

import mlk  # noqa: E402
import mlk.torch  # noqa: E402
from check_common import check, results  # noqa: E402

shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
FNS = ["elementwise", "row_stats", "pick", "gelu", "stats", "joined", "batched"]
with open(os.path.join(SRC, "tests", "transforms", "ops_f64.tl")) as f:
    text = f.read()
# The same fns, public (a library of fns is checked whole: the rest stays as it is).
text = re.sub(r"^fn (%s) " % "|".join(FNS), r"public fn \1 ", text, flags=re.M)
path = os.path.join(WORK, "ops_f64_public.tl")
with open(path, "w") as f:
    f.write(text)
ops = mlk.load(path, cache=os.path.join(WORK, "cache.db"))
gen = torch.Generator().manual_seed(5)


def r(*shape):
    return (torch.rand(tuple(shape), dtype=torch.float64, generator=gen) * 2 - 1).requires_grad_()


def bcast(x, shape, axes):
    """mlk's broadcast: axis k of x becomes axis axes[k] of the result."""
    order = sorted(range(len(axes)), key=lambda k: axes[k])
    y = x.permute(*order) if order else x
    view = [1] * len(shape)
    for k, a in enumerate(sorted(axes)):
        view[a] = y.shape[k]
    return y.reshape(view).expand(*shape)


N, C, V, E, I, B, M, K = 3, 5, 5, 3, 7, 3, 5, 7


def elementwise(a, b):
    p = b * b + 1.0
    return (torch.exp(a) * torch.log(p) + torch.sqrt(p) * torch.tanh(a) - torch.rsqrt(p) + torch.sigmoid(a) * b.abs()
            + torch.relu(a) + torch.erf(b) + torch.maximum(a, b) + torch.minimum(a, b) * a + torch.pow(p, a)
            + torch.where(a > b, a * b, b * 3.0) - a / p)


def row_stats(x, w):
    return (torch.softmax(x, 1) * w.T).sum(1) + (x @ w).amax(1)


def pick(t, idx):
    return t[idx.long()].T


def gelu(x):
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def stats(x, w, s):
    return (w * bcast(x, [C, 3, N], [2, 0])).mean(2) * s + bcast(x.amin(0), [C, 3], [0])


def joined(x, y):
    c = torch.cat([x, y, torch.repeat_interleave(x, 2, dim=1)], 1)
    t = c[:, 1:1 + C].T
    return torch.cat([(t * t).reshape(C * N), (x * c[:, C + 2:C + 2 + C]).reshape(N * C)])


def batched(a, b):
    ab = a @ b
    return ab * ab


cases = {
    "elementwise": (elementwise, [r(7), r(7)]),
    "row_stats": (row_stats, [r(N, C), r(C, N)]),
    "pick": (pick, [r(V, E), torch.randint(0, V, (I,), dtype=torch.int32, generator=gen)]),
    "gelu": (gelu, [r(N, C)]),
    "stats": (stats, [r(N, C), r(C, 3, N), r()]),
    "joined": (joined, [r(N, C), r(N, 2)]),
    "batched": (batched, [r(B, M, K), r(K, N)]),
}
for name, (ref, args) in cases.items():
    block = mlk.torch.function(getattr(ops, name))
    want_y = ref(*args)
    got_y = block.apply(*args)
    g = torch.rand(want_y.shape, dtype=torch.float64, generator=gen) * 2 - 1
    wrt = [a for a in args if a.requires_grad]
    got = torch.autograd.grad(got_y, wrt, g)
    want = torch.autograd.grad(want_y, wrt, g)
    # F64 through erf: the compiled erf is a polynomial within 1e-6 (docs/numerics.md).
    bound = 1e-5 if name == "elementwise" else 1e-10
    worst = max(float((a - b).abs().max() / (1 + b.abs().max())) for a, b in zip(got, want))
    check("vjp of %s = autograd's (F64, %d cotangents, worst %.1e, bound %.0e)" % (name, len(wrt), worst, bound),
          worst < bound and all(a.shape == b.shape for a, b in zip(got, want)))

# What mlk.torch.function returns is called like a function (as a new user
# would inside an nn.Module), by position or by parameter name; .apply stays.
block = mlk.torch.function(ops.batched)
a, b = r(B, M, K), r(K, N)
y = block(a, b)
ga, gb = torch.autograd.grad((y * y).sum(), [a, b])
wa, wb = torch.autograd.grad((batched(a, b) ** 2).sum(), [a, b])
check("function(fn)(*args) records autograd like fn's own (callable, not a class)",
      float((ga - wa).abs().max()) < 1e-10 and float((gb - wb).abs().max()) < 1e-10 and not isinstance(block, type))
check("block(b=.., a=..) = block.apply(a, b)", torch.equal(block(b=b, a=a), block.apply(a, b)))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.rand(K, N, dtype=torch.float64))
        self.block = mlk.torch.function(ops.batched)

    def forward(self, x):
        return self.block(x, self.w)


net = Net()
net(a.detach()).sum().backward()
check("a block inside an nn.Module trains its parameter", net.w.grad is not None and net.w.grad.shape == (K, N))
for kwargs, want in [({"a": a, "c": b}, "`batched` has no parameter `c` (its parameters: a, b)"),
                     ({"a": a}, "`batched` is missing parameter `b`")]:
    try:
        block(**kwargs)
        got = "no error"
    except TypeError as e:
        got = str(e)
    check("block(%s) is refused naming the fn: %s" % (", ".join(kwargs), got), got == want)
try:
    block(a, a=a)
    got = "no error"
except TypeError as e:
    got = str(e)
check("a parameter given twice is refused: " + got, got == "`batched` got parameter `a` twice: by position (argument 1) and by name")

failed = [x for x in results if not x[1]]
for name, ok, note in results:
    print("%s %s%s" % ("ok  " if ok else "FAIL", name, "" if ok else "\n     " + note))
print("%d checks, %d failed" % (len(results), len(failed)))
sys.exit(1 if failed else 0)
