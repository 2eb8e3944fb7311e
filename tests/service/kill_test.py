#!/usr/bin/env python3
"""The kill test of `mlk serve` (issue 28, "Tests and figures"): SIGKILL of the
server in the middle of writes, under load, loses no acknowledged write and
leaves a store that `mlk cache verify` finds consistent.

Three rounds on one SQLite store, each: start `mlk serve` on a free loopback
port, run WRITERS concurrent writer loops that PUT blobs (1 B to 256 KiB) and
entries binding them, each on its own keep-alive connection, recording every
write the server acknowledged (2xx, the whole response read); after 2-3 s of
load, SIGKILL the server while the writers are still sending (some request
is always cut: sent, its answer never read). Then:

  - `mlk cache verify` on the store exits 0 (consistent);
  - a restarted server answers every acknowledged blob with its bytes and
    every acknowledged entry with the manifest that was put;
  - `mlk cache ls` lists every acknowledged entry.

Bounded: at most ~40 s of load in all (about 10 s usually), loopback only, every request with a
timeout. Only the HTTP API is used (docs/api.md), so the test holds for any
transport behind service/api.h.

usage: kill_test.py MLK_BINARY WORK_DIR
"""
import hashlib
import http.client
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from serve_common import Results, Server, token  # noqa: E402

MLK, WORK = sys.argv[1], sys.argv[2]
WRITERS = 6
ROUNDS = 3
LOAD_S = 2.0            # load runs at least this long before the kill, plus up to 1 s at random
MIN_ACKED = 40          # ... and until this many writes of the round were acknowledged
MAX_LOAD_S = 12         # ... but no longer than this
TEAM = "load"

t0 = time.time()
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
store = os.path.join(WORK, "kill.db")
res = Results()
tok = token(MLK, store, TEAM, "read,write-blobs,write-entries")

lock = threading.Lock()
acked_blobs = {}    # digest -> sha256 of the bytes (== digest), size
acked_entries = {}  # key -> manifest files as put
errors_before_kill = []
cut_by_kill = []    # requests on a connection the kill broke (not refused ones)


def provenance():
    return {"producer": "kill test", "host": "loopback", "time": int(time.time()), "toolchain": {"mlk": "0.1.0"},
            "measured": False}


class Writer(threading.Thread):
    """PUTs blobs and entries until `stop`, on one keep-alive connection
    (a new one after each failure), recording what was acknowledged."""

    def __init__(self, n, port, stop, killed, round_no):
        super().__init__(daemon=True)
        self.n, self.port, self.stop, self.killed, self.round = n, port, stop, killed, round_no
        self.rng = random.Random(1000 * round_no + n)
        self.conn = None
        self.mine = []  # (digest, size) acknowledged by this writer, for its entries

    def send(self, method, path, body):
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            self.conn.request(method, path, body=body, headers={"Authorization": "Bearer " + tok,
                                                                "Content-Type": "application/octet-stream"})
            r = self.conn.getresponse()
            data = r.read()
            return r.status, data
        except (OSError, http.client.HTTPException) as e:
            self.conn.close()
            self.conn = None
            with lock:
                if not self.killed.is_set():
                    errors_before_kill.append(f"writer {self.n}: {method} {path[:40]}: {e!r}")
                elif not isinstance(e, ConnectionRefusedError):
                    cut_by_kill.append(f"{method} {path[:20]}: {type(e).__name__}")
            return None, b""

    def run(self):
        i = 0
        while not self.stop.is_set():
            i += 1
            size = self.rng.choice([1, 100, 4096, 65536, 262144]) + self.rng.randrange(64)
            data = self.rng.randbytes(size)
            digest = hashlib.sha256(data).hexdigest()
            status, body = self.send("PUT", "/v1/blobs/" + digest, data)
            if status is not None and 200 <= status < 300:
                with lock:
                    acked_blobs[digest] = size
                self.mine.append((digest, size))
            elif status is not None and not self.killed.is_set():
                with lock:
                    errors_before_kill.append(f"writer {self.n}: PUT blob -> {status} {body[:200]!r}")
            if i % 2 == 0 and self.mine:
                picked = self.rng.sample(self.mine, min(len(self.mine), self.rng.randrange(1, 4)))
                files = {f"f{j}.bin": {"digest": d, "size": s} for j, (d, s) in enumerate(picked)}
                key = hashlib.sha256(f"{self.round}/{self.n}/{i}".encode()).hexdigest()
                manifest = {"files": files, "meta": {"fn": f"w{self.n}", "target": "host", "i": i},
                            "provenance": provenance()}
                status, body = self.send("PUT", "/v1/entries/" + key, json.dumps(manifest).encode())
                if status is not None and 200 <= status < 300:
                    with lock:
                        acked_entries[key] = files
                elif status is not None and not self.killed.is_set():
                    with lock:
                        errors_before_kill.append(f"writer {self.n}: PUT entry -> {status} {body[:200]!r}")


def get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", path, headers={"Authorization": "Bearer " + tok})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


for round_no in range(1, ROUNDS + 1):
    srv = Server(MLK, store, "--threads", "8")
    stop, killed = threading.Event(), threading.Event()
    before = len(acked_blobs) + len(acked_entries)
    writers = [Writer(n, srv.port, stop, killed, round_no) for n in range(WRITERS)]
    for w in writers:
        w.start()
    start = time.time()
    load_s = LOAD_S + random.random()
    cut_before = len(cut_by_kill)
    while time.time() - start < MAX_LOAD_S and (time.time() - start < load_s or
                                                len(acked_blobs) + len(acked_entries) - before < MIN_ACKED):
        time.sleep(0.05)
    killed.set()
    srv.kill()
    stop.set()
    for w in writers:
        w.join(timeout=15)
    res.check(f"round {round_no}: the writers stopped after the kill", not any(w.is_alive() for w in writers))
    acked = len(acked_blobs) + len(acked_entries) - before
    res.check(f"round {round_no}: at least {MIN_ACKED} writes acknowledged before the SIGKILL", acked >= MIN_ACKED,
              f"{acked} in {time.time() - start:.1f} s")
    res.check(f"round {round_no}: no writer saw an error before the kill", not errors_before_kill,
              "; ".join(errors_before_kill[:5]))
    cut = cut_by_kill[cut_before:]
    res.check(f"round {round_no}: the kill cut requests in flight", cut, "no request was in flight")
    print(f"round {round_no}: {acked} writes acknowledged in {time.time() - start:.1f} s, "
          f"{len(cut)} cut by the kill ({', '.join(sorted(set(cut)))[:200]})")

    v = subprocess.run([MLK, "cache", "verify", "--cache", store], capture_output=True, text=True, timeout=60)
    res.check(f"round {round_no}: `mlk cache verify` after the SIGKILL: consistent (exit 0)", v.returncode == 0,
              f"exit {v.returncode}: {v.stdout[-500:]} {v.stderr[-500:]}")

    # Every acknowledged write, through a restarted server.
    srv = Server(MLK, store)
    try:
        lost_blobs, bad_blobs = [], []
        for digest, size in sorted(acked_blobs.items()):
            status, data = get(srv.port, "/v1/blobs/" + digest)
            if status != 200:
                lost_blobs.append(f"{digest[:12]} -> {status}")
            elif hashlib.sha256(data).hexdigest() != digest or len(data) != size:
                bad_blobs.append(digest[:12])
        res.check(f"round {round_no}: every acknowledged blob ({len(acked_blobs)}) is there after the restart",
                  not lost_blobs, ", ".join(lost_blobs[:10]))
        res.check(f"round {round_no}: ... with its bytes", not bad_blobs, ", ".join(bad_blobs[:10]))
        lost_entries, wrong_entries = [], []
        for key, files in sorted(acked_entries.items()):
            status, data = get(srv.port, "/v1/entries/" + key)
            if status != 200:
                lost_entries.append(f"{key[:12]} -> {status}")
                continue
            got = json.loads(data).get("manifest", {}).get("files")
            if got != files:
                wrong_entries.append(f"{key[:12]}: {got!r} != {files!r}")
        res.check(f"round {round_no}: every acknowledged entry ({len(acked_entries)}) is there after the restart",
                  not lost_entries, ", ".join(lost_entries[:10]))
        res.check(f"round {round_no}: ... with the manifest that was put", not wrong_entries, "; ".join(wrong_entries[:3]))
    finally:
        code, err = srv.stop()
    res.check(f"round {round_no}: the restarted server stops on SIGTERM", code == 0, err[-300:])

ls = subprocess.run([MLK, "cache", "ls", "--cache", store, "--namespace", TEAM], capture_output=True, text=True,
                    timeout=60)
missing = [k for k in acked_entries if k not in ls.stdout]
res.check("`mlk cache ls` lists every acknowledged entry", ls.returncode == 0 and not missing,
          f"exit {ls.returncode}, {len(missing)} missing, e.g. {missing[:3]}")
print(f"{len(acked_blobs)} blobs and {len(acked_entries)} entries acknowledged over {ROUNDS} kills, "
      f"in {time.time() - t0:.1f} s")
sys.exit(res.finish())
