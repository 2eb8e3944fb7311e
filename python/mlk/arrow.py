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
Arrow's memory where the layout allows (one batch, no null, aligned, not
Bool), else one copy: columns(...) shows which. Calling with the column
tensors themselves (one argument per column parameter) works too.

A Category[I32, K] column is a dictionary-encoded one
(`pa.array([...]).dictionary_encode()`, int8, int16 or int32 indices): its
tensor is the codes as int32, K is the dictionary's size.

Arrow has no bfloat16: a BF16 column is a uint16 field (the bits) whose
metadata names the extension type mlk.bfloat16 (bf16_field, bf16_bits make
one). Bool columns are Arrow bool. docs/interop/arrow.md has the rules.
"""

BF16_EXTENSION = "mlk.bfloat16"


def bf16_field(name, nullable=True):
    """A pyarrow field for a BF16 column `name`: uint16 values (the bfloat16 bits, as bf16_bits
    makes them) with the field metadata ARROW:extension:name = mlk.bfloat16. Wrap it in
    pa.list_(bf16_field("item"), D) for a FixedSizeList[BF16, D] column."""
    import pyarrow as pa
    return pa.field(name, pa.uint16(), nullable=nullable,
                    metadata={b"ARROW:extension:name": BF16_EXTENSION.encode()})


def bf16_bits(values):
    """The bfloat16 bits (a numpy uint16 array) of `values` (anything numpy reads as float32),
    rounded to nearest even; a NaN stays a (quiet) NaN."""
    import numpy as np
    f = np.ascontiguousarray(values, dtype=np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(f)
    bits[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return bits

_ARROW = []


def _module():
    if not _ARROW:
        from . import _arrow  # loads libarrow (the pyarrow wheel's) on first use
        _ARROW.append(_arrow)
    return _ARROW[0]


def expand(fn, args, dims):
    """(`args` of `fn` (an mlk _Fn) with each Dataframe argument replaced by its column tensors,
    `dims` with the dimensions the tables bound that it lacks: a Category column's K, which no
    tensor's shape shows)."""
    sig = fn._sig
    frames = sig.get("frames") or []
    if not frames:
        return args, dims
    tables = any(hasattr(a, "__arrow_c_stream__") for a in args)
    user_arity = len(sig["params"]) - sum(len(f["params"]) - 1 for f in frames if f["params"])
    if not tables and (len(args) != user_arity or user_arity == len(sig["params"])):
        return args, dims  # the column tensors themselves (or a mistake the arity check names)
    bound = {}
    first = {f["params"][0]: f for f in frames if f["params"]}
    out, k = [], 0
    i = 0
    while i < len(sig["params"]):
        if k >= len(args):
            return args, dims  # too few: the arity check names the problem
        f = first.get(i)
        if f is None:
            out.append(args[k])
            i += 1
        else:
            where = "argument %d `%s` of `%s`" % (k, f["name"], fn.__name__)
            cols = _module().read(args[k], fn._ops._program.source, fn.__name__, f["name"], dims or {}, where)
            out.extend(cols)
            unbound = set(sig.get("unbound_dims") or [])
            for c in cols[:1]:  # the fn's dims no shape shows (a Category's K); not a constant row count's text
                bound.update({d: v for d, v in c.stream_dims.items() if d in unbound})
            i += len(f["params"])
        k += 1
    if k != len(args):
        return args, dims
    return tuple(out), (dict(bound, **dims) if dims else bound or dims)


def columns(fn, table, frame=None, dims=None):
    """The column tensors (mlk._arrow.ArrowColumn: name, shape, dtype, copied, dictionary) that
    `table` gives the Dataframe parameter `frame` of `fn` (its only one by default). A
    Category[I32, K] column is its codes (int32), and `dictionary` is the list of its
    dictionary's values as text (code c is dictionary[c]); None for other columns."""
    frames = fn._sig.get("frames") or []
    if frame is None and len(frames) == 1:
        frame = frames[0]["name"]
    return _module().read(table, fn._ops._program.source, fn.__name__, frame, dims or {}, "`%s`" % frame)
