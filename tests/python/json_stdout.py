"""Machine-readable output is exactly that: every mlk command that prints
JSON (`tune --json`, fresh and cached, `token list --json`, `bench --json -`,
`cache show`, `cache ls --json`, `check --json`, `targets --json`,
`version --json`) prints one JSON document on stdout and nothing else; the
human lines go to stderr. Each stdout is parsed whole with json.loads and the
fields of the newer documents are checked (docs/cli.md, "Machine-readable
output").

usage: json_stdout.py MLK_BINARY EXAMPLES_DIR WORK_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys

MLK, EXAMPLES, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
BAD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli", "bad.tl")
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
STORE = os.path.join(WORK, "cache.db")
MLP = os.path.join(EXAMPLES, "mlp.tl")
TINY = ["--fn", "sgemm", "--dims", "M=16,K=16,N=16"]
failures = []


def parse_stdout(name, args, check=None, code=0):
    p = subprocess.run([MLK, *args], capture_output=True, text=True, timeout=240)
    if p.returncode != code:
        failures.append(f"{name}: exit {p.returncode}, expected {code}: {p.stderr.strip()[-300:]}")
        return None
    try:
        doc = json.loads(p.stdout)
    except json.JSONDecodeError as e:
        failures.append(f"{name}: stdout is not one JSON document ({e}); stdout starts {p.stdout[:200]!r}")
        return None
    if check:
        problem = check(doc, p.stderr)
        if problem:
            failures.append(f"{name}: {problem}")
            return None
    print(f"ok   {name}")
    return doc


def tune_check(cached):
    def check(doc, err):
        if not (isinstance(doc, list) and len(doc) == 1 and doc[0].get("fn") == "sgemm"):
            return f"expected a list of one sgemm result, got {doc!r}"
        if doc[0].get("cached") is not cached:
            return f"cached is {doc[0].get('cached')!r}, expected {cached}"
        if "sgemm [K=16,M=16,N=16] host" not in err:
            return "the summary line is not on stderr"
        return None
    return check


tune = ["tune", MLP, "--target", "host", *TINY, "--trials", "2", "--time", "20", "--no-autoschedulers",
        "--cache", STORE, "--json"]
first = parse_stdout("tune --json", tune, tune_check(False))
parse_stdout("tune --json (cached)", tune, tune_check(True))
if first:
    parse_stdout("cache show", ["cache", "show", first[0]["key"], "--cache", STORE],
                 lambda d, e: None if d.get("key") == first[0]["key"] else f"the key is {d.get('key')!r}")

def cache_ls_check(key):
    def check(doc, err):
        if doc.get("format") != "mlk-cache-ls-1" or doc.get("store") != STORE or doc.get("exists") is not True:
            return f"expected format mlk-cache-ls-1 of the store {STORE}, got {doc!r}"
        rows = [e for e in doc.get("entries", []) if e.get("key") == key]
        if len(rows) != 1:
            return f"expected one entry of key {key}, got {doc.get('entries')!r}"
        e = rows[0]
        if not (e["namespace"] == "default" and e["size"] > 0 and e["file_count"] > 0 and e["pinned"] is False
                and e["damaged"] is False and e["producer"] and e["verified"] and e["last_used"].endswith("Z")):
            return f"the entry's fields: {e!r}"
        if not (doc["blobs"] > 0 and doc["blob_bytes"] > 0
                and any(n["namespace"] == "default" and n["entries"] >= 1 and n["bytes"] > 0 for n in doc["namespaces"])):
            return f"the store's totals: {doc!r}"
        return None
    return check


if first:
    parse_stdout("cache ls --json", ["cache", "ls", "--json", "--cache", STORE], cache_ls_check(first[0]["key"]))
nowhere = os.path.join(WORK, "nowhere.db")
parse_stdout("cache ls --json (no store)", ["cache", "ls", "--json", "--cache", nowhere],
             lambda d, e: None if d.get("exists") is False and d["entries"] == [] and d["blobs"] == 0
             and "no cache store at" in e else f"expected an empty listing and the note on stderr, got {d!r}")


def check_json_check(doc, err):
    """`check --json` of bad.tl, norms.tl and a missing file."""
    want = {"format": "mlk-check-1", "ok": False, "counts": {"files": 3, "files_with_errors": 2, "errors": 2}}
    for k, v in want.items():
        if doc.get(k) != v:
            return f"{k} is {doc.get(k)!r}, expected {v!r}"
    bad, missing = doc["diagnostics"]
    pos = {k: bad[k] for k in ("line", "column", "end_line", "end_column", "severity", "kind")}
    if bad["file"] != BAD or pos != {"line": 3, "column": 3, "end_line": 3, "end_column": 8, "severity": "error",
                                     "kind": "ShapeMismatch"} or not bad["message"].startswith("`*` needs identical shapes"):
        return f"the diagnostic of bad.tl: {bad!r}"
    if missing["kind"] != "Unreadable" or missing["line"] is not None or \
            missing["message"] != f"cannot read {NOPE}: No such file or directory":
        return f"the unreadable file: {missing!r}"
    files = {f["file"]: f for f in doc["files"]}
    if files[NORMS] != {"file": NORMS, "ok": True, "errors": 0, "functions": 2, "public": ["rmsnorm", "layernorm"]}:
        return f"norms.tl: {files[NORMS]!r}"
    if files[BAD]["ok"] is not False or files[BAD]["errors"] != 1:
        return f"bad.tl: {files[BAD]!r}"
    if "bad.tl:3:3: error:" not in err or f"{NORMS}: ok, 2 fns" not in err:
        return "the rendered diagnostic and the ok line belong on stderr"
    return None


NORMS, NOPE = os.path.join(EXAMPLES, "norms.tl"), os.path.join(WORK, "nope.tl")
parse_stdout("check --json", ["check", "--json", BAD, NORMS, NOPE], check_json_check, code=1)
parse_stdout("check --json (well-typed)", ["check", "--json", "-q", NORMS],
             lambda d, e: None if d["ok"] is True and d["diagnostics"] == [] and d["counts"]["errors"] == 0
             and e == "" else f"expected ok and nothing on stderr with -q, got {d!r}, stderr {e!r}")
p = subprocess.run([MLK, "check", "--json", "--emit-ir", NORMS], capture_output=True, text=True)
if p.returncode != 2 or "--json cannot be combined" not in p.stderr:
    failures.append(f"check --json --emit-ir: expected a usage error, got exit {p.returncode}: {p.stderr!r}")


def version_check(doc, err):
    if doc.get("format") != "mlk-version-1" or not re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", doc.get("mlk", "")):
        return f"format and mlk: {doc!r}"
    if not re.match(r"[0-9]+\.", doc.get("halide", "")) or not re.match(r"[0-9]+", doc.get("llvm", "")):
        return f"halide and llvm: {doc!r}"
    cuda = doc.get("cuda", "absent")
    if cuda is not None and (not isinstance(cuda, dict) or set(cuda) != {"version", "nvcc", "ptxas"}):
        return f"cuda is null or {{version, nvcc, ptxas}}: {cuda!r}"
    return None


def targets_check(doc, err):
    if doc.get("format") != "mlk-targets-1":
        return f"format: {doc.get('format')!r}"
    prof = {p["name"]: p for p in doc["profiles"]}
    host, sm90 = prof.get("host"), prof.get("cuda_sm90")
    if not host or host["runs"] is not True or host["reason"] is not None or host["kind"] != "cpu" \
            or host["vector_bits"] < 128 or not host["halide_target"]:
        return f"the host profile: {host!r}"
    if not sm90 or sm90["kind"] != "cuda" or sm90["compute_capability"] != 90 or sm90["sm_count"] <= 0:
        return f"cuda_sm90: {sm90!r}"
    if any(p["runs"] is False and not p["reason"] for p in doc["profiles"]):
        return "a profile that does not run has no reason"
    m, cuda = doc["machine"], doc["cuda"]
    if m["cores"] < 1 or "sse41" not in m["cpu_features"]:
        return f"machine: {m!r}"
    if not isinstance(cuda["devices"], list) or (not cuda["devices"] and not cuda["why_not"]):
        return f"cuda: {cuda!r}"
    return None


parse_stdout("version --json", ["version", "--json"], version_check)
parse_stdout("targets --json", ["targets", "--json"], targets_check)
for cmd in (["check"], ["version"], ["targets"], ["cache"]):
    p = subprocess.run([MLK, *cmd, "--help"], capture_output=True, text=True)
    if "--json" not in p.stdout:
        failures.append(f"{' '.join(cmd)} --help does not mention --json")


create = subprocess.run([MLK, "token", "create", "--team", "t1", "--scopes", "read", "--note", "json test",
                         "--cache", STORE], capture_output=True, text=True)
if create.returncode != 0:
    failures.append(f"token create: exit {create.returncode}: {create.stderr.strip()}")
parse_stdout("token list --json", ["token", "list", "--json", "--cache", STORE],
             lambda d, e: None if isinstance(d, list) and len(d) == 1 and d[0]["team"] == "t1"
             else f"expected one token of team t1, got {d!r}")

bench = ["bench", MLP, "--target", "host", *TINY, "--peers", "default", "--rounds", "2", "--min-time", "20",
         "--cache", STORE, "-q"]
parse_stdout("bench --json -", [*bench, "--json", "-"],
             lambda d, e: None if isinstance(d, dict) and d.get("kernels") and "median times" in e
             else "expected the report on stdout and the tables on stderr")
out = os.path.join(WORK, "bench.json")
p = subprocess.run([MLK, *bench, "--json", out], capture_output=True, text=True, timeout=240)
if p.returncode != 0 or "median times" not in p.stdout:
    failures.append(f"bench --json FILE: exit {p.returncode}, the tables belong on stdout: {p.stdout[:200]!r}")
else:
    try:
        json.load(open(out))
        print("ok   bench --json FILE")
    except (OSError, json.JSONDecodeError) as e:
        failures.append(f"bench --json FILE: {out} is not JSON ({e})")

for f in failures:
    print("FAIL " + f)
sys.exit(1 if failures else 0)
