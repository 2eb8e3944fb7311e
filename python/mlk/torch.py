"""mlk.torch: mlk fns inside PyTorch's autograd and torch.compile.

    import mlk, mlk.torch
    ops = mlk.load("blocks.tl")
    ffn = mlk.torch.function(ops.ffn_block)   # a torch.autograd.Function
    y = ffn.apply(x, wi, bi, wf, bf)          # y.sum().backward() runs ffn_block's vjp

    mlk.torch.register(ops, namespace="mlk")  # every public fn a torch.library op
    y = torch.ops.mlk.ffn_block(x, wi, bi, wf, bf)   # traced by torch.compile(fullgraph=True)

A fn's backward is its `vjp` (docs/interop/pytorch.md, "Training through
mlk blocks"): for the fn's float parameters, mlk derives the program
`public fn <fn>__vjp__<p>, .. = vjp(<fn>, wrt=[p, ..])` from the fn's own
program on first use and runs those fns like any kernel (the cache, tuned
artifacts and the JIT fallback apply to them; a tuned `vjp` fn is found by
its program hash). The forward and every vjp call go through the same
boundary checks as a plain call (dtypes, shapes, refinements, the target
policy); nothing is converted or broadcast.

Rank-0 parameters (`Scalar[..]`) are numbers in the torch.library schema
(float, int or bool) and get no gradient; through function() a rank-0 torch
tensor gets one like any tensor. Double backward is not supported.
"""
import threading

import torch

from . import BoundaryError, _TORCH_DTYPES

_FLOATS = ("F16", "BF16", "F32", "F64")
_LOCK = threading.Lock()


def _vjp_program(fn):
    """{param index: vjp fn (an mlk fn)} for fn's float parameters, derived once per fn."""
    with _LOCK:
        cached = getattr(fn, "_vjps", None)
        if cached is not None:
            return cached
        ops = fn._ops
        if ops._runtime is None:
            raise BoundaryError("`%s`: its Ops were not made by mlk.load, so its program cannot be derived"
                                % fn.__name__)
        params = fn._sig["params"]
        wrt = [i for i, p in enumerate(params) if p["dtype"] in _FLOATS]
        names = {i: "%s__vjp__%s" % (fn.__name__, params[i]["name"]) for i in wrt}
        out = {}
        if wrt:
            line = "public fn %s = vjp(%s, wrt=[%s])" % (
                ", ".join(names[i] for i in wrt), fn.__name__, ", ".join(params[i]["name"] for i in wrt))
            base = ops._program
            derived = ops._runtime.program_source(base.file + " (with the vjp of `%s`)" % fn.__name__,
                                                   base.source.rstrip("\n") + "\n\n" + line + "\n", ops._precision)
            from . import Ops
            vops = Ops(derived, ops.target, ops._runtime, ops._precision)
            out = {i: getattr(vops, names[i]) for i in wrt}
        fn._vjps = out
        return out


def _plain(a):
    return a.detach() if isinstance(a, torch.Tensor) else a


def _backward(fn, args, g, needs, dims):
    """The cotangents of fn's arguments `args` for the result's cotangent g (None where not needed)."""
    vjps = _vjp_program(fn)
    g = g.contiguous()  # autograd gives it the result's dtype and shape; it may be expanded
    plain = [_plain(a) for a in args]
    return tuple(vjps[i](*plain, g, dims=dims) if need and i in vjps else None for i, need in enumerate(needs))


def _unbound(fn, dims):
    missing = [d for d in fn._sig["unbound_dims"] if d not in (dims or {})]
    if missing:
        raise ValueError("`%s` has dimension%s %s that no parameter binds: give %s with dims={..}"
                         % (fn.__name__, "s" if len(missing) > 1 else "", ", ".join(missing),
                            "their values" if len(missing) > 1 else "its value"))
    return {d: int(dims[d]) for d in fn._sig["unbound_dims"]} or None


def function(fn, dims=None):
    """A torch.autograd.Function for the mlk fn `fn` (e.g. ops.ffn_block): `.apply(*args)` runs
    the fn; backward runs the fn's vjp fns (derived and compiled on first use) for the arguments
    that need a gradient. Arguments are passed as to the fn itself (tensors of the declared dtypes,
    numbers for Scalar parameters); `dims` gives the dimensions no parameter binds (e.g. {"H": 12}
    for attention heads), for the fn and its vjp fns alike."""
    if not hasattr(fn, "_sig") or not hasattr(fn, "_ops"):
        raise TypeError("mlk.torch.function takes an mlk fn (an attribute of mlk.load(...)), not %s"
                        % type(fn).__name__)
    dims = _unbound(fn, dims)

    class MlkFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            ctx.args = [None if isinstance(a, torch.Tensor) else a for a in args]
            ctx.save_for_backward(*[a for a in args if isinstance(a, torch.Tensor)])
            return fn(*[_plain(a) for a in args], dims=dims)

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx, g):
            saved = iter(ctx.saved_tensors)
            args = [next(saved) if a is None else a for a in ctx.args]
            return _backward(fn, args, g, ctx.needs_input_grad, dims)

    MlkFunction.__name__ = MlkFunction.__qualname__ = "mlk_" + fn.__name__
    MlkFunction.__doc__ = fn.__doc__
    return MlkFunction


def _schema_type(p):
    if p["rank"] > 0:
        return "Tensor"
    return {"Bool": "bool"}.get(p["dtype"], "float" if p["dtype"] in _FLOATS else "int")


def _needs_torch_library():
    lib = torch.library
    if not (hasattr(lib, "register_fake") and hasattr(lib, "register_autograd")):
        raise RuntimeError("mlk.torch.register needs PyTorch 2.4 or later (torch.library.register_fake and "
                           "register_autograd); this is torch %s. mlk.torch.function works on older versions"
                           % torch.__version__)


def _define(lib, ns, name, fn, dims):
    """Defines `ns::name` for mlk fn `fn` (its parameters, then `extra` schema arguments) with a CPU
    implementation that calls it and a fake one from its typed signature."""
    params = fn._sig["params"]
    schema = ", ".join("%s %s" % (_schema_type(p), p["name"]) for p in params)
    lib.define("%s(%s) -> Tensor" % (name, schema))
    result = getattr(torch, _TORCH_DTYPES[fn._sig["result_dtype"]])
    program, fname = fn._ops._program, fn.__name__

    def impl(*args):
        return fn(*[_plain(a) for a in args], dims=dims)

    def fake(*args):
        shapes = [[int(d) for d in a.shape] if isinstance(a, torch.Tensor) else [] for a in args]
        like = next(a for a in args if isinstance(a, torch.Tensor))
        return like.new_empty(program.result_shape(fname, shapes, dims or {}), dtype=result)

    lib.impl(name, impl, "CPU")
    torch.library.register_fake("%s::%s" % (ns, name), fake, lib=lib)


def register(ops, namespace="mlk", dims=None):
    """Registers every public fn of `ops` (mlk.load) as the torch.library op
    torch.ops.<namespace>.<fn>, with a fake implementation from its typed signature and
    an autograd formula from its vjp (the vjp fns are ops too: <fn>__vjp__<param>), so
    that torch.compile(fullgraph=True) traces through them. `dims` gives the values of
    dimensions no parameter binds ({"H": 12}), for every fn that has them. Returns
    torch.ops.<namespace>."""
    _needs_torch_library()
    lib = torch.library.Library(namespace, "FRAGMENT")
    _LIBRARIES.append(lib)  # an op lives as long as its Library object
    for name in ops._program.public_fns:
        fn = getattr(ops, name)
        fixed = _unbound(fn, dims)
        _define(lib, namespace, name, fn, fixed)
        vjps = _vjp_program(fn)
        for i, v in vjps.items():
            _define(lib, namespace, v.__name__, v, fixed)
        params = fn._sig["params"]
        # Gradients only for tensor parameters: a number in the schema has none.
        grads = {i: getattr(torch.ops, namespace).__getattr__(v.__name__) for i, v in vjps.items()
                 if params[i]["rank"] > 0}

        def setup_context(ctx, inputs, output):
            ctx.scalars = [None if isinstance(a, torch.Tensor) else a for a in inputs]
            ctx.save_for_backward(*[a for a in inputs if isinstance(a, torch.Tensor)])

        def backward(ctx, g, grads=grads, n=len(params)):
            saved = iter(ctx.saved_tensors)
            args = [next(saved) if a is None else a for a in ctx.scalars]
            g = g.contiguous()
            return tuple(grads[i](*args, g) if i in grads and ctx.needs_input_grad[i] else None for i in range(n))

        torch.library.register_autograd("%s::%s" % (namespace, name), backward, setup_context=setup_context, lib=lib)
    return getattr(torch.ops, namespace)


_LIBRARIES = []
