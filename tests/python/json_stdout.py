"""Machine-readable output is exactly that: every mlk command that prints
JSON (`tune --json`, fresh and cached, `token list --json`, `bench --json -`,
`cache show`) prints one JSON document on stdout and nothing else; the human
lines go to stderr. Each stdout is parsed whole with json.loads.

usage: json_stdout.py MLK_BINARY EXAMPLES_DIR WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

MLK, EXAMPLES, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
STORE = os.path.join(WORK, "cache.db")
MLP = os.path.join(EXAMPLES, "mlp.tl")
TINY = ["--fn", "sgemm", "--dims", "M=16,K=16,N=16"]
failures = []


def parse_stdout(name, args, check=None):
    p = subprocess.run([MLK, *args], capture_output=True, text=True, timeout=240)
    if p.returncode != 0:
        failures.append(f"{name}: exit {p.returncode}: {p.stderr.strip()[-300:]}")
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
