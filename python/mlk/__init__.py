"""mlk: call tuned .tl kernels from PyTorch (or numpy) through DLPack.

    import mlk
    ops = mlk.load("examples/norms.tl", target="cpu_avx512,host", cache="http://cache:8080")
    y = ops.rmsnorm(x, w, 1e-6)          # torch tensors in, a torch tensor out

The boundary contract is docs/interop/pytorch.md. In short: inputs are
borrowed zero-copy (CPU, contiguous, exactly the declared dtype, no autograd);
the output is allocated by torch (numpy when no argument is a torch tensor);
every check is made by the C++ runtime before the kernel runs, and a
violation raises mlk.BoundaryError (a ValueError) naming the argument, axis
and rule.
"""
from ._mlk import BoundaryError, CorruptionError, Error, NotFoundError  # noqa: F401
from . import _mlk

__all__ = ["load", "Ops", "Error", "BoundaryError", "NotFoundError", "CorruptionError"]

_TORCH_DTYPES = {"F16": "float16", "BF16": "bfloat16", "F32": "float32", "F64": "float64", "I8": "int8",
                 "I16": "int16", "I32": "int32", "I64": "int64", "U8": "uint8", "Bool": "bool"}
_NUMPY_DTYPES = {"F16": "float16", "F32": "float32", "F64": "float64", "I8": "int8", "I16": "int16",
                 "I32": "int32", "I64": "int64", "U8": "uint8", "Bool": "bool"}


def _torch():
    try:
        import torch
        return torch
    except ImportError:
        return None


def _is_torch(x):
    t = _torch()
    return t is not None and isinstance(x, t.Tensor)


class _Fn:
    """One public fn of a program: call it like the fn."""

    def __init__(self, ops, name):
        self._ops = ops
        self._sig = ops._program.signature(name)
        self.__name__ = name
        self.__doc__ = "mlk kernel `%s`(%s) -> %s" % (
            name, ", ".join("%s: %s rank %d" % (p["name"], p["dtype"], p["rank"]) for p in self._sig["params"]),
            self._sig["result_dtype"])

    def _where(self, i):
        p = self._sig["params"][i]
        return "argument %d `%s` of `%s`" % (i, p["name"], self.__name__)

    def _capsules(self, args, use_torch):
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
            if _is_torch(a):
                if a.requires_grad:
                    raise BoundaryError("%s: requires grad; mlk kernels have no autograd (pass x.detach())"
                                        % self._where(i))
                if a.dtype == _torch().bool:
                    a = a.view(_torch().uint8)
                caps.append(a.__dlpack__())
            elif hasattr(a, "__dlpack__"):
                caps.append(a.__dlpack__())
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

    def kernel(self, *args, dims=None):
        """The kernel these arguments would run (its .selection says which artifact and why)."""
        use_torch = any(_is_torch(a) for a in args)
        keep, caps = self._capsules(args, use_torch)
        return self._ops._program.kernel(self.__name__, self._ops.target, caps, dims or {})

    def __call__(self, *args, dims=None):
        use_torch = any(_is_torch(a) for a in args)
        keep, caps = self._capsules(args, use_torch)
        # The capsules are borrowed, never consumed, so they serve every call below.
        k = self._ops._program.kernel(self.__name__, self._ops.target, caps, dims or {})
        shape = k.output_shape(caps)
        rd = self._sig["result_dtype"]
        if use_torch:
            torch = _torch()
            out = torch.empty(shape, dtype=getattr(torch, _TORCH_DTYPES[rd]))
            view = out.view(torch.uint8) if rd == "Bool" else out
        else:
            import numpy as np
            out = np.empty(shape, dtype=_NUMPY_DTYPES[rd])
            view = out
        k.run(caps, view.__dlpack__())
        return out


class Ops:
    """The public fns of one .tl program, as attributes."""

    def __init__(self, program, target):
        self._program = program
        self.target = target
        for name in program.public_fns:
            setattr(self, name, _Fn(self, name))


def load(path, target="host", cache="", namespace="default", token=""):
    """Opens the artifact cache (a store path or http://HOST:PORT; "" uses
    $MLK_CACHE or the default store) and the program at `path`. `target` is
    the policy: profile names, best first ("cuda_sm90,cpu_avx512,host")."""
    rt = _mlk.Runtime(cache, namespace, token)
    return Ops(rt.program(path), target)
