"""mlk.torch: mlk fns inside PyTorch's autograd and torch.compile.

    import mlk, mlk.torch
    ops = mlk.load("blocks.tl")
    ffn = mlk.torch.function(ops.ffn_block)   # a differentiable function of tensors
    y = ffn(x, wi, bi, wf, bf)                # y.sum().backward() runs ffn_block's vjp

    mlk.torch.register(ops, namespace="mlk")  # every public fn a torch.library op
    y = torch.ops.mlk.ffn_block(x, wi, bi, wf, bf)   # traced by torch.compile(fullgraph=True)

Training runs a fn's `vjp_split` (docs/interop/pytorch.md, "Training
through mlk blocks"): when an argument needs a gradient, the forward runs
`<fn>__fwd`, which also returns the values its backward reads (autograd
keeps them), and the backward runs `<fn>__bwd` on them, so no forward value
is computed twice. When some float parameter has no gradient there is no
split, and the backward runs vjp fns: one with a result per parameter that
needs a gradient (`<fn>__vjp` when every float tensor parameter needs one,
`<fn>__vjp__<p>__<q>..` for a few, `<fn>__vjp__<p>` for one), else one
each, and a backward that needs the missing one says why. Every such fn is
the program's own public fn of that name when it defines one (a program
written to be tuned whole), else derived once from the program with a
`vjp_split` or `vjp` line; they run like any kernel (the cache, tuned
artifacts and the JIT fallback apply). The forward and every backward call
go through the same boundary checks as a plain call
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


def _tensor_floats(fn):
    return [i for i, p in enumerate(fn._sig["params"]) if p["dtype"] in _FLOATS and p["rank"] > 0]


def _vjp_name(fn, idxs):
    """The name of fn's vjp fn for its parameters `idxs` (see the module's docstring)."""
    params = fn._sig["params"]
    if len(idxs) == 1:
        return "%s__vjp__%s" % (fn.__name__, params[idxs[0]]["name"])
    if list(idxs) == _tensor_floats(fn):
        return "%s__vjp" % fn.__name__
    return "%s__vjp__%s" % (fn.__name__, "__".join(params[i]["name"] for i in idxs))


def _is_vjp_of(fn, idxs, sig):
    """Whether the signature `sig` is that of fn's vjp for parameters idxs: fn's parameters, then a
    cotangent of fn's result, returning those parameters' types (dtypes and ranks), in order."""
    params = fn._sig["params"]
    want = [(p["dtype"], p["rank"]) for p in params] + [(fn._sig["result_dtype"], fn._sig["result_rank"])]
    return ([(p["dtype"], p["rank"]) for p in sig["params"]] == want and len(fn._sig["results"]) == 1
            and [(r["dtype"], r["rank"]) for r in sig["results"]] == [(params[i]["dtype"], params[i]["rank"])
                                                                      for i in idxs])


def _kept(fn, key, make):
    """make(), once per fn and key (under _LOCK), kept on the fn."""
    cache = fn.__dict__.setdefault("_vjps", {})
    if key not in cache:
        with _LOCK:
            if key not in cache:
                cache[key] = make()
    return cache[key]


def _derive(fn, line):
    """The Ops of fn's program with `line` added (checked under the program's precision policy);
    ValueError or RuntimeError carrying the checker's diagnostics when it does not check."""
    ops = fn._ops
    if ops._runtime is None:
        raise BoundaryError("`%s`: its Ops were not made by mlk.load, so its program cannot be derived"
                            % fn.__name__)
    base = ops._program
    derived = ops._runtime.program_source("%s, with `%s`" % (base.file, line),
                                          base.source.rstrip("\n") + "\n" + line + "\n", base.precision)
    from . import Ops
    return Ops(derived, ops.target, ops._runtime)


def _vjp(fn, idxs):
    """The vjp fn (an mlk fn) of fn for its float parameters idxs (a list, in order), made once:
    the program's own public fn of that name (_vjp_name) when it defines one (so that `mlk tune`
    tunes it with the rest; its signature must be that vjp's), else derived from fn's program by
    `public fn <name> = vjp(<fn>, wrt=[..])`, under the program's precision policy. With several
    parameters it returns a tuple, one cotangent per parameter. Raises BoundaryError when a
    parameter has no gradient (a non-differentiable op); that answer is kept too."""
    idxs = list(idxs)
    made = _kept(fn, tuple(idxs), lambda: _make_vjp(fn, idxs))
    if isinstance(made, str):
        raise BoundaryError(made)
    return made


def _make_vjp(fn, idxs):
    """_vjp's work: the vjp fn, or the text of why there is none."""
    ops, name, params = fn._ops, _vjp_name(fn, idxs), fn._sig["params"]
    which = ", ".join("`%s`" % params[i]["name"] for i in idxs)
    if name in ops._program.public_fns:
        if not _is_vjp_of(fn, idxs, ops._program.signature(name)):
            raise BoundaryError("`%s` is a public fn of %s but not the vjp of `%s` for %s (its parameters "
                                "and a cotangent of the result, returning their types); rename it"
                                % (name, ops._program.file, fn.__name__, which))
        return getattr(ops, name)
    line = "public fn %s = vjp(%s, wrt=[%s])" % (name, fn.__name__, ", ".join(params[i]["name"] for i in idxs))
    try:
        return getattr(_derive(fn, line), name)
    except (ValueError, RuntimeError) as e:  # the checker's diagnostics
        return "`%s` has no gradient for %s:\n%s" % (fn.__name__, which, e)


class _Split:
    """fn's vjp split in two (`vjp_split`, phase-0/transforms.md): `fwd` returns fn's result and
    the values its backward reads, `bwd` takes fn's arguments, those values and the cotangent
    and returns the cotangents of the parameters `wrt` (every float parameter)."""

    def __init__(self, fwd, bwd, wrt):
        self.fwd, self.bwd, self.wrt = fwd, bwd, wrt


def _split(fn):
    """fn's _Split, made once: the program's own public `<fn>__fwd` and `<fn>__bwd` when it defines
    them (its signatures checked), else derived by `public fn <fn>__fwd, <fn>__bwd =
    vjp_split(<fn>, wrt=[every float parameter])`. None (kept) when some float parameter has no
    gradient: the backward then runs the vjp fns of the parameters that need one."""
    return _kept(fn, "split", lambda: _make_split(fn))


def _make_split(fn):
    ops, params = fn._ops, fn._sig["params"]
    wrt = _float_params(fn)
    if not wrt or len(fn._sig["results"]) != 1:
        return None
    fwd, bwd = "%s__fwd" % fn.__name__, "%s__bwd" % fn.__name__
    public = ops._program.public_fns
    if fwd in public and bwd in public:
        f, b = ops._program.signature(fwd), ops._program.signature(bwd)
        shape = [(p["dtype"], p["rank"]) for p in params]
        if ([(p["dtype"], p["rank"]) for p in f["params"]] != shape
                or [(p["dtype"], p["rank"]) for p in b["params"]][:len(params)] != shape
                or [(r["dtype"], r["rank"]) for r in b["results"]] != [shape[i] for i in wrt]):
            raise BoundaryError("`%s` and `%s` are public fns of %s but not the vjp_split of `%s` over every float "
                                "parameter; rename them" % (fwd, bwd, ops._program.file, fn.__name__))
        return _Split(getattr(ops, fwd), getattr(ops, bwd), wrt)
    if ops._runtime is None:
        return None  # the vjp fns say why nothing can be derived
    line = "public fn %s, %s = vjp_split(%s, wrt=[%s])" % (fwd, bwd, fn.__name__,
                                                            ", ".join(params[i]["name"] for i in wrt))
    try:
        d = _derive(fn, line)
    except (ValueError, RuntimeError):
        return None  # a parameter with no gradient: the per-parameter vjp fns say which
    return _Split(getattr(d, fwd), getattr(d, bwd), wrt)


def _float_params(fn):
    return [i for i, p in enumerate(fn._sig["params"]) if p["dtype"] in _FLOATS]


def _plain(a):
    return a.detach() if isinstance(a, torch.Tensor) else a


def _save(ctx, args, residuals=()):
    """Saves a call's arguments (tensors for autograd, the rest as they are) and its residuals."""
    ctx.scalars = [None if isinstance(a, torch.Tensor) else a for a in args]
    ctx.residuals = len(residuals)
    ctx.save_for_backward(*[a for a in args if isinstance(a, torch.Tensor)], *residuals)


def _saved(ctx):
    """What _save kept: (the arguments, detached; the residuals)."""
    saved = list(ctx.saved_tensors)
    tensors = iter(saved[:len(saved) - ctx.residuals])
    return [_plain(next(tensors)) if a is None else a for a in ctx.scalars], saved[len(saved) - ctx.residuals:]


def _split_backward(bwd, wrt, args, residuals, g, needs, **kw):
    """The cotangents of a call's arguments from a split's backward `bwd` (an mlk fn or its op),
    which returns those of the parameters `wrt`; None where not needed."""
    got = bwd(*args, *residuals, g.contiguous(), **kw)
    got = dict(zip(wrt, got if isinstance(got, tuple) else (got,)))
    return tuple(got[i] if need else None for i, need in enumerate(needs))


def _backward(fn, args, g, needs, dims):
    """The cotangents of fn's arguments `args` for the result's cotangent g (None where not needed):
    one vjp fn for every parameter that needs one, else (a parameter with no gradient) one each."""
    g = g.contiguous()  # autograd gives it the result's dtype and shape; it may be expanded
    plain = [_plain(a) for a in args]
    want = [i for i, need in enumerate(needs) if need]
    if len(want) > 1:
        try:
            together = _vjp(fn, want)
        except BoundaryError:
            together = None  # one of them has no gradient: the loop below names it
        if together is not None:
            got = dict(zip(want, together(*plain, g, dims=dims)))
            return tuple(got.get(i) for i in range(len(needs)))
    return tuple(_vjp(fn, [i])(*plain, g, dims=dims) if need else None for i, need in enumerate(needs))


def _unbound(fn, dims):
    missing = [d for d in fn._sig["unbound_dims"] if d not in (dims or {})]
    if missing:
        raise ValueError("`%s` has dimension%s %s that no parameter binds: give %s with dims={..}"
                         % (fn.__name__, "s" if len(missing) > 1 else "", ", ".join(missing),
                            "their values" if len(missing) > 1 else "its value"))
    return {d: int(dims[d]) for d in fn._sig["unbound_dims"]} or None


class Block:
    """An mlk fn as a differentiable function of tensors (what mlk.torch.function returns):
    `block(*args)` computes the fn with autograd recording it, `block.apply(*args)` is the same
    (torch.autograd.Function's spelling), and `block.function` is the torch.autograd.Function
    subclass itself. Arguments go by position, or by the fn's parameter names."""

    def __init__(self, fn, cls):
        self.function, self._fn = cls, fn
        self.__name__ = self.__qualname__ = cls.__name__
        self.__doc__ = fn.__doc__

    def __call__(self, *args, **kwargs):
        if kwargs:
            args = self._by_position(args, kwargs)
        return self.function.apply(*args)

    apply = __call__

    def __repr__(self):
        return "<mlk.torch.function of `%s`>" % self._fn.__name__

    def _by_position(self, args, kwargs):
        names = [p["name"] for p in self._fn._sig["params"]]
        out = list(args) + [_MISSING] * (len(names) - len(args))
        for k, v in kwargs.items():
            if k not in names:
                raise TypeError("`%s` has no parameter `%s` (its parameters: %s)"
                                % (self._fn.__name__, k, ", ".join(names)))
            i = names.index(k)
            if i < len(args):
                raise TypeError("`%s` got parameter `%s` twice: by position (argument %d) and by name"
                                % (self._fn.__name__, k, i + 1))
            out[i] = v
        missing = [n for n, v in zip(names, out) if v is _MISSING]
        if missing:
            raise TypeError("`%s` is missing parameter%s %s" % (self._fn.__name__, "s" if len(missing) > 1 else "",
                                                               ", ".join("`%s`" % n for n in missing)))
        return out


_MISSING = object()


def function(fn, dims=None):
    """The mlk fn `fn` (e.g. ops.ffn_block) as a differentiable function of tensors (a Block):
    `block(*args)` (or `block.apply(*args)`) runs the fn; backward runs the fn's vjp fns (derived
    and compiled on first use) for the arguments that need a gradient. Arguments are passed as to
    the fn itself (tensors of the declared dtypes, numbers for Scalar parameters), by position or
    by parameter name; `dims` gives the dimensions no parameter binds (e.g. {"H": 12} for
    attention heads), for the fn and its vjp fns alike. `block.function` is the
    torch.autograd.Function subclass."""
    if not hasattr(fn, "_sig") or not hasattr(fn, "_ops"):
        raise TypeError("mlk.torch.function takes an mlk fn (an attribute of mlk.load(...)), not %s"
                        % type(fn).__name__)
    if len(fn._sig["results"]) > 1:
        raise TypeError("mlk.torch.function takes a fn with one result; `%s` has %d (call it directly, or "
                        "through mlk.torch.register, with no autograd)" % (fn.__name__, len(fn._sig["results"])))
    dims = _unbound(fn, dims)

    class MlkFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            plain = [_plain(a) for a in args]
            split = _split(fn) if any(ctx.needs_input_grad) else None
            ctx.split = split
            if split is None:
                _save(ctx, args)
                return fn(*plain, dims=dims)
            # The forward keeps what the backward reads (the residuals), so the
            # backward does not compute the forward again.
            try:
                got = split.fwd(*plain, dims=dims)
            except BoundaryError as e:  # the arguments are fn's: say so in fn's name
                raise BoundaryError(str(e).replace("`%s`" % split.fwd.__name__, "`%s`" % fn.__name__)) from None
            y, residuals = (got[0], got[1:]) if isinstance(got, tuple) else (got, ())
            _save(ctx, args, residuals)
            return y

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx, g):
            args, residuals = _saved(ctx)
            if ctx.split is None:
                return _backward(fn, args, g, ctx.needs_input_grad, dims)
            return _split_backward(ctx.split.bwd, ctx.split.wrt, args, residuals, g, ctx.needs_input_grad, dims=dims)

    MlkFunction.__name__ = MlkFunction.__qualname__ = "mlk_" + fn.__name__
    MlkFunction.__doc__ = fn.__doc__
    return Block(fn, MlkFunction)


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
    results = [getattr(torch, _TORCH_DTYPES[r["dtype"]]) for r in fn._sig["results"]]
    several = len(results) > 1  # a tuple of tensors
    lib.define("%s(%s) -> %s" % (name, _schema_args(fn),
                                 "(%s)" % ", ".join(["Tensor"] * len(results)) if several else "Tensor"))
    program, fname = fn._ops._program, fn.__name__

    def impl(*args):
        return fn(*[a.detach().contiguous() if isinstance(a, torch.Tensor) else a for a in args], dims=dims)

    def fake(*args):
        # Symbolic sizes are specialised (int()): a new shape traces again, as the
        # result's shape is computed by the C++ checker from concrete extents.
        shapes = [[int(d) for d in a.shape] if isinstance(a, torch.Tensor) else [] for a in args]
        like = next(a for a in args if isinstance(a, torch.Tensor))
        got = program.result_shape(fname, shapes, dims or {})
        if not several:
            return like.new_empty(got, dtype=results[0])
        return tuple(like.new_empty(s, dtype=t) for s, t in zip(got, results))

    lib.impl(name, impl, "CPU")
    torch.library.register_fake("%s::%s" % (ns, name), fake, lib=lib)


def _define_split(lib, ns, name, fn, dims, split):
    """`ns::name` for a fn with a vjp_split: a composite op that, when an argument needs a gradient,
    runs `ns::<fn>__fwd` (the result and the residuals; its autograd formula runs `ns::<fn>__bwd` on
    them, so the backward computes no forward value again), else `ns::<name>__plain` (the fn alone).
    torch.compile traces through the composite to those ops."""
    _define(lib, ns, name + "__plain", fn, dims)
    _define(lib, ns, split.fwd.__name__, split.fwd, dims)
    _define(lib, ns, split.bwd.__name__, split.bwd, dims)
    ops = getattr(torch.ops, ns)
    plain, fwd, bwd = getattr(ops, name + "__plain"), getattr(ops, split.fwd.__name__), getattr(ops, split.bwd.__name__)
    lib.define("%s(%s) -> Tensor" % (name, _schema_args(fn)))

    def composite(*args):
        if torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
            got = fwd(*args)
            return got[0] if isinstance(got, tuple) else got  # no residuals: the forward is the fn
        return plain(*args)

    lib.impl(name, composite, "CompositeImplicitAutograd")

    def setup_context(ctx, inputs, output):
        _save(ctx, inputs, output[1:] if isinstance(output, tuple) else ())

    def backward(ctx, g, *residual_grads):  # the residuals are the backward's own: no gradient flows to them
        args, residuals = _saved(ctx)
        return _split_backward(bwd, split.wrt, args, residuals, g, ctx.needs_input_grad)

    torch.library.register_autograd("%s::%s" % (ns, split.fwd.__name__), backward, setup_context=setup_context,
                                    lib=lib)


_REGISTERED = {}  # (id of the Ops, namespace) -> (the Ops, dims, torch.ops.<namespace>)
_REGISTER_LOCK = threading.Lock()  # one register() at a time (it takes _LOCK inside)


def register(ops, namespace="mlk", dims=None):
    """Registers every public fn of `ops` (mlk.load) as the torch.library op
    torch.ops.<namespace>.<fn>, with a fake implementation from its typed signature and
    autograd through ops too: for a fn with a vjp_split, a composite op over <fn>__fwd (whose
    autograd formula runs <fn>__bwd on the values it kept) when an argument needs a gradient,
    else over <fn>__plain; for a fn without one, the autograd formula of its vjp fns
    (<fn>__vjp__<param> per float tensor parameter, and <fn>__vjp returning them all, which a
    backward that needs several runs); the program's own fns when it defines them, so that
    torch.compile(fullgraph=True) traces through them. `dims` gives the values of dimensions no
    parameter binds ({"H": 12}), for every fn that has them. Registering the same Ops in the
    same namespace again (with the same dims) returns the same ops; a name the namespace already
    has is a ValueError before anything is defined. Parameter names the schema parser refuses
    (`def`, `in`) become positional names a0, a1, ... A parameter with no gradient (a non-differentiable op on its
    path) gets no vjp op; a backward that needs it raises BoundaryError saying why. A fn with
    no tensor parameter cannot be dispatched by torch and is not registered (a warning names
    it). A fn with several results becomes an op returning a tuple, with no autograd formula.
    Returns torch.ops.<namespace>."""
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
            v = _vjp_name(f, [i])
            if f._sig["params"][i]["rank"] > 0 and v in public and _is_vjp_of(f, [i], ops._program.signature(v)):
                own_vjps.add(v)
        every = _tensor_floats(f)
        v = _vjp_name(f, every)
        if len(every) > 1 and v in public and _is_vjp_of(f, every, ops._program.signature(v)):
            own_vjps.add(v)
        if "%s__fwd" % n in public and "%s__bwd" % n in public:  # its own vjp_split (checked by _split)
            own_vjps.update(["%s__fwd" % n, "%s__bwd" % n])
    # (name, fn, fixed dims, {param index: vjp fn}, {param index: why it has none}, the vjp fn of
    # every parameter with a gradient, when there are several, or the fn's _Split)
    plan = []
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
        if len(fn._sig["results"]) > 1:  # an op returning a tuple; transforms take one result
            plan.append((name, fn, fixed, vjps, why, None))
            continue
        split = _split(fn)
        if split is not None:  # the forward keeps what the backward reads
            plan.append((name, fn, fixed, vjps, why, split))
            continue
        for i in _float_params(fn):
            if fn._sig["params"][i]["rank"] == 0:
                continue  # a number in the schema: no gradient
            try:
                vjps[i] = _vjp(fn, [i])
            except BoundaryError as e:
                why[i] = str(e)  # the text only: a kept exception would keep every failed call's frames
        together = _vjp(fn, sorted(vjps)) if len(vjps) > 1 else None
        plan.append((name, fn, fixed, vjps, why, together))
    def made(name, vjps, together):
        if isinstance(together, _Split):
            return [name, name + "__plain", together.fwd.__name__, together.bwd.__name__]
        return [name] + [v.__name__ for v in vjps.values()] + ([together.__name__] if together else [])
    names = [n for name, _, _, vjps, _, together in plan for n in made(name, vjps, together)]
    ns = getattr(torch.ops, namespace)
    taken = [n for n in names if _has_op(namespace, n)]
    if taken or len(set(names)) != len(names):
        raise ValueError("mlk.torch.register: namespace `%s` already has %s; register each program once, or "
                         "give another namespace" % (namespace, ", ".join("`%s`" % n for n in taken) or "a name twice"))
    lib = torch.library.Library(namespace, "FRAGMENT")
    _LIBRARIES.append(lib)  # an op lives as long as its Library object
    for name, fn, fixed, vjps, why, together in plan:
        if isinstance(together, _Split):
            _define_split(lib, namespace, name, fn, fixed, together)
            continue
        _define(lib, namespace, name, fn, fixed)
        if len(fn._sig["results"]) > 1:
            continue
        for v in vjps.values():
            _define(lib, namespace, v.__name__, v, fixed)
        grads = {i: getattr(ns, v.__name__) for i, v in vjps.items()}
        if together is not None:
            _define(lib, namespace, together.__name__, together, fixed)
        every = (sorted(vjps), getattr(ns, together.__name__)) if together is not None else None

        def setup_context(ctx, inputs, output):
            _save(ctx, inputs)

        def backward(ctx, g, grads=grads, why=why, every=every, n=len(fn._sig["params"])):
            for i, text in why.items():
                if ctx.needs_input_grad[i]:
                    raise BoundaryError(text) from None
            args, _ = _saved(ctx)
            g = g.contiguous()
            need = [i for i in grads if ctx.needs_input_grad[i]]
            if every is not None and len(need) > 1:  # one op for them all: shared stages once
                got = dict(zip(every[0], every[1](*args, g)))
                return tuple(got[i] if i in need else None for i in range(n))
            return tuple(grads[i](*args, g) if i in grads and ctx.needs_input_grad[i] else None for i in range(n))

        torch.library.register_autograd("%s::%s" % (namespace, name), backward, setup_context=setup_context, lib=lib)
    _REGISTERED[key] = (ops, dims, ns)
    return ns


_LIBRARIES = []
