"""The standard library's std.init against torch.nn.init: each initialiser,
imported in F32 (`import std.init`) and F64 (`import std.init[F64]`), given
the noise PyTorch's own initialiser draws (torch.rand or torch.randn from the
same seed), must give PyTorch's weights: within 1e-6 of the scale in F32 and
1e-12 in F64. nn.Linear's own initialisation too, from the generator state
its constructor starts at. Odd shapes (O=7, I=13).

usage: std_init.py SOURCE_DIR MODULE_DIR WORK_DIR
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
import torch.nn.init as I  # noqa: E402

import mlk  # noqa: E402
from check_common import check, close_to_scale as close, results  # noqa: E402

O, IN = 7, 13
SEED = 5

# name: (mlk call, noise ("rand" or "randn"), extra scalar args, torch's initialiser on a tensor).
CASES = {
    "uniform": ("init.uniform(u, a, b)", "rand", [-0.5, 2.0], lambda t: I.uniform_(t, -0.5, 2.0)),
    "normal": ("init.normal(u, a, b)", "randn", [0.25, 3.0], lambda t: I.normal_(t, 0.25, 3.0)),
    "kaiming_uniform": ("init.kaiming_uniform(u, a)", "rand", [0.1], lambda t: I.kaiming_uniform_(t, a=0.1)),
    "kaiming_normal": ("init.kaiming_normal(u, a)", "randn", [0.1], lambda t: I.kaiming_normal_(t, a=0.1)),
    "xavier_uniform": ("init.xavier_uniform(u, a)", "rand", [1.7], lambda t: I.xavier_uniform_(t, gain=1.7)),
    "xavier_normal": ("init.xavier_normal(u, a)", "randn", [1.7], lambda t: I.xavier_normal_(t, gain=1.7)),
    "linear_weight": ("init.linear_weight(u)", "rand", [], lambda t: I.kaiming_uniform_(t, a=math.sqrt(5))),
}
PARAMS = {0: "", 1: ", a: Scalar[T]", 2: ", a: Scalar[T], b: Scalar[T]"}
DTYPES = {"32": ("F32", torch.float32, "init", 1e-6), "64": ("F64", torch.float64, "init64", 1e-12)}

shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
lines = ["import std.init", "import std.init[F64] as init64"]
for name, (call, _, extra, _) in CASES.items():
    for sfx, (code, _, mod, _) in DTYPES.items():
        sig = ("[O, I](u: Tensor[T, [O, I]]" + PARAMS[len(extra)] + ") -> Tensor[T, [O, I]]").replace("[T", "[" + code)
        lines.append("public fn %s_%s %s =\n  %s" % (name, sfx, sig, call.replace("init.", mod + ".")))
for sfx, (code, _, mod, _) in DTYPES.items():
    lines.append("public fn linear_bias_%s [O, I](u: Tensor[%s, [O]]) -> Tensor[%s, [O]] = %s.linear_bias[I=I](u)"
                 % (sfx, code, code, mod))
PROGRAM = os.path.join(WORK, "std_init.tl")
with open(PROGRAM, "w") as f:
    f.write("\n".join(lines) + "\n")
ops = mlk.load(PROGRAM)


for name, (_, noise, extra, ref) in CASES.items():
    for sfx, (code, dt, _, tol) in DTYPES.items():
        torch.manual_seed(SEED)
        want = ref(torch.empty(O, IN, dtype=dt))
        torch.manual_seed(SEED)
        u = getattr(torch, noise)(O, IN, dtype=dt)
        got = getattr(ops, "%s_%s" % (name, sfx))(u, *extra)
        close("std.init.%s in %s: PyTorch's weights from the same draw" % (name, code), got, want, tol)
        # and not by accident: other noise gives other weights
        other = getattr(ops, "%s_%s" % (name, sfx))(getattr(torch, noise)(O, IN, dtype=dt), *extra)
        check("std.init.%s in %s: other noise, other weights" % (name, code),
              (torch.as_tensor(other).double() - want.double()).abs().max().item() > 1e-3)

# nn.Linear(I, O): its constructor draws the weight, then the bias.
for sfx, (code, dt, _, tol) in DTYPES.items():
    torch.manual_seed(SEED)
    lin = torch.nn.Linear(IN, O, dtype=dt)
    torch.manual_seed(SEED)
    uw = torch.rand(O, IN, dtype=dt)
    ub = torch.rand(O, dtype=dt)
    close("std.init.linear_weight in %s: nn.Linear's weight" % code, getattr(ops, "linear_weight_" + sfx)(uw),
          lin.weight, tol)
    close("std.init.linear_bias in %s: nn.Linear's bias" % code,
          getattr(ops, "linear_bias_" + sfx)(ub, dims={"I": IN}), lin.bias, tol)

failed = [r for r in results if not r[1]]
for name, ok, note in results:
    print("%s %s%s" % ("ok  " if ok else "FAIL", name, "" if ok else "\n     " + note))
print("%d checks, %d failed" % (len(results), len(failed)))
sys.exit(1 if failed else 0)
