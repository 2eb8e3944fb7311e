"""Record arguments (docs/interop/pytorch.md, "Records as arguments").

A record parameter `p: Linear[D, F]` of a .tl fn is, at the runtime, one
tensor parameter per leaf, named by its path with `_` for `.` (`p_w`, `p_b`;
`p.layers[1].w` is `p_layers_1_w`); the fn's signature says which
parameters each record became ("records": name, type, first, count). From
Python a record is passed as a dict (fields by name) or a list / tuple (the
elements of an Array), nested as the record is, in the record parameter's
place or by its name: `f(x, p={"w": w, "b": b})`. Its leaves are placed by
name under the record's, so a dict's order does not matter; a missing,
extra or misnamed field, or a record where a tensor goes (and a tensor where
a record goes), is a BoundaryError that names it. Plain tensors may be
passed by keyword too.

`params_from=` (a torch.nn.Module, or a dict of tensors nested as a
module's parameters are) binds every parameter not given otherwise by name:
the module's parameters and buffers under their dotted names with `_` for
`.` (`ln1.weight` is `ln1_weight`), the names records' leaves have, so a
block `f(h, ln1_weight, ln1_bias, attn_q_weight, ..)` or `f(h, attn: ..)`
is called `f(h, params_from=module)`. Entries the fn does not name are
ignored; a parameter neither given nor found is a BoundaryError that names
it and the closest names the source has.
"""
import difflib


def _is_record(v):
    return isinstance(v, (dict, list, tuple))


def _leaves(v, path, out):
    """`v`'s leaves as (parameter name, tensor), depth first, under `path`."""
    if isinstance(v, dict):
        for k, x in v.items():
            _leaves(x, path + "_" + str(k), out)
    elif isinstance(v, (list, tuple)):
        for i, x in enumerate(v):
            _leaves(x, path + "_" + str(i), out)
    else:
        out.append((path, v))
    return out


def _source(src, error, fn):
    """`params_from`'s tensors by flat name (`_` for `.`), and what to call it in errors."""
    if hasattr(src, "named_parameters") and hasattr(src, "named_buffers"):  # a torch.nn.Module
        flat = {}
        for name, t in list(src.named_parameters()) + list(src.named_buffers()):
            flat[name.replace(".", "_")] = t
        return flat, "`params_from` (a %s)" % type(src).__name__
    if isinstance(src, dict):
        return {k[1:]: v for k, v in _leaves(src, "", [])}, "`params_from` (a dict)"
    raise error("`%s`: params_from must be a torch.nn.Module or a dict of tensors, not a %s"
                % (fn.__name__, type(src).__name__))


def place(fn, args, named, error, source=None):
    """The flat argument list of `fn` (an mlk._Fn) for `args` and keyword
    arguments `named`, records expanded, the rest taken by name from
    `source` (params_from, above); `error` is the exception type."""
    sig = fn._sig
    records = sig.get("records") or []
    if (not records and not named and source is None) or sig.get("frames"):
        return args  # Dataframe arguments are the table readers' (mlk/arrow.py)
    params = [p["name"] for p in sig["params"]]
    # The parameters as written: a record (its leaves) or one tensor parameter.
    first = {r["first"]: r for r in records}
    written, i = [], 0
    while i < len(params):
        r = first.get(i)
        written.append((r["name"], r) if r else (params[i], None))
        i += r["count"] if r else 1
    slots, filled = [None] * len(params), [False] * len(params)

    def put(i, value, what):
        if filled[i]:
            raise error("%s: parameter `%s` of `%s` is given twice" % (what, params[i], fn.__name__))
        slots[i], filled[i] = value, True

    def give(entry, value, what):
        name, r = entry
        if r is None:
            put(params.index(name), value, what)
            return
        if not _is_record(value):
            raise error("%s: `%s` is a record %s; pass a dict of its fields (a list for an Array), not a %s"
                        % (what, name, r["type"], type(value).__name__))
        mine = {params[k]: k for k in range(r["first"], r["first"] + r["count"])}
        for leaf, t in _leaves(value, name, []):
            if leaf not in mine:
                raise error("%s: the record `%s` (%s) has no field `%s`" % (what, name, r["type"], leaf[len(name) + 1:]))
            put(mine[leaf], t, what)

    if len(args) > len(written):
        raise error("`%s` takes %d arguments, got %d" % (fn.__name__, len(written), len(args)))
    for k, a in enumerate(args):
        give(written[k], a, "argument %d of `%s`" % (k, fn.__name__))
    by_name = dict(written)
    for name, v in named.items():
        what = "argument `%s` of `%s`" % (name, fn.__name__)
        if name in by_name:
            give((name, by_name[name]), v, what)
        elif name in params:
            put(params.index(name), v, what)
        else:
            raise error("%s: `%s` has no parameter `%s`" % (what, fn.__name__, name))
    if source is not None:
        flat, what = _source(source, error, fn)
        for i in range(len(params)):
            if not filled[i] and params[i] in flat:
                put(i, flat[params[i]], "%s, `%s`" % (what, params[i]))
        missing = [params[i] for i in range(len(params)) if not filled[i]]
        if missing:
            m = missing[0]
            unused = [n for n in flat if n not in params]  # names no parameter of the fn has
            near = difflib.get_close_matches(m, unused, n=3)
            if near:
                has = " (closest: %s)" % ", ".join("`%s`" % n for n in near)
            elif flat:
                has = " (it has %s%s)" % (", ".join("`%s`" % n for n in list(flat)[:8]), ", .." if len(flat) > 8 else "")
            else:
                has = " (it has no tensors)"
            raise error("`%s`: argument `%s` is neither given nor in %s%s" % (fn.__name__, m, what, has))
    missing = [params[i] for i in range(len(params)) if not filled[i]]
    if missing:
        raise error("`%s`: missing %s %s" % (fn.__name__, "argument" if len(missing) == 1 else "arguments",
                                            ", ".join("`%s`" % m for m in missing)))
    return slots
