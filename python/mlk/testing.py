"""mlk.testing: the migration tooling. Compare an mlk fn (or model) against a
PyTorch callable on the same inputs, within the tolerance envelope of
docs/numerics.md for the result's dtype and the fn's longest reduction, and
see the worst element:

    import mlk, torch
    ops = mlk.load("examples/norms.tl", target="host")
    def rmsnorm(x, w, eps):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w
    r = mlk.testing.compare(ops.rmsnorm, rmsnorm, dims={"B": 2, "S": 8, "D": 64}, overrides={"eps": 1e-6})
    # prints: rmsnorm: ok: 1024 elements within the F32 envelope (K = 64: rtol 0.0001, atol 8e-05);
    #   worst at [1, 6, 43]: mlk -3.78744388 torch -3.78744292 |diff| 9.54e-07 <= 0.000459
    assert r.ok, r

docs/interop/pytorch.md ("Migrating a model block by block") walks through
swapping blocks of a PyTorch model one at a time. numpy is needed; torch is
used when it is installed (generated inputs are torch tensors then).
"""
import collections

from . import _dlpack, _mlk

__all__ = ["compare", "Comparison", "Worst", "envelope", "random_inputs"]

Worst = collections.namedtuple("Worst", "index mlk torch error envelope")
Worst.__doc__ = """The element furthest outside (or closest to the edge of) the envelope: its
multi-index, the mlk and torch values, |mlk - torch| and the envelope there
(atol + rtol * |torch|)."""


def envelope(dtype, k=1, through_erf=False):
    """The tolerance of docs/numerics.md (section 5) for results of mlk dtype `dtype`
    ("F32", ...) that accumulate `k` terms: a dict with dtype, k, through_erf, rtol, atol."""
    return _mlk.tolerance(dtype, int(k), bool(through_erf))


class Comparison:
    """The outcome of compare(): `ok`, the envelope used (`dtype`, `k`, `rtol`, `atol`),
    `elements` and `mismatches` counted, the `worst` element (a Worst, None when the
    result is empty or the shapes differ), the `trial` it came from, and `reason`
    when the results could not be compared element by element (shape or dtype)."""

    def __init__(self, name, env, trial):
        self.name = name
        self.dtype, self.k, self.rtol, self.atol = env["dtype"], env["k"], env["rtol"], env["atol"]
        self.trial = trial
        self.ok = False
        self.elements = 0
        self.mismatches = 0
        self.worst = None
        self.reason = None
        self._ratio = 0.0

    def __bool__(self):
        return self.ok

    def _envelope_text(self):
        return "the %s envelope (K = %d: rtol %g, atol %.3g)" % (self.dtype, self.k, self.rtol, self.atol)

    def __str__(self):
        if self.reason:
            return "%s: FAIL: %s" % (self.name, self.reason)
        head = ("%s: ok: %d elements within %s" % (self.name, self.elements, self._envelope_text()) if self.ok else
                "%s: FAIL: %d of %d elements outside %s" % (self.name, self.mismatches, self.elements,
                                                           self._envelope_text()))
        if self.trial:
            head += ", trial %d" % self.trial
        if self.worst is None:
            return head
        w = self.worst
        return "%s; worst at [%s]: mlk %.9g torch %.9g |diff| %.3g %s %.3g" % (
            head, ", ".join(str(i) for i in w.index), w.mlk, w.torch, w.error,
            "<=" if w.error <= w.envelope else ">", w.envelope)

    __repr__ = __str__


# --- values --------------------------------------------------------------------

_NUMPY_NAMES = {v: k for k, v in _dlpack.NUMPY_DTYPES.items()}
_TORCH_NAMES = {v: k for k, v in _dlpack.TORCH_DTYPES.items()}


def _values(x, side):
    """(mlk dtype name, float64 or exact numpy array) of a result."""
    import numpy as np
    m = type(x).__module__
    if m.startswith("torch"):
        name = _TORCH_NAMES.get(str(x.dtype).replace("torch.", ""))
        t = x.detach().cpu()
        if t.is_floating_point():
            t = t.double()
        return name, t.numpy()
    if isinstance(x, _mlk.Tensor):
        name = x.dtype
        a = np.from_dlpack(x)  # zero-copy (Bool arrives as its uint8 bytes)
        return name, a
    if isinstance(x, np.ndarray) or isinstance(x, np.generic):
        a = np.asarray(x)
        return _NUMPY_NAMES.get(a.dtype.name), a
    if isinstance(x, (bool, int, float)):
        return None, np.asarray(x)
    if hasattr(x, "__dlpack__"):
        a = np.from_dlpack(x)
        return _NUMPY_NAMES.get(a.dtype.name), a
    raise TypeError("compare: the %s result is a %s, not a tensor" % (side, type(x).__name__))


def _fill(c, got, want):
    """Fills Comparison c from the two float64/exact arrays (same shape)."""
    import numpy as np
    a = got.astype(np.float64) if got.dtype != np.float64 else got
    e = want.astype(np.float64) if want.dtype != np.float64 else want
    c.elements = int(e.size)
    if e.size == 0:
        c.ok = True
        return 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        nan_a, nan_e = np.isnan(a), np.isnan(e)
        same = (nan_a & nan_e) | (np.isinf(e) & (a == e))
        err = np.where(same, 0.0, np.abs(a - e))
        err = np.where(nan_a ^ nan_e, np.inf, err)
        bound = c.atol + c.rtol * np.where(np.isinf(e), 0.0, np.abs(e))
        bad = ((err > bound) | (np.isinf(e) & ~same) | (nan_a ^ nan_e)) & ~same
        ratio = np.where(bound > 0, err / np.where(bound > 0, bound, 1.0), np.where(err > 0, np.inf, 0.0))
        ratio = np.where(bad & ~np.isfinite(ratio), np.inf, ratio)
    flat = int(np.argmax(np.where(np.isnan(ratio), np.inf, ratio)))
    idx = tuple(int(i) for i in np.unravel_index(flat, e.shape)) if e.ndim else ()
    c.mismatches = int(bad.sum())
    c.ok = c.mismatches == 0
    c.worst = Worst(idx, float(a.flat[flat]), float(e.flat[flat]), float(err.flat[flat]), float(bound.flat[flat]))
    return float(ratio.flat[flat])


# --- inputs --------------------------------------------------------------------

def _torch():
    try:
        import torch
        return torch
    except ImportError:
        return None


def random_inputs(fn, dims, seed=0, overrides=None):
    """Arguments for the mlk fn `fn` (ops.NAME) at `dims` (every dimension variable),
    made from its signature: floats standard normal, integers and Bool 0 or 1, a
    seeded generator; `overrides` maps parameter names to the values to use instead
    (numbers or tensors). torch tensors when torch is installed, else numpy arrays."""
    sig = fn._sig
    shapes = fn._ops._program.param_shapes(fn.__name__, dict(dims))
    overrides = dict(overrides or {})
    names = [p["name"] for p in sig["params"]]
    unknown = sorted(set(overrides) - set(names))
    if unknown:
        raise ValueError("random_inputs: `%s` has no parameter %s (its parameters: %s)"
                         % (fn.__name__, ", ".join("`%s`" % u for u in unknown), ", ".join(names)))
    torch = _torch()
    out = []
    if torch is not None:
        g = torch.Generator().manual_seed(seed)
    else:
        import numpy as np
        rng = np.random.default_rng(seed)
    for p, shape in zip(sig["params"], shapes):
        if p["name"] in overrides:
            out.append(overrides[p["name"]])
            continue
        d = p["dtype"]
        if torch is not None:
            tdtype = getattr(torch, _dlpack.TORCH_DTYPES[d])
            if d in ("F16", "BF16", "F32", "F64"):
                v = torch.randn(shape, generator=g, dtype=torch.float64).to(tdtype)
            else:
                v = torch.randint(0, 2, shape, generator=g).to(tdtype)
        else:
            if d not in _dlpack.NUMPY_DTYPES:
                raise ValueError("random_inputs: a %s parameter needs torch (numpy has no %s)" % (d, d))
            v = rng.standard_normal(shape) if d in ("F16", "F32", "F64") else rng.integers(0, 2, shape)
            v = np.ascontiguousarray(v.astype(_dlpack.NUMPY_DTYPES[d]))
        out.append(v)
    return out


def _cases(inputs, fn, dims, trials, seed, overrides):
    if inputs is None:
        if not hasattr(fn, "_sig"):
            raise ValueError("compare: generated inputs need an mlk fn (ops.NAME) and dims=; pass inputs= otherwise")
        if dims is None:
            raise ValueError("compare: generated inputs need dims= (a value for every dimension variable of `%s`)"
                             % fn.__name__)
        return ((t, random_inputs(fn, dims, seed + t, overrides)) for t in range(trials))
    if callable(inputs):
        return ((t, list(inputs(t))) for t in range(trials))
    if hasattr(inputs, "__next__"):
        return ((t, list(a)) for t, a in zip(range(trials), inputs))
    return iter([(0, list(inputs))])


# --- compare -------------------------------------------------------------------

def _mlk_side(mlk_fn, target):
    """(callable, name, kind) for the mlk side: kind is 'fn', 'model' or 'callable'."""
    from . import Ops, _Fn
    from .model import Model
    if isinstance(mlk_fn, _Fn):
        if target is not None:
            # Other profiles, the same trust: the Ops' options (require=, signed keys, precision=) stay
            # unless `target` gives its own.
            if ";" not in target:
                target = ";".join([target] + mlk_fn._ops.target.split(";")[1:])
            mlk_fn = getattr(Ops(mlk_fn._ops._program, target), mlk_fn.__name__)
        return mlk_fn, mlk_fn.__name__, "fn"
    if target is not None:
        raise ValueError("compare: target= applies to an mlk fn (ops.NAME); a model's target is chosen by "
                         "mlk.load_model, and a plain callable runs where it runs")
    if isinstance(mlk_fn, Model):
        return mlk_fn, "model", "model"
    if callable(mlk_fn):
        return mlk_fn, getattr(mlk_fn, "__name__", "callable"), "callable"
    raise TypeError("compare: the first argument is a %s: pass an mlk fn (ops.NAME), an mlk.Model or a callable"
                    % type(mlk_fn).__name__)


def _envelope(fn, kind, name, args, dims, dtype, k, rtol, atol):
    if rtol is not None and atol is not None:
        return {"dtype": dtype or (fn._sig["result_dtype"] if kind == "fn" else "given"), "k": k or 0,
                "through_erf": False, "rtol": float(rtol), "atol": float(atol)}
    if kind == "fn":
        if k is None:
            _, caps = fn._capsules(args, any(type(a).__module__.startswith("torch") for a in args))
            env = fn._ops._program.envelope(name, caps, dict(dims or {}))
            if dtype is not None and dtype != env["dtype"]:
                env = envelope(dtype, env["k"], env["through_erf"])
        else:
            env = envelope(dtype or fn._sig["result_dtype"], k)
    elif k is None:
        raise ValueError("compare: the envelope of %s needs k= (its longest reduction: the K of docs/numerics.md), "
                         "or rtol= and atol=" % ("a model" if kind == "model" else "a callable"))
    else:
        if dtype is None and kind == "model":
            dtype = fn._result_dtype
        if dtype is None:
            raise ValueError("compare: the envelope of a callable needs dtype= (\"F32\", ...) and k=")
        env = envelope(dtype, k)
    env = dict(env)
    if rtol is not None:
        env["rtol"] = float(rtol)
    if atol is not None:
        env["atol"] = float(atol)
    return env


def compare(mlk_fn, torch_fn, inputs=None, *, dims=None, trials=1, seed=0, overrides=None, dtype=None, k=None,
            rtol=None, atol=None, target=None, name=None, verbose=True, check=False):
    """Runs `mlk_fn` and `torch_fn` on the same arguments and compares the results
    element by element: |mlk - torch| <= atol + rtol * |torch|, NaN only matching NaN,
    an infinity only the same infinity; shapes and dtypes must be the same.

    mlk_fn: an mlk fn (ops.NAME), an mlk.Model, or any callable (a PyTorch model
      with mlk blocks swapped in; then give dtype= and k=).
    inputs: the arguments (a sequence, used once); a callable `inputs(trial)` or an
      iterator giving one argument list per trial; or None: generated from the
      fn's signature at `dims` (random_inputs, seeded by seed + trial; `overrides`
      fixes some parameters, e.g. {"eps": 1e-6}).
    dims: values of dimension variables: every one for generated inputs; for the
      call, those no argument binds (passed as the fn's dims=).
    dtype, k: the envelope of docs/numerics.md, tolerance_for(dtype, k). For an mlk
      fn, by default the result's dtype and the fn's longest reduction at the
      call's shape (F64 through erf widened); a model or callable needs k (and a
      callable dtype). rtol=, atol= override either bound.
    target: for an mlk fn, the profiles to run it with instead of its own
      ("cpu_avx2"), keeping its options (require=, trusted keys, precision);
      a policy with options of its own ("host;require=tuned") replaces them.
    name: what the report calls the mlk side (default: the fn's name, "model",
      or the callable's __name__).
    Returns the Comparison of the trial with the worst element (the first that
    cannot be compared, if any); prints it when verbose; raises AssertionError
    with its text when check= and it failed."""
    fn, default_name, kind = _mlk_side(mlk_fn, target)
    label = name or default_name
    worst = None
    for trial, args in _cases(inputs, fn, dims, trials, seed, overrides):
        env = _envelope(fn, kind, default_name, args, dims, dtype, k, rtol, atol)
        got = fn(*args, dims=dims) if kind == "fn" and dims else fn(*args)
        want = torch_fn(*args)
        c = Comparison(label, env, trial)
        gname, g = _values(got, "mlk")
        wname, w = _values(want, "torch")
        if tuple(g.shape) != tuple(w.shape):
            c.reason = "shape: mlk [%s], torch [%s]" % (", ".join(map(str, g.shape)), ", ".join(map(str, w.shape)))
        elif gname is not None and wname is not None and gname != wname:
            c.reason = "dtype: mlk %s, torch %s (compare results of the same dtype)" % (gname, wname)
        if c.reason:
            worst = c
            break
        c._ratio = _fill(c, g, w)
        if worst is None or c._ratio > worst._ratio or (not c.ok and worst.ok):
            worst = c
    if worst is None:
        raise ValueError("compare: no inputs (trials=%d)" % trials)
    if verbose:
        print(worst)
    if check and not worst.ok:
        raise AssertionError(str(worst))
    return worst

