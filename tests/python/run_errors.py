"""`mlk run` on bad inputs: each gets a clear error naming what is wrong and
where, the right exit code, and no output file.

usage: run_errors.py MLK_BINARY EXAMPLES_DIR WORK_DIR
"""
import os
import subprocess
import sys

import numpy as np
from safetensors.numpy import save_file

MLK, EXAMPLES, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(WORK, exist_ok=True)
f32, f16 = np.float32, np.float16
results = []


def check(name, tl, inputs, want_code, want_text, extra=(), raw_file=None):
    path_in = os.path.join(WORK, f"{name}.safetensors")
    path_out = os.path.join(WORK, f"{name}_out.safetensors")
    if os.path.exists(path_out):
        os.remove(path_out)
    if raw_file is not None:
        with open(path_in, "wb") as f:
            f.write(raw_file)
    elif inputs is not None:
        save_file(inputs, path_in)
    cmd = [MLK, "run", os.path.join(EXAMPLES, tl), "--inputs", path_in, "--output", path_out, *extra]
    p = subprocess.run(cmd, capture_output=True, text=True)
    out = p.stdout + p.stderr
    problems = []
    if p.returncode != want_code:
        problems.append(f"exit {p.returncode}, expected {want_code}")
    if want_text not in out:
        problems.append(f"output lacks {want_text!r}")
    if want_code != 0 and os.path.exists(path_out):
        problems.append("an output file was written")
    results.append((name, not problems, "; ".join(problems) + f" | {out.strip()[-200:]}" if problems else out.strip()[-150:]))
    return out


x = np.ones((2, 3, 4), f32)
check("dim_mismatch", "norms.tl", {"x": x, "w": np.ones(5, f32), "eps": np.array(1e-5, f32)}, 1,
      "w.shape[0] = 5 but D = 4, bound by x.shape[2]", ["--fn", "rmsnorm"])
check("missing_tensor", "norms.tl", {"x": x, "eps": np.array(1e-5, f32)}, 1,
      'has no tensor "w" for parameter `w` of `rmsnorm`', ["--fn", "rmsnorm"])
check("extra_tensor", "norms.tl", {"x": x, "w": np.ones(4, f32), "eps": np.array(1e-5, f32), "bias": np.ones(4, f32)},
      1, 'tensor "bias" matches no parameter of `rmsnorm` (parameters: x, w, eps)', ["--fn", "rmsnorm"])
check("wrong_dtype", "norms.tl", {"x": x, "w": np.ones(4, f16), "eps": np.array(1e-5, f32)}, 1,
      "`w` must be F32, got F16", ["--fn", "rmsnorm"])
check("wrong_rank", "norms.tl", {"x": np.ones((3, 4), f32), "w": np.ones(4, f32), "eps": np.array(1e-5, f32)}, 1,
      "`x` must have rank 3", ["--fn", "rmsnorm"])
qkv = np.ones((1, 2, 6), f32)
check("refinement", "attention.tl", {"q": qkv, "k": qkv, "v": qkv, "scale": np.array(1, f32)}, 1,
      "refinement `D mod H = 0` of `attention` does not hold: D = 6, H = 4", ["--fn", "attention", "--dims", "H=4"])
check("unbound_dim", "attention.tl", {"q": qkv, "k": qkv, "v": qkv, "scale": np.array(1, f32)}, 1,
      "give it with --dims H=VALUE", ["--fn", "attention"])
check("reference_too", "norms.tl", {"x": x, "w": np.ones(5, f32), "eps": np.array(1e-5, f32)}, 1,
      "w.shape[0] = 5 but D = 4, bound by x.shape[2]", ["--fn", "rmsnorm", "--reference"])
check("truncated_file", "norms.tl", None, 1, "safetensors", ["--fn", "rmsnorm"], raw_file=b"\x10\x00\x00\x00\x00\x00\x00\x00{}")
check("missing_file", "norms.tl", None, 1, "missing_file.safetensors: cannot open: No such file or directory", ["--fn", "rmsnorm"])
check("no_fn_given", "norms.tl", {"x": x}, 2, "--fn NAME is required", [])
check("bad_dims_flag", "norms.tl", {"x": x}, 2, "--dims: `H` is not NAME=VALUE", ["--fn", "rmsnorm", "--dims", "H"])
check("unknown_target", "norms.tl", {"x": x, "w": np.ones(4, f32), "eps": np.array(1e-5, f32)}, 1,
      "cannot run cuda_sm90 here", ["--fn", "rmsnorm", "--target", "cuda_sm90"])
out = check("repeat", "norms.tl", {"x": x, "w": np.ones(4, f32), "eps": np.array(1e-5, f32)}, 0,
            "rmsnorm: median", ["--fn", "rmsnorm", "--repeat", "3"])
# A result too large for this machine's memory (G is bound only by --dims): refused
# before it is allocated, with the estimate, for the JIT and the interpreter alike.
kv = {"kv": np.ones((1, 1, 1, 1024), f32)}
too_big = ("--dims G=2147483647 needs about 8.0 TiB for the inputs and outputs of `expand_kv` "
           "(1 set of inputs of 4.0 KiB, 1 result of 8.0 TiB); this machine has ")
check("result_beyond_memory", "attention.tl", kv, 1, too_big, ["--fn", "expand_kv", "--dims", "G=2147483647", "--no-cache"])
check("result_beyond_memory_reference", "attention.tl", kv, 1, too_big,
      ["--fn", "expand_kv", "--dims", "G=2147483647", "--reference"])

failed = [r for r in results if not r[1]]
for name, ok, note in results:
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {note}")
print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
sys.exit(1 if failed else 0)
