"""The benchmark history on the server, end to end:

- `mlk bench --record FILE --push --baseline-set main` stores the results on
  a `mlk serve`; GET /v1/bench/history?kernel=ID gives them back (kernel,
  target, machine, versions, cache key and every sample, as recorded);
- GET /v1/bench/baselines/main is the set as a baseline, and
  `mlk bench --baseline-set main` compares with it, A/B against the artifact
  it names; a second push under the set replaces the kernel's entry there,
  while the history keeps both, and the dashboard's kernel page plots both
  (not without a token);
- what is refused says why: no token (401), a read-only token pushing (403),
  a body that is no report (400), a set never pushed (404, and exit 1 with
  the message), bad usage (exit 2).

usage: bench_history.py MLK_BINARY EXAMPLES_DIR WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_common import Server, error_of, request, token  # noqa: E402

MLK, EXAMPLES, WORK = (os.path.abspath(a) for a in sys.argv[1:4])
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
results = []
t_start = time.time()
NORMS = os.path.join(EXAMPLES, "norms.tl")
ID = "rmsnorm [B=8,D=512,S=64] host"
local, served = os.path.join(WORK, "local.db"), os.path.join(WORK, "server.db")


def check(name, cond, p=None, note=""):
    if not cond and p is not None:
        note = f"exit {p.returncode}\n--- stdout ---\n{p.stdout[-1500:]}\n--- stderr ---\n{p.stderr[-1500:]}"
    results.append((name, bool(cond), note))


def mlk(*args, tok=None):
    e = dict(os.environ)
    e.pop("MLK_TOKEN", None)
    if tok:
        e["MLK_TOKEN"] = tok
    return subprocess.run([MLK, *args], capture_output=True, text=True, env=e)


p = mlk("tune", NORMS, "--fn", "rmsnorm", "--dims", "B=8,S=64,D=512", "--target", "host", "--trials", "3", "--time",
        "20", "--no-autoschedulers", "--cache", local, "-q")
check("tune rmsnorm into the local store", p.returncode == 0, p)
p = mlk("cache", "stats", "--cache", served)  # creates the server's store
srv = Server(MLK, served)
try:
    rw = token(MLK, served, "ci", "read,write-blobs,write-entries")
    ro = token(MLK, served, "ci", "read")
    bench = ["bench", NORMS, "--fn", "rmsnorm", "--dims", "B=8,S=64,D=512", "--target", "host", "--cache", local,
             "--min-time", "30", "-q", "--server", srv.url]
    rec = os.path.join(WORK, "main.json")
    p = mlk(*bench, "--record", rec, "--push", "--baseline-set", "main", tok=rw)
    check("--record --push --baseline-set main: exit 0, says so",
          p.returncode == 0 and os.path.exists(rec), p)
    doc = json.load(open(rec)) if os.path.exists(rec) else {"kernels": [{"mlk": {}}], "machine": {}}
    st, body, _ = request(srv.port, "GET", "/v1/bench/history?kernel=" + ID.replace(" ", "%20").replace("[", "%5B")
                          .replace("]", "%5D").replace(",", "%2C").replace("=", "%3D"), rw)
    hist = json.loads(body) if st == 200 else {"results": []}
    check("GET /v1/bench/history: 200, one result", st == 200 and len(hist["results"]) == 1, note=f"{st} {body[:300]}")
    got = hist["results"][0] if hist["results"] else {}
    k = doc["kernels"][0]
    check("... with the kernel, target, cache key and variant as recorded",
          got.get("kernel") == ID and got.get("target") == "host" and got.get("cache_key") == k.get("cache_key")
          and got.get("variant") == "tuned", note=str(got)[:300])
    check("... every sample and round size as recorded",
          got.get("samples_ms") == k["mlk"].get("samples_ms") and got.get("round_sizes") == k["mlk"].get("round_sizes")
          and len(got.get("samples_ms", [])) >= 10, note=str(got.get("round_sizes")))
    check("... the machine's fingerprint and the versions",
          got.get("machine") == doc["machine"] and got.get("versions", {}).get("halide") == doc["versions"]["halide"],
          note=str(got.get("machine")))
    st, body, _ = request(srv.port, "GET", "/v1/bench/baselines/main", ro)
    base = json.loads(body) if st == 200 else {}
    check("GET /v1/bench/baselines/main: an mlk bench report of the set",
          st == 200 and base.get("format") == "mlk-bench" and [x["id"] for x in base.get("kernels", [])] == [ID],
          note=f"{st} {body[:300]}")

    out = os.path.join(WORK, "pr.json")
    p = mlk(*bench, "--baseline-set", "main", "--max-regression", "10", "--json", out, tok=ro)
    pr = json.load(open(out)) if os.path.exists(out) else {"kernels": [{}]}
    c = pr["kernels"][0].get("comparison", {})
    check("--baseline-set main: compared A/B with the artifact the set names, passes",
          p.returncode == 0 and "against baseline baseline set main on " + srv.url in p.stdout
          and c.get("first", {}).get("mode") == "ab" and c.get("against") == "artifact " + k.get("cache_key", ""), p)

    p = mlk(*bench, "--push", "--baseline-set", "main", tok=rw)
    check("a second push under the set", p.returncode == 0, p)
    st, body, _ = request(srv.port, "GET", "/v1/bench/history?limit=10", rw)
    check("... the history keeps both, newest first",
          st == 200 and len(json.loads(body)["results"]) == 2
          and json.loads(body)["results"][0]["created"] >= json.loads(body)["results"][1]["created"], note=body[:200])
    st, body, _ = request(srv.port, "GET", "/v1/bench/baselines/main", ro)
    check("... the set holds the kernel once", st == 200 and len(json.loads(body)["kernels"]) == 1, note=body[:200])
    # The dashboard plots what was pushed (service/dashboard.cpp; in a browser: python.dashboard_chromium).
    q = "/ui/kernel?id=" + "".join(ch if ch.isalnum() else "%%%02X" % ord(ch) for ch in ID)
    st, body, _ = request(srv.port, "GET", q, ro)
    page = body.decode()
    check("the dashboard's kernel page plots both pushed results",
          st == 200 and page.count('<circle class="result"') == 2 and ID in page and 'class="history"' in page,
          note=f"{st} {page[-400:]}")
    st, body, _ = request(srv.port, "GET", q)
    check("... and without a token is the sign-in form, without them",
          st == 401 and b'<form class="login"' in body and b'<circle' not in body, note=f"{st}")

    # Refusals.
    st, body, _ = request(srv.port, "GET", "/v1/bench/history")
    check("no token: 401", st == 401 and error_of(body), note=f"{st} {body[:200]}")
    st, body, _ = request(srv.port, "POST", "/v1/bench/results", ro, body=json.dumps(doc))
    check("a read-only token pushing: 403", st == 403 and error_of(body), note=f"{st} {body[:200]}")
    st, body, _ = request(srv.port, "POST", "/v1/bench/results", rw, body='{"kernels": []}')
    check("a body that is no report: 400, says so",
          st == 400 and "the body is no mlk bench report: `format` is not \"mlk-bench\"" in (error_of(body) or ""),
          note=f"{st} {body[:200]}")
    st, body, _ = request(srv.port, "GET", "/v1/bench/history?limit=0", rw)
    check("a bad limit: 400", st == 400 and "limit `0` is not 1-10000" in (error_of(body) or ""), note=body[:200])
    p = mlk(*bench, "--baseline-set", "nope", "--max-regression", "10", tok=ro)
    check("a set never pushed: exit 1, names it",
          p.returncode == 1 and "answered 404: no baseline set `nope`" in p.stderr, p)
    # Review 17 of issue 49 (low): the bench client took only http://, so a TLS-only server meant a
    # token in clear. https:// is spoken and the server verified: this plain-HTTP one fails the handshake.
    tls = ["https://" + a[len("http://"):] if a == srv.url else a for a in bench]
    p = mlk(*tls, "--baseline-set", "main", tok=ro)
    check("--server https://: spoken, the server verified (a plain-HTTP server fails the handshake)",
          p.returncode == 1 and "cannot reach https://" in p.stderr and "is not an http" not in p.stderr, p)
    p = mlk("bench", NORMS, "--fn", "rmsnorm", "--target", "host", "--push")
    check("--push without a server: usage error",
          p.returncode == 2 and "--push needs --server URL (or a --cache that is a server URL)" in p.stderr, p)
finally:
    srv.stop()

failed = [x for x in results if not x[1]]
for name, ok, note in results:
    print(f"{'ok  ' if ok else 'FAIL'} {name}" + (f"\n{note}" if not ok and note else ""))
print(f"{len(results) - len(failed)} passed, {len(failed)} failed in {time.time() - t_start:.0f} s")
sys.exit(1 if failed else 0)
