"""`shard` over MPI (`mlk run --ranks N`, Open MPI's mpirun on loopback)
against the unsharded program (`mlk run --reference`, the interpreter in
double precision) within the F32 envelope, on 2 and 4 ranks: a matmul sharded
on its contraction dimension (an all-reduce), on its rows (result blocks
gathered), a two-axis mesh, a softmax along a sharded axis (two all-reduces),
and the scenario's pipeline (a cross-entropy loss, its gradient, the gradient
sharded over the batch), the gradient also against its closed form in numpy,
once with plain parameters and once written with records (`loss_step(params,
batch)`); the per-rank kernel
tuned into a cache and loaded by the ranks.
Then the failures: a wrong rank count, --ranks on a fn without a plan, a rank
that hangs (the others' collective times out, naming it) and a rank that is
killed (the run ends with an error, not a hang).

usage: shard_mpi.py MLK_BINARY SOURCE_DIR WORK_DIR
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import time

import numpy as np

MLK, SRC, WORK = sys.argv[1:4]
sys.path.insert(0, os.path.join(SRC, "tests", "python"))
from check_common import check, results  # noqa: E402

TL = os.path.join(SRC, "tests", "transforms", "shard_f32.tl")
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
rng = np.random.default_rng(7)
U = 2.0 ** -24  # F32 unit roundoff


def write_safetensors(path, named):
    header, blobs, off = {}, [], 0
    for name, a in named.items():
        b = a.tobytes()
        header[name] = {"dtype": "I32" if a.dtype == np.int32 else "F32", "shape": list(a.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_output(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    meta = json.loads(data[8:8 + n])["output"]
    a, b = meta["data_offsets"]
    return np.frombuffer(data[8 + n + a:8 + n + b], dtype=np.float32).reshape(meta["shape"]).astype(np.float64)


RUNS = []


def run(fn, inputs, *flags, env=None):
    path = os.path.join(WORK, fn + ".in.safetensors")
    write_safetensors(path, inputs)
    RUNS.append(fn)
    out = os.path.join(WORK, "%s.%d.out.safetensors" % (fn, len(RUNS)))
    t0 = time.monotonic()
    p = subprocess.run([MLK, "run", TL, "--fn", fn, "--inputs", path, "--output", out, *flags], capture_output=True,
                       text=True, env=env)
    return p, out, time.monotonic() - t0


def sharded_vs_unsharded(fn, inputs, ranks, envelope):
    """The fn on `ranks` ranks against its unsharded value; envelope(ref) bounds |got - ref| elementwise."""
    p, out, secs = run(fn, inputs, "--ranks", str(ranks))
    check("%s on %d ranks runs" % (fn, ranks), p.returncode == 0, p.stderr[-1500:])
    r, ref_out, _ = run(fn, inputs, "--reference")
    check("%s unsharded (reference) runs" % fn, r.returncode == 0, r.stderr[-800:])
    if p.returncode or r.returncode:
        return None
    got, ref = read_output(out), read_output(ref_out)
    err, bound = np.abs(got - ref), envelope(ref)
    check("%s on %d ranks: shape %s" % (fn, ranks, list(ref.shape)), got.shape == ref.shape)
    check("%s on %d ranks within the F32 envelope (max error %.3g, %.1fs)" % (fn, ranks, err.max(), secs),
          np.all(err <= bound), "worst %.3g > bound %.3g" % (err.max(), bound.flat[np.argmax(err - bound)]))
    return got


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


# Matmul: Higham's bound for any summation order, gamma_K * (|A| |B|), for the
# kernel and the rounding of the F64 reference to F32.
a, b = f32(8, 12), f32(12, 6)


def mm_envelope(ref):
    k = a.shape[1]
    return (k * U / (1 - k * U)) * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))) + 2 * U * np.abs(ref)


for fn, ranks in [("mm_k2", 2), ("mm_k4", 4), ("mm_rows2", 2), ("mm_rows4", 4), ("mm_2d", 4)]:
    sharded_vs_unsharded(fn, {"a": a, "b": b}, ranks, mm_envelope)

# The per-rank kernel is an ordinary fn: tuned into a cache, then loaded by
# every rank instead of the JIT.
db = os.path.join(WORK, "cache.db")
t = subprocess.run([MLK, "tune", TL, "--fn", "mm_k2__step0", "--dims", "M=8,K=12,N=6", "--target", "host",
                    "--trials", "2", "--no-autoschedulers", "--cache", db, "-q"], capture_output=True, text=True)
check("the per-rank kernel mm_k2__step0 tunes like any fn", t.returncode == 0, t.stderr[-800:])
p, out, _ = run("mm_k2", {"a": a, "b": b}, "--ranks", "2", "--cache", db)
check("the ranks load the tuned per-rank artifact", p.returncode == 0 and
      "mlk run: mm_k2__step0: tuned artifact " in p.stderr and "tuned at exactly K=12,M=8,N=6" in p.stderr,
      p.stderr[-800:])
if p.returncode == 0:
    ref = a.astype(np.float64) @ b.astype(np.float64)
    check("mm_k2 with the tuned per-rank artifact within the F32 envelope",
          np.all(np.abs(read_output(out) - ref) <= mm_envelope(ref)))

# Second review, finding 6: `--ranks N --require signed:KEY` dropped the policy, and the ranks loaded the
# unsigned artifact (or the JIT). Now each rank loads only what the key signed: the unsigned tune is refused.
k = subprocess.run([MLK, "key", "create", os.path.join(WORK, "rank.pem")], capture_output=True, text=True)
check("mlk key create", k.returncode == 0, k.stderr)
p, _, _ = run("mm_k2", {"a": a, "b": b}, "--ranks", "2", "--cache", db, "--require",
              "signed:" + os.path.join(WORK, "rank.pem.pub"))
check("Round2 finding 6: --ranks with --require signed: refuses an unsigned per-rank artifact (no JIT)",
      p.returncode == 1 and "no signed artifact for `mm_k2__step0`" in p.stderr and "tuned artifact" not in p.stderr
      and "JIT" not in p.stderr, p.stderr[-800:])

# Softmax along the sharded axis: exp and division in F32, a few ulps of each
# element plus the normaliser's sum of N terms.
s = f32(5, 16) * 3
for fn, ranks in [("sm2", 2), ("sm4", 4)]:
    sharded_vs_unsharded(fn, {"a": s}, ranks, lambda ref: (8 + s.shape[1]) * U * np.abs(ref) + 1e-12)

# The scenario: d/dw of the mean cross-entropy of x @ w, the batch sharded.
w, x = f32(6, 5), f32(8, 6)
labels = rng.integers(0, 5, 8).astype(np.int32)
ins = {"w": w, "x": x, "labels": labels}
logits = x.astype(np.float64) @ w.astype(np.float64)
p = np.exp(logits - logits.max(1, keepdims=True))
p /= p.sum(1, keepdims=True)
closed = x.astype(np.float64).T @ ((p - np.eye(5)[labels]) / len(labels))
for fn, ranks in [("d_model_b2", 2), ("d_model_b4", 4)]:
    got = sharded_vs_unsharded(fn, ins, ranks, lambda ref: 1e-4 * np.abs(ref) + 1e-6)
    if got is not None:
        check("%s on %d ranks against the closed-form gradient" % (fn, ranks),
              np.allclose(got, closed, rtol=1e-4, atol=1e-6), "max error %.3g" % np.abs(got - closed).max())
sharded_vs_unsharded("loss_b2", ins, 2, lambda ref: 1e-5 * np.abs(ref) + 1e-6)

# The scenario written with records (params: Linear, batch: Batch): the records'
# leaves are the fn's parameters (params_w, params_b, batch_x, batch_labels).
bias = f32(5)
rins = {"params_w": w, "params_b": bias, "batch_x": x, "batch_labels": labels}
logits = x.astype(np.float64) @ w.astype(np.float64) + bias.astype(np.float64)
p = np.exp(logits - logits.max(1, keepdims=True))
p /= p.sum(1, keepdims=True)
dlogits = (p - np.eye(5)[labels]) / len(labels)
for fn, want in [("d_step_w_b2", x.astype(np.float64).T @ dlogits), ("d_step_b_b2", dlogits.sum(0))]:
    got = sharded_vs_unsharded(fn, rins, 2, lambda ref: 1e-4 * np.abs(ref) + 1e-6)
    if got is not None:
        check("%s (records) on 2 ranks against the closed-form gradient" % fn,
              np.allclose(got, want, rtol=1e-4, atol=1e-6), "max error %.3g" % np.abs(got - want).max())
sharded_vs_unsharded("loss_step_b2", rins, 2, lambda ref: 1e-5 * np.abs(ref) + 1e-6)

# Failures, each a clear message and a bounded time.
p, _, _ = run("mm_k2", {"a": a, "b": b}, "--ranks", "3")
check("--ranks 3 for a mesh of 2: usage error", p.returncode == 2 and
      "`mm_k2` runs on mesh(x=2), which has 2 ranks, but --ranks is 3" in p.stderr, p.stderr)
p, _, _ = run("d_model", ins, "--ranks", "2")
check("--ranks on a fn without a plan: usage error", p.returncode == 2 and
      "--ranks runs a fn defined by `shard`; `d_model` is not one" in p.stderr, p.stderr)

env = dict(os.environ, MLK_SPMD_FAULT="hang:1")
p, _, secs = run("mm_k2", {"a": a, "b": b}, "--ranks", "2", "--collective-timeout", "2", env=env)
check("a hung rank: rank 0's collective times out, naming it (%.1fs)" % secs, p.returncode == 1 and
      "mlk run: rank 0 of 2: all_reduce(sum) over `x` after `mm_k2__step0` (`matmul` contracting `K`, sharded over "
      "`x`) did not complete within 2 s (--collective-timeout); another rank died or hangs" in p.stderr and
      "the SPMD run of `mm_k2` on 2 ranks failed" in p.stderr and secs < 30, p.stderr[-1500:])
env = dict(os.environ, MLK_SPMD_FAULT="kill:1")
p, _, secs = run("mm_k4", {"a": a, "b": b}, "--ranks", "4", env=env)
check("a killed rank: the run ends with an error naming it (%.1fs)" % secs, p.returncode == 1 and
      "process rank 1" in p.stderr and "the SPMD run of `mm_k4` on 4 ranks failed" in p.stderr and secs < 30,
      p.stderr[-1500:])

failed = [r for r in results if not r[1]]
for name, ok, note in results:
    print("%s %s%s" % ("ok  " if ok else "FAIL", name, "" if ok else "\n     " + note))
print("%d checks, %d failed" % (len(results), len(failed)))
sys.exit(1 if failed else 0)
