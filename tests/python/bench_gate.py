"""`mlk bench` end to end, on small kernels (under a minute):

- a baseline recorded by this build passes the gate, and so do repeated runs
  of the same build against it and against each other's --json (no false alarms);
- every comparison is A/B: the baseline's artifact (by the cache key the
  baseline records, or the default schedule of the same program) is timed in
  turn with this build's, so the recorded times play no part; a baseline
  whose times are quartered for one kernel (it claims four times the speed
  this build has) therefore passes, and only under `--recorded` (the weaker
  mode) fails `--max-regression 100` with exit 1, naming that kernel and only it
  (recorded times carry the machine's drift between runs, seen at +15% on a CI
  VM, so the limit sits between that and the doctored +300%);
- a kernel made really slower (test seam MLK_BENCH_TEST_SLOW=FN:always: every
  call takes twice as long) fails the gate; one slowed only during the first
  measurement does not (the re-measurement does not confirm it);
- bad input fails before anything is timed, naming the file, the field or the
  kernel: missing, garbled or foreign baselines, a baseline of other kernels,
  of another target or of another machine, bad suites, bad flags (exit 2);
- the peer table, the ratio table, OpenBLAS and the SVG plot.

usage: bench_gate.py MLK_BINARY EXAMPLES_DIR WORK_DIR
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
results = []
t_start = time.time()


def mlk(*args, env=None):
    e = dict(os.environ)
    e.pop("MLK_BENCH_TEST_SLOW", None)
    e.update(env or {})
    return subprocess.run([MLK, *args], capture_output=True, text=True, env=e)


def check(name, cond, p=None, note=""):
    if not cond and p is not None:
        note = f"exit {p.returncode}\n--- stdout ---\n{p.stdout[-1500:]}\n--- stderr ---\n{p.stderr[-1500:]}"
    results.append((name, bool(cond), note))


def path(name):
    return os.path.join(WORK, name)


def write_json(name, obj):
    with open(path(name), "w") as f:
        json.dump(obj, f)
    return path(name)


MLP, NORMS = os.path.join(EXAMPLES, "mlp.tl"), os.path.join(EXAMPLES, "norms.tl")
# Kernels of 0.1-0.2 ms: kernels of a few microseconds are dominated by how
# the VM schedules threads (docs/ci.md), which is not what this test is about.
TUNED = "rmsnorm [B=8,D=512,S=64] host"
DEF = "layernorm [D=256,N=512] host"
SGEMM = "sgemm [K=64,M=64,N=64] host"

# A tuned artifact for rmsnorm; layernorm stays untuned (the default schedule).
p = mlk("tune", NORMS, "--fn", "rmsnorm", "--dims", "B=8,S=64,D=512", "--target", "host", "--trials", "3",
        "--time", "20", "--no-autoschedulers", "--cache", store, "-q")
check("tune rmsnorm into the test store", p.returncode == 0, p)

suite = write_json("suite.json", {"kernels": [
    {"file": NORMS, "fn": "rmsnorm", "dims": {"B": 8, "S": 64, "D": 512}, "target": "host"},
    {"file": NORMS, "fn": "layernorm", "dims": "N=512,D=256", "target": "host"}]})
common = ["--suite", suite, "--cache", store, "--min-time", "300", "-q"]

# Record, then gate against the recording: an honest baseline passes.
base = path("base.json")
p = mlk("bench", *common, "--record", base)
check("--record exits 0", p.returncode == 0 and os.path.exists(base), p)
doc = json.load(open(base)) if os.path.exists(base) else {"kernels": []}
ids = {k["id"]: k for k in doc["kernels"]}
check("baseline holds both kernels by id", set(ids) == {TUNED, DEF}, note=str(list(ids)))
check("rmsnorm is timed as the tuned artifact, layernorm as the default schedule",
      ids.get(TUNED, {}).get("variant") == "tuned" and ids.get(DEF, {}).get("variant") == "default", note=str(
          {k: v.get("variant") for k, v in ids.items()}))
check("the table says which", "(tuned)" in p.stdout and "(default)" in p.stdout, p)
check("baseline has samples, machine, versions, cache key and IR hash",
      all(len(k["mlk"]["samples_ms"]) >= 30 and len(k["mlk"]["round_sizes"]) == 10
          and sum(k["mlk"]["round_sizes"]) == len(k["mlk"]["samples_ms"])
          and len(k["cache_key"]) == 64 and len(k["ir_hash"]) == 64
          for k in doc["kernels"]) and doc.get("machine", {}).get("cores", 0) > 0
      and "halide" in doc.get("versions", {}), note=json.dumps(doc)[:500])

p = mlk("bench", *common, "--baseline", base, "--max-regression", "10")
check("an honest baseline passes the gate", p.returncode == 0 and "regression:" not in p.stderr, p)
check("the gate table lists both kernels",
      "against baseline" in p.stdout and p.stdout.count(" host ") >= 2 and "REGRESSION" not in p.stdout, p)

# Runs of the same build never trip the gate: against the recording, and
# against each other's --json output.
prev = base
for i in range(3):
    out = path(f"run{i}.json")
    p = mlk("bench", *common, "--baseline", prev, "--max-regression", "10", "--json", out)
    check(f"same build, run {i + 1}: no regression", p.returncode == 0 and "REGRESSION" not in p.stdout, p)
    if os.path.exists(out):
        prev = out

# The same build while another process loads both cores and the memory
# (what CI machines do): A/B, the baseline's artifact is slowed alike, so
# nothing is flagged.
hog = subprocess.Popen([sys.executable, "-c",
                        "import time\n"
                        "a = bytearray(64 << 20)\n"
                        "end = time.time() + 60\n"
                        "while time.time() < end:\n"
                        "    b = bytes(a)\n"])
try:
    p = mlk("bench", *common, "--baseline", base, "--max-regression", "10", "--settle", "0")
finally:
    hog.kill()
    hog.wait()
check("same build on a loaded machine: no regression", p.returncode == 0 and "REGRESSION" not in p.stdout, p)

# A baseline claiming four times the speed of this build (rmsnorm only): a
# difference far outside the scatter of rounds on a loaded 2-core machine
# (where a doctored 2x was seen to give a 99% interval of [0.80, 2.16]), so
# the first measurement always suspects it.
half = json.load(open(base)) if os.path.exists(base) else {"kernels": []}
for k in half["kernels"]:
    if k["id"] == TUNED:
        k["mlk"]["samples_ms"] = [t / 4 for t in k["mlk"]["samples_ms"]]
half_path = write_json("half.json", half)
# The quartered times are of the same artifact (its cache key is in the
# baseline): A/B times that artifact beside this build's and finds no
# difference; the doctored record plays no part.
p = mlk("bench", *common, "--baseline", half_path, "--max-regression", "10", "--json", path("half_ab.json"))
ab = json.load(open(path("half_ab.json"))) if os.path.exists(path("half_ab.json")) else {"kernels": []}
modes = {k["id"]: k.get("comparison", {}).get("first", {}).get("mode") for k in ab["kernels"]}
check("A/B: a quartered record of the same artifact is refuted by timing that artifact",
      p.returncode == 0 and "regression:" not in p.stderr and modes.get(TUNED) == "ab", p)
check("... the JSON says both kernels were compared A/B", modes == {TUNED: "ab", DEF: "ab"}, note=str(modes))
against = {k["id"]: k.get("comparison", {}).get("against") for k in ab["kernels"]}
check("... against the artifact the baseline names, and the default schedule for the untuned kernel",
      against.get(TUNED) == "artifact " + ids.get(TUNED, {}).get("cache_key", "?")
      and against.get(DEF) == "the default schedule", note=str(against))
# Against the recorded times alone (--recorded, the weaker mode) it is a regression.
# Recorded times also carry the machine's drift since they were taken (an
# untouched kernel was seen +15% on a CI VM, confirmed by the re-measurement, as
# this mode cannot tell drift from a slower build): the limit sits between that
# and the doctored +300%, so "only that kernel" tests the gate, not the VM.
p = mlk("bench", *common, "--baseline", half_path, "--max-regression", "100", "--recorded")
check("a quartered baseline fails with exit 1 under --recorded", p.returncode == 1, p)
check("... naming the kernel and the slowdown",
      f"regression: `{TUNED}` is " in p.stderr and "% slower than in" in p.stderr
      and "confirmed by a re-measurement (against recorded times only)" in p.stderr, p)
check("... and only that kernel", f"regression: `{DEF}`" not in p.stderr, p)
check("... the table says REGRESSION", "REGRESSION" in p.stdout, p)
p = mlk("bench", *common, "--baseline", half_path, "--recorded")
check("without --max-regression it reports and exits 0",
      p.returncode == 0 and "REGRESSION" in p.stdout and "report only" in p.stdout, p)
check("... and says the comparison was with recorded times (the weaker mode)",
      "compared with the baseline's recorded times only: the weaker mode" in p.stdout and " recorded " in p.stdout, p)

# A real slowdown of the build (every call of layernorm takes twice as long) fails;
# a transient one (only during the first measurement) is not confirmed.
p = mlk("bench", *common, "--baseline", base, "--max-regression", "10", env={"MLK_BENCH_TEST_SLOW": "layernorm:always"})
check("a kernel really twice as slow fails the gate, A/B",
      p.returncode == 1 and f"regression: `{DEF}`" in p.stderr and f"regression: `{TUNED}`" not in p.stderr
      and "(A/B against the baseline's artifact)" in p.stderr, p)
p = mlk("bench", *common, "--baseline", base, "--max-regression", "10", env={"MLK_BENCH_TEST_SLOW": "layernorm"})
check("a transient slowdown is measured again and not confirmed",
      p.returncode == 0 and "not confirmed by a re-measurement" in p.stdout and "regression:" not in p.stderr, p)

# Bad input: exit 1 before timing, naming the file and what is wrong.
nope = path("nope.json")
p = mlk("bench", *common, "--baseline", nope, "--max-regression", "10")
check("missing baseline: exit 1, names it", p.returncode == 1 and f"cannot read {nope}: No such file or directory" in p.stderr, p)
with open(path("garbled.json"), "w") as f:
    f.write('{"format": "mlk-bench", "kernels": [')
p = mlk("bench", *common, "--baseline", path("garbled.json"))
check("garbled baseline: exit 1, not valid JSON", p.returncode == 1 and "garbled.json: not valid JSON" in p.stderr, p)
p = mlk("bench", *common, "--baseline", write_json("foreign.json", {"kernels": []}))
check("a JSON file that is no baseline", p.returncode == 1 and "foreign.json: not an mlk bench report" in p.stderr, p)
bad = json.load(open(base)) if os.path.exists(base) else {"kernels": [{"mlk": {"samples_ms": [1, 1, 1, 1]}}]}
bad["kernels"][0]["mlk"]["samples_ms"][3] = -1
p = mlk("bench", *common, "--baseline", write_json("negative.json", bad))
check("a bad sample is named by its path",
      p.returncode == 1 and "negative.json: kernels[0].mlk.samples_ms[3]: expected a positive number" in p.stderr, p)
p = mlk("bench", NORMS, "--fn", "layernorm", "--dims", "N=256,D=256", "--target", "host", "--cache", store,
        "--baseline", base, "--max-regression", "10")
check("a baseline of other kernels: exit 1, names the missing kernel",
      p.returncode == 1 and "has no kernel `layernorm [D=256,N=256] host`" in p.stderr and DEF in p.stderr, p)
other = json.load(open(base)) if os.path.exists(base) else {"kernels": []}
for k in other["kernels"]:
    k["id"] = k["id"].replace(" host", " cpu_avx2")
    k["target"] = "cpu_avx2"
p = mlk("bench", *common, "--baseline", write_json("avx2.json", other), "--max-regression", "10")
check("a baseline of another target: exit 1, says so",
      p.returncode == 1 and "only for target cpu_avx2, not host" in p.stderr, p)
alien = json.load(open(base)) if os.path.exists(base) else {"machine": {}}
alien["machine"]["cpu"] = "Imaginary CPU 9000"
alien_path = write_json("alien.json", alien)
p = mlk("bench", *common, "--baseline", alien_path, "--max-regression", "10")
check("a baseline of another machine: exit 1, says so",
      p.returncode == 1 and "was recorded on another machine (Imaginary CPU 9000" in p.stderr, p)
p = mlk("bench", *common, "--baseline", alien_path, "--max-regression", "10", "--any-machine")
check("... unless --any-machine", p.returncode == 0, p)
p = mlk("bench", "--suite", write_json("typo.json", {"kernels": [{"file": MLP, "fn": "sgemm", "dim": "M=1"}]}))
check("a suite with a typo names the kernel and field",
      p.returncode == 1 and "typo.json: kernels[0]: unknown field `dim`" in p.stderr, p)
p = mlk("bench", "--suite", path("missing-suite.json"))
check("a missing suite", p.returncode == 1 and
      f"cannot read {path('missing-suite.json')}: No such file or directory" in p.stderr, p)
p = mlk("bench", MLP, "--fn", "nope", "--target", "host")
check("an unknown fn", p.returncode == 1 and "has no fn `nope`" in p.stderr, p)
for args, msg in [(["--suite", suite, "--max-regression", "10"], "--max-regression needs --baseline FILE or --against KEY"),
                  (["--suite", suite, "--against", "default"], "--against KEY goes with FILE.tl (one kernel)"),
                  (["--suite", suite, "--baseline", base, "--max-regression", "ten"], "is not a percentage"),
                  (["--suite", suite, "--plot", path("x.gif")], "must end in .svg or .png"),
                  (["--suite", suite, "--peers", "numpy"], "unknown peer `numpy`"),
                  ([MLP, "--fn", "sgemm"], "--target PROFILE is required")]:
    p = mlk("bench", *args)
    check(f"usage error: {msg}", p.returncode == 2 and msg in p.stderr, p)

# Peers, ratios and the plot (sgemm, untuned, and layernorm: the default schedule and OpenBLAS).
svg, out = path("speedup.svg"), path("peers.json")
peer_suite = write_json("peer_suite.json", {"kernels": [
    {"file": MLP, "fn": "sgemm", "dims": "M=64,K=64,N=64", "target": "host"},
    {"file": NORMS, "fn": "layernorm", "dims": "N=512,D=256", "target": "host"}]})
p = mlk("bench", "--suite", peer_suite, "--cache", store, "--min-time", "200", "-q", "--peers", "default,openblas",
        "--plot", svg, "--json", out)
check("peers run", p.returncode == 0 and "vs default" in p.stdout and "vs openblas" in p.stdout, p)
peers = {k["id"]: {q["name"]: q for q in k["peers"]} for k in json.load(open(out))["kernels"]} if os.path.exists(out) else {}
ob = peers.get(SGEMM, {}).get("openblas", {})
check("OpenBLAS times sgemm (or says why not)", ob.get("speedup", 0) > 0 or "OpenBLAS not found" in ob.get("error", ""),
      note=str(ob)[:300])
check("OpenBLAS is not applicable to layernorm", "not applicable" in peers.get(DEF, {}).get("openblas", {}).get("error", ""))
check("the default-schedule peer of an untuned kernel is mlk itself",
      "same as mlk" in peers.get(DEF, {}).get("default", {}).get("error", ""))
text = open(svg).read() if os.path.exists(svg) else ""
check("the SVG plot has a bar per measured peer",
      text.startswith("<svg") and text.rstrip().endswith("</svg>") and text.count("<rect") >= 4 and "openblas" in text,
      note=text[:300])

failed = [x for x in results if not x[1]]
for name, ok, note in results:
    print(f"{'ok  ' if ok else 'FAIL'} {name}" + (f"\n{note}" if not ok and note else ""))
print(f"{len(results) - len(failed)} passed, {len(failed)} failed in {time.time() - t_start:.0f} s")
sys.exit(1 if failed else 0)
