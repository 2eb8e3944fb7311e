"""DLPack through the mlk Python module, done fully: capsules consumed with
their deleter run exactly once (on success, on every refusal, never again
when the capsule dies), the versioned DLPack 1.x protocol where the producer
offers it and the legacy one where it does not, the READ_ONLY flag refused
for an output, and results exported zero-copy to torch.from_dlpack and
np.from_dlpack.

Producers: a hand-made one (ctypes records with counting deleters, legacy-
only or versioned), numpy, and torch when installed. MODE says which peer
protocol the interpreter's packages speak, and the test insists on it:
  legacy     Debian's python3: torch 1.13 and numpy 1.24 (no max_version)
  versioned  the project venv: numpy >= 2.1 and torch 2.x (__dlpack__(max_version=...))

usage: dlpack_protocol.py MODE EXAMPLES_DIR MODULE_DIR WORK_DIR
"""
import ctypes
import gc
import os
import shutil
import sys

MODE, EXAMPLES, MODULE_DIR, WORK = sys.argv[1:5]
if MODULE_DIR != "-":  # "-": the installed mlk package
    sys.path.insert(0, MODULE_DIR)
import numpy as np  # noqa: E402

import mlk  # noqa: E402
from mlk import _dlpack  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
from check_common import check, results  # noqa: E402
from check_common import raises as _raises  # noqa: E402


def raises(name, call, exc, text):
    _raises(name, call, exc, text, exact=True)


# --- the DLPack records, by hand (the layouts of dlpack.h 1.x) -----------------
class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


LEGACY_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
VERSIONED_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", LEGACY_DELETER)]
DLManagedTensorVersioned._fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                                     ("deleter", VERSIONED_DELETER), ("flags", ctypes.c_uint64),
                                     ("dl_tensor", DLTensor)]
check("record layouts", ctypes.sizeof(DLManagedTensor) == 64 and ctypes.sizeof(DLManagedTensorVersioned) == 80 and
      DLManagedTensorVersioned.dl_tensor.offset == 32)

api = ctypes.pythonapi
CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
api.PyCapsule_New.restype = ctypes.py_object
api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, CAPSULE_DESTRUCTOR]
api.PyCapsule_IsValid.restype = ctypes.c_int
api.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
api.PyCapsule_GetPointer.restype = ctypes.c_void_p
api.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
api.PyCapsule_GetName.restype = ctypes.c_char_p
api.PyCapsule_GetName.argtypes = [ctypes.py_object]
LEGACY_NAME = ctypes.create_string_buffer(b"dltensor")
VERSIONED_NAME = ctypes.create_string_buffer(b"dltensor_versioned")
READ_ONLY, IS_COPIED = 1, 2


def capsule_name(c):
    return api.PyCapsule_GetName(c).decode()


class Producer:
    """A numpy array exported by hand (VersionedProducer honours max_version, with
    `version` and `read_only`; LegacyProducer has the legacy signature). Every
    record's deleter counts its calls in `deleted`; the capsules it made are in
    `capsules` (the test holds them to read their names)."""

    def __init__(self, array, version=(1, 0), read_only=False, device=1):
        self.array = np.ascontiguousarray(array)
        self.version, self.read_only, self.device = version, read_only, device
        self.deleted = {}  # record address -> deleter calls
        self.capsules = []
        self.streams = []  # the `stream` of every __dlpack__ call
        self._keep = {}

    def __dlpack_device__(self):
        return (self.device, 0)

    def _export(self, versioned):
        a = self.array
        shape = (ctypes.c_int64 * max(a.ndim, 1))(*a.shape)
        rec = DLManagedTensorVersioned() if versioned else DLManagedTensor()
        t = rec.dl_tensor
        t.data = a.ctypes.data
        t.device = DLDevice(self.device, 0)
        t.ndim = a.ndim
        code = {"f": 2, "i": 0, "u": 1, "b": 1}[a.dtype.kind]
        t.dtype = DLDataType(code, a.dtype.itemsize * 8, 1)
        t.shape = shape
        t.strides = None
        t.byte_offset = 0
        addr = ctypes.addressof(rec)
        deleted = self.deleted  # the closures hold what they use: they may outlive self's attributes
        deleted[addr] = 0

        def deleter(_):
            deleted[addr] += 1
        if versioned:
            rec.version = DLPackVersion(*self.version)
            rec.flags = READ_ONLY if self.read_only else 0
            rec.deleter = VERSIONED_DELETER(deleter)
        else:
            rec.deleter = LEGACY_DELETER(deleter)
        name = VERSIONED_NAME if versioned else LEGACY_NAME

        def destructor(cap, api=api, ptr=ctypes.POINTER(type(rec)), cast=ctypes.cast):
            if api.PyCapsule_IsValid(cap, name):  # as producers do: delete only what no consumer took
                rec.deleter(cast(api.PyCapsule_GetPointer(cap, name), ptr))
        d = CAPSULE_DESTRUCTOR(destructor)
        self._keep[addr] = (rec, shape, d)
        cap = api.PyCapsule_New(addr, name, d)
        self.capsules.append(cap)
        return cap

    def calls(self):
        return sorted(self.deleted.values())


class VersionedProducer(Producer):
    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        self.streams.append(stream)
        return self._export(max_version is not None and max_version[0] >= 1)


class LegacyProducer(Producer):
    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        return self._export(False)


def producer(array, versioned, **kw):
    return (VersionedProducer if versioned else LegacyProducer)(array, **kw)


ops = mlk.load(os.path.join(EXAMPLES, "norms.tl"), target="host", cache=os.path.join(WORK, "cache.db"))
rng = np.random.default_rng(0)
x = rng.standard_normal((2, 4, 64)).astype(np.float32)
w = rng.standard_normal(64).astype(np.float32)
want = x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6) * w


def close(got):
    return np.allclose(np.from_dlpack(got) if isinstance(got, mlk.Tensor) else got, want, rtol=1e-5, atol=1e-5)


def settle(*producers):
    """Drops the capsules the producers made (the test's references), then collects."""
    for p in producers:
        p.capsules.clear()
    gc.collect()


# --- consuming: the deleter exactly once ---------------------------------------
for versioned in (False, True):
    kind = "versioned" if versioned else "legacy"
    px, pw = producer(x, versioned), producer(w, versioned)
    y = ops.rmsnorm(px, pw, 1e-6)
    check("%s producer: computes" % kind, isinstance(y, mlk.Tensor) and close(y), repr(y))
    used = "used_dltensor_versioned" if versioned else "used_dltensor"
    check("%s producer: capsules consumed" % kind,
          [capsule_name(c) for c in px.capsules + pw.capsules] == [used, used],
          str([capsule_name(c) for c in px.capsules + pw.capsules]))
    check("%s producer: each deleter ran once, by the call" % kind, px.calls() == [1] and pw.calls() == [1],
          "%s %s" % (px.calls(), pw.calls()))
    px.capsules.clear(), pw.capsules.clear()
    settle()
    check("%s producer: not again when the capsule dies" % kind, px.calls() == [1] and pw.calls() == [1],
          "%s %s" % (px.calls(), pw.calls()))
    check("%s producer: the protocol spoken" % kind, _dlpack._VERSIONED.get(type(px)) is versioned)


# Refusals: every capsule given is deleted once, consumed or not.
px, pw = producer(x, True, version=(2, 0)), producer(w, True)
raises("versioned major 2 is refused", lambda: ops.rmsnorm(px, pw, 1e-6), mlk.BoundaryError,
       "argument 0 `x` of `rmsnorm`: DLPack version 2.0, but mlk reads DLPack 1.x (major version 1)")
settle(px, pw)
check("major 2: both deleters once", px.calls() == [1] and pw.calls() == [1], "%s %s" % (px.calls(), pw.calls()))

px, pw = producer(x, True, version=(1, 3)), producer(w, True)
raises("1.2+ without strides is refused", lambda: ops.rmsnorm(px, pw, 1e-6), mlk.BoundaryError,
       "argument 0 `x` of `rmsnorm`: strides are NULL, which DLPack 1.3 does not allow (from 1.2 on, strides are "
       "required when ndim > 0)")
settle(px, pw)
check("1.3 without strides: both deleters once", px.calls() == [1] and pw.calls() == [1])

px, pw = producer(x, True), producer(w.astype(np.float64), False)
raises("a wrong dtype after a consumed argument", lambda: ops.rmsnorm(px, pw, 1e-6), mlk.BoundaryError,
       "argument 1 `w` of `rmsnorm`: dtype float64 but the signature declares F32 (float32); mlk never converts dtypes")
settle(px, pw)
check("wrong dtype: both deleters once", px.calls() == [1] and pw.calls() == [1], "%s %s" % (px.calls(), pw.calls()))

px, pw = producer(x, True, device=2), producer(w, True)
raises("a CUDA tensor for a CPU kernel is refused", lambda: ops.rmsnorm(px, pw, 1e-6), mlk.BoundaryError,
       "argument 0 `x` of `rmsnorm`: on cuda:0, but the kernel runs on the CPU (host); pass a CPU tensor (x.cpu()) "
       "or select a CUDA profile (e.g. cuda_sm90)")
settle(px, pw)
check("CUDA: both deleters once", px.calls() == [1] and pw.calls() == [1])
# The CUDA producer is asked for its tensor on the call's stream (no torch here:
# the legacy default stream, which the protocol spells 1); a CPU one is asked for none.
check("CUDA: the producer was given the call's stream", px.streams == [1] and pw.streams == [None],
      "%s %s" % (px.streams, pw.streams))
px, pw = producer(x, False, device=2), producer(w, False)
raises("a given stream reaches the CUDA producer", lambda: ops.rmsnorm(px, pw, 1e-6, stream=0x5000),
       mlk.BoundaryError, "argument 0 `x` of `rmsnorm`: on cuda:0, but the kernel runs on the CPU (host); pass a CPU "
       "tensor (x.cpu()) or select a CUDA profile (e.g. cuda_sm90)")
settle(px, pw)
check("CUDA: stream= passed to __dlpack__", px.streams == [0x5000] and pw.streams == [None],
      "%s %s" % (px.streams, pw.streams))

# Read-only: fine as an input, refused as the output (and nothing written).
px, pw = producer(x, True, read_only=True), producer(w, True, read_only=True)
check("read-only inputs are taken", close(ops.rmsnorm(px, pw, 1e-6)))
sentinel = np.full((2, 4, 64), 7.0, np.float32)
po = producer(sentinel, True, read_only=True)
raises("a read-only output is refused", lambda: ops.rmsnorm(x, w, 1e-6, out=po), mlk.BoundaryError,
       "the output of `rmsnorm`: read-only (its producer set the DLPack READ_ONLY flag); mlk writes the result "
       "there, so pass a writable tensor")
check("nothing written into the read-only output", np.all(sentinel == 7.0))
settle(po)
check("read-only output: deleter once", po.calls() == [1], str(po.calls()))
pw_out = producer(np.zeros((2, 4, 64), np.float32), True)
res = ops.rmsnorm(x, w, 1e-6, out=pw_out)
check("a writable output is written and returned", res is pw_out and close(pw_out.array) and pw_out.calls() == [1])

# A capsule is taken once.
k = ops.rmsnorm.kernel(x, w, 1e-6)
cx, cw, ce = x.__dlpack__(), w.__dlpack__(), np.asarray(1e-6, np.float32).__dlpack__()
out = np.empty_like(x)
k.run([cx, cw, ce], out.__dlpack__())
check("the low-level run computes", close(out))
raises("a consumed capsule is refused", lambda: k.run([cx, w.__dlpack__(), ce], out.__dlpack__()), mlk.BoundaryError,
       "argument 0 `x` of `rmsnorm`: the DLPack capsule was already consumed (it is named \"used_dltensor\"); a "
       "capsule is taken once: call __dlpack__() again for a new one")
raises("not a capsule", lambda: k.run([3, w.__dlpack__(), ce], out.__dlpack__()), mlk.BoundaryError,
       "argument 0 `x` of `rmsnorm`: a int, not a DLPack capsule")

# No leak, no double free: numpy's deleter drops the array's reference once.
xs, ws = x.copy(), w.copy()
base = (sys.getrefcount(xs), sys.getrefcount(ws))
for _ in range(200):
    y = ops.rmsnorm(xs, ws, 1e-6)
settle()
check("numpy inputs: references back to where they were after 200 calls",
      (sys.getrefcount(xs), sys.getrefcount(ws)) == base, "%s vs %s" % ((sys.getrefcount(xs), sys.getrefcount(ws)), base))
check("numpy output: only the caller holds it", sys.getrefcount(y) == 2, str(sys.getrefcount(y)))
o = np.empty_like(x)
base_o = sys.getrefcount(o)
for _ in range(50):
    ops.rmsnorm(xs, ws, 1e-6, out=o)
check("numpy out=: its reference count is back", sys.getrefcount(o) == base_o + 0,
      "%d vs %d" % (sys.getrefcount(o), base_o))

if torch is not None:
    # torch's storage of a numpy-backed tensor holds the array: it is released
    # only when every DLPack record of the tensor has been deleted.
    a_in, a_out = x.copy(), np.empty_like(x)
    r_in, r_out = sys.getrefcount(a_in), sys.getrefcount(a_out)
    t_in, t_out, t_w = torch.from_numpy(a_in), torch.from_numpy(a_out), torch.from_numpy(w.copy())
    for _ in range(100):
        ops.rmsnorm(t_in, t_w, 1e-6, out=t_out)
    check("torch: computes into out=", close(t_out.numpy()))
    del t_in, t_out
    settle()
    check("torch: every record deleted (the storages are freed)",
          (sys.getrefcount(a_in), sys.getrefcount(a_out)) == (r_in, r_out),
          "%s vs %s" % ((sys.getrefcount(a_in), sys.getrefcount(a_out)), (r_in, r_out)))

# --- the peers' protocol --------------------------------------------------------
if MODE == "legacy":
    check("legacy peers: numpy < 2.1 has no max_version", _dlpack._VERSIONED.get(np.ndarray) is False,
          "numpy %s" % np.__version__)
    check("legacy peers: torch 1.13 is here", torch is not None and torch.__version__.startswith("1.13"),
          getattr(torch, "__version__", "no torch"))
    if torch is not None:
        ops.rmsnorm(torch.from_numpy(x), torch.from_numpy(w), 1e-6)
        check("legacy peers: torch 1.13 takes the legacy path", _dlpack._VERSIONED.get(torch.Tensor) is False)
    ro = x.copy()
    ro.flags.writeable = False
    raises("numpy < 2.1 cannot export a read-only array", lambda: ops.rmsnorm(ro, w, 1e-6), mlk.BoundaryError,
           "argument 0 `x` of `rmsnorm`: its __dlpack__() failed: BufferError: Cannot export readonly array since "
           "signalling readonly is unsupported by DLPack.")
else:
    check("versioned peers: numpy >= 2.1", tuple(int(v) for v in np.__version__.split(".")[:2]) >= (2, 1),
          np.__version__)
    check("versioned peers: numpy takes the versioned path", _dlpack._VERSIONED.get(np.ndarray) is True)
    # The project venv sees PyTorch 2.x (scripts/install.sh): asked through
    # __dlpack__ (the general path; the fast one uses torch's C exchange API),
    # it gives versioned capsules.
    check("versioned peers: torch 2.x is here", torch is not None and int(torch.__version__.split(".")[0]) >= 2,
          getattr(torch, "__version__", "no torch"))
    if torch is not None:
        ops.rmsnorm(torch.from_numpy(x), torch.from_numpy(w), 1e-6, dims={})
        check("versioned peers: torch %s takes the versioned path" % torch.__version__,
              _dlpack._VERSIONED.get(torch.Tensor) is True)
    ro = x.copy()
    ro.flags.writeable = False
    check("versioned peers: a read-only numpy input is taken", close(ops.rmsnorm(ro, w, 1e-6)))
    ro_out = np.full_like(x, 7.0)
    ro_out.flags.writeable = False
    raises("versioned peers: a read-only numpy output is refused", lambda: ops.rmsnorm(x, w, 1e-6, out=ro_out),
           mlk.BoundaryError, "the output of `rmsnorm`: read-only (its producer set the DLPack READ_ONLY flag); mlk "
           "writes the result there, so pass a writable tensor")
    check("versioned peers: nothing written", np.all(ro_out == 7.0))

# --- exporting: zero-copy to numpy and torch ------------------------------------
settle()
exports0, buffers0 = mlk._mlk.live_exports(), mlk._mlk.live_host_buffers()
y = ops.rmsnorm(producer(x, True), producer(w, False), 1e-6)
check("an mlk.Tensor result", isinstance(y, mlk.Tensor) and y.shape == (2, 4, 64) and y.dtype == "F32"
      and y.data_ptr() % 64 == 0, repr(y))
n = np.from_dlpack(y)
check("np.from_dlpack takes it zero-copy", n.ctypes.data == y.data_ptr() and close(n))
if torch is not None:
    t = torch.from_dlpack(y)
    check("torch.from_dlpack takes it zero-copy", t.data_ptr() == y.data_ptr() and close(t.numpy()))
    t[0, 0, 0] = 123.0
    check("one buffer: a write through torch shows in numpy", n[0, 0, 0] == 123.0)
    t[0, 0, 0] = float(want[0, 0, 0])
ptr = y.data_ptr()
del y  # the views keep the buffer
settle()
check("the buffer outlives the mlk.Tensor while a view holds it", mlk._mlk.live_host_buffers() == buffers0 + 1 and
      n.ctypes.data == ptr and close(n))
del n
if torch is not None:
    del t
settle()
check("every export deleted once, the buffer freed", (mlk._mlk.live_exports(), mlk._mlk.live_host_buffers()) ==
      (exports0, buffers0), "%s vs %s" % ((mlk._mlk.live_exports(), mlk._mlk.live_host_buffers()), (exports0, buffers0)))

e = mlk.empty([3, 5], "F32")
check("legacy export by default", capsule_name(e.__dlpack__()) == "dltensor")
check("versioned export for a 1.x consumer", capsule_name(e.__dlpack__(max_version=(1, 0))) == "dltensor_versioned")
check("legacy export for a 0.x consumer", capsule_name(e.__dlpack__(max_version=(0, 8))) == "dltensor")
check("__dlpack_device__ is the CPU", e.__dlpack_device__() == (1, 0))
c = e.__dlpack__()
rec = ctypes.cast(api.PyCapsule_GetPointer(id(c), LEGACY_NAME), ctypes.POINTER(DLManagedTensor)).contents
tt = rec.dl_tensor
check("exported: strides, byte_offset 0, the buffer itself",
      tt.strides and [tt.strides[i] for i in range(2)] == [5, 1] and tt.byte_offset == 0 and tt.data == e.data_ptr()
      and [tt.shape[i] for i in range(2)] == [3, 5])
cc = e.__dlpack__(max_version=(1, 0), copy=True)
vrec = ctypes.cast(api.PyCapsule_GetPointer(id(cc), VERSIONED_NAME), ctypes.POINTER(DLManagedTensorVersioned)).contents
check("copy=True: a new buffer flagged IS_COPIED", vrec.dl_tensor.data != e.data_ptr() and vrec.flags == IS_COPIED and
      (vrec.version.major, vrec.version.minor) == (1, 0))
raises("export to a GPU is refused", lambda: e.__dlpack__(dl_device=(2, 0)), BufferError,
       "mlk.Tensor lives in CPU memory (device (1, 0)); it cannot be exported to device (2, 0)")
raises("a stream is refused", lambda: e.__dlpack__(stream=1), BufferError,
       "mlk.Tensor lives in CPU memory: __dlpack__ takes no stream (stream=None)")
raises("mlk.empty: an unknown dtype", lambda: mlk.empty([2], "F8"), mlk.BoundaryError,
       "unknown dtype `F8` (F16, BF16, F32, F64, I8, I16, I32, I64, U8, Bool)")
raises("mlk.empty: a negative extent", lambda: mlk.empty([2, -1]), mlk.BoundaryError,
       "axis 1 extent -1 is outside [0, 2147483647]")
del c, cc, rec, vrec, tt, e
settle()
check("unconsumed export capsules delete their record once", mlk._mlk.live_exports() == exports0 and
      mlk._mlk.live_host_buffers() == buffers0)

# --- the round trip: a producer -> mlk -> mlk.Tensor -> mlk -> torch / numpy -----
y1 = ops.rmsnorm(producer(x, True), producer(w, True), 1e-6)
ones = mlk.empty([64], "F32")
ctypes.memmove(ones.data_ptr(), np.ones(64, np.float32).ctypes.data, ones.nbytes)  # numpy < 2 imports read-only
y2 = ops.rmsnorm(y1, ones, 1e-6)  # an mlk.Tensor back in, consumed through its own export
ref2 = want / np.sqrt((want ** 2).mean(-1, keepdims=True) + 1e-6)
check("round trip: mlk.Tensor in, mlk.Tensor out", isinstance(y2, mlk.Tensor) and
      np.allclose(np.from_dlpack(y2), ref2, rtol=1e-5, atol=1e-5))
if torch is not None:
    tx = torch.from_numpy(x.copy())
    ty = ops.rmsnorm(tx, torch.from_numpy(w), 1e-6)
    t2 = torch.from_dlpack(ops.rmsnorm(producer(ty.numpy(), True), ones, 1e-6))
    check("round trip: torch -> mlk -> torch", isinstance(ty, torch.Tensor) and close(ty.numpy()) and
          np.allclose(t2.numpy(), ref2, rtol=1e-5, atol=1e-5))
    del t2
del y1, y2, ones
settle()
check("round trip: nothing left behind", (mlk._mlk.live_exports(), mlk._mlk.live_host_buffers()) ==
      (exports0, buffers0))

failed = [r for r in results if not r[1]]
for name, ok, note in results:
    print("%s: %s%s" % ("ok" if ok else "FAIL", name, "" if ok or not note else "\n    " + note.replace("\n", "\n    ")))
print("%d checks, %d failed (%s mode: numpy %s, torch %s)" % (len(results), len(failed), MODE, np.__version__,
                                                             getattr(torch, "__version__", "absent")))
sys.exit(1 if failed else 0)
