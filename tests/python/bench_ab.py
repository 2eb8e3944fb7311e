"""`mlk bench` A/B on a loaded machine, and the instruction-count gate:

- the same build, timed A/B against its own artifact (`--against KEY`) while
  a CPU hog keeps both cores busy, never trips the gate: twenty runs;
- the kernel made 1.5x slower through the test seam
  (MLK_BENCH_TEST_SLOW=rmsnorm:always:x1.5) trips it every time, under the
  same load, and says A/B;
- `--count-instructions`: an artifact counted against itself is +0.00% and
  passes; extra instructions in every counted call (test seam
  MLK_BENCH_TEST_EXTRA_INSTRUCTIONS, which changes nothing that is timed)
  trip `--max-instruction-increase` while the timing gate passes;
- bad --against values are usage errors.

usage: bench_ab.py MLK_BINARY EXAMPLES_DIR WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import time

MLK, EXAMPLES, WORK = (os.path.abspath(a) for a in sys.argv[1:4])
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
store = os.path.join(WORK, "cache.db")
NORMS = os.path.join(EXAMPLES, "norms.tl")
results = []
t_start = time.time()


def mlk(*args, env=None):
    e = dict(os.environ)
    for k in ("MLK_BENCH_TEST_SLOW", "MLK_BENCH_TEST_EXTRA_INSTRUCTIONS"):
        e.pop(k, None)
    e.update(env or {})
    return subprocess.run([MLK, *args], capture_output=True, text=True, env=e)


def check(name, cond, p=None, note=""):
    if not cond and p is not None:
        note = f"exit {p.returncode}\n--- stdout ---\n{p.stdout[-1500:]}\n--- stderr ---\n{p.stderr[-1500:]}"
    results.append((name, bool(cond), note))


def tuned_key(target):
    p = mlk("tune", NORMS, "--fn", "rmsnorm", "--dims", "B=8,S=64,D=512", "--target", target, "--trials", "3",
            "--time", "20", "--no-autoschedulers", "--cache", store, "-q")
    check(f"tune rmsnorm for {target}", p.returncode == 0, p)
    p = mlk("bench", NORMS, "--fn", "rmsnorm", "--dims", "B=8,S=64,D=512", "--target", target, "--cache", store,
            "--min-time", "20", "--json", "-", "-q")
    k = json.loads(p.stdout)["kernels"][0] if p.returncode == 0 else {}
    check(f"the {target} artifact is what bench times", k.get("variant") == "tuned", p)
    return k.get("cache_key", "0" * 64)


KEY = tuned_key("host")
one = ["bench", NORMS, "--fn", "rmsnorm", "--dims", "B=8,S=64,D=512", "--target", "host", "--cache", store,
       "--min-time", "30", "-q", "--max-regression", "10"]

# A hog on each core for the whole of the timed part.
hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
try:
    passed, modes = 0, set()
    for i in range(20):
        out = os.path.join(WORK, f"same{i}.json")
        p = mlk(*one, "--against", KEY, "--json", out)
        ok = p.returncode == 0 and "regression:" not in p.stderr
        if not ok:
            check(f"same build under load, run {i + 1}: no regression", False, p)
        passed += ok
        if os.path.exists(out):
            modes.add(json.load(open(out))["kernels"][0]["comparison"]["first"]["mode"])
    check("same build under load: 20 of 20 runs pass", passed == 20, note=f"{passed} of 20")
    check("... each compared A/B", modes == {"ab"}, note=str(modes))
    slow = 0
    for i in range(5):
        p = mlk(*one, "--against", KEY, env={"MLK_BENCH_TEST_SLOW": "rmsnorm:always:x1.5"})
        ok = (p.returncode == 1 and "regression: `rmsnorm [B=8,D=512,S=64] host` is " in p.stderr
              and "(A/B against the baseline's artifact)" in p.stderr and "paired t p" in p.stderr)
        if not ok:
            check(f"1.5x slower under load, run {i + 1}: a regression", False, p)
        slow += ok
    check("1.5x slower under load: 5 of 5 runs fail the gate", slow == 5, note=f"{slow} of 5")
finally:
    for h in hogs:
        h.kill()
        h.wait()

# Instruction counts (an AVX2 artifact: valgrind runs no AVX-512).
KEY2 = tuned_key("cpu_avx2")
count = ["bench", NORMS, "--fn", "rmsnorm", "--dims", "B=8,S=64,D=512", "--target", "cpu_avx2", "--cache", store,
         "--min-time", "30", "-q", "--max-regression", "10", "--against", KEY2, "--count-instructions",
         "--max-instruction-increase", "1"]
out = os.path.join(WORK, "count.json")
p = mlk(*count, "--json", out)
ins = json.load(open(out))["kernels"][0].get("instructions", {}) if os.path.exists(out) else {}
check("an artifact counted against itself: +0.00%, passes",
      p.returncode == 0 and "(+0.00%)" in p.stdout and ins.get("ratio") == 1 and ins.get("per_call", 0) > 1000, p)
check("... counted by the CPU's counters or callgrind", ins.get("counter") in ("perf", "callgrind"), note=str(ins))
extra = int(ins.get("per_call", 100000) * 0.05)  # 5% more instructions, nothing more to time
out = os.path.join(WORK, "count_extra.json")
p = mlk(*count, "--json", out, env={"MLK_BENCH_TEST_EXTRA_INSTRUCTIONS": f"rmsnorm:{extra}"})
doc = json.load(open(out)) if os.path.exists(out) else {"kernels": [{}]}
k = doc["kernels"][0]
check("5% more instructions trip the counting gate (exit 1, named)",
      p.returncode == 1 and "instruction regression: `rmsnorm [B=8,D=512,S=64] cpu_avx2` runs " in p.stderr
      and "limit 1%" in p.stderr, p)
check("... while the timing gate passes",
      k.get("comparison", {}).get("verdict") in ("ok", "faster", "unconfirmed") and "regression: `" not in
      p.stderr.replace("instruction regression: `", ""), p)
check("... the JSON lists it", doc.get("instruction_regressions") == ["rmsnorm [B=8,D=512,S=64] cpu_avx2"]
      and 1.03 < k.get("instructions", {}).get("ratio", 0) < 1.07, note=json.dumps(k.get("instructions")))

for args, msg in [(["--against", "abc"], "--against: `abc` is neither a cache key (64 hex digits) nor `default`"),
                  (["--against", KEY, "--recorded"], "--recorded needs --baseline FILE"),
                  (["--max-instruction-increase", "1"], "--max-instruction-increase needs --count-instructions")]:
    p = mlk("bench", NORMS, "--fn", "rmsnorm", "--target", "host", *args)
    check(f"usage error: {msg}", p.returncode == 2 and msg in p.stderr, p)
p = mlk("bench", NORMS, "--fn", "rmsnorm", "--dims", "B=8,S=64,D=512", "--target", "host", "--cache", store,
        "--against", "f" * 64, "-q", "--min-time", "20")
check("--against a key the store lacks: exit 1, names the kernel",
      p.returncode == 1 and "rmsnorm [B=8,D=512,S=64] host: the baseline's artifact cannot be had" in p.stderr, p)

# Review 13, low: a baseline report names the artifact to compare with by its key; one of another
# fn or shape (signed or not) is refused, not run on this kernel's buffers.
p = mlk("bench", NORMS, "--fn", "rmsnorm", "--dims", "B=8,S=64,D=256", "--target", "host", "--cache", store,
        "--against", KEY, "-q", "--min-time", "20")
check("Review13: --against an artifact of another shape: exit 1, names both",
      p.returncode == 1 and "is an artifact of `rmsnorm` at B=8,D=512,S=64 for " in p.stderr
      and ", not of `rmsnorm` at B=8,D=256,S=64 for " in p.stderr, p)

failed = [x for x in results if not x[1]]
for name, ok, note in results:
    print(f"{'ok  ' if ok else 'FAIL'} {name}" + (f"\n{note}" if not ok and note else ""))
print(f"{len(results) - len(failed)} passed, {len(failed)} failed in {time.time() - t_start:.0f} s")
sys.exit(1 if failed else 0)
