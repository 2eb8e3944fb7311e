"""`mlk serve` replicas on the shared backend that scripts/cluster.sh started
(PostgreSQL 15, moto_server as the S3 endpoint, two replicas): concurrent
identical uploads through both replicas leave one object, one blob row and
one entry; read-after-write through the other replica; quotas exact across
replicas under concurrent writes; read grants between teams (a grant lets B
read A's entry, a revoked one is a 403, B never writes into A's namespace);
a blob damaged inside the bucket is caught by the re-hash and quarantined;
Debian's ccache shares a compile through either replica; a replica killed
with SIGKILL mid-upload leaves nothing and the client fails over to the
other; the blob store stopped gives a clear 503, never a corrupt body.

usage: serve_cluster.py MLK_BINARY CLUSTER_DIR WORK_DIR
"""
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

from serve_common import Results, error_of, request

MLK, CLUSTER, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
R = Results()
rng = random.Random(18)

env = {}
for line in open(os.path.join(CLUSTER, "env")):
    k, v = line.strip().removeprefix("export ").split("=", 1)
    env[k] = v.strip("'")
R1, R2 = [int(u.rsplit(":", 1)[1]) for u in env["MLK_SERVERS"].split(",")]
STORE, BLOBS, S3 = env["MLK_CLUSTER_STORE"], env["MLK_CLUSTER_BLOBS"], env["MLK_CLUSTER_S3"]
TOKEN, ADMIN = env["MLK_TOKEN"], env["MLK_ADMIN_TOKEN"]
PG_PORT = STORE.rsplit(":", 1)[1].split("/")[0]
AWS = dict(os.environ, AWS_ACCESS_KEY_ID="mlk", AWS_SECRET_ACCESS_KEY="mlk-secret")


def sha(b):
    import hashlib
    return hashlib.sha256(b).hexdigest()


def psql(sql):
    p = subprocess.run(["/usr/lib/postgresql/15/bin/psql", "-h", "127.0.0.1", "-p", PG_PORT, "-U", "mlk", "-d", "mlk",
                        "-tAc", sql], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(p.stderr)
    return p.stdout.strip()


def s3(method, key, body=None):
    """(status, body) of a signed request to the bucket, as any S3 client would send it."""
    out = os.path.join(WORK, "s3.out")
    cmd = ["curl", "-s", "-o", out, "-w", "%{http_code}", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
           "mlk:mlk-secret", "-X", method, f"{S3}/mlk/{key}"]
    if body is not None:
        path = os.path.join(WORK, "s3.in")
        open(path, "wb").write(body)
        # An octet-stream: a form-encoded body (curl's default) is not stored as it is.
        cmd += ["--data-binary", "@" + path, "-H", "x-amz-content-sha256: " + sha(body), "-H",
                "Content-Type: application/octet-stream"]
    code = subprocess.run(cmd, capture_output=True, text=True).stdout
    return int(code or 0), open(out, "rb").read() if os.path.exists(out) else b""


def new_token(team, scopes):
    p = subprocess.run([MLK, "token", "create", "--store", STORE, "--team", team, "--scopes", scopes],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(p.stderr)
    return p.stdout.strip()


def manifest(files, meta=None):
    return json.dumps({"files": {n: {"digest": sha(b), "size": len(b)} for n, b in files.items()},
                       "meta": meta or {}, "provenance": {"producer": "serve_cluster.py", "host": "test", "time": 1,
                                                                   "toolchain": {"mlk": "test"}, "measured": False}})


def put_entry(port, tok, key, files, ns=None):
    q = f"?namespace={ns}" if ns else ""
    for b in files.values():
        st, body, _ = request(port, "PUT", f"/v1/blobs/{sha(b)}{q}", tok, b)
        if st not in (200, 201):
            return st, body
    st, body, _ = request(port, "PUT", f"/v1/entries/{key}{q}", tok, manifest(files))
    return st, body


def metrics(port):
    return request(port, "GET", "/metrics", ADMIN)[1].decode()


CLUSTER_SH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "cluster.sh")


def cluster_status():
    p = subprocess.run(["bash", CLUSTER_SH, "status"], capture_output=True, text=True,
                       env=dict(os.environ, MLK_CLUSTER_DIR=CLUSTER))
    return p.returncode, p.stdout


rc, out = cluster_status()  # postgresql, s3, two replicas, two workers
R.check("cluster.sh status: everything up", rc == 0 and out.count(" up ") == 6, out)

# --- Concurrent identical uploads through both replicas ----------------------
same = bytes(rng.randrange(256) for _ in range(3000))
d_same = sha(same)
codes = []
start = threading.Barrier(8)


def racer(i):
    start.wait()
    codes.append(put_entry((R1, R2)[i % 2], TOKEN, "race", {"kernel.so": same}))


threads = [threading.Thread(target=racer, args=(i,)) for i in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
R.check("8 identical concurrent uploads through two replicas all succeed",
        all(c[0] in (200, 201) for c in codes), str(codes))
R.check("they leave one blob row", psql(f"SELECT count(*) FROM mlk_blobs WHERE digest='{d_same}'") == "1")
R.check("and one entry", psql("SELECT count(*) FROM mlk_entries WHERE ns='default' AND key='race'") == "1")
R.check("with one reference", psql("SELECT count(*) FROM mlk_refs r JOIN mlk_entries e ON e.id=r.entry_id "
                                   "WHERE e.key='race'") == "1")
st, listing = s3("GET", f"?list-type=2&prefix=cas/{d_same}")
R.check("and one object in the bucket", listing.count(b"<Key>") == 1, listing[:300])

# --- Read-after-write through the other replica ------------------------------
fresh = {"a.bin": os.urandom(1500), "b.bin": os.urandom(700)}
st, _ = put_entry(R1, TOKEN, "raw", fresh)
st2, body, _ = request(R2, "GET", "/v1/entries/raw", TOKEN)
R.check("an entry written through replica 1 is read at once through replica 2", st == 201 and st2 == 200, body[:200])
st3, blob, _ = request(R2, "GET", f"/v1/blobs/{sha(fresh['a.bin'])}", TOKEN)
R.check("and its blob, byte for byte", st3 == 200 and blob == fresh["a.bin"])

# --- Quotas exact across replicas --------------------------------------------
quota_servers = []
for _ in range(2):
    p = subprocess.Popen([MLK, "serve", "--store", STORE, "--blobs", BLOBS, "--listen", "127.0.0.1:0", "--threads", "8",
                          "--quota", "q=1000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=AWS)
    line = p.stdout.readline()
    quota_servers.append((p, int(line.split("127.0.0.1:")[1].split()[0])))
qtok = new_token("q", "read,write-blobs,write-entries")
qcodes = []
qstart = threading.Barrier(16)


def quota_writer(i):
    b = bytes([i]) * 100
    qstart.wait()
    qcodes.append(request(quota_servers[i % 2][1], "PUT", f"/v1/blobs/{sha(b)}", qtok, b)[0])


threads = [threading.Thread(target=quota_writer, args=(i,)) for i in range(16)]
for t in threads:
    t.start()
for t in threads:
    t.join()
R.check("16 concurrent 100-byte uploads against a 1000-byte quota, through two replicas: exactly 10 stored",
        sorted(qcodes) == [201] * 10 + [507] * 6, str(sorted(qcodes)))
R.check("the namespace is charged exactly 1000 bytes", psql("SELECT SUM(size) FROM service_staged WHERE ns='q'") == "1000")
for p, _ in quota_servers:
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=20)

# --- Read grants between teams ------------------------------------------------
ta, tb = new_token("team-a", "read,write-blobs,write-entries"), new_token("team-b", "read,write-blobs,write-entries")
shared = {"kernel.so": os.urandom(900)}
put_entry(R1, ta, "tuned", shared)
st, body, _ = request(R2, "GET", "/v1/entries/tuned?namespace=team-a", tb)
R.check("without a grant team B's read of A's namespace is 403", st == 403 and "may not use namespace `team-a`" in
        (error_of(body) or ""), body[:200])
g = subprocess.run([MLK, "token", "grant", "--store", STORE, "--namespace", "team-a", "--team", "team-b"],
                   capture_output=True, text=True)
R.check("mlk token grant", g.returncode == 0 and "granted team `team-b` read access to namespace `team-a`" in g.stdout,
        g.stdout + g.stderr)
st, body, _ = request(R2, "GET", "/v1/entries/tuned?namespace=team-a", tb)
st_blob, blob, _ = request(R1, "GET", f"/v1/blobs/{sha(shared['kernel.so'])}?namespace=team-a", tb)
R.check("with the grant B hits A's artifact through either replica", st == 200 and st_blob == 200 and
        blob == shared["kernel.so"], body[:200])
R.check("grant reads are counted in the metrics", 'mlk_grant_reads_total{namespace="team-a",team="team-b"} 1' in metrics(R2))
st_w, body_w = put_entry(R1, tb, "intruder", {"x": b"bad bytes"}, ns="team-a")
R.check("B can never write into A's namespace (403)", st_w == 403, body_w[:200])
R.check("and nothing of B's is in A's namespace",
        psql("SELECT count(*) FROM mlk_entries WHERE ns='team-a'") == "1" and
        psql("SELECT count(*) FROM service_staged WHERE ns='team-a'") == "0")
u = subprocess.run([MLK, "token", "ungrant", "--store", STORE, "--namespace", "team-a", "--team", "team-b"],
                   capture_output=True, text=True)
st, body, _ = request(R1, "GET", "/v1/entries/tuned?namespace=team-a", tb)
R.check("a revoked grant is a 403 naming the revocation, not a miss", u.returncode == 0 and st == 403 and
        "its read grant to team `team-b` was revoked" in (error_of(body) or ""), body[:200])
R.check("the revoked read is counted as a reject", 'reason="grant_revoked"' in metrics(R1))

# --- A blob damaged inside the bucket -----------------------------------------
victim = {"kernel.so": os.urandom(4000)}
d_victim = sha(victim["kernel.so"])
put_entry(R1, TOKEN, "victim", victim)
damaged = bytearray(victim["kernel.so"])
damaged[1234] ^= 0xFF
st_over, _ = s3("PUT", f"cas/{d_victim}", bytes(damaged))
st, body, _ = request(R2, "GET", "/v1/entries/victim", TOKEN)
R.check("a blob damaged in the bucket: the read is a 404 saying it failed verification, never the bytes",
        st_over == 200 and st == 404 and "failed verification and was quarantined" in (error_of(body) or "") and
        "its bytes do not hash to its digest" in error_of(body), body[:300])
R.check("the blob and its entry are in quarantine",
        psql(f"SELECT count(*) FROM mlk_quarantine WHERE name='{d_victim}' AND kind='blob'") == "1" and
        psql("SELECT count(*) FROM mlk_quarantine WHERE name='default/victim' AND kind='entry'") == "1" and
        psql(f"SELECT count(*) FROM mlk_blobs WHERE digest='{d_victim}'") == "0")
R.check("the damaged object moved to quarantine/ in the bucket",
        s3("GET", f"cas/{d_victim}")[0] == 404 and s3("GET", f"quarantine/{d_victim}") == (200, bytes(damaged)))
R.check("the other replica sees a miss", request(R1, "GET", "/v1/entries/victim", TOKEN)[0] == 404)
R.check("the verification failure is counted",
        'mlk_verification_failures_total{namespace="default",kind="entry"} 1' in metrics(R2))
st, _ = put_entry(R2, TOKEN, "victim", victim)
R.check("uploading the good bytes again heals it", st == 201 and
        request(R1, "GET", f"/v1/blobs/{d_victim}", TOKEN)[1] == victim["kernel.so"])

# --- ccache through either replica ---------------------------------------------
CCACHE, CC = shutil.which("ccache"), shutil.which("gcc") or shutil.which("cc")
src = os.path.join(WORK, "project")
os.makedirs(src)
sources = {"add.c": "int add(int a, int b) { return a + b; }\n",
           "sq.c": "int sq(int a) { return a * a; }\nconst int t[32] = {" + ",".join(map(str, range(32))) + "};\n"}
for n, text in sources.items():
    open(os.path.join(src, n), "w").write(text)
conf = os.path.join(WORK, "empty.conf")
open(conf, "w").close()


def ccache_build(name, port):
    e = dict(os.environ, CCACHE_DIR=os.path.join(WORK, "cc-" + name), CCACHE_CONFIGPATH=conf,
             CCACHE_REMOTE_STORAGE=f"http://127.0.0.1:{port}/ccache|bearer-token={TOKEN}")
    e.pop("CCACHE_DISABLE", None)
    objs = {}
    for s in sorted(sources):
        obj = os.path.join(WORK, f"{name}-{s}.o")
        subprocess.run([CCACHE, CC, "-O2", "-c", os.path.join(src, s), "-o", obj], env=e, check=True, cwd=src)
        objs[s] = open(obj, "rb").read()
    stats = subprocess.run([CCACHE, "--print-stats"], env=e, capture_output=True, text=True).stdout
    return {k: int(v) for k, v in (x.split("\t") for x in stats.splitlines() if "\t" in x)}, objs


if not CCACHE or not CC:
    R.check("ccache and a C compiler are installed (scripts/install.sh)", False)
else:
    first, o1 = ccache_build("first", R1)
    second, o2 = ccache_build("second", R2)
    R.check("ccache: a compile stored through replica 1 is a remote hit through replica 2",
            first["remote_storage_hit"] == 0 and second["remote_storage_hit"] == len(sources) and
            second["cache_miss"] == 0 and o1 == o2, str((first, second)))

# --- A replica killed mid-upload; the client fails over ----------------------
pid1 = int(env["MLK_CLUSTER_PIDS"].split(",")[0])
half = os.urandom(200000)
d_half = sha(half)
s = socket.create_connection(("127.0.0.1", R1), timeout=10)
s.sendall(f"PUT /v1/blobs/{d_half} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
          f"Content-Length: {len(half)}\r\n\r\n".encode() + half[:100000])
time.sleep(0.3)
os.kill(pid1, signal.SIGKILL)
s.close()
time.sleep(0.3)
R.check("replica 1 killed with SIGKILL mid-upload leaves no blob row and no object",
        psql(f"SELECT count(*) FROM mlk_blobs WHERE digest='{d_half}'") == "0" and s3("GET", f"cas/{d_half}")[0] == 404)
st, body, _ = request(R2, "GET", "/v1/entries/race", TOKEN)
R.check("replica 2 keeps serving", st == 200, body[:200])
rc, out = cluster_status()
R.check("cluster.sh status says replica 1 is down (exit 1)", rc == 1 and "replica1    down" in out and
        "replica2    up" in out, out)
local = os.path.join(WORK, "local.db")
p = subprocess.run([MLK, "cache", "pull", "raw", "--remote", env["MLK_SERVERS"], "--cache", local],
                   capture_output=True, text=True, env=dict(os.environ, MLK_TOKEN=TOKEN))
R.check("a client given both replicas fails over to the live one", p.returncode == 0, p.stdout + p.stderr)

# --- The blob store stopped -----------------------------------------------------
late = {"kernel.so": os.urandom(2500)}
put_entry(R2, TOKEN, "late", late)
os.kill(int(env["MLK_CLUSTER_MOTO_PID"]), signal.SIGKILL)
time.sleep(0.3)
st, body, _ = request(R2, "GET", f"/v1/blobs/{sha(late['kernel.so'])}", TOKEN)
R.check("the blob store down: a blob not cached on the replica is a clear 503, never a body",
        st == 503 and "blob store" in (error_of(body) or "") and "unavailable" in error_of(body), body[:300])
st, body, _ = request(R2, "GET", "/v1/entries/late", TOKEN)
R.check("and so is an entry whose blob it is", st == 503 and error_of(body) is not None, body[:300])
st, blob, _ = request(R2, "GET", f"/v1/blobs/{sha(fresh['a.bin'])}", TOKEN)
R.check("a blob in the replica's local cache is still served", st == 200 and blob == fresh["a.bin"])
p = subprocess.run([MLK, "cache", "pull", "late", "--remote", f"http://127.0.0.1:{R2}", "--cache", local],
                   capture_output=True, text=True, env=dict(os.environ, MLK_TOKEN=TOKEN))
R.check("the client sees 503 as the server being unavailable (exit 1, HTTP 503 named), storing nothing",
        p.returncode != 0 and "HTTP 503" in p.stderr, p.stderr[-300:])
ls = subprocess.run([MLK, "cache", "ls", "--cache", local], capture_output=True, text=True).stdout
R.check("the local store did not get the entry", "late" not in ls, ls)
# An empty S3 endpoint on the same port again, for the tests that share the fixture.
subprocess.run(["bash", CLUSTER_SH, "restart-blobs"], check=True, env=dict(os.environ, MLK_CLUSTER_DIR=CLUSTER))
sys.exit(R.finish())
