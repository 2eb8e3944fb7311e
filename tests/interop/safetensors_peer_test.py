"""Checks interop/safetensors against the reference `safetensors` package, both ways.

Usage: safetensors_peer_test.py PATH/TO/safetensors_tool [TMPDIR]
Exits 0 on success. Needs `safetensors==0.4.5` and `numpy` (scripts/requirements.txt).

1. mlk writes (`safetensors_tool write`), the reference reads every tensor and the metadata.
2. The reference writes (`serialize` and `safetensors.numpy.save_file`), mlk dumps, and the
   dtypes, shapes, FNV-1a 64 of the bytes, alignment and metadata must match.
3. Malformed files the reference rejects, mlk rejects too (exit 1, a `safetensors:` message);
   files only our stricter rules reject are reported for information.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import safetensors
import safetensors.numpy

META = {"format": "np", "producer": "mlk safetensors_tool"}
# safetensors.serialize() in 0.4.5 takes torch-style dtype names, not header names.
SERIALIZE_NAME = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "U16": "uint16", "I16": "int16",
                  "U32": "uint32", "I32": "int32", "U64": "uint64", "I64": "int64", "F16": "float16",
                  "BF16": "bfloat16", "F32": "float32", "F64": "float64", "F8_E4M3": "float8_e4m3fn",
                  "F8_E5M2": "float8_e5m2"}


def expected_set():
    """name -> (dtype, shape, bytes); keep in sync with WriteFixed() in safetensors_tool.cpp."""
    le = lambda a, t: np.asarray(a, dtype=t).tobytes()
    return {
        "a.f32": ("F32", [2, 3], le(range(6), "<f4")),
        "b.f16": ("F16", [4], le([1.0, 2.0, -0.5, np.inf], "<f2")),
        "c.bf16": ("BF16", [2], le([0x3F80, 0xC000], "<u2")),
        "d.i64": ("I64", [3], le([-1, 0, 1 << 40], "<i8")),
        "e.u8": ("U8", [2, 2], bytes([1, 2, 3, 4])),
        "f.bool": ("BOOL", [3], le([True, False, True], "?")),
        "g.scalar": ("F64", [], le(3.5, "<f8")),
        "h.empty": ("I32", [0, 4], b""),
        "i.f8": ("F8_E4M3", [2], bytes([0x38, 0xB8])),
        "j.nan": ("F32", [2], le([np.nan, -np.inf], "<f4")),
        "k.u16": ("U16", [2], le([1, 65535], "<u2")),
        "l.i8": ("I8", [1], le([-7], "i1")),
    }


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def run_tool(tool, *args):
    return subprocess.run([tool, *args], capture_output=True, text=True)


def dump(tool, path):
    r = run_tool(tool, "dump", path)
    assert r.returncode == 0, f"dump {path} failed: {r.stderr}"
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    return lines[0]["metadata"], {t["name"]: t for t in lines[1:]}


def check_mlk_writes(tool, tmp):
    path = os.path.join(tmp, "mlk.safetensors")
    r = run_tool(tool, "write", path)
    assert r.returncode == 0, r.stderr
    with open(path, "rb") as f:
        raw = f.read()
    got = {name: (t["dtype"], t["shape"], bytes(t["data"])) for name, t in safetensors.deserialize(raw)}
    assert got == expected_set(), f"reference read differs:\n{got}\n{expected_set()}"
    with safetensors.safe_open(path, framework="numpy") as f:
        assert f.metadata() == META, f.metadata()
        a = f.get_tensor("a.f32")
        assert a.dtype == np.float32 and a.shape == (2, 3) and a.ravel().tolist() == list(range(6))
        assert np.isnan(f.get_tensor("j.nan")[0])
    n = struct.unpack("<Q", raw[:8])[0]
    assert n % 8 == 0 and raw[8 + n - 1:8 + n] in (b" ", b"}"), "header must be padded with spaces to 8"
    print(f"ok: reference reads all {len(got)} tensors and the metadata mlk wrote")


def check_reference_writes(tool, tmp):
    path = os.path.join(tmp, "ref.safetensors")
    tensors = {k: {"dtype": SERIALIZE_NAME[d], "shape": s, "data": b} for k, (d, s, b) in expected_set().items()}
    with open(path, "wb") as f:
        f.write(safetensors.serialize(tensors, metadata=META))
    meta, got = dump(tool, path)
    assert meta == META, meta
    assert set(got) == set(tensors), sorted(got)
    for name, (d, s, b) in expected_set().items():
        t = got[name]
        assert (t["dtype"], t["shape"], t["nbytes"], t["fnv1a64"]) == (d, s, len(b), fnv1a64(b)), (name, t)
        assert t["aligned"], f"{name}: the reference aligns its data"

    path = os.path.join(tmp, "ref_np.safetensors")
    arrays = {"x": np.arange(12, dtype=np.float16).reshape(3, 4), "y": np.array(7, dtype=np.int32),
              "z": np.zeros((2, 0), dtype=np.uint64), "w": np.linspace(0, 1, 5)}
    safetensors.numpy.save_file(arrays, path)
    meta, got = dump(tool, path)
    assert meta == {}, meta
    for name, a in arrays.items():
        t = got[name]
        assert t["shape"] == list(a.shape) and t["fnv1a64"] == fnv1a64(a.tobytes()), (name, t)
    print(f"ok: mlk reads what the reference wrote ({len(tensors) + len(arrays)} tensors)")


def file_bytes(header, data=b"", n=None):
    h = header.encode() if isinstance(header, str) else header
    return struct.pack("<Q", len(h) if n is None else n) + h + data


def entry(offsets, dtype="F32", shape=(2, 2), extra=""):
    return '{"dtype":"%s","shape":%s,"data_offsets":%s%s}' % (dtype, json.dumps(list(shape)), offsets, extra)


def check_rejections(tool, tmp):
    both = {  # the reference rejects these too
        "R1 short file": b"\x01\x00",
        "R2 huge header": file_bytes("{}", n=100_000_001),
        "R3 header past end": file_bytes("{}", n=64),
        "R4 not UTF-8": file_bytes(b'{"\xff":1}'),
        "R5 bad JSON": file_bytes('{"w":'),
        "R5 negative offset": file_bytes('{"w":%s}' % entry("[-1,16]"), bytes(16)),
        "R5 unknown dtype": file_bytes('{"w":%s}' % entry("[0,16]", dtype="F128"), bytes(16)),
        "R5 non-string metadata": file_bytes('{"__metadata__":{"k":1}}'),
        "R6 gap": file_bytes('{"w":%s}' % entry("[4,20]"), bytes(20)),
        "R6 overlap": file_bytes('{"a":%s,"b":%s}' % (entry("[0,16]"), entry("[8,24]")), bytes(24)),
        "R5 non-integer dim": file_bytes('{"w":%s}' % entry("[0,2]", dtype="U8", shape=(2, 0.5)), bytes(2)),
        "R7 size overflow": file_bytes('{"w":%s}' % entry("[0,0]", shape=(1 << 32, 1 << 32))),
        "R9 size mismatch": file_bytes('{"w":%s}' % entry("[0,12]"), bytes(12)),
        "R10 trailing bytes": file_bytes('{"w":%s}' % entry("[0,16]"), bytes(17)),
        "R10 truncated": file_bytes('{"w":%s}' % entry("[0,16]"), bytes(15)),
    }
    stricter = {  # our rules beyond the reference
        "duplicate key": file_bytes('{"w":%s,"w":%s}' % (entry("[0,0]", shape=(0,)), entry("[0,0]", shape=(0,)))),
        "unknown field": file_bytes('{"w":%s}' % entry("[0,0]", shape=(0,), extra=',"x":1')),
        "leading whitespace": file_bytes(' {"w":%s}' % entry("[0,16]"), bytes(16)),
    }
    for label, raw in list(both.items()) + list(stricter.items()):
        path = os.path.join(tmp, "bad.safetensors")
        with open(path, "wb") as f:
            f.write(raw)
        r = run_tool(tool, "dump", path)
        assert r.returncode == 1 and r.stderr.startswith("safetensors: " + path), (label, r.returncode, r.stderr)
        try:
            safetensors.deserialize(raw)
            ref = "accepts"
        except Exception:  # SafetensorError, or a Python error from the bindings
            ref = "rejects"
        assert label in stricter or ref == "rejects", f"{label}: the reference accepts it; test case is wrong"
        if label in stricter:
            print(f"info: {label}: mlk rejects, reference {ref}")
    print(f"ok: mlk rejects all {len(both) + len(stricter)} malformed files")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    tool = os.path.abspath(sys.argv[1])
    tmp = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="st_peer_")
    os.makedirs(tmp, exist_ok=True)
    print(f"safetensors {safetensors.__version__}, numpy {np.__version__}")
    check_mlk_writes(tool, tmp)
    check_reference_writes(tool, tmp)
    check_rejections(tool, tmp)


if __name__ == "__main__":
    main()
