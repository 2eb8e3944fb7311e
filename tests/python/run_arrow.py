"""`mlk run --inputs table.arrows`: a small model on a table pyarrow writes.

usage: run_arrow.py MLK_BINARY WORK_DIR

The features of the rows come from the columns of an Arrow IPC stream
(`embedding`: FixedSizeList[F16, D], `session_len`: I32), the weights from a
safetensors file (--inputs twice). The result of the JIT kernel and of the
reference interpreter must match a numpy MLP on the same values; bad
bindings (a column no parameter has, a nullable field, a list size against
--dims, a wrong dtype, a parameter given twice or by no file, a rank-3
parameter) are refused with their messages and no output file.
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
p = stream(os.path.join(WORK, "nullable.arrows"),
           [pa.field("embedding", pa.list_(pa.float16(), D), nullable=False), pa.field("session_len", pa.int32())],
           [emb_array(emb, D), pa.array(sess, pa.int32())])
refused("nullable_field", [p, wpath],
        f"mlk run: {p}: column `session_len`: declared non-nullable, the stream's field is nullable")
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
p = stream(os.path.join(WORK, "flag.arrows"), [pa.field("flag", pa.int32(), nullable=False)], [pa.array([1, 0], pa.int32())])
rc = subprocess.run([MLK, "run", tl, "--fn", "flagged", "--inputs", p, "--output", os.path.join(WORK, "f.safetensors")],
                    capture_output=True, text=True)
want_text = f"mlk run: {p}: column `flag` cannot bind parameter `flag` (Tensor[Bool, [N]]): columns are I32, I64, F16, F32 or F64"
if rc.returncode != 1 or want_text not in rc.stderr:
    failures.append(f"bool_param: exit {rc.returncode}: {rc.stderr}")
else:
    print("ok bool_param:", rc.stderr.strip())
damaged = open(good, "rb").read()[:-40]
bad = os.path.join(WORK, "truncated.arrows")
open(bad, "wb").write(damaged)
refused("truncated", [bad, wpath], f"mlk run: {bad}: message ")

for f in failures:
    print("FAIL:", f)
print(f"{len(failures)} failed" if failures else "run_arrow: all cases passed")
sys.exit(1 if failures else 0)
