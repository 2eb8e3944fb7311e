"""DLPack on the Python side of mlk: capsules from producers, and where
results are allocated. docs/interop/pytorch.md ("DLPack") is the contract.

- A producer is asked for a versioned DLPack 1.x capsule first
  (`__dlpack__(max_version=(1, 0))`: torch 2.x, numpy >= 2.1, mlk.Tensor);
  one whose `__dlpack__` takes no `max_version` (torch 1.13, numpy 1.x) gives
  the legacy capsule. Which one a type speaks is learnt on its first use.
- The C++ module consumes the capsules (runtime/dlpack.h): each deleter runs
  exactly once, when the call returns.
- A result is a torch tensor when any argument is one, else a numpy array
  when any argument is one (or every argument is a Python number), else an
  mlk.Tensor, which exports itself through DLPack zero-copy.
"""
from . import _mlk

MAX_VERSION = (1, 0)
_VERSIONED = {}  # type -> whether its __dlpack__ takes max_version


def capsule(x, where, i=None, stream=None):
    """A DLPack capsule of `x`; `where(i)` names it in an error. `stream`: for a
    CUDA tensor, the CUstream (an int) the kernel will run on, passed to the
    producer (`__dlpack__(stream=...)`) so that the tensor is ready on it; 0,
    the legacy default stream, is passed as the protocol spells it (1)."""
    t = type(x)
    v = _VERSIONED.get(t)
    kw = {} if stream is None else {"stream": 1 if stream == 0 else stream}
    try:
        if v:
            return x.__dlpack__(max_version=MAX_VERSION, **kw)
        if v is None:
            try:
                c = x.__dlpack__(max_version=MAX_VERSION, **kw)
            except TypeError:
                _VERSIONED[t] = False  # the legacy protocol: no max_version
            else:
                _VERSIONED[t] = True
                return c
        return x.__dlpack__(**kw)
    except Exception as e:  # the producer refused (read-only, autograd, a device, ...)
        raise _mlk.BoundaryError("%s: its __dlpack__() failed: %s: %s" % (where(i), type(e).__name__, e)) from e


def output_kind(args):
    """'torch', 'numpy' or 'mlk': where the result of a call on `args` is allocated."""
    numpy = False
    other = False
    for a in args:
        if a is None or isinstance(a, (bool, int, float)):
            continue
        m = type(a).__module__
        if m.startswith("torch"):
            return "torch"
        if m == "numpy":
            numpy = True
        else:
            other = True
    return "numpy" if numpy or not other else "mlk"


TORCH_DTYPES = {"F16": "float16", "BF16": "bfloat16", "F32": "float32", "F64": "float64", "I8": "int8",
                "I16": "int16", "I32": "int32", "I64": "int64", "U8": "uint8", "Bool": "bool"}
NUMPY_DTYPES = {"F16": "float16", "F32": "float32", "F64": "float64", "I8": "int8", "I16": "int16",
                "I32": "int32", "I64": "int64", "U8": "uint8", "Bool": "bool"}


def _output_name(_):
    return "the output"


def cuda_device(args):
    """The device of the first CUDA tensor among `args` (a torch.device or an
    object's `__dlpack_device__()` of type kDLCUDA, 2), else None."""
    for a in args:
        dev = getattr(a, "device", None)
        if getattr(dev, "type", None) == "cuda":
            return dev
        f = getattr(a, "__dlpack_device__", None)
        if f is not None and type(a).__module__ != "numpy":
            try:
                t, n = f()
            except Exception:  # not a DLPack producer after all: the boundary says so
                continue
            if t == 2:
                return ("cuda", n)
    return None


def current_stream(torch, device):
    """torch's current CUDA stream on `device` as an int (0: the default stream)."""
    if torch is None or not isinstance(device, torch.device):
        return 0
    return int(torch.cuda.current_stream(device).cuda_stream)


def allocator(kind, dtype, torch=None, device=None, stream=None):
    """alloc(shape) -> (result, its capsule), for results of mlk dtype `dtype`;
    a torch result on `device` (a CUDA one for a CUDA call, made for `stream`)."""
    if kind == "torch":
        tdtype = getattr(torch, TORCH_DTYPES[dtype])

        def alloc_torch(shape):
            out = torch.empty(shape, dtype=tdtype) if device is None else torch.empty(shape, dtype=tdtype, device=device)
            return out, capsule(out.view(torch.uint8) if tdtype is torch.bool else out, _output_name, None,
                                stream if device is not None else None)
        return alloc_torch
    if kind == "numpy":
        import numpy as np
        if dtype not in NUMPY_DTYPES:
            raise _mlk.BoundaryError("a %s result cannot be a numpy array (numpy has no %s); pass torch tensors"
                                     % (dtype, dtype))
        ndtype = np.dtype(NUMPY_DTYPES[dtype])

        def alloc_numpy(shape):
            out = np.empty(shape, dtype=ndtype)
            return out, capsule(out, _output_name)
        return alloc_numpy

    def alloc_mlk(shape):
        out = _mlk.empty(list(shape), dtype)
        return out, out.__dlpack__(max_version=MAX_VERSION)
    return alloc_mlk


def given_output(out, torch=None, stream=None):
    """alloc(shape) for a caller's output tensor `out` (checked by the runtime)."""
    if not hasattr(out, "__dlpack__"):
        raise _mlk.BoundaryError("the output: a %s, not a tensor (torch.Tensor or an object with __dlpack__)"
                                 % type(out).__name__)
    if getattr(out, "requires_grad", False):
        if torch is None or torch.is_grad_enabled():
            raise _mlk.BoundaryError("the output: requires grad; mlk kernels have no autograd (pass out.detach(), "
                                     "or call under torch.no_grad())")
    # grad mode off: written in place through a detached view, as torch's own out= would be
    data = out.detach() if getattr(out, "requires_grad", False) else out
    view = data.view(torch.uint8) if torch is not None and isinstance(data, torch.Tensor) and data.dtype is torch.bool \
        else data
    cuda = cuda_device([out]) is not None
    return lambda shape: (out, capsule(view, _output_name, None, stream if cuda else None))
