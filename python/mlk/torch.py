"""mlk.torch: mlk fns inside PyTorch's autograd and torch.compile.

    import mlk, mlk.torch
    ops = mlk.load("blocks.tl")
    ffn = mlk.torch.function(ops.ffn_block)   # a torch.autograd.Function
    y = ffn.apply(x, wi, bi, wf, bf)          # y.sum().backward() runs ffn_block's vjp

    mlk.torch.register(ops, namespace="mlk")  # every public fn a torch.library op
    y = torch.ops.mlk.ffn_block(x, wi, bi, wf, bf)   # traced by torch.compile(fullgraph=True)

A fn's backward is its `vjp` (docs/interop/pytorch.md, "Training through
mlk blocks"): for each float parameter p that needs a gradient, the public
fn `<fn>__vjp__<p>` of the fn's program when it defines one (a program
written to be tuned whole), else, on first use, the program derived from it
with `public fn <fn>__vjp__<p> = vjp(<fn>, wrt=[<p>])`; they run like any
kernel (the cache, tuned artifacts and the JIT fallback apply). The forward
and every vjp call go through the same boundary checks as a plain call
(dtypes, shapes, refinements, the target policy and the program's precision
policy); nothing is converted or broadcast.

Rank-0 parameters (`Scalar[..]`) are numbers in the torch.library schema
(float, int or bool) and get no gradient; through function() a rank-0 torch
tensor gets one like any tensor. Double backward is not supported.
"""
import threading
import warnings

import torch

from . import BoundaryError, _TORCH_DTYPES

_FLOATS = ("F16", "BF16", "F32", "F64")
_LOCK = threading.Lock()


def _vjp_name(fn, i):
    return "%s__vjp__%s" % (fn.__name__, fn._sig["params"][i]["name"])


def _is_vjp_of(fn, i, sig):
    """Whether the signature `sig` is that of fn's vjp for parameter i: fn's parameters, then a
    cotangent of fn's result, returning parameter i's type (dtypes and ranks)."""
    params = fn._sig["params"]
    want = [(p["dtype"], p["rank"]) for p in params] + [(fn._sig["result_dtype"], fn._sig["result_rank"])]
    return ([(p["dtype"], p["rank"]) for p in sig["params"]] == want
            and (sig["result_dtype"], sig["result_rank"]) == (params[i]["dtype"], params[i]["rank"]))


def _vjp(fn, i):
    """The vjp fn (an mlk fn) of fn for its float parameter i, made once: the program's own public
    fn <fn>__vjp__<param> when it defines one (so that `mlk tune` tunes it with the rest; its
    signature must be that vjp's), else derived from fn's program by
    `public fn <fn>__vjp__<param> = vjp(<fn>, wrt=[<param>])`, under the program's precision
    policy. Raises BoundaryError when that parameter has no gradient (a non-differentiable op)."""
    cache = fn.__dict__.setdefault("_vjps", {})
    if i in cache:
        return cache[i]
    with _LOCK:
        if i in cache:
            return cache[i]
        ops, name, params = fn._ops, _vjp_name(fn, i), fn._sig["params"]
        if name in ops._program.public_fns:
            if not _is_vjp_of(fn, i, ops._program.signature(name)):
                raise BoundaryError("`%s` is a public fn of %s but not the vjp of `%s` for `%s` (its parameters "
                                    "and a cotangent of the result, returning `%s`'s type); rename it"
                                    % (name, ops._program.file, fn.__name__, params[i]["name"], params[i]["name"]))
            cache[i] = getattr(ops, name)
            return cache[i]
        if ops._runtime is None:
            raise BoundaryError("`%s`: its Ops were not made by mlk.load, so its program cannot be derived"
                                % fn.__name__)
        base = ops._program
        line = "public fn %s = vjp(%s, wrt=[%s])" % (name, fn.__name__, params[i]["name"])
        try:
            derived = ops._runtime.program_source("%s, with `%s`" % (base.file, line),
                                                   base.source.rstrip("\n") + "\n" + line + "\n", base.precision)
        except (ValueError, RuntimeError) as e:  # the checker's diagnostics
            raise BoundaryError("`%s` has no gradient for `%s`:\n%s" % (fn.__name__, params[i]["name"], e)) from None
        from . import Ops
        cache[i] = getattr(Ops(derived, ops.target, ops._runtime), name)
        return cache[i]


def _float_params(fn):
    return [i for i, p in enumerate(fn._sig["params"]) if p["dtype"] in _FLOATS]


def _plain(a):
    return a.detach() if isinstance(a, torch.Tensor) else a


def _backward(fn, args, g, needs, dims):
    """The cotangents of fn's arguments `args` for the result's cotangent g (None where not needed)."""
    g = g.contiguous()  # autograd gives it the result's dtype and shape; it may be expanded
    plain = [_plain(a) for a in args]
    return tuple(_vjp(fn, i)(*plain, g, dims=dims) if need else None for i, need in enumerate(needs))


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


def _schema_args(fn):
    """The op's arguments: each parameter's schema type and name, or positional names a0, a1, ..
    when a name is one the schema parser refuses (`def`, `in`, ..)."""
    params = fn._sig["params"]
    named = ", ".join("%s %s" % (_schema_type(p), p["name"]) for p in params)
    try:
        torch._C.parse_schema("mlk::f(%s) -> Tensor" % named)
        return named
    except RuntimeError:
        return ", ".join("%s a%d" % (_schema_type(p), i) for i, p in enumerate(params))


def _has_op(namespace, name):
    try:
        torch._C._dispatch_find_schema_or_throw("%s::%s" % (namespace, name), "")
        return True
    except RuntimeError:
        return False


def _needs_torch_library():
    lib = torch.library
    if not (hasattr(lib, "register_fake") and hasattr(lib, "register_autograd")):
        raise RuntimeError("mlk.torch.register needs PyTorch 2.4 or later (torch.library.register_fake and "
                           "register_autograd); this is torch %s. mlk.torch.function works on older versions"
                           % torch.__version__)


def _define(lib, ns, name, fn, dims):
    """Defines `ns::name` for mlk fn `fn` with a CPU implementation that calls it and a fake one
    from its typed signature. Tensors are made contiguous first: inside a compiled graph the
    caller does not choose strides (a plain mlk call refuses non-contiguous tensors instead)."""
    lib.define("%s(%s) -> Tensor" % (name, _schema_args(fn)))
    result = getattr(torch, _TORCH_DTYPES[fn._sig["result_dtype"]])
    program, fname = fn._ops._program, fn.__name__

    def impl(*args):
        return fn(*[a.detach().contiguous() if isinstance(a, torch.Tensor) else a for a in args], dims=dims)

    def fake(*args):
        # Symbolic sizes are specialised (int()): a new shape traces again, as the
        # result's shape is computed by the C++ checker from concrete extents.
        shapes = [[int(d) for d in a.shape] if isinstance(a, torch.Tensor) else [] for a in args]
        like = next(a for a in args if isinstance(a, torch.Tensor))
        return like.new_empty(program.result_shape(fname, shapes, dims or {}), dtype=result)

    lib.impl(name, impl, "CPU")
    torch.library.register_fake("%s::%s" % (ns, name), fake, lib=lib)


_REGISTERED = {}  # (id of the Ops, namespace) -> (the Ops, dims, torch.ops.<namespace>)
_REGISTER_LOCK = threading.Lock()  # one register() at a time (it takes _LOCK inside)


def register(ops, namespace="mlk", dims=None):
    """Registers every public fn of `ops` (mlk.load) as the torch.library op
    torch.ops.<namespace>.<fn>, with a fake implementation from its typed signature and
    an autograd formula from its vjp fns, which are ops too (<fn>__vjp__<param>, one per float
    tensor parameter; the program's own when it defines them), so that
    torch.compile(fullgraph=True) traces through them. `dims` gives the values of dimensions no
    parameter binds ({"H": 12}), for every fn that has them. Registering the same Ops in the
    same namespace again (with the same dims) returns the same ops; a name the namespace already
    has is a ValueError before anything is defined. Parameter names the schema parser refuses
    (`def`, `in`) become positional names a0, a1, ... A parameter with no gradient (a non-differentiable op on its
    path) gets no vjp op; a backward that needs it raises BoundaryError saying why. A fn with
    no tensor parameter cannot be dispatched by torch and is not registered (a warning names
    it). Returns torch.ops.<namespace>."""
    _needs_torch_library()
    with _REGISTER_LOCK:
        return _register(ops, namespace, dims)


def _register(ops, namespace, dims):
    key = (id(ops), namespace)
    if key in _REGISTERED and _REGISTERED[key][0] is ops:
        if _REGISTERED[key][1] != dims:
            raise ValueError("mlk.torch.register: this program is registered in `%s` with dims=%r, not %r"
                             % (namespace, _REGISTERED[key][1], dims))
        return _REGISTERED[key][2]
    public = ops._program.public_fns
    # The program's own vjp fns (a public <fn>__vjp__<p> with that vjp's signature, for a
    # float tensor parameter p of a public fn) become ops as vjp fns only.
    own_vjps = set()
    for n in public:
        f = getattr(ops, n)
        for i in _float_params(f):
            v = _vjp_name(f, i)
            if f._sig["params"][i]["rank"] > 0 and v in public and _is_vjp_of(f, i, ops._program.signature(v)):
                own_vjps.add(v)
    plan = []  # (name, fn, fixed dims, {param index: vjp fn}, {param index: why it has none})
    for name in public:
        fn = getattr(ops, name)
        if name in own_vjps:
            continue
        if not any(p["rank"] > 0 for p in fn._sig["params"]):
            warnings.warn("mlk.torch.register: `%s` has no tensor parameter, so torch cannot dispatch it; "
                          "call ops.%s directly" % (name, name))
            continue
        fixed = _unbound(fn, dims)
        vjps, why = {}, {}
        for i in _float_params(fn):
            if fn._sig["params"][i]["rank"] == 0:
                continue  # a number in the schema: no gradient
            try:
                vjps[i] = _vjp(fn, i)
            except BoundaryError as e:
                why[i] = str(e)  # the text only: a kept exception would keep every failed call's frames
        plan.append((name, fn, fixed, vjps, why))
    names = [n for name, _, _, vjps, _ in plan for n in [name] + [v.__name__ for v in vjps.values()]]
    ns = getattr(torch.ops, namespace)
    taken = [n for n in names if _has_op(namespace, n)]
    if taken or len(set(names)) != len(names):
        raise ValueError("mlk.torch.register: namespace `%s` already has %s; register each program once, or "
                         "give another namespace" % (namespace, ", ".join("`%s`" % n for n in taken) or "a name twice"))
    lib = torch.library.Library(namespace, "FRAGMENT")
    _LIBRARIES.append(lib)  # an op lives as long as its Library object
    for name, fn, fixed, vjps, why in plan:
        _define(lib, namespace, name, fn, fixed)
        for v in vjps.values():
            _define(lib, namespace, v.__name__, v, fixed)
        grads = {i: getattr(ns, v.__name__) for i, v in vjps.items()}

        def setup_context(ctx, inputs, output):
            ctx.scalars = [None if isinstance(a, torch.Tensor) else a for a in inputs]
            ctx.save_for_backward(*[a for a in inputs if isinstance(a, torch.Tensor)])

        def backward(ctx, g, grads=grads, why=why, n=len(fn._sig["params"])):
            for i, text in why.items():
                if ctx.needs_input_grad[i]:
                    raise BoundaryError(text) from None
            saved = iter(ctx.saved_tensors)
            args = [next(saved) if a is None else a for a in ctx.scalars]
            g = g.contiguous()
            return tuple(grads[i](*args, g) if i in grads and ctx.needs_input_grad[i] else None for i in range(n))

        torch.library.register_autograd("%s::%s" % (namespace, name), backward, setup_context=setup_context, lib=lib)
    _REGISTERED[key] = (ops, dims, ns)
    return ns


_LIBRARIES = []
