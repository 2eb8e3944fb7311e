"""`mlk run` on a Dataframe parameter: examples/features.tl on a table pyarrow writes.

usage: run_frames.py MLK_BINARY EXAMPLES_DIR WORK_DIR

The stream (user_id: I64, session_len: I32, embedding: FixedSizeList[F16, D];
several batches, one of them a slice with an offset) binds the parameter
`df: Dataframe[N, Schema{..}]` of `score`; the weights come from a
safetensors file. The JIT kernel and the reference interpreter must match a
numpy MLP on the same values. Refused, with their messages and no output: a
refinement failing at a row (`session_len >= 1`), a null in a non-nullable
column, a column missing or reordered against the type, a list size against
--dims, a row dimension against --dims, and a stream given for no Dataframe.
A second program checks a dimension bound (`x < K`), nullable columns (read,
not passed), a constant row count and `--inputs NAME=FILE.arrows`.
"""
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
from safetensors.numpy import load_file, save_file

MLK, EXAMPLES, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(WORK, exist_ok=True)
TL = os.path.join(EXAMPLES, "features.tl")
failures = []

rng = np.random.default_rng(16)
N, D, H = 5000, 8, 6
uid = rng.integers(0, 1 << 40, N).astype(np.int64)
sess = rng.integers(1, 50, N).astype(np.int32)
emb = (rng.standard_normal((N, D)) * 0.5).astype(np.float16)
weights = {"w1": (rng.standard_normal((D, H)) * 0.3).astype(np.float32),
           "b1": rng.standard_normal(H).astype(np.float32),
           "w2": rng.standard_normal((H, 1)).astype(np.float32)}
wpath = os.path.join(WORK, "weights.safetensors")
save_file(weights, wpath)

FIELDS = [pa.field("user_id", pa.int64(), nullable=False), pa.field("session_len", pa.int32(), nullable=False),
          pa.field("embedding", pa.list_(pa.float16(), D), nullable=False)]


def emb_array(values, d):
    return pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1), pa.float16()), d)


def write(name, fields, arrays, batches=None):
    """A stream of `arrays`: 1000-row batches, and the last one a slice (an offset)."""
    path = os.path.join(WORK, name)
    schema = pa.schema(fields)
    table = pa.table(arrays, schema=schema)
    with pa.OSFile(path, "wb") as fh, pa.ipc.new_stream(fh, schema) as w:
        for b in batches(table) if batches else table.to_batches(max_chunksize=1000):
            w.write_batch(b)
    return path


def sliced(table):
    """Batches of 2048 rows, each cut out of a larger batch (non-zero offsets)."""
    big = pa.concat_tables([table.slice(0, 7), table]).combine_chunks().to_batches()[0]
    out, start = [], 7
    while start < big.num_rows:
        out.append(big.slice(start, 2048))
        start += 2048
    return out


good = write("table.arrows", FIELDS, [pa.array(uid), pa.array(sess), emb_array(emb, D)], sliced)
x = emb.astype(np.float64)
h = np.maximum(x @ weights["w1"] + weights["b1"] + 0.01 * sess.astype(np.float64)[:, None], 0)
want = h @ weights["w2"]


def run(tl, fn, inputs, *extra, out="out.safetensors"):
    path_out = os.path.join(WORK, out)
    if os.path.exists(path_out):
        os.remove(path_out)
    cmd = [MLK, "run", tl, "--fn", fn, "--no-cache", "--output", path_out, *extra]
    for i in inputs:
        cmd += ["--inputs", i]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return p.returncode, p.stderr, path_out


for mode in ([], ["--reference"]):
    name = "reference" if mode else "jit"
    rc, err, out = run(TL, "score", [good, wpath], *mode)
    if rc != 0:
        failures.append(f"{name}: exit {rc}: {err}")
        continue
    got = load_file(out)["output"]
    if got.shape != (N, 1) or not np.allclose(got, want, rtol=1e-3, atol=1e-3):
        failures.append(f"{name}: result differs from numpy: shape {got.shape}, max err {np.abs(got - want).max()}")
    else:
        print(f"ok {name}: [{N}, 1] matches numpy (max err {np.abs(got - want).max():.2e})")


def refused(name, tl, fn, inputs, text, *extra):
    rc, err, out = run(tl, fn, inputs, *extra)
    problems = []
    if rc != 1:
        problems.append(f"exit {rc}")
    if text not in err:
        problems.append(f"stderr lacks {text!r}")
    if os.path.exists(out):
        problems.append("an output file was written")
    if problems:
        failures.append(f"{name}: {'; '.join(problems)} | {err.strip()[-400:]}")
    else:
        print(f"ok {name}: {err.strip().splitlines()[-1]}")


bad_sess = sess.copy()
bad_sess[4097] = 0
p = write("zero.arrows", FIELDS, [pa.array(uid), pa.array(bad_sess), emb_array(emb, D)])
refused("refinement_row", TL, "score", [p, wpath], f"mlk run: {p}: session_len >= 1 fails at row 4097: value 0")
p = write("null.arrows", [pa.field("user_id", pa.int64(), nullable=False), pa.field("session_len", pa.int32()), FIELDS[2]],
          [pa.array(uid), pa.array([None if i == 12 else int(v) for i, v in enumerate(sess)], pa.int32()),
           emb_array(emb, D)])
refused("null_in_nullable_field", TL, "score", [p, wpath],
        f"mlk run: {p}: column `session_len` is declared non-nullable, but row 12 is null")
p = write("missing.arrows", [FIELDS[0], FIELDS[2]], [pa.array(uid), emb_array(emb, D)])
refused("missing_column", TL, "score", [p, wpath],
        f"mlk run: {p}: the stream has no column `session_len` (declared column 1); its columns: user_id, embedding")
p = write("reordered.arrows", [FIELDS[1], FIELDS[0], FIELDS[2]], [pa.array(sess), pa.array(uid), emb_array(emb, D)])
refused("reordered", TL, "score", [p, wpath],
        f"mlk run: {p}: column order differs: declared column 0 is `user_id`, the stream's columns are "
        "session_len, user_id, embedding")
refused("list_size_vs_dims", TL, "score", [good, wpath],
        f"mlk run: {good}: column `embedding`: declared FixedSizeList[F16, D] with D = 4, the stream has "
        f"fixed_size_list<item: halffloat>[{D}]", "--dims", "D=4")
refused("rows_vs_dims", TL, "score", [good, wpath],
        f"mlk run: {good}: the stream has {N} rows; the row dimension N is 10", "--dims", "N=10")
refused("no_stream", TL, "score", [wpath],
        "mlk run: no --inputs stream gives Dataframe parameter `df` of `score` (give it as --inputs TABLE.arrows)")

# A dimension bound, a nullable column, a constant row count, two Dataframes.
PROGRAM = """
public fn pick [N, K](t: Dataframe[N, Schema{ x: I32 where x >= 0 && x < K, m: Nullable[F32] }],
                      table: Tensor[F32, [K]]) -> Tensor[F32, [N]] =
  gather(table, to_tensor(t.x), axis=0)

public fn two(a: Dataframe[4, Schema{ v: F32 }], b: Dataframe[4, Schema{ v: F32 where v != 0 }])
    -> Tensor[F32, [4]] =
  to_tensor(a.v) / to_tensor(b.v)
"""
tl2 = os.path.join(WORK, "frames.tl")
with open(tl2, "w") as fh:
    fh.write(PROGRAM)
K = 10
table = np.arange(K, dtype=np.float32) * 1.5
save_file({"table": table}, os.path.join(WORK, "table.safetensors"))
tpath = os.path.join(WORK, "table.safetensors")
xs = np.array([3, 0, 9, 4, 4], dtype=np.int32)
ms = pa.array([1.0, None, 2.0, None, 3.0], pa.float32())
FX = [pa.field("x", pa.int32(), nullable=False), pa.field("m", pa.float32(), nullable=True)]
p = write("pick.arrows", FX, [pa.array(xs), ms])
rc, err, out = run(tl2, "pick", [p, tpath], "--reference")
if rc != 0 or not np.array_equal(load_file(out)["output"], table[xs]):
    failures.append(f"pick: exit {rc}: {err}")
else:
    print("ok pick: gather by a refined index column, a nullable column read and not passed")
p = write("pick_bad.arrows", FX, [pa.array(np.array([3, 0, 10, 4, 4], dtype=np.int32)), ms])
refused("dim_bound", tl2, "pick", [p, tpath], f"mlk run: {p}: x < K fails at row 2: value 10")
p1 = write("a.arrows", [pa.field("v", pa.float32(), nullable=False)], [pa.array([1.0, 2.0, 3.0, 4.0], pa.float32())])
p2 = write("b.arrows", [pa.field("v", pa.float32(), nullable=False)], [pa.array([2.0, 4.0, 1.0, 8.0], pa.float32())])
rc, err, out = run(tl2, "two", ["b=" + p2, "a=" + p1], "--reference")
if rc != 0 or not np.allclose(load_file(out)["output"], [0.5, 0.5, 3.0, 0.5]):
    failures.append(f"two: exit {rc}: {err}")
else:
    print("ok two: --inputs NAME=FILE binds each Dataframe")
refused("which_frame", tl2, "two", [p1, "b=" + p2],
        f"mlk run: {p1}: `two` has 2 Dataframe parameters (a, b); say which this stream binds: --inputs NAME={p1}",
        "--reference")
p3 = write("b5.arrows", [pa.field("v", pa.float32(), nullable=False)], [pa.array([2.0, 4.0, 1.0, 8.0, 1.0], pa.float32())])
refused("constant_rows", tl2, "two", ["a=" + p1, "b=" + p3], f"mlk run: {p3}: the stream has 5 rows; the Dataframe has 4",
        "--reference")
p4 = write("b0.arrows", [pa.field("v", pa.float32(), nullable=False)], [pa.array([2.0, 4.0, 0.0, 8.0], pa.float32())])
refused("ne_rule", tl2, "two", ["a=" + p1, "b=" + p4], f"mlk run: {p4}: v != 0 fails at row 2: value 0", "--reference")

for f in failures:
    print("FAIL:", f)
print(f"{len(failures)} failed" if failures else "run_frames: all cases passed")
sys.exit(1 if failures else 0)
