"""Measurement workers (`mlk worker`, `mlk tune --workers`, /v1/jobs/...) end
to end, on the shared backend that scripts/cluster.sh started (PostgreSQL 15,
moto_server, two replicas, two workers of key cpu-loopback) or on one SQLite
`mlk serve` with two workers this script starts:

- a tune whose candidates are all measured by the workers, two at once, by
  both of them (progress lines name them, one fingerprint), stored through the server and served by every
  replica with the workers' fingerprint recorded in the entry;
- a worker killed with SIGKILL mid-job: its short lease expires and another
  worker finishes the job (attempt 2), and the tune completes;
- a key with no workers: a clear timeout error within --worker-wait, no hang;
  nor when the only worker leased a job and died;
- candidates sent as built artifacts (`--workers-run-artifacts`, what GPU
  profiles always do): the workers only load, verify and time them;
- bad job requests get clear errors (text and status), a bad setup or a
  damaged candidate pack fails its job with the decoder's message, a worker
  without --run-artifacts refuses built artifacts, and SIGTERM stops a
  worker cleanly;
- mlk-measure-worker (the loop without the compiler, what a GPU machine
  runs) measures a tune of built artifacts alone and refuses source jobs;
  with --trusted-signers it runs only packs `mlk tune --sign-packs` signed.

usage: serve_workers.py MLK EXAMPLES WORK cluster CLUSTER_DIR
       serve_workers.py MLK EXAMPLES WORK sqlite
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from serve_common import Results, Server, error_of, request, token

MLK, EXAMPLES, WORK, MODE = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
R = Results()
TL = os.path.join(EXAMPLES, "mlp.tl")
PROGRESS = re.compile(r"\[workers (\S+)\] job (\d+) measured by worker (\S+) \(fingerprint (\w+), attempt (\d+)\)")

own = []  # processes this script started, ended at the end
if MODE == "cluster":
    env = {}
    for line in open(os.path.join(sys.argv[5], "env")):
        k, v = line.strip().removeprefix("export ").split("=", 1)
        env[k] = v.strip("'")
    SERVERS, TOKEN = env["MLK_SERVERS"], env["MLK_TOKEN"]
    RO = subprocess.run([MLK, "token", "create", "--store", env["MLK_CLUSTER_STORE"], "--team", "default", "--scopes",
                         "read"], capture_output=True, text=True, check=True).stdout.strip()
    WORKERS = {"worker1", "worker2"}
    TAG = "pg"
else:
    store = os.path.join(WORK, "server.db")
    TOKEN = token(MLK, store, "default", "read,write-blobs,write-entries,worker")
    RO = token(MLK, store, "default", "read")
    server = Server(MLK, store)
    SERVERS = server.url
    WORKERS = {"lite1", "lite2"}
    TAG = "lite"
PORTS = [int(u.rsplit(":", 1)[1]) for u in SERVERS.split(",")]


def start_worker(key, name, lease="30", run_artifacts=True):
    log = open(os.path.join(WORK, name + ".log"), "w")
    events = open(os.path.join(WORK, name + ".jsonl"), "w")
    p = subprocess.Popen([MLK, "worker", "--server", SERVERS, "--device-key", key, "--name", name, "--lease", lease,
                          "--json"] + (["--run-artifacts"] if run_artifacts else []),
                         stdout=events, stderr=log, env=dict(os.environ, MLK_TOKEN=TOKEN))
    own.append(p)
    return p


def events_of(name):
    """The worker's --json events (mlk-worker-1), one object per line."""
    with open(os.path.join(WORK, name + ".jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def log_of(name):
    with open(os.path.join(WORK, name + ".log")) as f:
        return f.read()


def wait_for(cond, timeout):
    end = time.time() + timeout
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.05)
    return False


def tune(*args, timeout=240):
    e = dict(os.environ, MLK_TOKEN=TOKEN, MLK_LOCAL_CACHE=os.path.join(WORK, "mirror.db"))
    for k in ("MLK_CACHE", "MLK_SERVERS", "MLK_NAMESPACES"):
        e.pop(k, None)
    t0 = time.time()
    p = subprocess.run([MLK, "tune", TL, "--fn", "sgemm", "--target", "host", "--no-autoschedulers", *args],
                       capture_output=True, text=True, env=e, timeout=timeout)
    return p, time.time() - t0


def post(path, body, tok=TOKEN, port=None):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return request(port or PORTS[0], "POST", path, tok, data)


if MODE == "sqlite":
    for n in sorted(WORKERS):
        start_worker("cpu-loopback", n)
    R.check("the workers register", wait_for(lambda: all("registered as worker" in log_of(n) for n in WORKERS), 20),
            " / ".join(log_of(n)[-200:] for n in WORKERS))

# --- A tune measured by the workers, served by every replica ----------------------
p, _ = tune("--dims", "M=40,K=48,N=24", "--trials", "3", "--time", "60", "--cache", SERVERS, "--workers",
            "cpu-loopback", "--json")
R.check("tune --workers succeeds", p.returncode == 0, p.stderr[-800:])
lines = PROGRESS.findall(p.stderr)
R.check("every candidate is measured by a worker (progress lines name it)",
        len(lines) >= 3 and {w for _, _, w, _, _ in lines} <= WORKERS, p.stderr[-800:])
R.check("the results come from one fingerprint", len({f for _, _, _, f, _ in lines}) == 1, str(lines))
# Two live workers: the tune measures two candidates at once (its rule seeds
# go out together), and this one tune's candidates are measured by both.
wide = re.search(r"\[workers cpu-loopback\] (\d+) live workers of this key: measuring up to (\d+) candidates at once",
                 p.stderr)
R.check("the tune measures as many candidates at once as there are live workers (two)",
        wide is not None and wide.group(1) == wide.group(2) and int(wide.group(1)) >= 2, p.stderr[-800:])
R.check("one tune's candidates are measured by both workers", {w for _, _, w, _, _ in lines} == WORKERS, str(lines))
for n in sorted(WORKERS) if MODE == "sqlite" else []:  # the cluster's workers are scripts/cluster.sh's
    ev = events_of(n)
    jobs = [e for e in ev if e.get("event") == "job"]
    R.check(f"worker {n} --json: `registered` first, then a `job` event per measured job with its verdict and time",
            ev and ev[0].get("event") == "registered" and ev[0].get("device_key") == "cpu-loopback" and jobs and
            all(e["format"] == "mlk-worker-1" and isinstance(e["verdict"], str) and e["recorded"] is True and
                (e["verdict"] != "ok" or (isinstance(e["median_ms"], float) and e["error"] is None)) for e in jobs) and
            any(e["verdict"] == "ok" for e in jobs), json.dumps(ev)[:600])
key = json.loads(p.stdout)[0]["key"] if p.returncode == 0 else "0" * 64
for port in PORTS:
    st, body, _ = request(port, "GET", "/v1/entries/" + key, TOKEN)
    text = body.decode(errors="replace")
    R.check(f"the entry is served by the replica on port {port} with the workers' fingerprint",
            st == 200 and "measured_by" in text and lines and lines[0][3] in text, f"{st} {text[:300]}")

# --- Built artifacts, as GPU workers get them: the workers compile nothing ------
p, _ = tune("--dims", "M=36,K=40,N=20", "--trials", "3", "--time", "60", "--cache", SERVERS, "--workers",
            "cpu-loopback", "--workers-run-artifacts", "--json")
R.check("tune --workers --workers-run-artifacts succeeds", p.returncode == 0, p.stderr[-800:])
art_lines = PROGRESS.findall(p.stderr)
R.check("its candidates are measured by the workers", len(art_lines) >= 3 and
        {w for _, _, w, _, _ in art_lines} <= WORKERS, p.stderr[-800:])
art_jobs = {int(j) for _, j, _, _, _ in art_lines}
if MODE == "sqlite":
    got = [e for n in sorted(WORKERS) for e in events_of(n) if e.get("event") == "job" and e["job"] in art_jobs]
    R.check("each was a built artifact the worker ran (--json kind `candidates`), verified and timed",
            len(got) == len(art_jobs) and all(e["kind"] == "candidates" for e in got) and
            any(e["verdict"] == "ok" and isinstance(e["median_ms"], float) for e in got), json.dumps(got)[:600])
if p.returncode == 0:
    meta = json.loads(p.stdout)[0]
    R.check("the stored entry was measured by the workers", meta.get("measured") is True, p.stdout[:400])

# --- A worker killed with SIGKILL mid-job: its lease expires, another finishes ---
kill_key = "cpu-kill-" + TAG
victim = start_worker(kill_key, "victim-" + TAG, lease="1")
bg = subprocess.Popen([MLK, "tune", TL, "--fn", "sgemm", "--target", "host", "--no-autoschedulers", "--dims",
                       "M=24,K=16,N=8", "--trials", "2", "--time", "60", "--no-cache", "--server", SERVERS,
                       "--log", os.path.join(WORK, "kill.log"),
                       "--workers", kill_key, "--worker-wait", "60"],
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ, MLK_TOKEN=TOKEN))
own.append(bg)
leased = wait_for(lambda: "leased" in log_of("victim-" + TAG), 60)
m = re.search(r"job (\d+) leased", log_of("victim-" + TAG))
victim.send_signal(signal.SIGKILL)
victim.wait()
R.check("the victim leased a job before it was killed", leased and m, log_of("victim-" + TAG)[-300:])
killed_job = m.group(1) if m else "0"
start_worker(kill_key, "rescuer-" + TAG, lease="1")
try:
    out, err = bg.communicate(timeout=180)
except subprocess.TimeoutExpired:
    bg.kill()
    out, err = bg.communicate()
R.check("the tune completes after the kill", bg.returncode == 0, err[-800:])
done = [x for x in PROGRESS.findall(err) if x[1] == killed_job]
R.check("the killed worker's job is finished by the other worker on attempt 2",
        done and done[0][2] == "rescuer-" + TAG and done[0][4] == "2", str(done) + err[-400:])
st, body, _ = request(PORTS[-1], "GET", "/v1/jobs/" + killed_job, TOKEN)
j = json.loads(body) if st == 200 else {}
R.check("the job records the rescuer, two attempts and a result",
        j.get("state") == "done" and j.get("worker_name") == "rescuer-" + TAG and j.get("attempts") == 2
        and j.get("result", {}).get("verdict") == "ok", body[:400])

# --- No worker for the key: a clear timeout, not a hang --------------------------
p, took = tune("--dims", "M=8,K=8,N=8", "--trials", "1", "--no-cache", "--log", os.path.join(WORK, "none.log"),
               "--server", SERVERS, "--workers",
               "gpu-none-" + TAG, "--worker-wait", "2", timeout=90)
R.check("a key without workers fails with a clear timeout error",
        p.returncode == 1 and f"no worker with device key `gpu-none-{TAG}`" in p.stderr and "within 2 s" in p.stderr
        and "seen in the last 60 s: none" in p.stderr and "start `mlk worker --device-key" in p.stderr, p.stderr[-600:])
R.check("... within a few seconds of --worker-wait", took < 60, f"{took:.1f} s")

# --- A worker that leases a job and dies, with no other worker: a clear error ---
ghost_key = "cpu-ghost-" + TAG
st, data, _ = post("/v1/jobs/workers", {"device_key": ghost_key, "name": "ghost-" + TAG, "fingerprint": "ghost"})
ghost = json.loads(data)["worker"] if st == 201 else {"id": 0, "secret": ""}
t0 = time.time()
bg = subprocess.Popen([MLK, "tune", TL, "--fn", "sgemm", "--target", "host", "--no-autoschedulers", "--dims",
                       "M=8,K=8,N=8", "--trials", "1", "--no-cache", "--server", SERVERS, "--log",
                       os.path.join(WORK, "ghost.log"), "--workers", ghost_key, "--worker-wait", "4"],
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ, MLK_TOKEN=TOKEN))
own.append(bg)


def ghost_lease():
    s, b, _ = post("/v1/jobs/lease", {"worker": ghost["id"], "secret": ghost["secret"], "lease_s": 1})
    return s == 200 and json.loads(b).get("job") is not None


R.check("the ghost worker leases the tune's first job", wait_for(ghost_lease, 30), "")
try:
    out, err = bg.communicate(timeout=90)
except subprocess.TimeoutExpired:
    bg.kill()
    out, err = bg.communicate()
R.check("the job, requeued when the ghost's lease expired and taken by no one, fails the tune within --worker-wait",
        bg.returncode == 1 and f"no worker with device key `{ghost_key}`" in err and "within 4 s" in err
        and time.time() - t0 < 60, f"{time.time() - t0:.1f} s: " + err[-600:])

# --- Bad requests get clear errors -----------------------------------------------
cases = [
    ("/v1/jobs/submit", b"not json", 400, "is not valid JSON"),
    ("/v1/jobs/submit", b"[1]", 400, "must be a JSON object"),
    ("/v1/jobs/submit", b"[" * 100000, 400, "nested deeper than 64 levels"),
    ("/v1/jobs/submit", {"setup": "0" * 64, "payload": {}}, 400, "the body lacks the field `device_key`"),
    ("/v1/jobs/submit", {"device_key": "a/b", "setup": "0" * 64, "payload": {}}, 400, "device key `a/b` is not 1-64"),
    ("/v1/jobs/submit", {"device_key": "k", "setup": "xyz", "payload": {}}, 400, "setup `xyz` is not a sha256"),
    ("/v1/jobs/submit", {"device_key": "k", "setup": "0" * 64}, 400, "the body lacks the object `payload`"),
    ("/v1/jobs/submit", {"device_key": "k", "setup": "0" * 64, "payload": {}}, 400, "is not in namespace `"),
    ("/v1/jobs/submit", {"device_key": 5, "setup": "0" * 64, "payload": {}}, 400, "the field `device_key` has the wrong type"),
    ("/v1/jobs/setups", b"garbage", 400, "the body is not a measurement setup"),
    ("/v1/jobs/lease", {"worker": 999999, "secret": "x"}, 404, "no worker 999999"),
    ("/v1/jobs/lease", {"worker": 999999}, 400, "the body lacks the field `secret`"),
    ("/v1/jobs/workers", {"device_key": "k", "name": "a b", "fingerprint": "x"}, 400, "worker name `a b` is not 1-128"),
    ("/v1/jobs/1/result", {"worker": 999999, "secret": "x", "ok": True, "result": {}}, 404, "no worker 999999"),
]
for path, body, want, text in cases:
    st, data, _ = post(path, body)
    R.check(f"POST {path} {str(body)[:50]}: {want} `{text}`", st == want and text in (error_of(data) or ""),
            f"{st} {data[:200]}")
st, data, _ = post("/v1/jobs/submit", {"device_key": "k", "setup": "0" * 64, "payload": {}}, tok=RO)
R.check("a read-only token may not submit (403 naming the scope)",
        st == 403 and "lacks the scope `write-entries`" in (error_of(data) or ""), data[:200])
st, data, _ = request(PORTS[0], "GET", "/v1/jobs/abc", TOKEN)
R.check("GET /v1/jobs/abc: 404 naming the routes", st == 404 and "setups, submit, lease" in (error_of(data) or ""), data[:200])
# A worker that does not hold a job's lease cannot report it.
st, data, _ = post("/v1/jobs/workers", {"device_key": "nobody-" + TAG, "name": "idle", "fingerprint": "fp"})
idle = json.loads(data)["worker"] if st == 201 else {"id": 0, "secret": ""}
st, data, _ = post(f"/v1/jobs/{killed_job}/result", {"worker": idle["id"], "secret": idle["secret"], "ok": True, "result": {}})
R.check("a result from a worker without the lease: 409", st == 409 and "does not hold the lease" in (error_of(data) or ""),
        f"{st} {data[:200]}")
# A setup that starts right but does not decode fails its job on the worker.
st, data, _ = post("/v1/jobs/setups", b"mlk-measure-setup 1\nxx\n")
digest = json.loads(data)["setup"] if st == 201 else "0" * 64
st, data, _ = post("/v1/jobs/submit", {"device_key": "cpu-loopback", "setup": digest, "payload": {"schedule": {}}})
bad_job = json.loads(data)["id"] if st == 201 else 0


def bad_state():
    s, b, _ = request(PORTS[0], "GET", f"/v1/jobs/{bad_job}", TOKEN)
    return json.loads(b) if s == 200 else {}


wait_for(lambda: bad_state().get("state") == "failed", 30)
j = bad_state()
R.check("a job with an undecodable setup fails with the decoder's message",
        j.get("state") == "failed" and "measurement setup: the header length is not a number" in
        json.dumps(j.get("result")), json.dumps(j)[:400])

# A job of built artifacts whose pack is damaged fails with the unpacker's message.
st, data, _ = post("/v1/jobs/setups", b"mlk-candidate-pack 1\n5\n[1,2]")
digest = json.loads(data)["setup"] if st == 201 else "0" * 64
st, data, _ = post("/v1/jobs/submit", {"device_key": "cpu-loopback", "setup": digest,
                                       "payload": {"kind": "candidates", "schedule": {}}})
bad_job = json.loads(data)["id"] if st == 201 else 0
wait_for(lambda: bad_state().get("state") == "failed", 30)
j = bad_state()
R.check("a job with a damaged candidate pack fails with the unpacker's message",
        j.get("state") == "failed" and "a candidate pack: the header has no `files` list" in
        json.dumps(j.get("result")), json.dumps(j)[:400])

# Payload fields of the wrong type or range fail their job, naming the field;
# the worker that took it goes on (it once died of the exception, and so did
# each worker the requeued job went to next).
for payload, says in (({"kind": 1, "schedule": {}}, "`kind` must be \\\"source\\\" or \\\"candidates\\\", not 1"),
                      ({"kind": "candidates", "run_timeout_s": "60", "schedule": {}},
                       "`run_timeout_s` must be a number of seconds in (0, 86400], not \\\"60\\\""),
                      ({"kind": "candidates", "run_timeout_s": 1e12, "schedule": {}}, "`run_timeout_s` must be")):
    st, data, _ = post("/v1/jobs/submit", {"device_key": "cpu-loopback", "setup": digest, "payload": payload})
    bad_job = json.loads(data)["id"] if st == 201 else 0
    wait_for(lambda: bad_state().get("state") == "failed", 30)
    j = bad_state()
    R.check(f"a job whose payload is {json.dumps(payload)} fails naming the field",
            j.get("state") == "failed" and j.get("attempts") == 1 and says in json.dumps(j.get("result")),
            json.dumps(j)[:400])
# A source job's limits are bounded (issue 49, the fourth review): one job
# cannot hold a worker for a day. The setup and schedule of a job the first
# tune ran, with a run limit past a day.
first = int(lines[0][1]) if lines else 0
st, data, _ = request(PORTS[0], "GET", f"/v1/jobs/{first}", TOKEN)
ran = json.loads(data) if st == 200 else {}
long_payload = dict(ran.get("payload") or {}, run_timeout_s=100000)
st, data, _ = post("/v1/jobs/submit", {"device_key": "cpu-loopback", "setup": ran.get("setup", "0" * 64),
                                       "payload": long_payload})
bad_job = json.loads(data)["id"] if st == 201 else 0
wait_for(lambda: bad_state().get("state") == "failed", 60)
j = bad_state()
R.check("a source job whose run limit passes a day fails naming the bounds",
        j.get("state") == "failed" and "the job's limits are out of range (timeouts in (0, 86400] s" in
        json.dumps(j.get("result")), json.dumps(j)[:400])



def with_header(setup, **change):
    """The setup's bytes with fields of its JSON header changed."""
    magic, rest = setup.split(b"\n", 1)
    length, rest = rest.split(b"\n", 1)
    head = json.loads(rest[:int(length)])
    head.update(change)
    text = json.dumps(head).encode()
    return magic + b"\n" + str(len(text)).encode() + b"\n" + text + rest[int(length):]


# A source job runs another's program on this machine's CPU: a device-API
# target (whose driver would load in the unsandboxed child) is refused, and
# the program is checked first in a child bounded to 60 s and 4 GiB (issue
# 49, review 5), whose verdict names the bounds.
st, ran_setup, _ = request(PORTS[0], "GET", f"/v1/jobs/{first}/setup", TOKEN)
R.check("the first job's setup can be read back", st == 200, f"{st} {ran_setup[:200]}")
for change, says in (({"target": "host-opencl"}, "`host-opencl`: a source job is compiled for this machine's CPU"),
                     ({"target": "host-vulkan"}, "`host-vulkan`: a source job is compiled for this machine's CPU"),
                     ({"source": "public fn sgemm(a: Tensor[F32, [2]]) -> Tensor[F32, [2]] = nope(a)\n"},
                      "the setup's program does not compile here (within 60 s and 4 GiB)")):
    st, data, _ = post("/v1/jobs/setups", with_header(ran_setup, **change))
    digest = json.loads(data)["setup"] if st == 201 else "0" * 64
    st, data, _ = post("/v1/jobs/submit", {"device_key": "cpu-loopback", "setup": digest,
                                           "payload": ran.get("payload") or {}})
    bad_job = json.loads(data)["id"] if st == 201 else 0
    wait_for(lambda: bad_state().get("state") == "failed", 60)
    j = bad_state()
    R.check(f"a source job with {json.dumps(change)[:60]} fails, saying `{says[:40]}...`",
            j.get("state") == "failed" and says in json.dumps(j.get("result")), json.dumps(j)[:400])
if MODE == "sqlite":
    took = [p for p in own if p.args[1] == "worker" and WORKERS & set(p.args)]
    R.check("the workers that took them are still running",
            len(took) == len(WORKERS) and all(p.poll() is None for p in took), str(took))

# A worker started without --run-artifacts refuses built artifacts: they are
# native code from whoever may submit jobs.
plain_key = "cpu-plain-" + TAG
start_worker(plain_key, "plain-" + TAG, run_artifacts=False)
st, data, _ = post("/v1/jobs/submit", {"device_key": plain_key, "setup": digest,
                                       "payload": {"kind": "candidates", "schedule": {}}})
bad_job = json.loads(data)["id"] if st == 201 else 0
wait_for(lambda: bad_state().get("state") == "failed", 30)
j = bad_state()
R.check("a worker without --run-artifacts fails a job of built artifacts, saying how to allow it",
        j.get("state") == "failed" and "start it with --run-artifacts" in json.dumps(j.get("result")),
        json.dumps(j)[:400])

# --- mlk-measure-worker: the same loop with no compiler linked -------------------
MEASURE_WORKER = os.path.join(os.path.dirname(MLK), "mlk-measure-worker")
mw_key, mw_name = "cpu-measure-" + TAG, "measure-" + TAG
for args, says in ((["--device-key", "k", "--max-jobs", "1.5"], "--max-jobs wants a whole number, not `1.5`"),
                   (["--device-key", "k", "--lease", "nan"], "--lease wants a number of seconds (e.g. 0.5), not `nan`"),
                   (["--device-key", "k", "--lease", "0.1"], "--lease must be 0.5-3600 seconds"),
                   (["--server", SERVERS], "no device key: give --device-key KEY"),
                   (["--device-key", "k", "--bogus"], "unknown argument --bogus"),
                   (["--device-key", "k", "--trusted-signers", "nonsense"],
                    "--trusted-signers: trusted key `nonsense` is neither")):
    bad = subprocess.run([MEASURE_WORKER, "--server", SERVERS, *args], capture_output=True, text=True, timeout=30)
    R.check(f"mlk-measure-worker {' '.join(args[-2:])}: exit 1, `{says}`",
            bad.returncode == 1 and bad.stderr.startswith("mlk-measure-worker: " + says), bad.stderr[:300])
mw = subprocess.Popen([MEASURE_WORKER, "--server", SERVERS, "--device-key", mw_key, "--name", mw_name, "--json"],
                      stdout=open(os.path.join(WORK, mw_name + ".jsonl"), "w"),
                      stderr=open(os.path.join(WORK, mw_name + ".log"), "w"), env=dict(os.environ, MLK_TOKEN=TOKEN))
own.append(mw)
R.check("mlk-measure-worker registers", wait_for(lambda: "registered as worker" in log_of(mw_name), 20),
        log_of(mw_name)[-300:])
p, _ = tune("--dims", "M=28,K=32,N=12", "--trials", "2", "--time", "60", "--cache", SERVERS, "--workers", mw_key,
            "--workers-run-artifacts", "--json")
mw_lines = PROGRESS.findall(p.stderr)
R.check("a tune of built artifacts is measured by mlk-measure-worker alone",
        p.returncode == 0 and len(mw_lines) >= 2 and {w for _, _, w, _, _ in mw_lines} == {mw_name},
        p.stderr[-800:])
mw_jobs = [e for e in events_of(mw_name) if e.get("event") == "job"]
R.check("its jobs were built artifacts, verified and timed",
        mw_jobs and all(e["kind"] == "candidates" for e in mw_jobs) and
        any(e["verdict"] == "ok" and isinstance(e["median_ms"], float) for e in mw_jobs), json.dumps(mw_jobs)[:600])
st, data, _ = post("/v1/jobs/submit", {"device_key": mw_key, "setup": digest, "payload": {"schedule": {}}})
bad_job = json.loads(data)["id"] if st == 201 else 0
wait_for(lambda: bad_state().get("state") == "failed", 30)
j = bad_state()
R.check("mlk-measure-worker fails a job of source to compile, saying it runs built artifacts only",
        j.get("state") == "failed" and "runs built artifacts only" in json.dumps(j.get("result")), json.dumps(j)[:400])

# --- Signed packs (issue 49, finding 5): a worker with trusted signers runs only
# the packs one of them signed for its namespace, checked before unpacking ------
subprocess.run([MLK, "key", "create", os.path.join(WORK, "packs.pem")], capture_output=True, check=True)
sg_key, sg_name = "cpu-signed-" + TAG, "signed-" + TAG
sg = subprocess.Popen([MEASURE_WORKER, "--server", SERVERS, "--device-key", sg_key, "--name", sg_name, "--json",
                       "--trusted-signers", os.path.join(WORK, "packs.pem.pub")],
                      stdout=open(os.path.join(WORK, sg_name + ".jsonl"), "w"),
                      stderr=open(os.path.join(WORK, sg_name + ".log"), "w"), env=dict(os.environ, MLK_TOKEN=TOKEN))
own.append(sg)
R.check("mlk-measure-worker --trusted-signers registers", wait_for(lambda: "registered as worker" in log_of(sg_name), 20),
        log_of(sg_name)[-300:])
st, data, _ = post("/v1/jobs/submit", {"device_key": sg_key, "setup": digest, "payload": {"kind": "candidates"}})
bad_job = json.loads(data)["id"] if st == 201 else 0
wait_for(lambda: bad_state().get("state") == "failed", 30)
j = bad_state()
R.check("a worker with --trusted-signers fails an unsigned pack unrun, saying so",
        j.get("state") == "failed" and "is unsigned" in json.dumps(j.get("result")) and
        "runs only packs its --trusted-signers signed" in json.dumps(j.get("result")), json.dumps(j)[:400])
p, _ = tune("--dims", "M=24,K=32,N=12", "--trials", "2", "--time", "60", "--cache", SERVERS, "--workers", sg_key,
            "--workers-run-artifacts", "--sign-packs", os.path.join(WORK, "packs.pem"), "--json")
sg_lines = PROGRESS.findall(p.stderr)
R.check("a tune with --sign-packs is measured by that worker",
        p.returncode == 0 and len(sg_lines) >= 2 and {w for _, _, w, _, _ in sg_lines} == {sg_name}, p.stderr[-800:])
sg_jobs = [e for e in events_of(sg_name) if e.get("event") == "job" and e["job"] != bad_job]
R.check("the signed packs ran, verified and timed",
        sg_jobs and any(e["verdict"] == "ok" and isinstance(e["median_ms"], float) for e in sg_jobs),
        json.dumps(sg_jobs)[:600])

# --- SIGTERM stops a worker cleanly ----------------------------------------------
rescuer = next((p for p in own if "rescuer-" + TAG in p.args), None)
for p in own:
    if p.poll() is None and (p.args[1] == "worker" or p.args[0] == MEASURE_WORKER):
        p.send_signal(signal.SIGTERM)
for p in own:
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
stopped = "rescuer-" + TAG
R.check("a worker stopped by SIGTERM exits 0 and says so",
        rescuer is not None and rescuer.returncode == 0 and "stopped by a signal" in log_of(stopped), log_of(stopped)[-200:])
R.check("its last --json event is `stopped` with its job count",
        events_of(stopped) and events_of(stopped)[-1].get("event") == "stopped" and
        events_of(stopped)[-1].get("jobs", 0) >= 1, json.dumps(events_of(stopped))[-300:])
R.check("mlk-measure-worker stopped by SIGTERM exits 0, its last --json event `stopped`",
        mw.returncode == 0 and events_of(mw_name) and events_of(mw_name)[-1].get("event") == "stopped",
        log_of(mw_name)[-300:])
if MODE == "sqlite":
    server.stop()
sys.exit(R.finish())
