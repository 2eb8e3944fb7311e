"""Finding 6 of issue 28: a runtime that requires a signer refuses an unsigned
artifact before it opens it, from Python (`mlk.load(..., trusted=[...])`)
and from `mlk run --require signed:KEYS`; a signed one loads, a
foreign-signed one is refused naming its signer. "Before it opens it": the
forged entry's library is not a shared library at all, so opening it could
only fail in dlopen ("cannot load"); under the policy the error is the
signature refusal instead. Runs in the venv (the installed mlk package, PyTorch 2.x).

usage: runtime_signed.py MLK_BINARY FORGE_ENTRY EXAMPLES_DIR MODULE_DIR WORK_DIR
"""
import json
import os
import shutil
import struct
import subprocess
import sys

MLK, FORGE, EXAMPLES, MODULE_DIR, WORK = sys.argv[1:6]
if MODULE_DIR != "-":  # "-": the installed mlk package
    sys.path.insert(0, MODULE_DIR)
import torch  # noqa: E402

import mlk  # noqa: E402

shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
store = os.path.join(WORK, "cache.db")
norms = os.path.join(EXAMPLES, "norms.tl")
results = []


def check(name, cond, note=""):
    results.append((name, bool(cond), note))


def run(*args):
    return subprocess.run([MLK, *args], capture_output=True, text=True)


def key(name):
    p = run("key", "create", os.path.join(WORK, name + ".pem"))
    check("mlk key create " + name, p.returncode == 0, p.stderr)
    pub = open(os.path.join(WORK, name + ".pem.pub")).read().split()[0]
    kid = [ln.split()[-1] for ln in p.stdout.splitlines() if ln.startswith("key id:")][0]
    return pub, kid


signer, signer_id = key("signer")
stranger, stranger_id = key("stranger")
check("the private key file is 0600", os.stat(os.path.join(WORK, "signer.pem")).st_mode & 0o777 == 0o600)

p = run("tune", norms, "--fn", "rmsnorm", "--dims", "B=2,S=4,D=64", "--target", "host", "--trials", "1",
        "--time", "20", "--cache", store, "-q", "--sign", os.path.join(WORK, "signer.pem"))
check("mlk tune --sign", p.returncode == 0, p.stderr[-600:])

x, w, eps = torch.randn(2, 4, 64), torch.randn(64), 1e-5
want = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def refused(name, fn, needles, absent=()):
    try:
        fn()
    except mlk.NotFoundError as e:
        msg = str(e)
        check(name, all(n in msg for n in needles) and not any(a in msg for a in absent), msg[-800:])
        return
    except Exception as e:  # noqa: BLE001
        check(name, False, "%s: %s" % (type(e).__name__, e))
        return
    check(name, False, "no error")


# A signed artifact loads under a policy that trusts its signer (a key, or the .pub file).
for trusted in ([signer], [os.path.join(WORK, "signer.pem.pub")], [stranger, signer]):
    ops = mlk.load(norms, target="host", cache=store, trusted=trusted)
    k = ops.rmsnorm.kernel(x, w, eps)
    check("signed artifact loads (trusted=%s)" % trusted[0][-12:],
          k.source == "exact" and ("signed by key " + signer_id) in k.selection, k.selection)
    got = ops.rmsnorm(x, w, eps)
    check("... and computes rmsnorm", torch.allclose(got, want, rtol=2e-5, atol=2e-5))
# Foreign-signed: refused, naming the signer.
refused("a foreign-signed artifact is refused naming its signer",
        lambda: mlk.load(norms, target="host", cache=store, trusted=[stranger]).rmsnorm(x, w, eps),
        ["is signed by key " + signer_id + ", which is not trusted"])

# The forgery: the same key, an unloadable library, matching sha256s, no signature.
p = subprocess.run([FORGE, store, "default", "rmsnorm"], capture_output=True, text=True)
check("forge the entry", p.returncode == 0, p.stderr)
forged_key = p.stdout.strip()
forged = forged_key[:16]
# Without a policy the forged library is opened, and dlopen fails on it.
try:
    mlk.load(norms, target="host", cache=store).rmsnorm(x, w, eps)
    check("without a signer policy the forged library is opened (dlopen fails)", False, "no error")
except Exception as e:  # noqa: BLE001
    check("without a signer policy the forged library is opened (dlopen fails)", "cannot load" in str(e), str(e))
# Finding 6, from Python: refused before it is opened.
refused("Finding6: mlk.load(trusted=...) refuses the unsigned artifact before opening it",
        lambda: mlk.load(norms, target="host", cache=store, trusted=[signer]).rmsnorm(x, w, eps),
        ["entry " + forged + " is unsigned"], absent=["cannot load"])

# Second review, finding 6: a signed default for runtimes. $MLK_TRUSTED_SIGNERS is the trust list of
# every loader whose caller names none: the forged entry is refused from Python, `mlk run` and
# `mlk bench` without a word about keys in the call; a malformed value is an error naming it.
DEFAULT = f"""
import sys
if {MODULE_DIR!r} != "-": sys.path.insert(0, {MODULE_DIR!r})
import mlk, torch
try:
    mlk.load({norms!r}, target="host", cache={store!r}).rmsnorm(torch.randn(2, 4, 64), torch.randn(64), 1e-5)
    print("LOADED")
except Exception as e:
    print("REFUSED", type(e).__name__, e)
"""
for value, want in ((signer, "is unsigned"), ("not-a-key", "$MLK_TRUSTED_SIGNERS"),
                    (os.path.relpath(os.path.join(WORK, "signer.pem.pub")), "is a relative path"),  # Review12 L6
                    (os.path.join(WORK, "signer.pem.pub"), "is unsigned")):
    p = subprocess.run([sys.executable, "-c", DEFAULT], capture_output=True, text=True,
                       env=dict(os.environ, MLK_TRUSTED_SIGNERS=value))
    check("Round2 finding 6: MLK_TRUSTED_SIGNERS=%s makes mlk.load refuse (%s)" % (value[:12], want),
          "REFUSED" in p.stdout and want in p.stdout and "cannot load" not in p.stdout, p.stdout + p.stderr[-400:])
p = subprocess.run([MLK, "bench", norms, "--fn", "rmsnorm", "--dims", "B=2,S=4,D=64", "--target", "host", "--cache",
                    store, "--min-time", "20", "--rounds", "1", "--peers", "none", "--json", "-", "-q"],
                   capture_output=True, text=True, env=dict(os.environ, MLK_TRUSTED_SIGNERS=signer))
check("Round2 finding 6: MLK_TRUSTED_SIGNERS makes mlk bench pass the forged hit over",
      p.returncode == 0 and "cannot load" not in p.stderr, p.stderr[-600:])

# Second review, finding 6: `mlk bench` dlopened cache hits with no policy. With --trusted-signers the
# forged (unsigned) hit is passed over and the default schedule is timed; without it, it is opened.
def bench(*extra):
    return run("bench", norms, "--fn", "rmsnorm", "--dims", "B=2,S=4,D=64", "--target", "host", "--cache", store,
               "--min-time", "20", "--rounds", "1", "--peers", "none", "--json", "-", "-q", *extra)


p = bench()
check("mlk bench without a policy opens the forged library (dlopen fails)", "cannot load" in p.stderr, p.stderr[-600:])
p = bench("--trusted-signers", signer)
variant = json.loads(p.stdout)["kernels"][0].get("variant") if p.returncode == 0 else None
check("Round2 finding 6: mlk bench --trusted-signers passes the forged hit over and times the default schedule",
      p.returncode == 0 and variant != "tuned" and "cannot load" not in p.stderr, p.stderr[-600:] + " " + str(variant))

# Second review, finding 1: `mlk build --cache STORE --sign K` signed a cache hit as it was, so a
# writer's bytes came out signed by CI's key. A hit that no --trusted-signers key signed is rebuilt
# here from its schedule: the signed directory holds this process's library, not the forged text.
def build_signed(name, *extra):
    d = os.path.join(WORK, name)
    p = run("build", norms, "--fn", "rmsnorm", "--dims", "B=2,S=4,D=64", "--target", "host", "--cache", store,
            "-o", d, "--sign", os.path.join(WORK, "signer.pem"), *extra)
    lib = json.load(open(os.path.join(d, "manifest.json")))["library"] if p.returncode == 0 else ""
    elf = lib and open(os.path.join(d, lib), "rb").read(4) == b"\x7fELF"
    return p, elf


for extra in ((), ("--trusted-signers", signer)):
    p, elf = build_signed("built%d" % len(extra), *extra)
    check("Round2 finding 1: mlk build --sign %s rebuilds a forged cache hit" % " ".join(extra)[:24],
          p.returncode == 0 and "rebuilt:" in p.stdout and "cached:" not in p.stdout and elf, p.stdout + p.stderr)


# Finding 6, from `mlk run`.
def safetensors(path, tensors):
    header, data = {}, b""
    for name, t in tensors.items():
        raw = t.contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


inp = os.path.join(WORK, "in.safetensors")
safetensors(inp, {"x": x, "w": w, "eps": torch.tensor(eps, dtype=torch.float32)})
out = os.path.join(WORK, "out.safetensors")
p = run("run", norms, "--fn", "rmsnorm", "--inputs", inp, "--output", out, "--cache", store)
check("mlk run without a policy opens the forged library (dlopen fails)", p.returncode == 1 and "cannot load" in p.stderr,
      p.stderr)
p = run("run", norms, "--fn", "rmsnorm", "--inputs", inp, "--output", out, "--cache", store,
        "--require", "signed:" + signer)
check("Finding6: mlk run --require signed:KEY refuses the unsigned artifact before opening it",
      p.returncode == 1 and ("entry " + forged + " is unsigned") in p.stderr and "cannot load" not in p.stderr, p.stderr)
p = run("run", norms, "--fn", "rmsnorm", "--inputs", inp, "--output", out, "--cache", store,
        "--require", "signed:nonsense")
check("mlk run --require signed: with a bad key is a usage error", p.returncode == 2, p.stderr)

# Re-signed by the signer (`mlk cache push --sign` re-signs a local entry; here through tune's key on a
# fresh store): a signed artifact in another store loads from `mlk run`.
store2 = os.path.join(WORK, "cache2.db")
p = run("tune", norms, "--fn", "rmsnorm", "--dims", "B=2,S=4,D=64", "--target", "host", "--trials", "1",
        "--time", "20", "--cache", store2, "-q", "--sign", os.path.join(WORK, "signer.pem"))
p = run("run", norms, "--fn", "rmsnorm", "--inputs", inp, "--output", out, "--cache", store2,
        "--require", "signed:" + os.path.join(WORK, "signer.pem.pub"))
check("mlk run --require signed:KEY.pub runs a signed artifact", p.returncode == 0 and "tuned artifact" in p.stderr,
      p.stderr)
p = run("run", norms, "--fn", "rmsnorm", "--inputs", inp, "--output", out, "--cache", store2,
        "--require", "signed:" + stranger)
check("mlk run refuses a foreign-signed artifact naming its signer",
      p.returncode == 1 and ("is signed by key " + signer_id + ", which is not trusted") in p.stderr, p.stderr)

# Second review, finding 6: mlk.load_model had no trusted=. With it, a model's steps load only what a
# trusted key signed: here none of MiniLM's steps is signed, so its first call is refused, naming the
# policy, and nothing falls back to the JIT.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_common import minilm_model_dir  # noqa: E402

weights = os.path.join(minilm_model_dir(sys.executable), "model.safetensors")
model = mlk.load_model(os.path.join(EXAMPLES, "minilm", "minilm.tl"), weights=weights, target="host", cache=store,
                       entry="encode", trusted=[signer])
ids = torch.tensor([[101, 7592, 102]], dtype=torch.int64)
refused("Round2 finding 6: load_model(trusted=...) admits only signed artifacts (no JIT fallback)",
        lambda: model(ids, torch.ones_like(ids)), ["signed"])
try:
    mlk.load_model(os.path.join(EXAMPLES, "minilm", "minilm.tl"), weights=weights, trusted=["a,b"])
    check("load_model(trusted=) refuses a malformed key list", False, "no error")
except ValueError as e:
    check("load_model(trusted=) refuses a malformed key list", "trusted=" in str(e), str(e))

# ... and a hit that a trusted key signed is signed as it is.
p = run("build", norms, "--fn", "rmsnorm", "--dims", "B=2,S=4,D=64", "--target", "host", "--cache", store2,
        "-o", os.path.join(WORK, "built_trusted"), "--sign", os.path.join(WORK, "signer.pem"),
        "--trusted-signers", os.path.join(WORK, "signer.pem.pub"))
check("Round2 finding 1: mlk build --sign --trusted-signers takes a hit its signer signed",
      p.returncode == 0 and "cached:" in p.stdout and "rebuilt:" not in p.stdout, p.stdout + p.stderr)

# Review 12, H1: `mlk build -o DIR` without --sign copied a writer's hit into DIR, and
# mlk.load(DIR, trusted=[...]) then loaded it: a directory was outside the signed policy. Now a
# trust list (--trusted-signers, else $MLK_TRUSTED_SIGNERS) makes build rebuild such a hit, and the
# runtime loads a directory under signed:KEYS only with a directory signature by one of KEYS.
def build_plain(name, env=None, *extra):
    d = os.path.join(WORK, name)
    p = subprocess.run([MLK, "build", norms, "--fn", "rmsnorm", "--dims", "B=2,S=4,D=64", "--target", "host",
                        "--cache", store, "-o", d, *extra], capture_output=True, text=True,
                       env=dict(os.environ, **(env or {})))
    return d, p


forged_dir, p = build_plain("forged_dir")
check("Review12 H1: without a trust list mlk build copies the cache hit as it is",
      p.returncode == 0 and "cached:" in p.stdout, p.stdout + p.stderr)
for label, env, extra in (("--trusted-signers", None, ("--trusted-signers", signer)),
                          ("$MLK_TRUSTED_SIGNERS", {"MLK_TRUSTED_SIGNERS": signer}, ())):
    d, p = build_plain("rebuilt_" + label.strip("-$"), env, *extra)
    lib = json.load(open(os.path.join(d, "manifest.json")))["library"] if p.returncode == 0 else ""
    elf = lib and open(os.path.join(d, lib), "rb").read(4) == b"\x7fELF"
    check("Review12 H1: mlk build with %s rebuilds a hit no trusted key signed" % label,
          p.returncode == 0 and "rebuilt:" in p.stdout and "cached:" not in p.stdout and elf, p.stdout + p.stderr)
refused("Review12 H1: mlk.load(DIR, trusted=...) refuses an unsigned directory before loading it",
        lambda: mlk.load(forged_dir, trusted=[signer]).rmsnorm(x, w, eps),
        ["directory " + forged_dir + " is unsigned"], absent=["cannot load"])
signed_dir = os.path.join(WORK, "built_trusted")
ops = mlk.load(signed_dir, trusted=[signer])
check("Review12 H1: a directory signed by a trusted key loads under the policy",
      torch.allclose(ops.rmsnorm(x, w, eps), x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w,
                     rtol=2e-5, atol=2e-5))
refused("Review12 H1: a directory signed by another key is refused naming its signer",
        lambda: mlk.load(signed_dir, trusted=[stranger]).rmsnorm(x, w, eps),
        ["is signed by key " + signer_id + ", which is not trusted"])

# Review 13, H1: mlk.select took a directory with a default policy, so neither trusted= nor
# $MLK_TRUSTED_SIGNERS applied to it. Now the machine's trust list applies to every directory and
# select takes trusted= as mlk.load does.
refused("Review13 H1: mlk.select(trusted=...) refuses an unsigned directory",
        lambda: mlk.select([mlk.prefer(forged_dir)], trusted=[signer]).rmsnorm(x, w, eps),
        ["directory " + forged_dir + " is unsigned"], absent=["cannot load"])
os.environ["MLK_TRUSTED_SIGNERS"] = signer
refused("Review13 H1: under $MLK_TRUSTED_SIGNERS mlk.select refuses an unsigned directory",
        lambda: mlk.select([mlk.prefer(forged_dir)]).rmsnorm(x, w, eps),
        ["directory " + forged_dir + " is unsigned"], absent=["cannot load"])
check("Review13 H1: ... and runs a signed one",
      torch.allclose(mlk.select([mlk.prefer(signed_dir)]).rmsnorm(x, w, eps),
                     x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w, rtol=2e-5, atol=2e-5))
del os.environ["MLK_TRUSTED_SIGNERS"]
# Review 13, M1: require=verified and require=exact did not apply to directories.
refused("Review13 M1: require=verified: refuses a directory without keys (its report is its writer's word)",
        lambda: mlk.load(signed_dir, require="verified:types").rmsnorm(x, w, eps), ["writer's word"])
refused("Review13 M1: require=verified: with keys refuses a directory no trusted verifier vouched for",
        lambda: mlk.load(signed_dir, require="verified:types", trusted=[signer]).rmsnorm(x, w, eps),
        ["directory " + signed_dir])
refused("Review13 M1: require=exact refuses a directory built for another shape",
        lambda: mlk.load(signed_dir, require="exact").rmsnorm(torch.randn(2, 4, 128), torch.randn(128), eps),
        ["was built for B=2,D=64,S=4, not B=2,D=128,S=4"])
p = run("verify", norms, "--fn", "rmsnorm", "--dims", "B=2,S=4,D=64", "--target", "host", "--artifact", signed_dir,
        "--level", "types,identity", "--sign", os.path.join(WORK, "signer.pem"))
check("mlk verify --artifact DIR --sign attaches a signed report", p.returncode == 0, p.stdout + p.stderr[-600:])
ops = mlk.load(signed_dir, require="verified:types,identity", trusted=[signer])
check("Review13 M1: a directory whose report a trusted key signed loads under require=verified:",
      torch.allclose(ops.rmsnorm(x, w, eps), x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w,
                     rtol=2e-5, atol=2e-5))

# Review 14, M1: `mlk verify --artifact DIR` (without --sign) ran any directory in its own process,
# whatever the trust list. Under one, an unsigned directory is refused before it runs.
def verify_dir(d, env):
    return subprocess.run([MLK, "verify", norms, "--fn", "rmsnorm", "--dims", "B=2,S=4,D=64", "--target", "host",
                           "--artifact", d, "--level", "envelope", "--no-store"],
                          capture_output=True, text=True, env=dict(os.environ, **env))


p = verify_dir(forged_dir, {})
check("mlk verify --artifact without a trust list runs the directory (dlopen fails)",
      "cannot load" in p.stderr + p.stdout, p.stdout + p.stderr[-600:])
p = verify_dir(forged_dir, {"MLK_TRUSTED_SIGNERS": signer})
check("Review14 M1: under $MLK_TRUSTED_SIGNERS mlk verify --artifact refuses an unsigned directory before it runs",
      p.returncode != 0 and "is unsigned" in p.stderr and "cannot load" not in p.stderr + p.stdout,
      p.stdout + p.stderr[-600:])
p = verify_dir(signed_dir, {"MLK_TRUSTED_SIGNERS": signer})
check("Review14 M1: ... and verifies a signed one", p.returncode == 0, p.stdout + p.stderr[-600:])

# Review 12, M4: `mlk verify` without --sign ignored $MLK_TRUSTED_SIGNERS and ran the forged hit
# in its own process. Now the machine's trust list passes it over (a build made here is verified).
def verify(env):
    return subprocess.run([MLK, "verify", norms, "--fn", "rmsnorm", "--dims", "B=2,S=4,D=64", "--target", "host",
                           "--cache", store, "--level", "identity,envelope", "--no-store"],
                          capture_output=True, text=True, env=dict(os.environ, **env))


p = verify({})
check("mlk verify without a trust list runs the forged hit (dlopen fails)", "cannot load" in p.stderr + p.stdout,
      p.stdout + p.stderr[-600:])
p = verify({"MLK_TRUSTED_SIGNERS": signer})
check("Review12 M4: MLK_TRUSTED_SIGNERS makes mlk verify pass the forged hit over",
      p.returncode == 0 and "cannot load" not in p.stderr + p.stdout, p.stdout + p.stderr[-600:])

# Review 12, L5: mlk-count (`mlk bench --count-instructions`) read the store again by key and
# loaded what it found with no policy; it now takes the parent's trust list.
def count(*extra):
    return subprocess.run([os.path.join(os.path.dirname(MLK), "mlk-count"), "--file", norms, "--fn", "rmsnorm",
                           "--target", "host", "--dims", "B=2,S=4,D=64", "--store", store, "--key", forged_key,
                           "--counter", "none", *extra], capture_output=True, text=True)


p = count()
check("mlk-count without a trust list loads the forged library (dlopen fails)", "cannot load" in p.stderr, p.stderr)
p = count("--trusted", signer)
check("Review12 L5: mlk-count --trusted refuses the unsigned entry before loading it",
      p.returncode != 0 and "is unsigned" in p.stderr and "cannot load" not in p.stderr, p.stderr)

failed = [r for r in results if not r[1]]
for name, ok, note in results:
    print("%s %s%s" % ("ok  " if ok else "FAIL", name, "" if ok else ": " + note))
print("%d checks, %d failed" % (len(results), len(failed)))
sys.exit(1 if failed else 0)
