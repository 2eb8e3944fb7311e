"""mlk.select: per fn, the first candidate artifact that serves it here
(runtime/select.h, docs/runtime.md "Choosing between artifacts you hold").
The seed's scenario 5, select([prefer(gpu_artifact), fallback(cpu_artifact)]),
with artifacts `mlk build` writes: a CUDA artifact without a device, a
cpu_avx512 one on a host without AVX-512, and one lacking the fn are each
skipped with their reason; prefer before fallback whatever the list order;
a .tl program (its policy, the JIT) as a candidate; none left is
NotFoundError naming every candidate; a damaged artifact is CorruptionError.
Runs in the venv (the installed mlk package, PyTorch 2.x).

usage: runtime_select.py MLK_BINARY EXAMPLES_DIR MODULE_DIR WORK_DIR
"""
import os
import shutil
import subprocess
import sys

MLK, EXAMPLES, MODULE_DIR, WORK = sys.argv[1:5]
if MODULE_DIR != "-":  # "-": the installed mlk package
    sys.path.insert(0, MODULE_DIR)
import torch  # noqa: E402

import mlk  # noqa: E402

shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
NORMS = os.path.join(EXAMPLES, "norms.tl")
results = []
torch.manual_seed(0)


def check(name, cond, note=""):
    results.append((name, bool(cond), note))


def build(fn, target, dims):
    out = os.path.join(WORK, "%s_%s" % (fn, target))
    p = subprocess.run([MLK, "build", NORMS, "--fn", fn, "--target", target, "--dims", dims, "--no-cache", "-o", out],
                       capture_output=True, text=True)
    check("mlk build %s for %s" % (fn, target), p.returncode == 0, p.stderr[-400:])
    return out


def runs_here():
    """{profile: whether it runs on this machine}, as `mlk targets` says."""
    p = subprocess.run([MLK, "targets"], capture_output=True, text=True, check=True)
    table = {}
    for line in p.stdout.splitlines()[1:]:
        cols = line.split()
        if len(cols) >= 3 and cols[2] in ("yes", "no"):
            table[cols[0]] = cols[2] == "yes"
    return table


def refused(name, fn, text, exc):
    try:
        fn()
    except exc as e:
        check(name, all(t in str(e) for t in ([text] if isinstance(text, str) else text)), "message: %s" % e)
        return
    except Exception as e:  # noqa: BLE001
        check(name, False, "raised %s: %s" % (type(e).__name__, e))
        return
    check(name, False, "no exception")


RUNS = runs_here()
GPU, AVX512 = RUNS.get("cuda_sm90", False), RUNS.get("cpu_avx512", False)
RMS = "B=2,S=4,D=64"
sm90 = build("rmsnorm", "cuda_sm90", RMS)
avx512 = build("rmsnorm", "cpu_avx512", RMS)
avx2 = build("rmsnorm", "cpu_avx2", RMS)
host = build("rmsnorm", "host", RMS)
layernorm = build("layernorm", "cpu_avx2", "N=4,D=8")

x, w, eps = torch.randn(2, 4, 64), torch.randn(64), 1e-6
want = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def close(name, got, ref):
    ok = isinstance(got, torch.Tensor) and got.shape == ref.shape and torch.allclose(got, ref, rtol=2e-5, atol=2e-5)
    check(name, ok, "got %r" % (got if not isinstance(got, torch.Tensor) else got.shape,))


# --- scenario 5: prefer the GPU artifact, fall back to the CPU one ---------------
runner = mlk.select([mlk.prefer(mlk.load(sm90)), mlk.fallback(mlk.load(avx2))])
check("the runner has the artifacts' fn", runner.fns == ["rmsnorm"], runner.fns)
k = runner.rmsnorm.kernel(x, w, eps)
check("the kernel names the candidate it runs", k.candidate == (0 if GPU else 1), k.selection)
choice = runner.rmsnorm.choice
if not GPU:
    close("the CPU fallback computes rmsnorm", runner.rmsnorm(x, w, eps), want)
    check("the skipped GPU artifact and why, in the text",
          "\n  not candidate 0 (prefer, %s): cannot run here: cuda_sm90: " % sm90 in k.selection, k.selection)
    check("the chosen one first, then its own selection",
          k.selection.startswith("`rmsnorm`: candidate 1 (fallback, %s): cpu_avx2: the artifact in %s" % (avx2, avx2)),
          k.selection)
    check("kernel source and profile", (k.source, k.profile) == ("directory", "cpu_avx2"), (k.source, k.profile))
    check("the structured choice", choice["chosen"] == 1 and [c["chosen"] for c in choice["considered"]] == [False, True]
          and choice["considered"][0]["rank"] == "prefer" and choice["considered"][0]["name"] == sm90
          and choice["considered"][0]["reason"].startswith("cannot run here: cuda_sm90: ")
          and choice["considered"][1]["rank"] == "fallback", choice)
    check("runner.selection covers every fn", runner.selection == choice["text"], runner.selection)
    y = torch.empty(2, 4, 64)
    close("out= as with mlk.load", runner.rmsnorm(x, w, eps, out=y), want)
    check("out= is the result", runner.rmsnorm(x, w, eps, out=y) is y)
refused("the boundary still checks the arguments", lambda: runner.rmsnorm(x.double(), w, eps),
        "argument 0 `x` of `rmsnorm`: dtype float64 but the signature declares F32", mlk.BoundaryError)

# --- an artifact this CPU cannot load: given as a path, it is skipped ----------
if not AVX512:
    refused("mlk.load of a cpu_avx512 directory raises on this host", lambda: mlk.load(avx512),
            "needs CPU features this machine lacks: avx512f", mlk.Error)
    r = mlk.select([mlk.prefer(avx512), mlk.fallback(mlk.load(avx2))])
    c = r.rmsnorm.choice
    check("the cpu_avx512 artifact is skipped with its reason", c["chosen"] == 1 and
          "cannot be loaded here: %s was built for cpu_avx512 and needs CPU features this machine lacks: avx512f"
          % avx512 in c["considered"][0]["reason"], c)
    close("and the AVX2 artifact runs", r.rmsnorm(x, w, eps), want)

# --- prefer before fallback, whatever the list order ---------------------------------
r = mlk.select([mlk.fallback(mlk.load(avx2)), mlk.prefer(mlk.load(host))])
k = r.rmsnorm.kernel(x, w, eps)
check("a prefer candidate listed second wins over a fallback listed first",
      k.candidate == 1 and len(k.choice["considered"]) == 1 and k.profile == "host", k.selection)
close("and computes rmsnorm", r.rmsnorm(x, w, eps), want)

# --- an artifact lacking the fn: skipped for that fn only -------------------------------
r = mlk.select([mlk.prefer(mlk.load(layernorm)), mlk.fallback(mlk.load(host))])
check("the runner has every candidate's fn", r.fns == ["layernorm", "rmsnorm"], r.fns)
c = r.rmsnorm.choice
check("the layernorm artifact is skipped for rmsnorm", c["chosen"] == 1 and
      c["considered"][0]["reason"] == "holds the artifact of `layernorm`, not of `rmsnorm`", c)
check("and chosen for layernorm", r.layernorm.choice["chosen"] == 0, r.layernorm.choice)
xl, g, b = torch.randn(4, 8), torch.randn(8), torch.randn(8)
close("layernorm through the runner", r.layernorm(xl, g, b), torch.nn.functional.layer_norm(xl, (8,), g, b, eps=1e-5))
check("runner.selection has one block per fn", r.selection.startswith("`layernorm`: candidate 0") and
      "\n`rmsnorm`: candidate 1 (fallback, %s)" % host in r.selection, r.selection)

# --- a .tl program as the fallback: its policy, here the default schedule (JIT) ---------
r = mlk.select([mlk.prefer(sm90), mlk.fallback(mlk.load(NORMS, cache=os.path.join(WORK, "empty.db")))])
if not GPU:
    k = r.rmsnorm.kernel(x, w, eps)
    check("a program candidate gets its kernel from its policy", k.candidate == 1 and k.source == "default-jit" and
          "): host: default schedule (JIT), not tuned" in k.selection, k.selection)
    close("and computes rmsnorm", r.rmsnorm(x, w, eps), want)

# --- nothing serves: NotFoundError naming every candidate ---------------------------
if not GPU and not AVX512:
    r = mlk.select([mlk.prefer(avx512), mlk.fallback(sm90)])
    check("the choice says none serves", r.rmsnorm.choice["chosen"] is None, r.rmsnorm.choice)
    refused("a call with no candidate left", lambda: r.rmsnorm(x, w, eps),
            ["no candidate of select(...) serves `rmsnorm` at B=2,D=64,S=4 here:",
             "\n  candidate 0 (prefer, %s): cannot be loaded here: " % avx512,
             "\n  candidate 1 (fallback, %s): cannot run here: cuda_sm90: " % sm90], mlk.NotFoundError)

    r = mlk.select([mlk.prefer(avx512), mlk.fallback(os.path.join(WORK, "nowhere"))])
    check("no candidate loaded: the runner has no fn", r.fns == [], r.fns)
    refused("a fn of a runner whose candidates could not be loaded", lambda: r.rmsnorm,
            ["no candidate of select(...) has a fn `rmsnorm`: `rmsnorm`: no candidate serves it here",
             "\n  not candidate 0 (prefer, %s): cannot be loaded here: " % avx512,
             "\n  not candidate 1 (fallback, %s): cannot be loaded here: %s is not an artifact directory of `mlk build`"
             % (os.path.join(WORK, "nowhere"), os.path.join(WORK, "nowhere"))], mlk.NotFoundError)

# --- a damaged artifact is an error, never skipped ------------------------------------
damaged = os.path.join(WORK, "damaged")
shutil.copytree(host, damaged)
with open(os.path.join(damaged, "librmsnorm.so"), "r+b") as f:
    f.seek(100)
    byte = f.read(1)
    f.seek(100)
    f.write(bytes([byte[0] ^ 0xFF]))
refused("a damaged candidate", lambda: mlk.select([mlk.prefer(damaged), mlk.fallback(mlk.load(avx2))]),
        "does not match the sha256 in its manifest", mlk.CorruptionError)

# --- misuse ------------------------------------------------------------------------------
refused("items must be prefer/fallback", lambda: mlk.select([mlk.load(avx2)]),
        "mlk.select() takes a list of mlk.prefer(..) and mlk.fallback(..) items, not a Ops", TypeError)
refused("prefer takes an artifact", lambda: mlk.prefer(42), "mlk.prefer() takes what mlk.load returns", TypeError)
refused("an empty list", lambda: mlk.select([]), "select() needs at least one candidate", mlk.BoundaryError)
other = os.path.join(WORK, "other.tl")
with open(other, "w") as f:
    f.write("public fn rmsnorm [N](x: Tensor[F32, [N]]) -> Tensor[F32, [N]] = x\n")
refused("two signatures of one fn", lambda: mlk.select([mlk.prefer(mlk.load(avx2)), mlk.fallback(mlk.load(other))]),
        "`rmsnorm` differs between candidate 0 (prefer, %s)" % avx2, mlk.BoundaryError)

failed = [r for r in results if not r[1]]
for name, ok, note in results:
    print("%s %s%s" % ("ok  " if ok else "FAIL", name, "" if ok else ": " + str(note)))
print("%d checks, %d failed" % (len(results), len(failed)))
sys.exit(1 if failed else 0)
