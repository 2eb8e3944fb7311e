"""Shipped schedules (issue 51, item 2; runtime/shipped.h): with no tuned
artifact in the cache, a call compiles the schedule shipped for this
machine's CPU family, at the call's shape or the nearest one within reach,
and says so in `.source` and `.selection`; the JIT store keeps that
schedule's build (its manifest holds it). Each condition of the match is
checked by breaking it: another family, other cores, another precision, a
shape out of reach, the database off; a schedule Halide refuses falls back
to the default saying why; a malformed database is an error naming the file
and the entry. The database is a file of this test's ($MLK_SHIPPED_SCHEDULES).

usage: shipped_schedules.py MLK_BINARY EXAMPLES_DIR MODULE_DIR WORK_DIR
"""
import copy
import json
import os
import shutil
import subprocess
import sys

MLK, EXAMPLES, MODULE_DIR, WORK = sys.argv[1:5]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if MODULE_DIR != "-":
    sys.path.insert(0, MODULE_DIR)
import numpy as np  # noqa: E402

from check_common import check, finish, raises  # noqa: E402

shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
os.environ["MLK_CACHE"] = os.path.join(WORK, "cache.db")
NORMS = os.path.join(EXAMPLES, "norms.tl")
DB = os.path.join(WORK, "shipped.json")
os.environ["MLK_SHIPPED_SCHEDULES"] = DB
import mlk  # noqa: E402

machine = json.loads(subprocess.run([MLK, "targets", "--json"], capture_output=True, text=True,
                                    check=True).stdout)["machine"]
hashes = dict(reversed(line.split()) for line in subprocess.run(
    [MLK, "check", NORMS, "--hash"], capture_output=True, text=True, check=True).stdout.splitlines()
    if len(line.split()) == 2)
# The naive schedule: unlike the default (the rules' plan), so that the
# build shows which one was compiled.
naive = json.loads(subprocess.run(
    [MLK, "build", NORMS, "--fn", "rmsnorm", "--target", "host", "--dims", "B=2,S=64,D=256", "--schedule", "naive",
     "--no-cache", "--dump-after", "schedule", "-o", os.path.join(WORK, "naive")],
    capture_output=True, text=True, check=True).stdout.split("\nbuilt ")[0])
ENTRY = {
    "program": "examples/norms.tl", "fn": "rmsnorm", "fn_hash": hashes["rmsnorm"], "precision": "f32",
    "dims": {"B": 2, "S": 64, "D": 256},
    "machine": {"family_key": machine["family_key"], "cores": machine["cores"], "cpu_model": "a test CPU"},
    "schedule": naive, "schedule_space": "test",
    "provenance": {"date": "2026-12-07", "mlk_version": "test", "command": "shipped_schedules.py"},
}


def write_db(*entries):
    with open(DB, "w") as f:
        json.dump({"format": "mlk-shipped-schedules-1", "entries": list(entries)}, f)


def call(b, s, d, db=DB, precision=None):
    """The kernel of rmsnorm at [b, s, d] in a fresh program handle, and whether its result is right."""
    os.environ["MLK_SHIPPED_SCHEDULES"] = db
    ops = mlk.load(NORMS, precision=precision) if precision else mlk.load(NORMS)
    x = np.random.default_rng(b * s).standard_normal((b, s, d)).astype(np.float32)
    w = np.linspace(0.5, 1.5, d).astype(np.float32)
    k = ops.rmsnorm.kernel(x, w, np.array(1e-6, np.float32))
    y = np.asarray(ops.rmsnorm(x, w, np.array(1e-6, np.float32)))
    want = x / np.sqrt((x.astype(np.float64) ** 2).mean(axis=2, keepdims=True) + 1e-6) * w
    return k, float(np.abs(y - want).max()) < 1e-4


def stored_schedule(k):
    """The schedule of the JIT store's build the selection names ({} when none)."""
    where = k.selection.split("kept in the JIT store ")[-1].split(";")[0].split("\n")[0].strip()
    where = where if os.path.isdir(where) else k.selection.split("(compiled earlier) ")[-1].split(";")[0].split("\n")[0].strip()
    try:
        with open(os.path.join(where, "manifest.json")) as f:
            return json.load(f)["schedule"]
    except OSError:
        return {}


write_db(ENTRY)
k, right = call(2, 64, 256)
check("at the shipped shape the shipped schedule runs", k.source == "shipped" and right, k.selection)
check("the selection says where it was tuned and by what command",
      "tuned at exactly B=2,D=256,S=64" in k.selection and "a test CPU" in k.selection and
      "shipped_schedules.py" in k.selection, k.selection)
check("the JIT store's build holds the shipped schedule", stored_schedule(k) == naive,
      json.dumps(stored_schedule(k))[:300])

k, right = call(4, 64, 256)
check("a shape within reach runs the nearest shipped schedule",
      k.source == "shipped" and right and "(the nearest shipped shape), run at B=4,D=256,S=64" in k.selection,
      k.selection)
k, right = call(2, 64, 256 * 16)
check("a shape out of reach (16x) runs the default", k.source == "default-jit" and right, k.selection)

other = copy.deepcopy(ENTRY)
other["machine"]["family_key"] = "AuthenticAMD 99: avx2"
write_db(other)
k, right = call(2, 64, 128)
check("a schedule of another CPU family is not used", k.source == "default-jit" and right, k.selection)
other = copy.deepcopy(ENTRY)
other["machine"]["cores"] = machine["cores"] + 1
write_db(other)
k, right = call(2, 32, 128)
check("a schedule tuned on another core count is not used", k.source == "default-jit" and right, k.selection)
write_db(ENTRY)
k, right = call(2, 64, 256, precision="bf16")
check("a schedule of another precision policy is not used", k.source == "default-jit" and right, k.selection)
k, right = call(2, 16, 256, db="off")
check("MLK_SHIPPED_SCHEDULES=off: the default", k.source == "default-jit" and right, k.selection)

broken = copy.deepcopy(ENTRY)
broken["schedule"] = {"version": 1, "stages": {"no_such_stage": [{"op": "compute_root"}]}}
write_db(broken)
k, right = call(2, 48, 256)
check("a shipped schedule the build refuses falls back to the default, saying why",
      k.source == "default-jit" and right and "the shipped schedule tuned at B=2,D=256,S=64 was refused" in k.selection,
      k.selection)

# `mlk run` chooses as the runtime does.
def save_safetensors(path, tensors):
    header, blobs, at = {}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))


write_db(ENTRY)
inputs = os.path.join(WORK, "in.safetensors")
save_safetensors(inputs, {"x": np.ones((2, 64, 256)), "w": np.ones(256), "eps": np.array(1e-6)})
r = subprocess.run([MLK, "run", NORMS, "--fn", "rmsnorm", "--target", "host", "--inputs", inputs, "--output",
                    os.path.join(WORK, "out.safetensors")], capture_output=True, text=True,
                   env=dict(os.environ, MLK_SHIPPED_SCHEDULES=DB))
check("mlk run compiles the shipped schedule and says so", r.returncode == 0 and
      "mlk run: rmsnorm: shipped schedule (JIT), tuned at B=2,D=256,S=64, tuned on a test CPU" in r.stderr,
      r.stderr[-800:])
r = subprocess.run([MLK, "run", NORMS, "--fn", "rmsnorm", "--target", "host", "--inputs", inputs, "--output",
                    os.path.join(WORK, "out2.safetensors")], capture_output=True, text=True,
                   env=dict(os.environ, MLK_SHIPPED_SCHEDULES="off"))
check("mlk run without shipped schedules: the default", r.returncode == 0 and
      "mlk run: rmsnorm: default schedule (JIT)" in r.stderr, r.stderr[-800:])

# The database's script: an entry whose fn changed is stale, named, and dropped on --drop.
SCRIPT = os.path.join(os.path.dirname(EXAMPLES), "scripts", "ship_schedules.py")
stale = copy.deepcopy(ENTRY)
stale["fn_hash"] = "0" * 64
write_db(ENTRY, stale)
r = subprocess.run([sys.executable, SCRIPT, "--mlk", MLK, "--db", DB, "check"], capture_output=True, text=True)
check("check names an entry whose fn changed since it was tuned, and fails",
      r.returncode == 1 and "STALE   examples/norms.tl `rmsnorm` f32 B=2,D=256,S=64 on a test CPU: tuned for program "
      "hash 0000000000000000" in r.stdout and r.stdout.count("ok      ") == 1, r.stdout + r.stderr[-500:])
r = subprocess.run([sys.executable, SCRIPT, "--mlk", MLK, "--db", DB, "check", "--drop"], capture_output=True, text=True)
with open(DB) as f:
    left = json.load(f)["entries"]
check("check --drop removes it and keeps the rest", r.returncode == 0 and "dropped 1 stale entry" in r.stdout and
      [e["fn_hash"] for e in left] == [ENTRY["fn_hash"]], r.stdout + r.stderr[-500:])

bad = copy.deepcopy(ENTRY)
del bad["dims"]
write_db(ENTRY, bad)
raises("a malformed database is an error naming the file and the entry", lambda: call(2, 40, 256), Exception,
       "$MLK_SHIPPED_SCHEDULES=%s: entry 1: `dims` is missing or not an object" % DB)
raises("an unreadable database is an error naming the file", lambda: call(2, 40, 256, db=DB + ".missing"),
       Exception, "$MLK_SHIPPED_SCHEDULES=%s.missing" % DB)
finish()
