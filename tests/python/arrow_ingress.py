"""Dataframe arguments from Python: pyarrow objects through the Arrow C stream interface.

usage: arrow_ingress.py EXAMPLES_DIR PYTHON_PACKAGE_DIR

`score` of examples/features.tl called with a pyarrow.Table (and a
RecordBatchReader) in the place of its Dataframe parameter, against numpy.
A one-chunk table is taken zero-copy (the column's data pointer is Arrow's
buffer, `copied` is False), a sliced one too (at its offset), a two-chunk
table with one copy (`copied` True); the columns stay valid after the table
is gone. Refused with their messages (ValueError, TypeError): a refinement
failing at a row, a nullable field, a missing column, a list size against
the weights, an object that is not a table. The C++ entry point
(arrow_ipc::read_c_stream) is the one the module calls.
"""
import gc
import os
import sys

import numpy as np
import pyarrow as pa

EXAMPLES, PKG = sys.argv[1], sys.argv[2]
if PKG != "-":  # "-": the installed mlk package
    sys.path.insert(0, PKG)
import mlk  # noqa: E402

failures = []
ops = mlk.load(os.path.join(EXAMPLES, "features.tl"))
rng = np.random.default_rng(3)
N, D, H = 300, 16, 5
emb = (rng.standard_normal((N, D)) * 0.5).astype(np.float16)
sess = rng.integers(1, 40, N).astype(np.int32)
uid = np.arange(N, dtype=np.int64) * 7
w1 = (rng.standard_normal((D, H)) * 0.3).astype(np.float32)
b1 = rng.standard_normal(H).astype(np.float32)
w2 = rng.standard_normal((H, 1)).astype(np.float32)
SCHEMA = pa.schema([pa.field("user_id", pa.int64(), False), pa.field("session_len", pa.int32(), False),
                    pa.field("embedding", pa.list_(pa.float16(), D), False)])


def table(u, s, e, schema=SCHEMA):
    return pa.table([pa.array(u), pa.array(s), pa.FixedSizeListArray.from_arrays(pa.array(e.reshape(-1)), e.shape[1])],
                    schema=schema)


def want(s, e):
    return np.maximum(e.astype(np.float64) @ w1 + b1 + 0.01 * s.astype(np.float64)[:, None], 0) @ w2


def check(name, got, expect):
    got = np.from_dlpack(got) if not isinstance(got, np.ndarray) else got
    if got.shape != expect.shape or not np.allclose(got, expect, rtol=1e-3, atol=1e-3):
        failures.append(f"{name}: differs from numpy (shape {got.shape})")
    else:
        print(f"ok {name}: {got.shape} matches numpy")


t = table(uid, sess, emb)
check("table", ops.score(t, w1, b1, w2), want(sess, emb))
cols = mlk.arrow.columns(ops.score, t)
emb_buf = t.column("embedding").chunks[0].values.buffers()[1].address
if [c.copied for c in cols] != [False, False, False] or cols[2].data_ptr != emb_buf:
    failures.append(f"zero_copy: copied {[c.copied for c in cols]}, pointer {cols[2].data_ptr:#x} vs {emb_buf:#x}")
else:
    print("ok zero_copy: one chunk, every column viewed in Arrow's memory")
del t
gc.collect()
if not np.array_equal(np.from_dlpack(cols[2]), emb):
    failures.append("lifetime: the column changed after the table was dropped")
else:
    print("ok lifetime: a column outlives its table")

sl = table(uid, sess, emb).slice(17, 100)
scols = mlk.arrow.columns(ops.score, sl)
if scols[2].copied or not np.array_equal(np.from_dlpack(scols[2]), emb[17:117]):
    failures.append(f"sliced: copied {scols[2].copied}")
else:
    print("ok sliced: an offset slice viewed at its offset")
check("sliced_call", ops.score(sl, w1, b1, w2), want(sess[17:117], emb[17:117]))

two = pa.concat_tables([table(uid[:100], sess[:100], emb[:100]), table(uid[100:], sess[100:], emb[100:])])
tcols = mlk.arrow.columns(ops.score, two)
if not all(c.copied for c in tcols):
    failures.append("chunks: two chunks not copied")
else:
    print("ok chunks: two chunks, one copy")
check("chunks_call", ops.score(two, w1, b1, w2), want(sess, emb))
reader = pa.RecordBatchReader.from_batches(SCHEMA, table(uid, sess, emb).to_batches(max_chunksize=64))
check("reader", ops.score(reader, w1, b1, w2), want(sess, emb))
check("columns_as_tensors", ops.score(uid, sess, emb, w1, b1, w2), want(sess, emb))


def refused(name, exc, text, *args):
    try:
        ops.score(*args)
    except exc as e:
        if text in str(e):
            print(f"ok {name}: {e}")
            return
        failures.append(f"{name}: message {str(e)!r} lacks {text!r}")
        return
    except Exception as e:  # noqa: BLE001
        failures.append(f"{name}: {type(e).__name__}: {e}")
        return
    failures.append(f"{name}: accepted")


bad = sess.copy()
bad[257] = 0
refused("refinement", ValueError, "argument 0 `df` of `score`: session_len >= 1 fails at row 257: value 0",
        table(uid, bad, emb), w1, b1, w2)
nullable = pa.schema([SCHEMA.field(0), pa.field("session_len", pa.int32(), True), SCHEMA.field(2)])
refused("nullable", ValueError, "column `session_len`: declared non-nullable, the stream's field is nullable",
        table(uid, sess, emb, nullable), w1, b1, w2)
missing = pa.table([pa.array(uid), pa.FixedSizeListArray.from_arrays(pa.array(emb.reshape(-1)), D)],
                   schema=pa.schema([SCHEMA.field(0), SCHEMA.field(2)]))
refused("missing", ValueError, "the stream has no column `session_len` (declared column 1); its columns: user_id, embedding",
        missing, w1, b1, w2)
refused("list_size_vs_weights", ValueError, "`score`: w1.shape[0] = 4 but D = 16, bound by df_embedding.shape[1]",
        table(uid, sess, emb), w1[:4], b1, w2)
try:
    ops.score(table(uid, sess, emb), w1, b1, w2, dims={"D": 4})
    failures.append("list_size_vs_dims: accepted")
except ValueError as e:
    text = "column `embedding`: declared FixedSizeList[F16, D] with D = 4, the stream has fixed_size_list<item: halffloat>[16]"
    (print(f"ok list_size_vs_dims: {e}") if text in str(e) else failures.append(f"list_size_vs_dims: {e}"))
refused("not_a_table", TypeError, "argument 0 `df` of `score`: a list, not a table", [1, 2, 3], w1, b1, w2)

for f in failures:
    print("FAIL:", f)
print(f"{len(failures)} failed" if failures else "arrow_ingress: all cases passed")
sys.exit(1 if failures else 0)
