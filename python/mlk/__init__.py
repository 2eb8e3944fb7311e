"""mlk: call tuned .tl kernels from PyTorch (or numpy) through DLPack.

    import mlk
    ops = mlk.load("examples/norms.tl", target="cpu_avx512,host", cache="http://cache:8080")
    y = ops.rmsnorm(x, w, 1e-6)          # torch tensors in, a torch tensor out

The boundary contract is docs/interop/pytorch.md. In short: inputs are
taken zero-copy through DLPack (CPU, contiguous, exactly the declared dtype,
no autograd; the versioned DLPack 1.x protocol where the producer offers it);
the output is allocated by torch when an argument is a torch tensor, else by
numpy for numpy arrays, else by mlk (an mlk.Tensor, which torch.from_dlpack
and np.from_dlpack take zero-copy), or given with out=; every check is made
by the C++ runtime before the kernel runs, and a violation raises
mlk.BoundaryError (a ValueError) naming the argument, axis and rule.

A whole model from its weights (a program, a binding file, a safetensors
file): mlk.load_model (mlk/model.py). Comparing an mlk fn against PyTorch
on generated inputs with the tolerance envelopes of docs/numerics.md:
mlk.testing.compare (mlk/testing.py).
"""
import os
import sys

from ._mlk import BoundaryError, CorruptionError, Error, NotFoundError, Tensor  # noqa: F401
from . import _mlk
from ._mlk import __version__  # noqa: F401
from . import _dlpack
from . import arrow  # noqa: F401  (Dataframe arguments; loads libarrow only when used)
from . import records  # noqa: F401  (record arguments: dicts and lists of tensors)
from .checked import Checked, check  # noqa: F401  (tensors checked once against a written type)
from . import checked as _checked
from ._dlpack import NUMPY_DTYPES as _NUMPY_DTYPES, TORCH_DTYPES as _TORCH_DTYPES
from .model import Model, _policy, _precision_option, load_model, pack_tokens  # noqa: F401

__all__ = ["load", "Ops", "load_model", "Model", "pack_tokens", "Tensor", "empty", "Error", "BoundaryError", "NotFoundError",
           "CorruptionError", "testing", "arrow", "select", "prefer", "fallback", "Runner", "signatures"]


def empty(shape, dtype="F32"):
    """An uninitialised mlk.Tensor (CPU, compact row-major, 64-byte aligned), e.g. for out=."""
    return _mlk.empty(list(shape), dtype)


_TORCH = []  # [torch module or None], looked up once: the call path is hot


def _torch():
    if not _TORCH:
        try:
            import torch
            _TORCH.append(torch)
        except ImportError:
            _TORCH.append(None)
    return _TORCH[0]


def _is_torch(x):
    """Whether x is a torch tensor, without importing torch: none exists unless torch was imported
    (and a process that never imports it keeps its libraries out: docs/interop/pytorch.md, "One
    thread pool with PyTorch")."""
    if not _TORCH:
        t = sys.modules.get("torch")
        if getattr(t, "Tensor", None) is None:
            return False
        _TORCH.append(t)  # imported: kept, as _torch() keeps it
    t = _TORCH[0]
    return t is not None and isinstance(x, t.Tensor)


class _Fn:
    """One public fn of a program: call it like the fn."""

    _plan = None  # subclasses that cross elsewhere (mlk/_select.py) have none

    def __init__(self, ops, name):
        self._ops = ops
        self._sig = ops._program.signature(name)
        self._allocs = {}  # output kind -> alloc(shape), made on first use
        # The fast path's plan (python/fast_call.cpp), for a fn with one result whose
        # dims its arguments bind; None: every call takes the general path.
        self._plan = None
        sig = self._sig
        if len(sig["results"]) == 1 and sig["result_dtype"] != "Bool" and not sig["unbound_dims"] and \
                not sig.get("frames") and not sig.get("records"):
            self._plan = ops._program.call_plan(name, ops.target)
        self.__name__ = name
        self.__doc__ = "mlk kernel " + self._sig["text"]

    @property
    def signature(self):
        """The fn's signature as the program declares it, one line: its dims, each
        parameter's type with symbolic shape, the result types and the refinements
        ("rmsnorm [B, S, D] (x: Tensor[F32, [B, S, D]], ..) -> Tensor[F32, [B, S, D]]")."""
        return self._sig["text"]

    def _where(self, i):
        p = self._sig["params"][i]
        return "argument %d `%s` of `%s`" % (i, p["name"], self.__name__)

    def _capsules(self, args, use_torch, stream=None):
        params = self._sig["params"]
        if len(args) != len(params):
            raise BoundaryError("`%s` takes %d arguments, got %d" % (self.__name__, len(params), len(args)))
        keep, caps = [], []
        for i, (a, p) in enumerate(zip(args, params)):
            if isinstance(a, (bool, int, float)):
                if p["rank"] != 0:
                    raise BoundaryError("%s: a Python number, but the signature declares a rank-%d %s tensor"
                                        % (self._where(i), p["rank"], p["dtype"]))
                a = self._scalar(a, p["dtype"], use_torch)
            if use_torch and _is_torch(a):
                if a.requires_grad:
                    # With grad mode off (torch.no_grad(), inference_mode()) no gradient is
                    # lost: a module's parameters are taken as they are. With it on, refused.
                    if _TORCH[0].is_grad_enabled():
                        raise BoundaryError("%s: requires grad; mlk kernels have no autograd (pass %s.detach(), "
                                            "call under torch.no_grad(), or train through mlk.torch.function)"
                                            % (self._where(i), p["name"]))
                    a = a.detach()
                if a.dtype is _TORCH[0].bool:
                    a = a.view(_TORCH[0].uint8)
                caps.append(_dlpack.capsule(a, self._where, i, stream if a.is_cuda else None))
            elif hasattr(a, "__dlpack__"):
                caps.append(_dlpack.capsule(a, self._where, i, stream if _dlpack.cuda_device([a]) else None))
            else:
                raise BoundaryError("%s: a %s, not a tensor (torch.Tensor or an object with __dlpack__)"
                                    % (self._where(i), type(a).__name__))
            keep.append(a)
        return keep, caps

    @staticmethod
    def _scalar(v, dtype, use_torch):
        if use_torch:
            torch = _torch()
            return torch.tensor(v, dtype=getattr(torch, _TORCH_DTYPES[dtype]))
        import numpy as np
        if dtype not in _NUMPY_DTYPES:
            raise BoundaryError("a Python number for a %s parameter needs torch" % dtype)
        return np.asarray(v, dtype=_NUMPY_DTYPES[dtype])

    def _prepare(self, args, named, dims, params_from=None):
        """The flat tensor arguments, dims and what the handles proved of a call: records
        expanded and parameters taken from `params_from` (mlk/records.py), checked handles
        unwrapped (mlk/checked.py), tables read (mlk/arrow.py)."""
        args, dims, proven = _checked.unwrap(records.place(self, args, named, BoundaryError, params_from), dims,
                                             self._sig["unbound_dims"])
        if self._sig.get("frames"):
            flat, dims = arrow.expand(self, args, dims)
            if len(flat) != len(args):
                proven = []  # tables moved the arguments: the handles' refinements are checked again
            args = flat
        self._check_dims(dims)
        return args, dims, proven

    def _check_dims(self, dims):
        """dims= in the caller's terms: each names a dimension of the fn, and every
        dimension no argument binds is given."""
        names = self._sig["dim_vars"]
        for k in dims or {}:
            if k not in names:
                raise BoundaryError("`%s` has no dimension `%s` (given in dims=); its dimensions are %s"
                                    % (self.__name__, k, ", ".join(names) or "none"))
        missing = [d for d in self._sig["unbound_dims"] if d not in (dims or {})]
        if missing:
            raise BoundaryError("dimension%s %s of `%s` %s bound by no argument; pass %s as dims={%s}" % (
                "s" if len(missing) > 1 else "", ", ".join("`%s`" % d for d in missing), self.__name__,
                "are" if len(missing) > 1 else "is", "them" if len(missing) > 1 else "it",
                ", ".join('"%s": VALUE' % d for d in missing)))

    def kernel(self, *args, dims=None, params_from=None, **named):
        """The kernel these arguments would run (its .selection says which artifact and why, and
        which refinements the arguments' checked handles proved: mlk/checked.py)."""
        args, dims, proven = self._prepare(args, named, dims, params_from)
        use_torch = any(_is_torch(a) for a in args)
        keep, caps = self._capsules(args, use_torch)
        return self._ops._program.kernel(self.__name__, self._ops.target, caps, dims or {}, proven)

    def _alloc(self, kind):
        alloc = self._allocs.get(kind)
        if alloc is None:
            alloc = self._allocs[kind] = _dlpack.allocator(kind, self._sig["result_dtype"],
                                                           _torch() if kind == "torch" else None)
        return alloc

    def _call_all(self, args, caps, dims, out, use_torch, proven=()):
        """A fn with several results: one run, a tuple of results (each allocated like a
        single result, or the tensors of the tuple `out`)."""
        results = self._sig["results"]
        if out is not None:
            if not isinstance(out, (tuple, list)) or len(out) != len(results):
                raise BoundaryError("`%s` has %d results: `out` must be a tuple of %d tensors"
                                    % (self.__name__, len(results), len(results)))
            allocs = [_dlpack.given_output(o, _torch() if _is_torch(o) else None) for o in out]
        else:
            kind = "torch" if use_torch else _dlpack.output_kind(args)
            key = ("all", kind)
            allocs = self._allocs.get(key)
            if allocs is None:
                allocs = self._allocs[key] = [_dlpack.allocator(kind, r["dtype"], _torch() if kind == "torch" else None)
                                              for r in results]
        return self._cross_all(caps, dims or {}, allocs, proven)

    # The one crossing into C++ of a call (check, select, allocate through the
    # callbacks, run); the capsules are consumed there, each deleter run once.
    # A Runner's fns (mlk/_select.py) cross to their selector instead.
    # `proven`: what the arguments' checked handles proved (mlk/checked.py, unwrap).
    def _cross(self, caps, dims, alloc, stream, proven=()):
        return _mlk.call(self._ops._program, self.__name__, self._ops.target, caps, dims, alloc, stream, list(proven))

    def _cross_all(self, caps, dims, allocs, proven=()):
        return _mlk.call_all(self._ops._program, self.__name__, self._ops.target, caps, dims, allocs, list(proven))

    def __call__(self, *args, dims=None, out=None, stream=None, params_from=None, **named):
        """Runs the kernel on `args` (dims: values of dims no argument binds). A fn with several
        results returns a tuple of them (`out`: a tuple of tensors), computed by one run. The result is
        allocated like the arguments (torch, numpy, else an mlk.Tensor; on the CUDA device of
        torch CUDA arguments), or is `out`: a writable tensor of the result's dtype and shape,
        disjoint from every argument. CUDA tensors go to a CUDA kernel in place, on `stream`
        (a CUstream as an int; default: torch's current stream); the result is ready on that
        stream. A Dataframe parameter takes a table (mlk/arrow.py); a record parameter a dict
        or list of tensors, positionally or by keyword (mlk/records.py). `params_from` (a
        torch.nn.Module, or a dict of tensors) gives every parameter not passed otherwise, by its
        name: a module's `ln1.weight` is the parameter `ln1_weight` (mlk/records.py)."""
        # torch CPU tensors (and numbers) in, a torch tensor out: one crossing that either
        # returns the result or declines untouched (python/fast_call.cpp); else the general path.
        if self._plan is not None and dims is None and out is None and stream is None and not named and \
                params_from is None:
            r = _mlk.fast_call(self._plan, args)
            if r is not NotImplemented:
                return r
        args, dims, proven = self._prepare(args, named, dims, params_from)
        use_torch = any(_is_torch(a) for a in args)
        if len(self._sig["results"]) > 1:  # a tuple of results, on the CPU
            keep, caps = self._capsules(args, use_torch)
            return self._call_all(args, caps, dims, out, use_torch, proven)
        device = _dlpack.cuda_device(list(args) + ([out] if out is not None else []))
        if device is not None and stream is None:
            stream = _dlpack.current_stream(_torch() if use_torch else None, device)
        keep, caps = self._capsules(args, use_torch, stream)
        if out is not None:
            alloc = _dlpack.given_output(out, _torch() if _is_torch(out) else None, stream)
        elif use_torch and device is not None:
            alloc = _dlpack.allocator("torch", self._sig["result_dtype"], _torch(), device, stream)
        else:
            alloc = self._alloc("torch" if use_torch else _dlpack.output_kind(args))
        return self._cross(caps, dims or {}, alloc, stream or 0, proven)


class Ops:
    """The public fns of one .tl program, as attributes."""

    def __init__(self, program, target, runtime=None):
        self._program = program
        self._runtime = runtime  # for programs derived from this one (mlk.torch's vjp fns)
        self.target = target
        for name in program.public_fns:
            setattr(self, name, _Fn(self, name))


def load(path, target="host", cache="", namespace="default", token="", require="any", namespaces="", trusted=None,
         precision="f32"):
    """Opens the artifact cache (a store path or http://HOST:PORT; "" uses
    $MLK_CACHE or the default store) and the program at `path`: a .tl file,
    or a directory written by `mlk build -o DIR` (its artifact is used, the
    cache is not consulted). `target` is the policy: profile names, best
    first ("cuda_sm90,cpu_avx512,host").

    On a cache miss a kernel falls back to the artifact tuned for the same fn
    and profile at the nearest other shape, then to the default schedule
    compiled by Halide's JIT for this machine; `ops.fn.kernel(...).selection`
    says which and why. `require="tuned"` refuses the JIT fallback,
    `require="exact"` anything not tuned at exactly the call's shape,
    `require="verified:envelope"` (any `mlk verify` levels) anything whose
    stored verification report did not pass those levels (all
    raise NotFoundError).

    With a cache server, `namespaces` is the read order of `mlk run
    --namespaces` ("own,shared-release": the team's own namespace, then ones
    other teams granted it; "" uses $MLK_NAMESPACES); a refused one is a
    warning on stderr, never a silent miss. Malformed, or given with a local
    store: BoundaryError ("namespaces: ...").

    `trusted` (a list of Ed25519 public keys, 64 hex characters, or paths
    of the KEY.pub files `mlk key create` writes) admits only artifacts
    signed by one of them (docs/signing.md): any other is refused before it
    is loaded, with NotFoundError naming the entry and its signer, and there
    is no JIT fallback. With `require="verified:LEVELS"` too, only a report
    one of these keys signed counts.

    `precision="bf16"` (or "f16") runs the program's F32 products from BF16
    (F16) operands with F32 sums, as `mlk tune --precision bf16` tunes them
    (docs/numerics.md, "Precision policies"); arguments and results keep
    their dtypes."""
    option = _precision_option(precision)
    rt = _mlk.Runtime(cache, namespace, token, namespaces)
    policy = _policy(target, require, trusted) + option
    return Ops(rt.program(str(path), precision), policy, rt)


def signatures(program, check=None):
    """What `mlk signature` prints for a program (an Ops from mlk.load, or the
    path of a .tl file): for every public fn, its signature with symbolic
    shapes and refinements, its arguments, results and `dims` order, and the
    C prototype of its entry. With `check` (the path of a snapshot kept
    earlier, or its text as a str holding a newline) it compares instead:
    BoundaryError naming each fn that changed, is new or was removed, with
    the lines that differ; the snapshot text when they match."""
    ops = program if isinstance(program, Ops) else load(program)
    now = ops._program.signature_snapshot()
    if check is None:
        return now
    if isinstance(check, str) and ("\n" in check or not check):
        before = check  # the snapshot's text (that of a program without public fns is "")
    else:
        with open(os.fspath(check)) as f:
            before = f.read()
    changes = _mlk.snapshot_changes(before, now)
    if changes:
        raise BoundaryError("the program's signatures differ from the snapshot:\n" + changes.rstrip("\n"))
    return now


from . import testing  # noqa: E402,F401  (mlk.testing: numpy and torch imported on use)
# mlk.select([mlk.prefer(a), mlk.fallback(b)]): per fn, the first candidate that serves it here (mlk/_select.py)
from ._select import Runner, fallback, prefer, select  # noqa: E402,F401
