"""mlk.select: choose, per fn, between artifacts you hold (runtime/select.h).

    runner = mlk.select([mlk.prefer(mlk.load("a_sm90")), mlk.fallback(mlk.load("a_cpu"))])
    y = runner.rmsnorm(x, w, 1e-6)       # the first candidate that serves rmsnorm here
    print(runner.selection)               # which one per fn, and why the others were skipped

Contract (docs/runtime.md, "Choosing between artifacts you hold"): every
prefer candidate is tried before any fallback one, each group in list order;
a candidate serves a fn when it was loaded, has the fn and can run here (a
CUDA artifact needs a driver and a device, a cpu_avx512 one AVX-512), and,
per call, its runtime finds a kernel at the call's shape. Skipped candidates
are recorded with their reason; when none serves, NotFoundError lists every
reason; a damaged artifact raises CorruptionError, never skipped.
"""
import os

from . import _mlk
from . import NotFoundError, Ops, _Fn, _is_torch
from .model import _policy


class Candidate:
    """One item of mlk.select: made by mlk.prefer(x) or mlk.fallback(x)."""

    __slots__ = ("rank", "artifact")

    def __init__(self, rank, artifact):
        if not isinstance(artifact, (Ops, str, os.PathLike)):
            raise TypeError("mlk.%s() takes what mlk.load returns, or the path of an `mlk build -o DIR` "
                            "directory, not a %s" % (rank, type(artifact).__name__))
        self.rank = rank
        self.artifact = artifact

    def __repr__(self):
        a = self.artifact
        return "mlk.%s(%s)" % (self.rank, "mlk.load(%r)" % a._program.file if isinstance(a, Ops) else repr(os.fspath(a)))


def prefer(artifact):
    """A candidate used when it can serve the fn here: `artifact` is what mlk.load
    returns, or the path of an `mlk build -o DIR` directory (loaded by select;
    a directory this machine cannot load, e.g. one needing AVX-512 on an AVX2
    host, is then skipped with the reason, where mlk.load would raise)."""
    return Candidate("prefer", artifact)


def fallback(artifact):
    """A candidate used only when no prefer candidate can serve the fn here
    (same arguments as prefer)."""
    return Candidate("fallback", artifact)


def select(candidates, cache="", namespace="default", token="", trusted=None):
    """A Runner over `candidates` (mlk.prefer(..) and mlk.fallback(..) items).
    `cache`, `namespace` and `token` open the runtime that loads the candidates
    given as paths (as mlk.load's). `trusted` (public keys or KEY.pub paths, as
    mlk.load's; default $MLK_TRUSTED_SIGNERS) admits a directory given as a
    path only with a directory signature by one of them (`mlk build --sign`),
    checked before it is loaded: NotFoundError otherwise. Raises
    BoundaryError when two candidates declare different signatures for one
    fn, CorruptionError for a damaged artifact."""
    dir_policy = _policy("host", "any", trusted) if trusted else ""
    candidates = list(candidates)
    items = []
    for c in candidates:
        if not isinstance(c, Candidate):
            raise TypeError("mlk.select() takes a list of mlk.prefer(..) and mlk.fallback(..) items, not a %s"
                            % type(c).__name__)
        a = c.artifact
        items.append((c.rank, a._program, a.target) if isinstance(a, Ops) else (c.rank, os.fspath(a), dir_policy))
    rt = _mlk.Runtime(cache, namespace, token) if any(not isinstance(c.artifact, Ops) for c in candidates) else None
    return Runner(_mlk.select(items, rt), candidates)


class Runner:
    """The fns of mlk.select(...), as attributes: runner.fn(args...) runs the
    kernel of the first candidate that serves fn here."""

    def __init__(self, selector, candidates):
        self._selector = selector
        self.candidates = candidates
        self.fns = list(selector.fns)
        for name in self.fns:
            setattr(self, name, _SelectedFn(self, name))

    def __getattr__(self, name):
        """A fn no loaded candidate has (e.g. every candidate was a directory this
        machine cannot load): NotFoundError with every candidate's reason."""
        if name.startswith("_"):
            raise AttributeError(name)
        raise NotFoundError("no candidate of select(...) has a fn `%s`: %s"
                            % (name, self._selector.choose(name)["text"]))

    @property
    def selection(self):
        """For every fn: the chosen candidate, then each skipped one and why."""
        return "\n".join(getattr(self, n).selection for n in self.fns)

    @property
    def choices(self):
        """{fn: its choice as data} (see _SelectedFn.choice)."""
        return {n: getattr(self, n).choice for n in self.fns}


class _SelectedFn(_Fn):
    """One fn of a Runner: call it like the fn (as an mlk.load fn: the same
    arguments, dims=, out=, stream=)."""

    def __init__(self, runner, name):
        self._ops = runner
        self._sig = runner._selector.signature(name)
        self._allocs = {}
        self.__name__ = name
        self.__doc__ = "mlk kernel `%s` chosen by mlk.select" % name

    @property
    def choice(self):
        """{"fn", "text", "chosen": candidate index or None, "considered": [{"index", "rank",
        "name", "chosen", "reason"}, ..]}: the shape-free choice (a .tl candidate may still
        have no kernel at a call's shape; kernel(...).choice says what a call does)."""
        return self._ops._selector.choose(self.__name__)

    @property
    def selection(self):
        return self.choice["text"]

    def kernel(self, *args, dims=None, params_from=None, **named):
        """The kernel these arguments would run: .selection (the candidate, why the
        ones before it were skipped, its own selection), .choice, .candidate, .source."""
        args, dims, proven = self._prepare(args, named, dims, params_from)
        keep, caps = self._capsules(args, any(_is_torch(a) for a in args))
        return self._ops._selector.kernel(self.__name__, caps, dims or {}, proven)

    def _cross(self, caps, dims, alloc, stream, proven=()):
        return _mlk.select_call(self._ops._selector, self.__name__, caps, dims, alloc, stream, list(proven))

    def _cross_all(self, caps, dims, allocs, proven=()):
        return _mlk.select_call_all(self._ops._selector, self.__name__, caps, dims, allocs, list(proven))
