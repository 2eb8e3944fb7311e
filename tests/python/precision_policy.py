"""The precision policies (docs/numerics.md, "Precision policies") end to end:

- mlk.load(..., precision="bf16"/"f16"): a product's F32 operands rounded to
  the narrow dtype, summed in F32 (against numpy on the rounded operands),
  and far from the product as written;
- `mlk tune --precision bf16` stores its winner under a key of its own: the
  runtime finds it under the policy and not without it;
- `mlk build --precision bf16 -o DIR`: the manifest says so, and the
  directory loads and computes the same;
- bad policy names are refused with the choices;
- all-MiniLM-L6-v2 (its real weights) under bf16 against f32 on real
  sentences: cosine >= 0.999 for every sentence (issue 29's accuracy check).

Runs in the venv (the installed mlk package; the MiniLM tokenizer of
examples/minilm/embed.py). Default (untuned) JIT schedules except for the
one tuned product.

usage: precision_policy.py MLK_BINARY VENV_PYTHON EXAMPLES_DIR MODULE_DIR WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

MLK, VENV_PY, EXAMPLES, MODULE_DIR, WORK = sys.argv[1:6]
if MODULE_DIR != "-":  # "-": the installed mlk package
    sys.path.insert(0, MODULE_DIR)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(EXAMPLES, "minilm"))
import numpy as np  # noqa: E402

import mlk  # noqa: E402
from check_common import check, minilm_model_dir, raises, results  # noqa: E402
from embed import WordPiece  # noqa: E402

shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
STORE = os.path.join(WORK, "cache.db")
MLP = os.path.join(EXAMPLES, "mlp.tl")


def bf16(x):
    """x rounded to BF16 (to nearest, ties to even), as float32."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def narrow(x, policy):
    return bf16(x) if policy == "bf16" else x.astype(np.float16).astype(np.float32)


rng = np.random.default_rng(0)
M, K, N = 24, 200, 40
a = rng.uniform(-2, 2, (M, K)).astype(np.float32)
b = rng.uniform(-2, 2, (K, N)).astype(np.float32)
as_written = a.astype(np.float64) @ b.astype(np.float64)
TOL = dict(rtol=1e-4, atol=1e-5 * K ** 0.5)  # docs/numerics.md §5, F32 at K

# --- products under each policy, by the default schedule -----------------------
for policy in ("bf16", "f16"):
    ops = mlk.load(MLP, cache=STORE, precision=policy)
    got = np.asarray(ops.sgemm(a, b))
    want = narrow(a, policy).astype(np.float64) @ narrow(b, policy).astype(np.float64)
    check("%s: F32 result" % policy, got.dtype == np.float32 and got.shape == (M, N), str(got.dtype))
    check("%s: the rounded operands' product, summed in F32" % policy, np.allclose(got, want, **TOL),
          "max |diff| %.3g" % np.abs(got - want).max())
    check("%s: not the product as written" % policy, not np.allclose(got, as_written, **TOL),
          "max |diff| %.3g" % np.abs(got - as_written).max())
f32 = np.asarray(mlk.load(MLP, cache=STORE).sgemm(a, b))
check("f32: the product as written", np.allclose(f32, as_written, **TOL))

raises("a bad policy is refused by mlk.load", lambda: mlk.load(MLP, precision="int8"), ValueError,
       "precision='int8': expected 'f32', 'bf16' or 'f16'")
p = subprocess.run([MLK, "check", "--precision", "fp8", MLP], capture_output=True, text=True)
check("a bad policy is refused by the CLI", p.returncode == 2 and
      "--precision: precision `fp8`: expected f32, bf16 or f16" in p.stderr, p.stderr)
p = subprocess.run([MLK, "check", "--precision", "bf16", "--emit-ir", MLP], capture_output=True, text=True)
check("--emit-ir shows the operands cast to BF16", p.returncode == 0 and "cast %0 : Tensor[BF16, [M, K]]" in p.stdout,
      p.stdout[:600] + p.stderr)

# --- a policy the program was not loaded under is refused -----------------------
raises("a policy in the target that the program was not loaded under",
       lambda: mlk.load(MLP, target="host;precision=bf16").sgemm(a, b), mlk.BoundaryError,
       "`sgemm`: the target policy asks for precision bf16, but %s was loaded under f32" % MLP)
sel = mlk.load(MLP, cache=STORE, precision="f16").sgemm.kernel(a, b).selection
check("the default schedule's hint tunes under the policy", "--target host --precision f16 --dims" in sel, sel)
p = subprocess.run([MLK, "run", MLP, "--fn", "sgemm", "--ranks", "2", "--precision", "bf16", "--inputs", "x",
                    "--output", "y"], capture_output=True, text=True)
check("mlk run --ranks refuses a policy", p.returncode == 2 and
      "--ranks runs the program as written; it takes no --precision" in p.stderr, p.stderr)

# --- a tuned artifact is cached under the policy -------------------------------
dims = "M=%d,K=%d,N=%d" % (M, K, N)
p = subprocess.run([MLK, "tune", MLP, "--fn", "sgemm", "--dims", dims, "--target", "host", "--precision", "bf16",
                    "--trials", "2", "--time", "20", "--no-autoschedulers", "--cache", STORE, "-q"],
                   capture_output=True, text=True)
check("tune --precision bf16", p.returncode == 0, p.stderr[-600:])
tuned = mlk.load(MLP, cache=STORE, precision="bf16", require="tuned")
got = np.asarray(tuned.sgemm(a, b))
check("the bf16 winner is found under the policy", np.allclose(got, bf16(a).astype(np.float64) @ bf16(b), **TOL))
raises("and not for the program as written", lambda: mlk.load(MLP, cache=STORE, require="tuned").sgemm(a, b),
       mlk.NotFoundError, "no artifact of `sgemm` tuned for host")

# --- an artifact directory records its policy ----------------------------------
art = os.path.join(WORK, "sgemm_bf16")
p = subprocess.run([MLK, "build", MLP, "--fn", "sgemm", "--target", "host", "--precision", "bf16", "--dims", dims,
                    "-o", art], capture_output=True, text=True)
check("build --precision bf16", p.returncode == 0, p.stderr[-600:])
manifest = json.load(open(os.path.join(art, "manifest.json"))) if p.returncode == 0 else {}
check("the manifest records the policy", manifest.get("precision") == "bf16", str(manifest.get("precision")))
if p.returncode == 0:
    got = np.asarray(mlk.load(art).sgemm(a, b))
    check("the directory loads under its policy", np.allclose(got, bf16(a).astype(np.float64) @ bf16(b), **TOL),
          "max |diff| %.3g" % np.abs(got - bf16(a).astype(np.float64) @ bf16(b)).max())
    verify = [MLK, "verify", MLP, "--fn", "sgemm", "--target", "host", "--dims", dims, "--artifact", art,
              "--level", "types,identity"]
    p = subprocess.run(verify, capture_output=True, text=True)
    check("verify names the directory's policy", p.returncode == 1 and
          "was built under precision bf16, not f32: verify it with --precision bf16" in p.stderr, p.stderr[-400:])
    p = subprocess.run(verify + ["--precision", "bf16"], capture_output=True, text=True)
    check("verify --precision bf16 passes it", p.returncode == 0, p.stdout[-400:] + p.stderr[-400:])
    raises("a directory built under bf16, asked for f16", lambda: mlk.load(art, precision="f16").sgemm(a, b),
           mlk.BoundaryError, "the target policy asks for precision f16, but")

# --- MiniLM under bf16 against f32 ---------------------------------------------
MODEL_DIR = minilm_model_dir(VENV_PY)
SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
    "Someone in a gorilla costume is playing a set of drums.",
    "The quick brown fox jumps over the lazy dog while the farmer sleeps under an old oak tree near the river.",
]
ids, mask = WordPiece(os.path.join(MODEL_DIR, "vocab.txt"))(SENTENCES)
weights = os.path.join(MODEL_DIR, "model.safetensors")
program = os.path.join(EXAMPLES, "minilm", "minilm.tl")
emb = {}
for policy in ("f32", "bf16"):
    model = mlk.load_model(program, weights=weights, target="host", cache=STORE, precision=policy,
                           entry="encode")
    emb[policy] = np.asarray(model(ids, mask), dtype=np.float64)
cos = (emb["f32"] * emb["bf16"]).sum(1) / (np.linalg.norm(emb["f32"], axis=1) * np.linalg.norm(emb["bf16"], axis=1))
print("MiniLM bf16 vs f32, %d sentences (%d tokens at most): cosine min %.6f, mean %.6f" %
      (len(SENTENCES), ids.shape[1], cos.min(), cos.mean()))
check("MiniLM under bf16: cosine >= 0.999 against f32 for every sentence", cos.min() >= 0.999, "min %.6f" % cos.min())
check("MiniLM under bf16 is not f32's", np.abs(emb["f32"] - emb["bf16"]).max() > 1e-5,
      "max |diff| %.3g" % np.abs(emb["f32"] - emb["bf16"]).max())

failed = [r for r in results if not r[1]]
for name, ok, note in results:
    print("%s: %s%s" % ("ok" if ok else "FAIL", name, "" if ok or not note else "\n    " + note.replace("\n", "\n    ")))
print("%d passed, %d failed" % (len(results) - len(failed), len(failed)))
sys.exit(1 if failed else 0)
