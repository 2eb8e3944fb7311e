"""Checked handles (the seed's scenario 1): a tensor checked once against a
written .tl type, e.g. `mlk.check(w_q, "Tensor[F16, [D, D], [D mod H = 0]]",
dims={"H": 8})`.

The type is compiled by mlk's front end, so its syntax, dimension arithmetic
and refinements are the language's; the tensor's dtype, every extent and
every refinement are checked, and the handle keeps the dimensions the check
bound (`.dims`: {"D": 384, "H": 8}). A handle is accepted wherever its
tensor is (a fn's argument, a record's field): the call takes the tensor,
and a refinement of the fn that the handle proved is not checked again when
(a) it is, as the language prints it, one of the handle's `.refinements`,
(b) the call binds every dimension it names to the value in the handle's
`.dims`, and (c) the tensor still has the dtype and shape it was checked
with. Every other boundary check runs as for any tensor (the device, dtype,
shape and layout rules always do: O(rank), and they catch a tensor resized
in place since the check), and so does any refinement not meeting (a)-(c).
The call's `kernel(...).selection` names each refinement it skipped
("refinement `D mod H = 0` of `w_q`: proven by its handle (mlk.check), not
checked again"); a handle given to a model (mlk.load_model) does the same for
every step that takes it, listed by the model's `selections(...)`. The checks
are made, and skipped, by the C++ runtime (runtime/boundary.h, Proven),
which C++ callers reach with mlk::rt::check (runtime/checked.h). A handle's dims give the call the values of the fn's
unbound dims of the same name (as `dims=` would), and must agree with the
call's own `dims=`.
"""
import builtins

from . import _dlpack, _mlk


class Checked:
    """A tensor and the type it was checked against: .tensor, .type (as the language prints
    it), .refinements (each proven for .dims) and .dims (every dimension of the type)."""

    __slots__ = ("tensor", "type", "refinements", "dims", "_proof")

    def __init__(self, tensor, type, refinements, dims, proof=None):
        self.tensor, self.type, self.refinements, self.dims = tensor, type, refinements, dims
        # What the check proved, opaque (the C++ CheckedType, with the shape and dtype as
        # checked: rule (c)); .refinements and .dims are copies to read. None proves nothing.
        self._proof = proof

    def __repr__(self):
        where = " where " + ", ".join(self.refinements) if self.refinements else ""
        dims = ", ".join("%s=%d" % kv for kv in sorted(self.dims.items()))
        return "mlk.Checked(%s%s; %s)" % (self.type, where, dims)

    def __dlpack__(self, *args, **kwargs):  # a handle is its tensor to any DLPack consumer
        return self.tensor.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()


def check(x, type, dims=None):
    """Checks `x` (a torch tensor, numpy array or any DLPack producer) against the .tl type
    `type`, with `dims` giving the names no axis binds (as `H` in `[D mod H = 0]`); returns a
    Checked handle, or raises BoundaryError naming the axis, dimension or refinement."""
    if isinstance(x, Checked):
        x = x.tensor
    if not hasattr(x, "__dlpack__"):
        raise _mlk.BoundaryError("mlk.check: a %s, not a tensor (torch.Tensor or an object with __dlpack__)"
                                 % builtins.type(x).__name__)
    t = x
    if builtins.type(x).__module__.startswith("torch") and str(getattr(x, "dtype", "")) == "torch.bool":
        import torch
        t = x.view(torch.uint8)  # DLPack's Bool as mlk takes it (runtime/boundary.h)
    cap = _dlpack.capsule(t, lambda i: "the checked tensor", 0, None)
    r = _mlk.check_type(cap, str(type), {str(k): int(v) for k, v in (dims or {}).items()})
    return Checked(x, r["type"], list(r["refinements"]), dict(r["dims"]), r["proof"])


def unwrap(args, dims, unbound):
    """(`args` with each handle replaced by its tensor, the call's dims, what the handles
    proved): a handle's dims must agree with the call's `dims`, and give the values of the fn's
    `unbound` dims it names. What they proved is one (argument index, proof) per handle, for
    the C++ call (runtime/boundary.h, Proven), which skips those
    refinements under rules (a)-(c) above."""
    if not any(isinstance(a, Checked) for a in args):
        return args, dims, []
    out = dict(dims or {})
    proven = []
    for i, a in enumerate(args):
        if isinstance(a, Checked):
            if a._proof is not None:
                proven.append((i, a._proof))
            for k, v in a.dims.items():
                if k in out and out[k] != v:
                    raise _mlk.BoundaryError("a handle checked with %s = %d, but the call has %s = %d"
                                             % (k, v, k, out[k]))
                if k in unbound:
                    out[k] = v
    return tuple(a.tensor if isinstance(a, Checked) else a for a in args), out, proven
