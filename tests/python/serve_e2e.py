"""`mlk serve` end to end on loopback, through the real binary:

- tune into one store, `mlk cache push` to the server, `mlk cache pull` into an
  empty store from another process, `mlk run` the artifact (and agree with
  numpy); `--cache http://...` on run, tune and build pulls a hit; a server that
  is down is a fallback to the local store, said on stderr;
- bad input: wrong hash, truncated upload, oversized body, malformed JSON,
  path traversal, unknown routes, missing and foreign tokens, over quota: each
  gets its status and a JSON error body, and the store file is unchanged;
- faults: SIGTERM finishes an upload in flight; SIGKILL during uploads and a
  restart leave no partial blob or entry and a store that verifies clean.

usage: serve_e2e.py MLK_BINARY EXAMPLES_DIR WORK_DIR
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time

import socket

import numpy as np
from safetensors.numpy import load_file, save_file

from serve_common import Results, Server, error_of, raw, request, snapshot, token, wait_port_closed

MLK, EXAMPLES, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
R = Results()
sha = lambda b: hashlib.sha256(b).hexdigest()


def mlk(*args, env=None, **kw):
    e = dict(os.environ)
    for k in ("MLK_CACHE", "MLK_TOKEN", "MLK_LOCAL_CACHE"):
        e.pop(k, None)
    e.update(env or {})
    return subprocess.run([MLK, *args], capture_output=True, text=True, env=e, **kw)


store = os.path.join(WORK, "server.db")
alpha = token(MLK, store, "alpha", "read,write-blobs,write-entries")
alpha_ro = token(MLK, store, "alpha", "read")
beta = token(MLK, store, "beta", "read,write-blobs,write-entries")
tight = token(MLK, store, "tight", "read,write-blobs,write-entries")
admin = token(MLK, store, "ops", "admin")
server = Server(MLK, store, "--max-body", "256K", "--quota", "tight=1K", "--timeout", "2")
port = server.port

# --- End to end: tune, push, pull elsewhere, run --------------------------------
tl = os.path.join(EXAMPLES, "mlp.tl")
dims = "M=40,K=48,N=24"
local1, local2 = os.path.join(WORK, "tuner.db"), os.path.join(WORK, "runner.db")
t = mlk("tune", tl, "--fn", "sgemm", "--dims", dims, "--target", "host", "--trials", "3", "--time", "20",
        "--cache", local1, "--json", "-q")
R.check("tune into a local store", t.returncode == 0, t.stderr[-400:])
key = json.loads(t.stdout.strip().splitlines()[-1])[0]["key"] if t.returncode == 0 else "0" * 64
p = mlk("cache", "push", key[:12], "--remote", server.url, "--cache", local1, env={"MLK_TOKEN": alpha})
R.check("cache push says where it landed: default is the token's team",
        p.returncode == 0 and "pushed default/%s to %s, namespace alpha (your team's namespace): " % (key, server.url)
        in p.stdout, p.stdout + p.stderr)
p = mlk("cache", "push", key, "--remote", server.url, "--cache", local1, env={"MLK_TOKEN": alpha_ro})
R.check("push with a read-only token is refused (403)", p.returncode == 1 and "403" in p.stderr, p.stderr[-300:])
p = mlk("cache", "pull", key, "--remote", server.url, "--cache", local2, env={"MLK_TOKEN": alpha_ro})
R.check("cache pull into an empty store", p.returncode == 0 and "verified" in p.stdout, p.stdout + p.stderr)
p = mlk("cache", "pull", key, "--remote", server.url, "--cache", os.path.join(WORK, "b.db"), env={"MLK_TOKEN": beta})
R.check("another team cannot pull it (404 in its namespace)", p.returncode == 1 and "404" in p.stderr, p.stderr[-300:])
p = mlk("cache", "pull", key, "--remote", server.url, "--namespace", "alpha", "--cache", os.path.join(WORK, "b.db"),
        env={"MLK_TOKEN": beta})
R.check("nor name its namespace (403)", p.returncode == 1 and "403" in p.stderr, p.stderr[-300:])
v = mlk("cache", "verify", "--cache", local2)
R.check("pulled store verifies", v.returncode == 0, v.stdout[-300:])

rng = np.random.default_rng(7)
a, b = rng.standard_normal((40, 48)).astype(np.float32), rng.standard_normal((48, 24)).astype(np.float32)
inp, out = os.path.join(WORK, "in.safetensors"), os.path.join(WORK, "out.safetensors")
save_file({"a": a, "b": b}, inp)
r = mlk("run", tl, "--fn", "sgemm", "--inputs", inp, "--output", out, "--cache", local2)
R.check("run uses the pulled artifact", r.returncode == 0 and "tuned at exactly K=48,M=40,N=24" in r.stderr, r.stderr[-300:])
if r.returncode == 0:
    R.check("pulled artifact agrees with numpy", np.allclose(load_file(out)["output"], a @ b, rtol=1e-4, atol=1e-4))

# --cache URL on run, build and tune: pull on a hit.
mirror = os.path.join(WORK, "mirror.db")
env = {"MLK_CACHE": server.url, "MLK_LOCAL_CACHE": mirror, "MLK_TOKEN": alpha_ro}
r = mlk("run", tl, "--fn", "sgemm", "--inputs", inp, "--output", out, env=env)
R.check("run --cache URL pulls the tuned artifact", r.returncode == 0 and "pulled " + key[:16] in r.stderr
        and "tuned at exactly K=48,M=40,N=24" in r.stderr, r.stderr[-400:])
bd = os.path.join(WORK, "built")
env2 = dict(env, MLK_LOCAL_CACHE=os.path.join(WORK, "mirror2.db"))
r = mlk("build", tl, "--fn", "sgemm", "--dims", dims, "--target", "host", "-o", bd, "--cache", server.url, env=env2)
R.check("build --cache URL pulls the tuned artifact", r.returncode == 0 and r.stdout.startswith("cached:")
        and "pulled" in r.stderr, r.stdout[-200:] + r.stderr[-300:])
env3 = dict(env, MLK_LOCAL_CACHE=os.path.join(WORK, "mirror3.db"), MLK_TOKEN=alpha)
r = mlk("tune", tl, "--fn", "sgemm", "--dims", dims, "--target", "host", "--trials", "3", "--json", "-q", env=env3)
R.check("tune --cache URL is a hit from the server", r.returncode == 0 and '"cached":true' in r.stdout
        and "pulled" in r.stderr, r.stdout[-200:] + r.stderr[-300:])
env6 = dict(env, MLK_LOCAL_CACHE=os.path.join(WORK, "mirror6.db"))
r = mlk("bench", tl, "--fn", "sgemm", "--dims", dims, "--target", "host", "--peers", "none", "--min-time", "50",
        "--rounds", "2", "--cache", server.url, "-q", env=env6)
R.check("bench --cache URL times the server's tuned artifact", r.returncode == 0 and "pulled " + key[:16] in r.stderr
        and "(tuned)" in r.stdout, r.stdout[-300:] + r.stderr[-300:])
# A server that is down: fall back to the local store and say so (the local
# mirror lacks the key, so the server must be asked).
env4 = {"MLK_CACHE": "http://127.0.0.1:9", "MLK_LOCAL_CACHE": os.path.join(WORK, "mirror4.db"), "MLK_TOKEN": alpha}
r = mlk("run", tl, "--fn", "sgemm", "--inputs", inp, "--output", out, env=env4)
R.check("server down: run falls back to the local store and says so", r.returncode == 0
        and "cannot connect" in r.stderr and "using the local store" in r.stderr and "default schedule" in r.stderr,
        r.stderr[-400:])
# A mirror that has the entry needs no server at all.
env5 = dict(env4, MLK_LOCAL_CACHE=local2)
r = mlk("run", tl, "--fn", "sgemm", "--inputs", inp, "--output", out, env=env5)
R.check("server down, entry in the mirror: the tuned artifact runs", r.returncode == 0
        and "tuned at exactly K=48,M=40,N=24" in r.stderr, r.stderr[-400:])

# Query and status.
st, body, _ = request(port, "GET", "/v1/entries?fn=sgemm&target=host", alpha_ro)
R.check("query by fn and profile finds the entry", st == 200 and key in body.decode(), body[:300])
st, body, _ = request(port, "GET", "/v1/entries?fn=softmax", alpha_ro)
R.check("query for another fn finds nothing", st == 200 and json.loads(body)["entries"] == [], body[:300])
st, body, _ = request(port, "GET", "/v1/status", alpha_ro)
ns = json.loads(body)["namespaces"] if st == 200 else [{}]
R.check("status: sizes and counts of the namespace", ns[0].get("namespace") == "alpha" and ns[0].get("entries") == 1
        and ns[0].get("bytes", 0) > 1000, body[:300])

# --- Bad input: right status, clear body, store unchanged ------------------------
def rejected(name, status, got, body, before):
    R.check(f"{name}: {status} with a JSON error", got == status and error_of(body) is not None, f"{got} {body[:200]}")
    R.check(f"{name}: store unchanged", snapshot(store) == before)


before = snapshot(store)
data = b"some bytes for the bad-input tests" * 10
st, body, _ = request(port, "PUT", "/v1/blobs/" + sha(b"other"), alpha, data)
rejected("wrong hash", 422, st, body, before)
st, body, _ = request(port, "PUT", "/v1/blobs/" + sha(b"x" * 300000), alpha, b"x" * 300000)
rejected("oversized body", 413, st, body, before)
st, body, _ = request(port, "PUT", "/v1/entries/k1", alpha, b'{"files": {"a": ')
rejected("malformed JSON", 400, st, body, before)
st, body, _ = request(port, "PUT", "/v1/entries/k1", alpha, json.dumps({"files": {"a": {"digest": sha(data), "size": 5}}}))
rejected("manifest missing fields", 400, st, body, before)
good = {"files": {"a": {"digest": sha(data), "size": len(data)}}, "meta": {},
        "provenance": {"producer": "t", "host": "h", "time": 1, "toolchain": {}, "measured": False}}
st, body, _ = request(port, "PUT", "/v1/entries/k1", alpha, json.dumps(good))
rejected("entry whose blob was never uploaded", 409, st, body, before)
for path in ["/v1/entries/..%2F..%2Fetc%2Fpasswd", "/v1/entries/../../etc/passwd", "/v1/blobs/..%2F" + "a" * 61,
             "/ccache/../../etc/passwd", "/ccache/ab/..%2F..%2Fx"]:
    st, body, _ = request(port, "PUT", path, alpha, json.dumps(good))
    rejected(f"path traversal {path[:24]}", 400, st, body, before)
for method, path in [("GET", "/"), ("GET", "/v2/status"), ("GET", "/etc/passwd"), ("DELETE", "/v1/blobsx")]:
    st, body, _ = request(port, method, path, alpha)
    rejected(f"unknown route {method} {path}", 404, st, body, before)
st, body, _ = request(port, "PROPFIND", "/ccache/", alpha)
rejected("unknown method (501 Not Implemented, RFC 9110)", 501, st, body, before)
st, body, hdrs = request(port, "PUT", "/v1/blobs/" + sha(data), None, data)
rejected("missing token", 401, st, body, before)
R.check("401 says how to authenticate", hdrs.get("www-authenticate", "").startswith("Bearer"))
st, body, _ = request(port, "GET", "/v1/blobs/" + sha(data), "mlk_forged_token_000000000000000000000000000")
rejected("unknown token on a read is 401, not a 404 miss", 401, st, body, before)
st, body, _ = request(port, "PUT", "/v1/blobs/" + sha(data) + "?namespace=alpha", beta, data)
rejected("foreign team's namespace", 403, st, body, before)
st, body, _ = request(port, "PUT", "/v1/blobs/" + sha(data), alpha_ro, data)
rejected("token without write scope", 403, st, body, before)
st, body, _ = request(port, "PUT", "/ccache/" + "c" * 33, tight, b"y" * 1025)
rejected("over quota", 507, st, body, before)
# Truncated upload: Content-Length promises more than arrives, then the client goes.
raw(port, (f"PUT /v1/blobs/{sha(b'z' * 5000)} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {alpha}\r\n"
           "Content-Length: 5000\r\n\r\n").encode() + b"z" * 2000, read=False)
reply = raw(port, (f"PUT /ccache/{'d' * 33} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {alpha}\r\n"
                   "Content-Length: 5000\r\n\r\n").encode() + b"z" * 2000, read=True, timeout=6)
time.sleep(0.2)
R.check("truncated upload (stalled client): closed without an answer after the timeout", reply == b"", reply[:120])
R.check("truncated uploads: store unchanged", snapshot(store) == before)
st, body, _ = request(port, "GET", "/metrics", admin)
m = body.decode()
for reason in ["hash_mismatch", "too_large", "unauthenticated", "forbidden", "quota", "broken_body", "no_route"]:
    R.check(f"metrics count rejects: {reason}", f'reason="{reason}"' in m)
R.check("metrics have the latency histogram", 'mlk_request_duration_seconds_bucket{route="blobs",le="+Inf"}' in m)

# --- Faults ------------------------------------------------------------------
# SIGTERM while an upload is in flight: it finishes and is answered.
big = os.urandom(150000)
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.sendall((f"PUT /v1/blobs/{sha(big)} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {alpha}\r\n"
           f"Content-Length: {len(big)}\r\n\r\n").encode() + big[:70000])
time.sleep(0.2)
server.proc.send_signal(15)
time.sleep(0.3)
R.check("after SIGTERM no new connections", wait_port_closed(port, 3))
s.sendall(big[70000:])
reply = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    reply += chunk
s.close()
_, err = server.proc.communicate(timeout=20)
R.check("SIGTERM: the upload in flight finished with 201", reply.startswith(b"HTTP/1.1 201"), reply[:120])
R.check("SIGTERM: exit 0, said so", server.proc.returncode == 0 and "finishing the requests in flight" in err, err[-300:])

# SIGKILL during uploads; restart; nothing partial.
server = Server(MLK, store, "--max-body", "256K")
port = server.port
st, _, _ = request(port, "HEAD", "/v1/blobs/" + sha(big), alpha)
R.check("the blob of the finished upload is there after restart", st == 200)
before = snapshot(store)
half_blob = os.urandom(100000)
manifest = json.dumps(good).encode()
socks = []
for path, payload in [(f"/v1/blobs/{sha(half_blob)}", half_blob), ("/v1/entries/partial", manifest),
                      (f"/ccache/{'e' * 33}", half_blob)]:
    c = socket.create_connection(("127.0.0.1", port), timeout=10)
    c.sendall((f"PUT {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {alpha}\r\n"
               f"Content-Length: {len(payload)}\r\n\r\n").encode() + payload[: len(payload) // 2])
    socks.append(c)
# And a stream of complete ccache uploads racing the kill.
sent, stop = {}, threading.Event()


def writer(i):
    n = 0
    while not stop.is_set():
        k, obj = f"{i:02d}{n:031d}", os.urandom(3000 + n)
        try:
            st, _, _ = request(port, "PUT", f"/ccache/{k}", alpha, obj)
        except OSError:
            return
        if st == 201:
            sent[k] = obj
        n += 1


threads = [threading.Thread(target=writer, args=(i,)) for i in range(3)]
for t_ in threads:
    t_.start()
time.sleep(0.5)
server.kill()
stop.set()
for t_ in threads:
    t_.join()
for c in socks:
    c.close()
server = Server(MLK, store)
port = server.port
st1, _, _ = request(port, "HEAD", "/v1/blobs/" + sha(half_blob), alpha)
st2, _, _ = request(port, "GET", "/v1/entries/partial", alpha)
st3, _, _ = request(port, "GET", f"/ccache/{'e' * 33}", alpha)
R.check("SIGKILL mid-upload: no partial blob, entry or ccache object", (st1, st2, st3) == (404, 404, 404), (st1, st2, st3))
lost = [k for k, obj in sent.items() if request(port, "GET", f"/ccache/{k}", alpha)[1] != obj]
R.check(f"SIGKILL: all {len(sent)} acknowledged uploads survive intact", len(sent) > 0 and not lost, lost[:3])
server.stop()
v = mlk("cache", "verify", "--cache", store)
R.check("after the kill the store verifies clean", v.returncode == 0, v.stdout[-400:])
sys.exit(R.finish())
