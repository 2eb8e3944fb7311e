"""One training step (forward, cross-entropy, backward, AdamW) of a BERT-style
encoder in PyTorch, pure and with its attention and FFN blocks in mlk
(bench/encoder_blocks.tl: the blocks and their vjp fns), eager
(mlk.torch.function) and under torch.compile (mlk.torch.register ops), in one
process, interleaved in rounds after the threads settle; the best median per
contender. The losses and gradients of one step are compared first.

usage: .venv/bin/python bench/torch_training.py [--threads N] [--rounds R] [--no-compile]
       (tune first: build/mlk tune bench/encoder_blocks.tl --target host --budget 600 --cache C.db,
        then run with MLK_CACHE=C.db; untuned, the kernels are the JIT's default schedules)
"""
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def arg(name, default):
    return int(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


THREADS, ROUNDS = arg("--threads", 2), arg("--rounds", 3)
COMPILE = "--no-compile" not in sys.argv
V, B, S, D, H, FF, LAYERS, C = 1000, 8, 128, 256, 4, 1024, 2, 2

# A fresh inductor cache: a graph compiled against other mlk ops (an older
# registration) must not be reused.
import tempfile  # noqa: E402
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="mlk-bench-inductor-"))
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(THREADS)
import mlk  # noqa: E402
import mlk.torch  # noqa: E402
from peer_timing import cpu, median_ms  # noqa: E402

ops = mlk.load(os.path.join(HERE, "encoder_blocks.tl"), target="host", cache=os.environ.get("MLK_CACHE", ""))
attention_fn = mlk.torch.function(ops.attention_block, dims={"H": H})
ffn_fn = mlk.torch.function(ops.ffn_block)
lib = mlk.torch.register(ops, namespace="mlk_bench", dims={"H": H}) if COMPILE else None


def torch_attention(x, mask, wq, bq, wk, bk, wv, bv, wo, bo, scale):
    def split(t):
        return t.view(B, S, H, D // H).transpose(1, 2)
    q, k, v = split(F.linear(x, wq, bq)), split(F.linear(x, wk, bk)), split(F.linear(x, wv, bv))
    scores = (q @ k.transpose(-1, -2) * scale).masked_fill(mask[:, None, None, :] == 0, -1e30)
    return F.linear((torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, S, D), wo, bo)


def torch_ffn(x, wi, bi, wf, bf):
    return F.linear(F.gelu(F.linear(x, wi, bi)), wf, bf)


BLOCKS = {
    "torch": (torch_attention, torch_ffn),
    "function": (attention_fn.apply, ffn_fn.apply),
    "ops": ((lambda *a: lib.attention_block(*a)), (lambda *a: lib.ffn_block(*a))) if lib else None,
}


class Layer(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.attention, self.ffn = BLOCKS[kind]
        self.q, self.k, self.v, self.o = (nn.Linear(D, D) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.fi, self.fo = nn.Linear(D, FF), nn.Linear(FF, D)

    def forward(self, x, mask):
        a = self.attention(x, mask, self.q.weight, self.q.bias, self.k.weight, self.k.bias, self.v.weight,
                           self.v.bias, self.o.weight, self.o.bias, 1 / math.sqrt(D // H))
        x = self.ln1(x + a)
        return self.ln2(x + self.ffn(x, self.fi.weight, self.fi.bias, self.fo.weight, self.fo.bias))


class Encoder(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.tok = nn.Embedding(V, D)
        self.pos = nn.Parameter(torch.randn(S, D) * 0.02)
        self.layers = nn.ModuleList(Layer(kind) for _ in range(LAYERS))
        self.head = nn.Linear(D, C)

    def forward(self, ids, mask):
        x = self.tok(ids) + self.pos
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(x[:, 0])


gen = torch.Generator().manual_seed(0)
ids = torch.randint(0, V, (B, S), generator=gen)
mask = (torch.arange(S)[None, :] < torch.randint(S // 2, S + 1, (B,), generator=gen)[:, None]).to(torch.int64)
label = torch.randint(0, C, (B,), generator=gen)


def trainer(kind, compiled):
    torch.manual_seed(0)
    model = Encoder(kind)
    run = torch.compile(model, fullgraph=True) if compiled else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        loss = F.cross_entropy(run(ids, mask), label)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return model, step


def first_step(kind, compiled):
    model, step = trainer(kind, compiled)
    loss = step()
    return loss.item(), {n: p.grad.clone() for n, p in model.named_parameters()}


def main():
    want_loss, want_grads = first_step("torch", False)
    kinds = [("mlk blocks (function)", "function", False)]
    if COMPILE:
        kinds.append(("mlk ops, compiled", "ops", True))
    for label_, kind, compiled in kinds:
        loss, grads = first_step(kind, compiled)
        # Relative to the largest gradient element of all: a key bias has a gradient that is 0 in
        # exact arithmetic (softmax cancels it), so its own scale is rounding noise.
        scale = max(float(g.abs().max()) for g in want_grads.values())
        errs = {n: float((grads[n] - g).abs().max()) / scale for n, g in want_grads.items()}
        worst = max(errs, key=errs.get)
        print("%-24s loss %.6f vs %.6f; worst gradient |diff| / max |grad| %.2e (%s)"
              % (label_, loss, want_loss, errs[worst], worst))
        worst = errs[worst]
        if abs(loss - want_loss) > 1e-4 * abs(want_loss) or worst > 1e-3:
            sys.exit("%s differs from PyTorch: not timing" % label_)
    x = torch.randn(B, S, D)
    print("kernels:", ops.attention_block.kernel(x, mask, *[torch.randn(D, D) if i % 2 == 0 else torch.randn(D)
                                                              for i in range(8)], 0.5, dims={"H": H}).selection)
    contenders = {"PyTorch eager": trainer("torch", False)[1], "mlk eager": trainer("function", False)[1]}
    if COMPILE:
        contenders["PyTorch compiled"] = trainer("torch", True)[1]
        contenders["mlk compiled"] = trainer("ops", True)[1]
    for fn in contenders.values():
        fn()
        fn()
    best = {k: float("inf") for k in contenders}
    for _ in range(ROUNDS):
        for k, fn in contenders.items():
            best[k] = min(best[k], median_ms(fn, 3))
    name, flags = cpu()
    print("CPU: %s (%s), %d threads; B=%d S=%d D=%d H=%d F=%d, %d layers; torch %s"
          % (name, ", ".join(flags), THREADS, B, S, D, H, FF, LAYERS, torch.__version__))
    for k, v in best.items():
        peer = "PyTorch compiled" if "compiled" in k else "PyTorch eager"
        print("%-17s %9.2f ms   %s / this = %.2fx" % (k, v, peer, best[peer] / v))


main()
