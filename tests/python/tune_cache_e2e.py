"""End to end through the artifact cache: `mlk tune` stores a verified artifact,
a second `mlk tune` is a cache hit, and `mlk run` uses the tuned artifact and
agrees with numpy.

usage: tune_cache_e2e.py MLK_BINARY EXAMPLES_DIR WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
from safetensors.numpy import load_file, save_file

MLK, EXAMPLES, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
store = os.path.join(WORK, "cache.db")
results = []


def mlk(*args):
    return subprocess.run([MLK, *args], capture_output=True, text=True)


def check(name, cond, note=""):
    results.append((name, bool(cond), note))


tl = os.path.join(EXAMPLES, "mlp.tl")
tune = ["tune", tl, "--fn", "sgemm", "--dims", "M=40,K=48,N=24", "--target", "host", "--trials", "4",
        "--cache", store, "--json", "-q"]
p = mlk(*tune)
check("tune exits 0", p.returncode == 0, p.stderr[-300:])
summary = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else [{}]
s = summary[0]
check("summary fields", all(k in s for k in ("fn", "target", "best_ms", "default_ms", "trials", "key", "measured")), str(s))
check("measured on this machine", s.get("measured") is True and s.get("cached") is False, str(s))
p2 = mlk(*tune)
s2 = json.loads(p2.stdout.strip().splitlines()[-1])[0] if p2.returncode == 0 else {}
check("second tune is a cache hit", s2.get("cached") is True and s2.get("key") == s.get("key"), p2.stdout[-300:])
p3 = mlk("tune", tl, "--fn", "sgemm", "--dims", "M=40,K=48,N=24", "--target", "host", "--trials", "4", "--cache", store)
check("hit says so", "cached: tuned on" in p3.stdout, p3.stdout[-300:])

rng = np.random.default_rng(1)
a, b = rng.standard_normal((40, 48)).astype(np.float32), rng.standard_normal((48, 24)).astype(np.float32)
inp, out = os.path.join(WORK, "in.safetensors"), os.path.join(WORK, "out.safetensors")
save_file({"a": a, "b": b}, inp)
r = mlk("run", tl, "--fn", "sgemm", "--inputs", inp, "--output", out, "--cache", store)
check("run uses the tuned artifact", r.returncode == 0 and "tuned artifact " + s.get("key", "?")[:16] in r.stderr
      and "tuned at exactly K=48,M=40,N=24" in r.stderr, r.stderr[-300:])
if r.returncode == 0:
    got = load_file(out)["output"]
    check("tuned artifact agrees with numpy", np.allclose(got, a @ b, rtol=1e-4, atol=1e-4))
# Another shape: the artifact tuned at the nearest shape runs, and says so;
# --require exact refuses it instead.
save_file({"a": a[:20], "b": b}, inp)
r = mlk("run", tl, "--fn", "sgemm", "--inputs", inp, "--output", out, "--cache", store)
check("other shape uses the artifact tuned at the nearest shape",
      r.returncode == 0 and "tuned at the nearest shape K=48,M=40,N=24" in r.stderr, r.stderr[-300:])
if r.returncode == 0:
    check("... and agrees with numpy", np.allclose(load_file(out)["output"], a[:20] @ b, rtol=1e-4, atol=1e-4))
r = mlk("run", tl, "--fn", "sgemm", "--inputs", inp, "--output", out, "--cache", store, "--require", "exact")
check("--require exact refuses another shape, naming it",
      r.returncode == 1 and "no artifact of `sgemm` tuned for host at exactly K=48,M=20,N=24" in r.stderr
      and "--require exact" in r.stderr, r.stderr[-300:])
r = mlk("run", tl, "--fn", "sgemm", "--inputs", inp, "--output", out, "--cache", store, "--require", "fast")
check("--require with a bad value is a usage error", r.returncode == 2 and "expected `any`, `tuned`" in r.stderr,
      r.stderr[-300:])
# Nothing tuned at all (an empty cache): the default schedule (JIT), and it says so; --require tuned refuses.
empty = os.path.join(WORK, "empty.db")
r = mlk("run", tl, "--fn", "sgemm", "--inputs", inp, "--output", out, "--cache", empty)
check("an empty cache falls back to the default schedule (JIT)", r.returncode == 0 and
      "default schedule (JIT), not tuned" in r.stderr, r.stderr[-300:])
if r.returncode == 0:
    check("... and agrees with numpy", np.allclose(load_file(out)["output"], a[:20] @ b, rtol=1e-4, atol=1e-4))
r = mlk("run", tl, "--fn", "sgemm", "--inputs", inp, "--output", out, "--cache", empty, "--require", "tuned")
check("--require tuned refuses the JIT fallback",
      r.returncode == 1 and "no artifact cache at " + empty in r.stderr and "--require tuned" in r.stderr,
      r.stderr[-300:])
r = mlk("run", tl, "--fn", "sgemm", "--inputs", inp, "--output", out, "--cache", store, "--target", "cuda_sm90")
check("a profile this machine cannot run is a clear error",
      r.returncode == 1 and "cannot run cuda_sm90 here" in r.stderr, r.stderr[-300:])
bd = os.path.join(WORK, "built")
bld = mlk("build", tl, "--fn", "sgemm", "--dims", "M=40,K=48,N=24", "--target", "host", "--cache", store, "-o", bd)
check("build of a tuned shape is a cache hit", bld.returncode == 0 and bld.stdout.startswith("cached: tuned on")
      and os.path.exists(os.path.join(bd, "tuning_log.jsonl")), bld.stdout[-300:] + bld.stderr[-300:])
ls = mlk("cache", "ls", "--cache", store)
check("cache ls lists the entry", s.get("key", "?") in ls.stdout, ls.stdout[-300:])
v = mlk("cache", "verify", "--cache", store)
check("cache verify is clean", v.returncode == 0, v.stdout[-300:])
g = mlk("tune", tl, "--fn", "sgemm", "--dims", "M=40,K=48,N=24", "--target", "cuda_sm90", "--require-measured",
        "--cache", store)
check("--require-measured refuses an unmeasurable GPU profile",
      g.returncode == 1 and "cannot be measured here" in g.stderr, g.stderr[-300:])

failed = [x for x in results if not x[1]]
for name, ok, note in results:
    print(f"{'ok  ' if ok else 'FAIL'} {name}" + (f": {note}" if not ok else ""))
print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
sys.exit(1 if failed else 0)
