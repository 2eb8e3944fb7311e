"""Ragged batches: all-MiniLM-L6-v2 in the packed-token form
(examples/minilm/minilm.tl's entry `encode_packed`, Model.encode) on sentences of
different lengths. Every sentence's embedding must equal, within the F32
envelope of docs/numerics.md, the embedding of that sentence run alone with
no padding through the padded model (the entry `encode`, itself checked
against PyTorch by minilm_torch.py): so attention crossed no other
sentence's tokens and the packing lost none. Also pack_tokens' arrays on a
small case, and encode's errors.

Default (untuned) JIT schedules. Runs in the venv (the installed mlk package).

usage: minilm_ragged.py VENV_PYTHON EXAMPLES_DIR MODULE_DIR WORK_DIR
"""
import math
import os
import shutil
import sys

VENV_PY, EXAMPLES, MODULE_DIR, WORK = sys.argv[1:5]
if MODULE_DIR != "-":  # "-": the installed mlk package
    sys.path.insert(0, MODULE_DIR)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402

import mlk  # noqa: E402
from check_common import check, minilm_model_dir, raises, results  # noqa: E402

shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
CACHE = os.path.join(WORK, "cache.db")
MODEL_DIR = minilm_model_dir(VENV_PY)
WEIGHTS = os.path.join(MODEL_DIR, "model.safetensors")
PROGRAM = os.path.join(EXAMPLES, "minilm", "minilm.tl")
ATOL, RTOL = 1e-5 * math.sqrt(1536), 1e-4  # F32 at the longest reduction (the FFN's 1536)

# --- pack_tokens on a small case -----------------------------------------------
p = mlk.pack_tokens([[101, 7, 102], [101, 102], [101, 5, 6, 102]])
want = {
    "input_ids": [[101, 7, 102, 101, 102, 101, 5, 6, 102]],
    "position_ids": [[0, 1, 2, 0, 1, 0, 1, 2, 3]],
    "pad_index": [[0, 1, 2, 2], [3, 4, 4, 4], [5, 6, 7, 8]],
    "pad_mask": [[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]],
    "unpad_index": [[0, 1, 2, 4, 5, 8, 9, 10, 11]],
}
for k, v in want.items():
    check("pack_tokens: " + k, p[k].dtype == np.int64 and p[k].tolist() == v, "%s" % p[k].tolist())

# --- packed against each sentence alone -----------------------------------------
rng = np.random.default_rng(1)
lengths = [5, 17, 2, 33, 9, 1]
sentences = []
for n in lengths:
    t = rng.integers(1000, 30000, size=n)
    t[0], t[-1] = 101, 102
    sentences.append(t.astype(np.int64))
packed = mlk.load_model(PROGRAM, weights=WEIGHTS, target="host", cache=CACHE, entry="encode_packed")
padded = mlk.load_model(PROGRAM, weights=WEIGHTS, target="host", cache=CACHE, entry="encode")
got = np.asarray(packed.encode(sentences))
check("one row per sentence", got.shape == (len(lengths), 384) and got.dtype == np.float32, str(got.shape))
worst = 0.0
for i, t in enumerate(sentences):
    alone = np.asarray(padded(t[None, :], np.ones((1, len(t)), dtype=np.int64)))[0]
    err = float(np.abs(got[i] - alone).max())
    worst = max(worst, err)
    check("sentence %d (%d tokens) as if alone" % (i, len(t)), np.allclose(got[i], alone, rtol=RTOL, atol=ATOL),
          "max |diff| %.3g" % err)
print("packed vs alone: max |diff| %.3g over %d sentences of %s tokens" % (worst, len(lengths), lengths))
# The order of the sentences changes nothing but the order of the rows.
rev = np.asarray(packed.encode(sentences[::-1]))
check("reversed order", np.allclose(rev[::-1], got, rtol=RTOL, atol=ATOL))

# --- errors ----------------------------------------------------------------------
raises("encode on a padded binding", lambda: padded.encode(sentences), mlk.BoundaryError,
       "encode needs a model of the packed-token form; this model's inputs (input_ids, attention_mask) lack "
       "position_ids, pad_index, pad_mask, unpad_index", exact=True)
raises("no sentence", lambda: packed.encode([]), mlk.BoundaryError,
       "the packed-token form needs at least one sentence", exact=True)
raises("an empty sentence", lambda: packed.encode([[101, 102], []]), mlk.BoundaryError,
       "sentence 1 of the token lists has no token", exact=True)
raises("a flat list", lambda: mlk.pack_tokens([101, 7, 102]), mlk.BoundaryError,
       "sentence 0 of the token lists is a scalar, not a sequence of token ids (pass one list of ids per sentence, "
       "unpadded)", exact=True)
raises("float ids", lambda: mlk.pack_tokens([[101, 102], [101.0, 7.5, 102.0]]), mlk.BoundaryError,
       "sentence 1 of the token lists holds float64 values; token ids are integers", exact=True)
raises("a negative id", lambda: mlk.pack_tokens([[101, -3, 102]]), mlk.BoundaryError,
       "sentence 0 of the token lists has a negative token id (-3)", exact=True)
bad = mlk.pack_tokens([[101, 102]])
bad["pad_index"] = bad["pad_index"] + 5  # points past the packed tokens
raises("an index past the tokens", lambda: packed(**bad), mlk.BoundaryError,
       "`layer_packed` failed at run time: gather index 5 is outside [0, 2)")

failed = [r for r in results if not r[1]]
for name, ok, note in results:
    print("%s: %s%s" % ("ok" if ok else "FAIL", name, "" if ok or not note else "\n    " + note.replace("\n", "\n    ")))
print("%d passed, %d failed" % (len(results) - len(failed), len(failed)))
sys.exit(1 if failed else 0)
