"""`mlk run --inputs table.arrows`: a small model on a table pyarrow writes.

usage: run_arrow.py MLK_BINARY WORK_DIR

The features of the rows come from the columns of an Arrow IPC stream
(`embedding`: FixedSizeList[F16, D], `session_len`: I32), the weights from a
safetensors file (--inputs twice). The result of the JIT kernel and of the
reference interpreter must match a numpy MLP on the same values; bad
bindings (a column no parameter has, a null row in a nullable field, a
list size against --dims, a wrong dtype, a parameter given twice or by no
file, a rank-3 parameter, a U8 parameter) are refused with their messages
and no output file. Nullable fields without nulls and a Bool column are
read; stderr says the columns were copied into the input tensors. A
Dataframe with a Category[I32, K] column (dictionary batches; int32 and int8
indices) gathers from a safetensors table through the JIT and the reference;
a replaced and a delta dictionary, and K against the table, are refused.
"""
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
from safetensors.numpy import load_file, save_file

MLK, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
failures = []

PROGRAM = """
public fn score [N, D, H](embedding: Tensor[F16, [N, D]], session_len: Tensor[I32, [N]],
                          w1: Tensor[F32, [D, H]], b1: Tensor[F32, [H]], w2: Tensor[F32, [H, 1]])
    -> Tensor[F32, [N, 1]] =
  let x = cast(embedding, F32) * broadcast(cast(session_len, F32), [N, D], axes=[0])
  let h = relu(matmul(x, w1) + broadcast(b1, [N, H], axes=[1]))
  matmul(h, w2)

public fn cube [N, D, E](t: Tensor[F32, [N, D, E]]) -> Tensor[F32, [N, D, E]] = t

public fn flagged [N](flag: Tensor[Bool, [N]]) -> Tensor[Bool, [N]] = flag

public fn bytes [N](v: Tensor[U8, [N]]) -> Tensor[U8, [N]] = v
"""
tl = os.path.join(WORK, "model.tl")
with open(tl, "w") as fh:
    fh.write(PROGRAM)

rng = np.random.default_rng(15)
N, D, H = 37, 8, 5
emb = rng.standard_normal((N, D)).astype(np.float16)
sess = rng.integers(1, 9, N).astype(np.int32)
weights = {"w1": rng.standard_normal((D, H)).astype(np.float32), "b1": rng.standard_normal(H).astype(np.float32),
           "w2": rng.standard_normal((H, 1)).astype(np.float32)}
wpath = os.path.join(WORK, "weights.safetensors")
save_file(weights, wpath)


def stream(path, fields, arrays, chunk=10):
    schema = pa.schema(fields)
    table = pa.table(arrays, schema=schema)
    with pa.OSFile(path, "wb") as fh, pa.ipc.new_stream(fh, schema) as w:
        for b in table.to_batches(max_chunksize=chunk):
            w.write_batch(b)
    return path


def emb_array(values, d):
    return pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1), pa.float16()), d)


good = stream(os.path.join(WORK, "table.arrows"),
              [pa.field("embedding", pa.list_(pa.float16(), D), nullable=False),
               pa.field("session_len", pa.int32(), nullable=False)],
              [emb_array(emb, D), pa.array(sess, pa.int32())])

x = emb.astype(np.float64) * sess[:, None]
want = np.maximum(x @ weights["w1"] + weights["b1"], 0) @ weights["w2"]


def run(inputs, *extra, out="out.safetensors"):
    path_out = os.path.join(WORK, out)
    if os.path.exists(path_out):
        os.remove(path_out)
    cmd = [MLK, "run", tl, "--fn", "score", "--no-cache", "--output", path_out, *extra]
    for i in inputs:
        cmd += ["--inputs", i]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return p.returncode, p.stderr, path_out


for mode in ([], ["--reference"]):
    rc, err, out = run([good, wpath], *mode)
    name = "reference" if mode else "jit"
    if rc != 0:
        failures.append(f"{name}: exit {rc}: {err}")
        continue
    got = load_file(out)["output"]
    if got.shape != (N, 1) or not np.allclose(got, want, rtol=1e-4, atol=1e-4):
        failures.append(f"{name}: result differs from numpy: max err {np.abs(got - want).max()}")
    else:
        print(f"ok {name}: [{N}, 1] matches numpy (max err {np.abs(got - want).max():.2e})")
    # stderr says what was done with the Arrow data: copied, not used in place
    note = (f"mlk run: {good}: {N} rows in 4 record batches, 2 columns copied into the input tensors "
            "(read once, copied once; not used in place)")
    if note not in err:
        failures.append(f"{name}: stderr lacks {note!r}: {err.strip()}")
    else:
        print(f"ok {name}: stderr says the columns were copied")
# the order of --inputs does not matter
rc, err, out = run([wpath, good], "--reference")
if rc != 0 or not np.allclose(load_file(out)["output"], want, rtol=1e-4, atol=1e-4):
    failures.append(f"inputs reversed: exit {rc}: {err}")


def refused(name, inputs, text, *extra):
    rc, err, out = run(inputs, *extra)
    problems = []
    if rc != 1:
        problems.append(f"exit {rc}")
    if text not in err:
        problems.append(f"stderr lacks {text!r}")
    if os.path.exists(out):
        problems.append("an output file was written")
    if problems:
        failures.append(f"{name}: {'; '.join(problems)} | {err.strip()[-300:]}")
    else:
        print(f"ok {name}: {err.strip().splitlines()[-1]}")


p = stream(os.path.join(WORK, "extra.arrows"),
           [pa.field("embedding", pa.list_(pa.float16(), D), nullable=False),
            pa.field("session_len", pa.int32(), nullable=False), pa.field("label", pa.int64(), nullable=False)],
           [emb_array(emb, D), pa.array(sess, pa.int32()), pa.array(range(N), pa.int64())])
refused("extra_column", [p, wpath],
        f"mlk run: {p}: column `label` matches no parameter of `score` (parameters: embedding, session_len, w1, b1, w2)")
# nullable fields (pyarrow's default): read while no row is null, refused at the first null row
p = stream(os.path.join(WORK, "nullable.arrows"),
           [pa.field("embedding", pa.list_(pa.float16(), D)), pa.field("session_len", pa.int32())],
           [emb_array(emb, D), pa.array(sess, pa.int32())])
rc, err, out = run([p, wpath])
if rc != 0 or not np.allclose(load_file(out)["output"], want, rtol=1e-4, atol=1e-4):
    failures.append(f"nullable_fields: exit {rc}: {err.strip()[-300:]}")
else:
    print("ok nullable_fields: nullable fields without nulls are read")
p = stream(os.path.join(WORK, "nullable_null.arrows"),
           [pa.field("embedding", pa.list_(pa.float16(), D)), pa.field("session_len", pa.int32())],
           [emb_array(emb, D), pa.array([None if i == 23 else int(v) for i, v in enumerate(sess)], pa.int32())])
refused("nullable_field_null", [p, wpath], f"mlk run: {p}: column `session_len` is declared non-nullable, but row 23 is null")
p = stream(os.path.join(WORK, "int64.arrows"),
           [pa.field("embedding", pa.list_(pa.float16(), D), nullable=False),
            pa.field("session_len", pa.int64(), nullable=False)],
           [emb_array(emb, D), pa.array(sess, pa.int64())])
refused("wrong_dtype", [p, wpath], f"mlk run: {p}: column `session_len`: declared I32, the stream has int64")
refused("list_size_vs_dims", [good, wpath],
        f"mlk run: {good}: column `embedding`: declared FixedSizeList[F16, 4], the stream has "
        f"fixed_size_list<item: halffloat>[{D}]", "--dims", "D=4")
# D from the stream against D from w1
w_bad = dict(weights, w1=rng.standard_normal((D + 1, H)).astype(np.float32))
wbad = os.path.join(WORK, "weights_bad.safetensors")
save_file(w_bad, wbad)
refused("list_size_vs_weights", [good, wbad], "mlk run: w1.shape[0] = 9 but D = 8, bound by embedding.shape[1]")
save_file({"session_len": sess}, os.path.join(WORK, "sess.safetensors"))
refused("given_twice", [good, wpath, os.path.join(WORK, "sess.safetensors")],
        f"mlk run: parameter `session_len` of `score` is given twice: by {good} and by {os.path.join(WORK, 'sess.safetensors')}")
refused("missing_param", [good], f"mlk run: {good} has no column \"w1\" for parameter `w1` of `score`")
only_emb = stream(os.path.join(WORK, "emb_only.arrows"),
                  [pa.field("embedding", pa.list_(pa.float16(), D), nullable=False)], [emb_array(emb, D)])
refused("missing_param_two_files", [only_emb, wpath],
        "mlk run: no --inputs file has a tensor or column \"session_len\" for parameter `session_len` of `score`")
p = stream(os.path.join(WORK, "refine.arrows"),
           [pa.field("t", pa.list_(pa.float32(), 2), nullable=False)],
           [pa.FixedSizeListArray.from_arrays(pa.array(np.zeros(2 * N), pa.float32()), 2)])
rc = subprocess.run([MLK, "run", tl, "--fn", "cube", "--inputs", p, "--output", os.path.join(WORK, "c.safetensors")],
                    capture_output=True, text=True)
if rc.returncode != 1 or "a column binds a Tensor of rank 1 ([N]) or 2 ([N, D], a FixedSizeList column)" not in rc.stderr:
    failures.append(f"rank_3: exit {rc.returncode}: {rc.stderr}")
else:
    print("ok rank_3:", rc.stderr.strip())
# a Bool column (Arrow bool, bit-packed, in batches of 10 bits) binds a Tensor[Bool, [N]]
flags = [i % 3 != 1 for i in range(N)]
p = stream(os.path.join(WORK, "flag.arrows"), [pa.field("flag", pa.bool_())], [pa.array(flags)])
fout = os.path.join(WORK, "f.safetensors")
rc = subprocess.run([MLK, "run", tl, "--fn", "flagged", "--no-cache", "--inputs", p, "--output", fout],
                    capture_output=True, text=True)
if rc.returncode != 0 or load_file(fout)["output"].tolist() != flags:
    failures.append(f"bool_param: exit {rc.returncode}: {rc.stderr}")
else:
    print("ok bool_param: a Bool column through the JIT")
p = stream(os.path.join(WORK, "flag_i32.arrows"), [pa.field("flag", pa.int32())], [pa.array([1, 0], pa.int32())])
rc = subprocess.run([MLK, "run", tl, "--fn", "flagged", "--inputs", p, "--output", fout], capture_output=True, text=True)
if rc.returncode != 1 or f"mlk run: {p}: column `flag`: declared Bool, the stream has int32" not in rc.stderr:
    failures.append(f"bool_param_int32: exit {rc.returncode}: {rc.stderr}")
else:
    print("ok bool_param_int32:", rc.stderr.strip())
p = stream(os.path.join(WORK, "u8.arrows"), [pa.field("v", pa.uint8())], [pa.array([1, 0], pa.uint8())])
rc = subprocess.run([MLK, "run", tl, "--fn", "bytes", "--inputs", p, "--output", fout], capture_output=True, text=True)
want_text = (f"mlk run: {p}: column `v` cannot bind parameter `v` (Tensor[U8, [N]]): "
             "columns are I32, I64, F16, BF16, F32, F64 or Bool")
if rc.returncode != 1 or want_text not in rc.stderr:
    failures.append(f"u8_param: exit {rc.returncode}: {rc.stderr}")
else:
    print("ok u8_param:", rc.stderr.strip())
damaged = open(good, "rb").read()[:-40]
bad = os.path.join(WORK, "truncated.arrows")
open(bad, "wb").write(damaged)
refused("truncated", [bad, wpath], f"mlk run: {bad}: message ")

# Category[I32, K] in a Dataframe: a dictionary-encoded column (dictionary batches in the
# stream), its codes gathered from a safetensors table whose shape gives K; int8 indices are
# widened; a dictionary that changes between batches (a replacement, a delta) is refused by
# batch; K from the table against the dictionary's size.
CAT = """
public fn lookup [N, K, D](df: Dataframe[N, Schema{ c: Category[I32, K], x: F32 }], emb: Tensor[F32, [K, D]])
    -> Tensor[F32, [N, D]] =
  gather(emb, to_tensor(df.c), axis=0) * broadcast(to_tensor(df.x), [N, D], axes=[0])

// K appears in no tensor: the stream's dictionary binds it.
public fn counts [N, K](df: Dataframe[N, Schema{ c: Category[I32, K], x: F32 }]) -> Tensor[F32, [K]] =
  let hit = broadcast(to_tensor(df.c), [N, K], axes=[0]) == iota(I32, [N, K], axis=1)
  sum(where(hit, broadcast(to_tensor(df.x), [N, K], axes=[0]), full(F32, [N, K], 0.0)), axes=[0])
"""
cat_tl = os.path.join(WORK, "cat.tl")
with open(cat_tl, "w") as fh:
    fh.write(CAT)
words = ["b", "a", "c", "a", "a", "b", "c", "c", "a"]
cx = np.arange(1, len(words) + 1, dtype=np.float32)
cemb = rng.standard_normal((3, 4)).astype(np.float32)
cpath = os.path.join(WORK, "cemb.safetensors")
save_file({"emb": cemb}, cpath)


def cat_stream(name, batches, options=None):
    path = os.path.join(WORK, name)
    with pa.OSFile(path, "wb") as fh, pa.ipc.new_stream(fh, batches[0].schema, options=options) as w:
        for b in batches:
            w.write_batch(b)
    return path


def cat_batch(indices, dictionary, x):
    return pa.record_batch({"c": pa.DictionaryArray.from_arrays(indices, pa.array(dictionary)),
                            "x": pa.array(x, pa.float32())})


codes = np.array([["b", "a", "c"].index(w) for w in words])
cwant = cemb[codes] * cx[:, None]
whole = pa.table({"c": pa.array(words).dictionary_encode(), "x": cx})
for name, batches in (("int32", whole.to_batches(max_chunksize=4)),
                      ("int8", [cat_batch(pa.array(codes, pa.int8()), ["b", "a", "c"], cx)])):
    p = cat_stream(f"cat_{name}.arrows", batches)
    for mode in ([], ["--reference"]):
        cout = os.path.join(WORK, "cat_out.safetensors")
        rc = subprocess.run([MLK, "run", cat_tl, "--fn", "lookup", "--no-cache", "--inputs", p, "--inputs", cpath,
                             "--output", cout, *mode], capture_output=True, text=True)
        if rc.returncode != 0 or not np.allclose(load_file(cout)["output"], cwant, rtol=1e-5, atol=1e-5):
            failures.append(f"category_{name}{mode}: exit {rc.returncode}: {rc.stderr.strip()[-300:]}")
        else:
            print(f"ok category_{name}{mode}: codes gathered, matches numpy")


# A fn whose K only the dictionary gives (a sum per category): mlk run binds it from the stream.
p = cat_stream("cat_counts.arrows", whole.to_batches())
for mode in ([], ["--reference"]):
    cout = os.path.join(WORK, "cat_counts.safetensors")
    rc = subprocess.run([MLK, "run", cat_tl, "--fn", "counts", "--no-cache", "--inputs", p, "--output", cout, *mode],
                        capture_output=True, text=True)
    want = np.array([cx[codes == k].sum() for k in range(3)], np.float32)
    if rc.returncode != 0 or not np.allclose(load_file(cout)["output"], want, rtol=1e-5):
        failures.append(f"category_counts{mode}: exit {rc.returncode}: {rc.stderr.strip()[-300:]}")
    else:
        print(f"ok category_counts{mode}: K = 3 from the stream's dictionary")


def cat_refused(name, p, text, weights=cpath):
    rc = subprocess.run([MLK, "run", cat_tl, "--fn", "lookup", "--no-cache", "--inputs", p, "--inputs", weights,
                         "--output", os.path.join(WORK, "cat_bad.safetensors")], capture_output=True, text=True)
    if rc.returncode != 1 or text not in rc.stderr:
        failures.append(f"{name}: exit {rc.returncode}: {rc.stderr.strip()[-300:]}")
    else:
        print(f"ok {name}: {rc.stderr.strip().splitlines()[-1]}")


b0 = cat_batch(pa.array([0, 1], pa.int32()), ["a", "b"], [1.0, 2.0])
p = cat_stream("cat_replaced.arrows", [b0, cat_batch(pa.array([0, 1], pa.int32()), ["c", "d"], [1.0, 2.0])])
cat_refused("category_replacement", p, f"mlk run: {p}: column `c`: record batch 1 has another dictionary (2 values) "
            "than record batch 0 (2 values): a delta or a replacement; a Category column has one dictionary per stream")
p = cat_stream("cat_delta.arrows", [b0, cat_batch(pa.array([0, 2], pa.int32()), ["a", "b", "c"], [1.0, 2.0])],
               pa.ipc.IpcWriteOptions(emit_dictionary_deltas=True))
cat_refused("category_delta", p, f"mlk run: {p}: column `c`: record batch 1 has another dictionary (3 values) "
            "than record batch 0 (2 values)")
p = cat_stream("cat_k.arrows", [b0])
cat_refused("category_k_vs_table", p, f"mlk run: {p}: column `c`: declared Category[I32, K] with K = 3, "
            "the stream's dictionary has 2 values")

for f in failures:
    print("FAIL:", f)
print(f"{len(failures)} failed" if failures else "run_arrow: all cases passed")
sys.exit(1 if failures else 0)
