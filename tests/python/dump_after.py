"""`--dump-after=STAGE` on `mlk build`, `mlk run` and `mlk tune`.

`mlk build --dump-after=schedule` on every public fn of every example (host,
the fn's first `tune` shape or small dims) prints the schedule the artifact's
manifest records; each stage's dump has its shape (ir: `fn NAME`, stages: the
stage names, schedule: JSON, loops: `produce`/`for`); `mlk run` and `mlk tune`
on every public fn of every example (small dims) dump the JIT kernel's and
the winner's schedule (the one its manifest records); `mlk run` dumps a tuned
artifact's stages too; `mlk build` with a cache hit dumps
the stored schedule; `mlk tune --json` keeps stdout pure JSON and dumps the
winner's schedule on stderr; an unknown stage is a usage error listing them.

usage: dump_after.py MLK_BINARY EXAMPLES_DIR WORK_DIR
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
from safetensors.numpy import save_file

MLK, EXAMPLES, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(WORK, exist_ok=True)
results = []


def check(name, ok, detail=""):
    results.append((name, bool(ok), detail))


def mlk(*args):
    return subprocess.run([MLK, *args], capture_output=True, text=True)


def schedule_part(stdout):
    """The dump before the `built ...` line."""
    return stdout[: stdout.rfind("\nbuilt ") + 1] if "\nbuilt " in stdout else stdout


# Every public fn of every example: its dim vars and first `tune` shape.
fns = []
for path in sorted(glob.glob(os.path.join(EXAMPLES, "*.tl"))):
    text = open(path).read()
    tunes = {}
    for m in re.finditer(r"^tune (\w+) \[([^\]]*)\]", text, re.M):
        tunes.setdefault(m.group(1), m.group(2).replace(" ", ""))
    for m in re.finditer(r"^public fn (\w+) \[([^\]]*)\]", text, re.M):
        dims = tunes.get(m.group(1)) or ",".join(f"{d.strip()}=8" for d in m.group(2).split(","))
        fns.append((path, m.group(1), dims))
check("every example has public fns", len(fns) >= 10, f"{len(fns)} fns")

for path, fn, dims in fns:
    out = os.path.join(WORK, f"build_{fn}")
    p = mlk("build", path, "--fn", fn, "--target", "host", "--dims", dims, "--no-cache", "--dump-after=schedule", "-o", out)
    name = f"build {os.path.basename(path)} {fn} [{dims}]"
    if p.returncode != 0:
        check(name, False, f"exit {p.returncode}: {p.stderr.strip()[-300:]}")
        continue
    try:
        dumped = json.loads(schedule_part(p.stdout))
        manifest = json.load(open(os.path.join(out, "manifest.json")))
        check(name, dumped == manifest["schedule"] and ("stages" in dumped or "autoscheduler" in dumped),
              "the dump is not the manifest's schedule")
    except (ValueError, OSError) as e:
        check(name, False, f"{e}: {p.stdout[:300]}")

# Each stage's dump has its shape.
norms = os.path.join(EXAMPLES, "norms.tl")
shapes = {
    "ir": lambda s: s.startswith("fn rmsnorm [B, S, D]") and "%0 = param 0" in s,
    "stages": lambda s: re.search(r"^reduction0 reduction pure\[a0=B:1 a1=S:8\] reduction\[r0=D:64\]", s, re.M)
    and re.search(r"^load_x input ", s, re.M) and re.search(r"^output output ", s, re.M),
    "schedule": lambda s: "stages" in json.loads(schedule_part(s)),
    "loops": lambda s: "produce " in s and re.search(r"\bfor \w", s) is not None,
}
for stage, ok in shapes.items():
    p = mlk("build", norms, "--fn", "rmsnorm", "--target", "host", "--dims", "B=1,S=8,D=64", "--no-cache",
            f"--dump-after={stage}", "-o", os.path.join(WORK, f"stage_{stage}"))
    try:
        good = p.returncode == 0 and ok(p.stdout) and "built " in p.stdout
    except ValueError:
        good = False
    check(f"build --dump-after={stage} output", good, p.stdout[:300] + p.stderr[-200:])

# mlk run: the JIT kernel's stages, then the run goes on.
x = np.ones((1, 8, 64), np.float32)
inputs = os.path.join(WORK, "rmsnorm_in.safetensors")
save_file({"x": x, "w": np.ones(64, np.float32), "eps": np.array(1e-5, np.float32)}, inputs)
run_out = os.path.join(WORK, "rmsnorm_out.safetensors")
for stage in ("schedule", "stages"):
    if os.path.exists(run_out):
        os.remove(run_out)
    p = mlk("run", norms, "--fn", "rmsnorm", "--inputs", inputs, "--output", run_out, "--no-cache",
            "--dump-after", stage)
    try:
        good = p.returncode == 0 and shapes[stage](p.stdout)
    except ValueError:
        good = False
    check(f"run --dump-after={stage}", good and os.path.exists(run_out), p.stdout[:300] + p.stderr[-200:])

# `mlk run --target cpu_avx2` compiles the AVX2 profile's default schedule:
# the one `mlk build --target cpu_avx2` makes. On an AVX-512 machine that
# differs from the host's (its vectors are twice as wide); a Halide target
# string alone once gave the JIT the host's schedule with AVX2 instructions.
avx2_build = mlk("build", norms, "--fn", "rmsnorm", "--target", "cpu_avx2", "--dims", "B=1,S=8,D=64", "--no-cache",
                 "--dump-after=schedule", "-o", os.path.join(WORK, "avx2_build"))
if avx2_build.returncode == 0:
    per_target = {}
    for target in ("cpu_avx2", "host"):
        p = mlk("run", norms, "--fn", "rmsnorm", "--inputs", inputs, "--output", run_out, "--no-cache",
                "--target", target, "--dump-after=schedule")
        per_target[target] = json.loads(p.stdout[: p.stdout.rfind("}") + 1]) if p.returncode == 0 else p.stderr
    check("run --target cpu_avx2 applies the AVX2 profile's schedule (build --target cpu_avx2's)",
          per_target["cpu_avx2"] == json.loads(schedule_part(avx2_build.stdout)), per_target)
    avx512 = "avx512f" in open("/proc/cpuinfo").read()
    check("on this machine (AVX-512: %s) the host's schedule %s it" % (avx512, "differs from" if avx512 else "may equal"),
          not avx512 or per_target["host"] != per_target["cpu_avx2"], per_target)
else:
    print("skipped: this machine cannot build for cpu_avx2: " + avx2_build.stderr.strip()[-200:])

# mlk run and mlk tune on every public fn of every example, at small dims (8
# each, which meets every refinement): run dumps the JIT kernel's schedule
# and goes on to write its output; tune (one trial, one second, no
# autoschedulers) dumps the winner's schedule, which must be the one its
# artifact's manifest records. The signatures come from the typed IR.
SMALL = 8
SIGNATURE = re.compile(r"^fn (\w+) \[([^\]]*)\] \((.*)\) -> .* public$", re.M)
PARAM = re.compile(r"(\w+): Tensor\[(\w+), \[([^\]]*)\]\]")
DTYPES = {"F16": np.float16, "F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64}
rng = np.random.default_rng(1)


def small_inputs(params, dims):
    """Random tensors for a signature's parameters at `dims`; integer inputs
    (indices) are below every dim."""
    tensors = {}
    for name, dtype, shape_text in PARAM.findall(params):
        shape = [eval(e, {"__builtins__": {}}, dims) for e in shape_text.split(",") if e.strip()]
        dt = DTYPES[dtype]
        if np.issubdtype(dt, np.integer):
            tensors[name] = rng.integers(0, SMALL, size=shape).astype(dt)
        else:
            tensors[name] = np.asarray(rng.standard_normal(shape) * 0.5 + 1.0, dtype=dt)
    return tensors


covered = []
for path in sorted(glob.glob(os.path.join(EXAMPLES, "*.tl"))):
    ir = mlk("check", "--emit-ir", path).stdout
    for fn, dim_text, params in SIGNATURE.findall(ir):
        dims = {d.strip(): SMALL for d in dim_text.split(",")}
        dims_arg = ",".join(f"{d}={v}" for d, v in dims.items())
        where = f"{os.path.basename(path)} {fn} [{dims_arg}]"
        small_in = os.path.join(WORK, f"small_{fn}_in.safetensors")
        save_file(small_inputs(params, dims), small_in)
        small_out = os.path.join(WORK, f"small_{fn}_out.safetensors")
        if os.path.exists(small_out):
            os.remove(small_out)
        p = mlk("run", path, "--fn", fn, "--inputs", small_in, "--output", small_out, "--dims", dims_arg, "--no-cache",
                "--dump-after=schedule")
        try:
            good = p.returncode == 0 and "stages" in json.loads(p.stdout) and os.path.exists(small_out)
        except ValueError:
            good = False
        check(f"run {where} --dump-after=schedule", good, p.stdout[:300] + p.stderr[-300:])
        tuned = os.path.join(WORK, f"tune_{fn}")
        shutil.rmtree(tuned, ignore_errors=True)
        p = mlk("tune", path, "--fn", fn, "--target", "host", "--dims", dims_arg, "--trials", "1", "--time", "1",
                "--no-autoschedulers", "--no-cache", "-q", "--dump-after=schedule", "-o", tuned)
        try:
            dumped, _ = json.JSONDecoder().raw_decode(p.stdout[p.stdout.index("{"):])
            manifest = json.load(open(os.path.join(tuned, "manifest.json")))
            good = p.returncode == 0 and dumped == manifest["schedule"] and ("stages" in dumped or "autoscheduler" in dumped)
        except (ValueError, OSError):
            good = False
        check(f"tune {where} --dump-after=schedule", good, p.stdout[:300] + p.stderr[-300:])
        covered.append(fn)
check("run and tune cover every public fn of the examples", sorted(covered) == sorted(f for _, f, _ in fns),
      f"{sorted(covered)} vs {sorted(f for _, f, _ in fns)}")

# mlk tune --json: stdout is the JSON array alone; the winner's schedule,
# whose hash the summary reports, goes to stderr.
p = mlk("tune", norms, "--fn", "rmsnorm", "--target", "host", "--dims", "B=1,S=8,D=64", "--trials", "2",
        "--no-autoschedulers", "--no-cache", "-q", "--json", "--dump-after=schedule")
try:
    summary = json.loads(p.stdout)
    start = p.stderr.index("{")
    dumped, _ = json.JSONDecoder().raw_decode(p.stderr[start:])
    good = p.returncode == 0 and len(summary) == 1 and ("stages" in dumped or "autoscheduler" in dumped)
except ValueError:
    good = False
check("tune --json --dump-after=schedule", good, p.stdout[:200] + p.stderr[-300:])
p = mlk("tune", norms, "--fn", "rmsnorm", "--target", "host", "--dims", "B=1,S=8,D=64", "--trials", "2",
        "--no-autoschedulers", "--no-cache", "-q", "--dump-after=loops")
check("tune --dump-after=loops", p.returncode == 0 and "produce " in p.stdout and "ms (" in p.stdout,
      p.stdout[:300] + p.stderr[-200:])

# From the cache: a tuned winner, then `mlk build` (a cache hit) and `mlk run`
# (the tuned artifact) dump the stages of its schedule without compiling it.
db = os.path.join(WORK, "cache.db")
if os.path.exists(db):
    os.remove(db)
p = mlk("tune", norms, "--fn", "rmsnorm", "--target", "host", "--dims", "B=1,S=8,D=64", "--trials", "2",
        "--no-autoschedulers", "--cache", db, "-q", "--json")
key = json.loads(p.stdout)[0]["schedule_hash"] if p.returncode == 0 else None
p = mlk("build", norms, "--fn", "rmsnorm", "--target", "host", "--dims", "B=1,S=8,D=64", "--cache", db,
        "--dump-after=schedule", "-o", os.path.join(WORK, "cached_build"))
try:
    head = p.stdout[: p.stdout.rfind("\ncached: ") + 1]
    manifest = json.load(open(os.path.join(WORK, "cached_build", "manifest.json")))
    good = p.returncode == 0 and json.loads(head) == manifest["schedule"] and manifest["schedule_hash"] == key
except (ValueError, OSError):
    good = False
check("build (cache hit) --dump-after=schedule", good, p.stdout[:300] + p.stderr[-200:])
p = mlk("run", norms, "--fn", "rmsnorm", "--inputs", inputs, "--output", run_out, "--cache", db,
        "--dump-after=stages")
check("run (tuned artifact) --dump-after=stages",
      p.returncode == 0 and "tuned artifact" in p.stderr and shapes["stages"](p.stdout), p.stdout[:300] + p.stderr[-200:])

# An unknown stage: usage error (exit 2) naming the stages, for each command.
bad = {
    "build": ["build", norms, "--fn", "rmsnorm", "--target", "host", "-o", os.path.join(WORK, "bad")],
    "run": ["run", norms, "--fn", "rmsnorm", "--inputs", inputs, "--output", run_out],
    "tune": ["tune", norms, "--fn", "rmsnorm", "--target", "host"],
}
for cmd, args in bad.items():
    p = mlk(*args, "--dump-after=lowered")
    check(f"{cmd} --dump-after=lowered", p.returncode == 2 and
          "--dump-after: unknown stage `lowered` (stages: ir, stages, schedule, loops)" in p.stderr, p.stderr[-300:])
p = mlk("run", norms, "--fn", "rmsnorm", "--inputs", inputs, "--output", run_out, "--reference", "--dump-after=ir")
check("run --reference --dump-after", p.returncode == 2 and "--reference runs the interpreter" in p.stderr, p.stderr)

failed = [r for r in results if not r[1]]
for name, ok, detail in results:
    print(f"{'ok  ' if ok else 'FAIL'} {name}" + ("" if ok else f": {detail}"))
print(f"{len(results) - len(failed)}/{len(results)} passed")
sys.exit(1 if failed else 0)
