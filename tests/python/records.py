"""Records through the language and the package (lang/records.h,
python/mlk/records.py): scenario 3's training step written with records
(tests/records/scenario3.tl), run by Halide's JIT through the `mlk` package
with its parameters and batch passed as dicts, positionally and by keyword:

1. the loss, `grad` with respect to the parameters record and `grad` with no
   `wrt` (the first parameter, as jax.grad's argnums=0) agree with PyTorch
   autograd within the F32 envelope;
2. `fold` over an Array of four layers equals the same layers applied in a
   loop by PyTorch;
3. a missing, extra or misnamed leaf is refused naming it;
4. scenario 1: `mlk.check` of a weight against a written type with a
   refinement, its refusals (refinement, dtype, shape, the type's own
   errors), the handle as an argument giving the call its unbound dim, and
   the call skipping the refinement the handle proved (its selection says
   so; a call without handles, or with a handle's tensor resized in place,
   checks it).

usage: records.py SOURCE_DIR MODULE_DIR
"""
import os
import sys

SRC, MODULE_DIR = sys.argv[1:3]
sys.path.insert(0, os.path.join(SRC, "tests", "python"))
if MODULE_DIR != "-":
    sys.path.insert(0, MODULE_DIR)
import torch  # noqa: E402

import mlk  # noqa: E402
from check_common import check, raises, results  # noqa: E402

torch.manual_seed(3)
B, D, H = 37, 19, 23  # odd sizes
ops = mlk.load(os.path.join(SRC, "tests", "records", "scenario3.tl"))


def t(*shape):
    return torch.randn(*shape, dtype=torch.float32)


params = {"hidden": {"w": t(D, H) * 0.3, "b": t(H) * 0.1}, "out": {"w": t(H, 1) * 0.3, "b": t(1) * 0.1}}
batch = {"x": t(B, D), "y": t(B, 1)}


def reference(p, bt):
    h = torch.tanh(bt["x"] @ p["hidden"]["w"] + p["hidden"]["b"])
    d = h @ p["out"]["w"] + p["out"]["b"] - bt["y"]
    return (d * d).mean()


def leaves(tree):
    return [leaf for v in tree.values() for leaf in (leaves(v) if isinstance(v, dict) else [v])]


def close(a, b, what):
    err = (a.double() - b.double()).abs().max().item()
    scale = b.double().abs().max().item() + 1e-30
    check(what, err <= 1e-5 * max(scale, 1.0), "max error %.3g (scale %.3g)" % (err, scale))


# 1. The loss and its gradients, against autograd.
p_req = {k: {f: v.clone().requires_grad_() for f, v in fs.items()} for k, fs in params.items()}
b_req = {k: v.clone().requires_grad_() for k, v in batch.items()}
loss = reference(p_req, b_req)
loss.backward()
close(ops.loss_step(params, batch), loss.detach(), "loss_step (positional records)")
close(ops.loss_step(batch=batch, params=params), loss.detach(), "loss_step (records by keyword)")
# A dict's order does not matter: leaves are placed by name.
swapped = {"out": params["out"], "hidden": {"b": params["hidden"]["b"], "w": params["hidden"]["w"]}}
close(ops.loss_step(swapped, batch), loss.detach(), "loss_step (fields in another order)")

g = ops.grads(params, batch)
want = [p_req["hidden"]["w"].grad, p_req["hidden"]["b"].grad, p_req["out"]["w"].grad, p_req["out"]["b"].grad]
check("grad wrt=[params]: one result per leaf of the record", len(g) == 4, "got %d" % len(g))
for name, a, b in zip(["hidden.w", "hidden.b", "out.w", "out.b"], g, want):
    close(a, b, "d loss / d params.%s" % name)

first = ops.first(params, batch)
check("grad with no wrt: the first parameter's float leaves (4 of params, none of batch)", len(first) == 4,
      "got %d" % len(first))
for name, a, b in zip(["hidden.w", "hidden.b", "out.w", "out.b"], first, want):
    close(a, b, "grad(loss_step) d/d params.%s" % name)

# 2. fold over an Array: the layers in order.
layers = [{"w": t(D, D) * 0.3, "b": t(D) * 0.1} for _ in range(4)]
x = t(B, D)
h = x
for layer in layers:
    h = torch.tanh(h @ layer["w"] + layer["b"])
close(ops.deep({"layers": layers}, x), h, "fold over Array[Linear, 4]")
close(ops.deep(x=x, s={"layers": tuple(layers)}), h, "fold, the Array as a tuple by keyword")

# 3. Refusals that name the leaf.
short = {"hidden": {"w": params["hidden"]["w"]}, "out": params["out"]}
raises("a missing leaf is named", lambda: ops.loss_step(short, batch), mlk.BoundaryError,
       "missing argument `params_hidden_b`")
extra = {"hidden": dict(params["hidden"], c=params["hidden"]["b"]), "out": params["out"]}
raises("an extra leaf is named", lambda: ops.loss_step(extra, batch), mlk.BoundaryError,
       "the record `params` (Params[D, H]) has no field `hidden_c`")
raises("a tensor where a record goes", lambda: ops.loss_step(batch["x"], batch), mlk.BoundaryError,
       "argument 0 of `loss_step`: `params` is a record Params[D, H]; pass a dict of its fields")
raises("a record where a tensor goes", lambda: ops.deep({"layers": layers}, [x]), mlk.BoundaryError, "not a tensor")
raises("a record given twice", lambda: ops.loss_step(params, batch, params=params), mlk.BoundaryError,
       "parameter `params_hidden_w` of `loss_step` is given twice")
raises("an Array one element short", lambda: ops.deep({"layers": layers[:3]}, x), mlk.BoundaryError,
       "`deep`: missing arguments `s_layers_3_w`, `s_layers_3_b`")

# 4. Scenario 1: mlk.check, a typed handle that carries its dims.
w_q = t(D, D)
raises("mlk.check refuses a refinement the tensor breaks", lambda: mlk.check(w_q, "Tensor[F32, [D, D], [D mod H = 0]]",
                                                                               dims={"H": 5}),
       mlk.BoundaryError, "D mod H = 0")
raises("mlk.check refuses a dtype", lambda: mlk.check(w_q.double(), "Tensor[F32, [D, D]]"), mlk.BoundaryError,
       "a float64 tensor, but the type `Tensor[F32, [D, D]]` is F32")
raises("mlk.check refuses a shape", lambda: mlk.check(t(D, D + 1), "Tensor[F32, [D, D]]"), mlk.BoundaryError,
       "type `Tensor[F32, [D, D]]`: the tensor's shape[1] = 20 but D = 19, bound by the tensor's shape[0]", exact=True)
raises("mlk.check names a dimension the tensor does not give as dims",
       lambda: mlk.check(w_q, "Tensor[F32, [D, D * H]]"), mlk.BoundaryError,
       'type `Tensor[F32, [D, D * H]]`: dimension `H` of the type is not an extent of the tensor; '
       'give its value in dims (dims={"H": VALUE})', exact=True)
raises("mlk.check names a dimension the type lacks", lambda: mlk.check(w_q, "Tensor[F32, [D, D]]", dims={"E": 2}),
       mlk.BoundaryError, "type `Tensor[F32, [D, D]]`: the type has no dimension `E` (given in dims)", exact=True)
raises("mlk.check reports the type's own errors", lambda: mlk.check(w_q, "Tensor[F32, [D / H]]"), mlk.BoundaryError,
       "type `Tensor[F32, [D / H]]`")
w = mlk.check(w_q, "Tensor[F32, [D, D], [D mod H = 0]]", dims={"H": D})
check("a handle carries its type, refinements and dims",
      (w.type, w.refinements, w.dims) == ("Tensor[F32, [D, D]]", ["D mod H = 0"], {"D": D, "H": D}), repr(w))
xb = t(B, D)
close(ops.project(xb, w), (xb @ w_q).reshape(B, D, 1), "a handle as an argument, its H giving the call's unbound dim")
raises("a handle's dims must agree with the call's", lambda: ops.project(xb, w, dims={"H": 1}), mlk.BoundaryError,
       "a handle checked with H = 19, but the call has H = 1")
skipped = "refinement `D mod H = 0` of `w_q`: proven by its handle (mlk.check), not checked again"
sel = ops.project.kernel(xb, w).selection
check("a call given a handle skips the refinement it proved, and its selection says so", skipped in sel, sel)
sel = ops.project.kernel(xb, w_q, dims={"H": D}).selection
check("a call without handles checks every refinement (its selection names none skipped)",
      "proven by its handle" not in sel, sel)
w_r = mlk.check(t(D, D), "Tensor[F32, [D, D], [D mod H = 0]]", dims={"H": D})
w_r.tensor.resize_(D + 1, D + 1)  # in place, after the check: D = 20 no longer a multiple of H = 19
raises("a handle's tensor resized since its check is checked again", lambda: ops.project(t(B, D + 1), w_r),
       mlk.BoundaryError, "refinement `D mod H = 0` of `project` does not hold: D = 20, H = 19")
# A handle's .dims and .refinements are copies to read: edited, or on a hand-made Checked, they prove nothing.
w_e = mlk.check(w_q, "Tensor[F32, [D, D], [D mod H = 0]]", dims={"H": D})
w_e.dims["H"] = 5
raises("a handle whose dims were edited proves nothing", lambda: ops.project(xb, w_e), mlk.BoundaryError,
       "refinement `D mod H = 0` of `project` does not hold: D = 19, H = 5")
forged = mlk.checked.Checked(w_q, "Tensor[F32, [D, D]]", ["D mod H = 0"], {"D": D, "H": 5})
raises("a hand-made handle proves nothing", lambda: ops.project(xb, forged), mlk.BoundaryError,
       "refinement `D mod H = 0` of `project` does not hold: D = 19, H = 5")
raises("a handle with another object as its proof is refused",
       lambda: ops.project(xb, mlk.checked.Checked(w_q, "t", [], {"H": D}, object())), mlk.BoundaryError,
       "a checked handle whose proof is not mlk.check's")

# 5. Signatures as the program declares them: symbolic shapes and refinements.
want_sig = ("project [B, D, H] (x: Tensor[F32, [B, D]], w_q: Tensor[F32, [D, D]]) -> Tensor[F32, [B, H, D / H]]"
            " where [D mod H = 0]")
check("fn.signature shows symbolic shapes and the refinement", ops.project.signature == want_sig,
      ops.project.signature)
check("fn.__doc__ shows the signature", ops.project.__doc__ == "mlk kernel " + want_sig, ops.project.__doc__)
# 6. dims= in Python's terms, never the command line's.
raises("a dimension no argument binds, missing: named as dims=", lambda: ops.project(xb, w_q), mlk.BoundaryError,
       'dimension `H` of `project` is bound by no argument; pass it as dims={"H": VALUE}', exact=True)
raises("a dimension the fn lacks: named as dims=", lambda: ops.project(xb, w_q, dims={"H": D, "Q": 2}),
       mlk.BoundaryError, "`project` has no dimension `Q` (given in dims=); its dimensions are B, D, H", exact=True)
snap = mlk.signatures(ops)
check("mlk.signatures: the declarations of every public fn", "/* mlk kernel " + want_sig + "\n" in snap
      and "int mlk_project(const mlk_tensor_t* args" in snap and "int mlk_first_results(" in snap, snap)
check("mlk.signatures(path, check=) passes on the same program",
      mlk.signatures(os.path.join(SRC, "tests", "records", "scenario3.tl"), check=snap) == snap)
raises("mlk.signatures(check=) names the fn whose signature changed",
       lambda: mlk.signatures(ops, check=snap.replace("w_q  MLK_F32  [D, D]", "w_q  MLK_F16  [D, D]")),
       mlk.BoundaryError, "`project` changed:\n  -  *   args[1]  w_q  MLK_F16  [D, D]\n  +  *   args[1]  w_q  MLK_F32  [D, D]")

failed = [r for r in results if not r[1]]
for name, ok, note in results:
    print("%s %s%s" % ("ok  " if ok else "FAIL", name, "" if ok else "\n     " + note))
print("%d checks, %d failed" % (len(results), len(failed)))
sys.exit(1 if failed else 0)
