"""Helpers shared by the `mlk serve` tests: start and stop a server process,
make tokens, send requests (including broken ones through a raw socket), and
snapshot the store file to prove that a rejected request changed nothing."""
import http.client
import json
import os
import signal
import socket
import sqlite3
import subprocess
import time


class Server:
    """`mlk serve` on a free loopback port; stop() sends SIGTERM, kill() SIGKILL."""

    def __init__(self, mlk, store, *extra):
        self.mlk, self.store, self.extra = mlk, store, extra
        self.proc = subprocess.Popen([mlk, "serve", "--cache", store, "--listen", "127.0.0.1:0", *extra],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if "listening on http://127.0.0.1:" not in line:
            self.proc.kill()
            raise RuntimeError("mlk serve did not start: " + line + self.proc.stderr.read())
        self.port = int(line.split("127.0.0.1:")[1].split()[0])
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self, timeout=20):
        self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, err

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)


def token(mlk, store, team, scopes):
    p = subprocess.run([mlk, "token", "create", "--cache", store, "--team", team, "--scopes", scopes],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(p.stderr)
    return p.stdout.strip()


def request(port, method, path, tok=None, body=None, headers=None):
    """(status, body bytes, headers dict) of one request on a new connection."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    h = dict(headers or {})
    if tok:
        h["Authorization"] = "Bearer " + tok
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    data = r.read()
    out = (r.status, data, {k.lower(): v for k, v in r.getheaders()})
    c.close()
    return out


def error_of(body):
    """The `error` text of a JSON error body, or None when the body is not one."""
    try:
        j = json.loads(body)
    except ValueError:
        return None
    return j.get("error") if isinstance(j, dict) and isinstance(j.get("error"), str) and j["error"] else None


def raw(port, data, read=True, timeout=10):
    """Sends bytes as they are; returns what came back (until close or timeout)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(data)
    out = b""
    if read:
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
        except socket.timeout:
            pass
    s.close()
    return out


def snapshot(store):
    """What the store holds: blobs, entries (with manifests) and staged rows."""
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        blobs = db.execute("SELECT digest, size FROM blobs ORDER BY digest").fetchall()
        entries = db.execute("SELECT ns, key, manifest FROM entries ORDER BY ns, key").fetchall()
        staged = db.execute("SELECT ns, digest, size FROM service_staged ORDER BY ns, digest").fetchall()
    finally:
        db.close()
    return blobs, entries, staged


class Results:
    def __init__(self):
        self.items = []

    def check(self, name, cond, note=""):
        self.items.append((name, bool(cond), note))

    def finish(self):
        failed = [x for x in self.items if not x[1]]
        for name, ok, note in self.items:
            print(f"{'ok  ' if ok else 'FAIL'} {name}" + (f": {note}" if not ok and note else ""))
        print(f"{len(self.items) - len(failed)} passed, {len(failed)} failed")
        return 1 if failed else 0


def wait_port_closed(port, timeout=5):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        except OSError:
            return True
        time.sleep(0.05)
    return False
