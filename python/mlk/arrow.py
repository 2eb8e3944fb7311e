"""Dataframe arguments: a fn with a `Dataframe[N, Schema{..}]` parameter takes,
in that parameter's place, any object with `__arrow_c_stream__` (a
pyarrow.Table or RecordBatchReader).

    ops = mlk.load("examples/features.tl")
    y = ops.score(table, w1, b1, w2)      # table: pyarrow.Table with the declared schema

The stream is read through the Arrow C stream interface by mlk's strict
reader (mlk._arrow, python/arrow_ingress.cpp): the schema against the
declaration the type makes, every batch validated in full, every value rule
(a failure raises ValueError, e.g. "session_len >= 1 fails at row 4097:
value 0"). Each non-nullable column then is a tensor argument, zero-copy in
Arrow's memory where the layout allows (one batch, no validity bitmap,
aligned), else one copy: columns(...) shows which. Calling with the column
tensors themselves (one argument per column parameter) works too.
docs/interop/arrow.md has the rules.
"""

_ARROW = []


def _module():
    if not _ARROW:
        from . import _arrow  # loads libarrow (the pyarrow wheel's) on first use
        _ARROW.append(_arrow)
    return _ARROW[0]


def expand(fn, args, dims):
    """`args` of `fn` (an mlk _Fn) with each Dataframe argument replaced by its column tensors."""
    sig = fn._sig
    frames = sig.get("frames") or []
    if not frames:
        return args
    tables = any(hasattr(a, "__arrow_c_stream__") for a in args)
    user_arity = len(sig["params"]) - sum(len(f["params"]) - 1 for f in frames if f["params"])
    if not tables and (len(args) != user_arity or user_arity == len(sig["params"])):
        return args  # the column tensors themselves (or a mistake the arity check names)
    first = {f["params"][0]: f for f in frames if f["params"]}
    out, k = [], 0
    i = 0
    while i < len(sig["params"]):
        if k >= len(args):
            return args  # too few: the arity check names the problem
        f = first.get(i)
        if f is None:
            out.append(args[k])
            i += 1
        else:
            where = "argument %d `%s` of `%s`" % (k, f["name"], fn.__name__)
            cols = _module().read(args[k], fn._ops._program.source, fn.__name__, f["name"], dims or {}, where)
            out.extend(cols)
            i += len(f["params"])
        k += 1
    return tuple(out) if k == len(args) else args


def columns(fn, table, frame=None, dims=None):
    """The column tensors (mlk._arrow.ArrowColumn: name, shape, dtype, copied) that `table` gives
    the Dataframe parameter `frame` of `fn` (its only one by default)."""
    frames = fn._sig.get("frames") or []
    if frame is None and len(frames) == 1:
        frame = frames[0]["name"]
    return _module().read(table, fn._ops._program.source, fn.__name__, frame, dims or {}, "`%s`" % frame)
