"""A block's weights from a torch.nn.Module by name (issue 53, item 2;
python/mlk/records.py, `params_from`): `ops.block(h, params_from=module)`
binds every parameter not passed otherwise to the module's parameter or
buffer of that name (`ln.weight` is `ln_weight`), equal to the module's own
forward under torch.no_grad(); a parameter given by keyword wins; with grad
mode on the module's parameters are refused naming the argument; a nested
dict works as a module does; a parameter the module lacks, and a source that
is neither, are refused naming them.

usage: params_from.py MODULE_DIR WORK_DIR
"""
import os
import sys

MODULE_DIR, WORK = sys.argv[1:3]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if MODULE_DIR != "-":
    sys.path.insert(0, MODULE_DIR)
import torch  # noqa: E402

import mlk  # noqa: E402
from check_common import check, close_to_scale, finish, raises  # noqa: E402

os.makedirs(WORK, exist_ok=True)
src = os.path.join(WORK, "block.tl")
with open(src, "w") as f:
    f.write("import std.nn\n\n"
            "public fn block [N, D, F](h: Tensor[F32, [N, D]], ln_weight: Tensor[F32, [D]], ln_bias: Tensor[F32, [D]],\n"
            "                          fc_weight: Tensor[F32, [F, D]], fc_bias: Tensor[F32, [F]]) -> Tensor[F32, [N, F]] =\n"
            "  nn.linear(nn.layer_norm(h, ln_weight, ln_bias, 1e-5), fc_weight, fc_bias)\n")
ops = mlk.load(src)


class Block(torch.nn.Module):
    def __init__(self, d, f):
        super().__init__()
        self.ln = torch.nn.LayerNorm(d)
        self.fc = torch.nn.Linear(d, f)

    def forward(self, h):
        return self.fc(self.ln(h))


torch.manual_seed(5)
N, D, F = 13, 24, 40
m = Block(D, F)
with torch.no_grad():
    m.ln.weight.normal_()
    m.ln.bias.normal_()
h = torch.randn(N, D)
with torch.no_grad():
    want = m(h)
    close_to_scale("params_from=module under no_grad: the module's forward", ops.block(h, params_from=m), want, 1e-5)
    with torch.inference_mode():
        close_to_scale("... and under inference_mode", ops.block(h, params_from=m), want, 1e-5)
    w2 = torch.randn(D)
    close_to_scale("a parameter given by keyword wins over the module's",
                   ops.block(h, ln_weight=w2, params_from=m),
                   torch.nn.functional.linear(torch.nn.functional.layer_norm(h, (D,), w2, m.ln.bias, 1e-5),
                                              m.fc.weight, m.fc.bias), 1e-5)
    tree = {"ln": {"weight": m.ln.weight, "bias": m.ln.bias}, "fc": {"weight": m.fc.weight, "bias": m.fc.bias}}
    close_to_scale("params_from=a nested dict, as the module's", ops.block(h, params_from=tree), want, 1e-5)
    check("the kernel's selection is reachable with params_from too",
          "default schedule" in ops.block.kernel(h, params_from=m).selection or "tuned" in
          ops.block.kernel(h, params_from=m).selection)
raises("with grad mode on, a module's parameter is refused, named",
       lambda: ops.block(h, params_from=m), mlk.BoundaryError,
       "argument 1 `ln_weight` of `block`: requires grad; mlk kernels have no autograd (pass ln_weight.detach(), "
       "call under torch.no_grad(), or train through mlk.torch.function)", exact=True)


class Half(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = torch.nn.LayerNorm(d)
        self.fc_w = torch.nn.Parameter(torch.zeros(F, d))


with torch.no_grad():
    raises("a parameter the module lacks: named, with the closest names it has",
           lambda: ops.block(h, params_from=Half(D)), mlk.BoundaryError,
           "`block`: argument `fc_weight` is neither given nor in `params_from` (a Half) (closest: `fc_w`)",
           exact=True)
    raises("... and from a dict with nothing close: what it has",
           lambda: ops.block(h, params_from={"ln": {"weight": m.ln.weight, "bias": m.ln.bias}}), mlk.BoundaryError,
           "`block`: argument `fc_weight` is neither given nor in `params_from` (a dict) (it has `ln_weight`, "
           "`ln_bias`)", exact=True)
    raises("a source that is neither a module nor a dict",
           lambda: ops.block(h, params_from=[m.ln.weight]), mlk.BoundaryError,
           "`block`: params_from must be a torch.nn.Module or a dict of tensors, not a list", exact=True)
    raises("a keyword the fn does not have is still refused",
           lambda: ops.block(h, ln_w=m.ln.weight, params_from=m), mlk.BoundaryError,
           "`block` has no parameter `ln_w`")

finish()
