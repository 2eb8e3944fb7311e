"""The dashboard of `mlk serve` in headless Chromium (Debian's `chromium`,
installed by scripts/install.sh), driven over the DevTools protocol on a pipe
(--remote-debugging-pipe: no extra Python package):

- a store seeded through the API: entries of team `ci` (one whose fn is
  `<script>...</script>`), an entry of another team, and three benchmark
  results of one kernel on two artifacts;
- /ui without a token is the sign-in form and shows no data; the form, filled
  in with a read-only token and submitted in the browser (a same-origin POST:
  the server's cross-site check lets it through), starts a session whose id,
  not the token, is kept in an HttpOnly cookie, and returns to the page asked
  for;
- the index lists the team's entries (fn, target, shape, measured, verified,
  size) and its benchmarked kernel, shows the hostile name as text (no
  script element runs or exists), and not the other team's entry;
- the kernel page, reached through the index's link, plots the history: an
  SVG with one point per result and the artifact change marked;
- a screenshot of each page is a PNG of the window's size and of some size;
- a sign-in form posted from a page of another origin is refused, no cookie.

A missing chromium fails the test (it is a dependency, not an option).

usage: dashboard_chromium.py MLK_BINARY WORK_DIR
"""
import base64
import fcntl
import functools
import hashlib
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from png_check import header  # noqa: E402
from serve_common import Results, Server, request, token  # noqa: E402

MLK, WORK = (os.path.abspath(a) for a in sys.argv[1:3])
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
res = Results()
t0 = time.time()
WIDTH, HEIGHT = 1200, 900
EVIL = '<script>document.title="pwned"</script>'
KERNEL = "rmsnorm [B=8,D=512,S=64] host"


class Chromium:
    """A headless Chromium and one page of it, over the DevTools pipe (fd 3 in, fd 4 out)."""

    def __init__(self, profile):
        exe = shutil.which("chromium")
        if not exe:
            raise RuntimeError("chromium not found on PATH: run scripts/install.sh (Debian's `chromium`)")
        to_r, self.to_w = os.pipe()
        self.from_r, from_w = os.pipe()
        # The child's ends, above 4, so that moving them to 3 and 4 clobbers neither.
        hi_r, hi_w = fcntl.fcntl(to_r, fcntl.F_DUPFD, 10), fcntl.fcntl(from_w, fcntl.F_DUPFD, 10)

        def fds():  # runs in the child before the other descriptors are closed
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)

        self.proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--remote-debugging-pipe", f"--user-data-dir={profile}", f"--window-size={WIDTH},{HEIGHT}",
             "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(os.path.join(WORK, "chromium.log"), "w"),
            preexec_fn=fds, pass_fds=(3, 4))
        for fd in (to_r, from_w, hi_r, hi_w):
            os.close(fd)
        self.buf, self.next_id, self.events = b"", 0, []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.call("Page.enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False}, session=True)

    def _read(self, deadline):
        while b"\0" not in self.buf:
            if time.time() > deadline:
                raise TimeoutError("no answer from chromium")
            chunk = os.read(self.from_r, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, params=None, session=False, timeout=30):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        os.write(self.to_w, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + timeout
        while True:
            m = self._read(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_load(self, timeout=30):
        deadline = time.time() + timeout
        while True:
            for i, m in enumerate(self.events):
                if m.get("method") == "Page.loadEventFired":
                    del self.events[:i + 1]
                    return
            self.events.append(self._read(deadline))

    def navigate(self, url):
        self.events.clear()
        self.call("Page.navigate", {"url": url}, session=True)
        self.wait_load()

    def js(self, expression):
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def screenshot(self, path):
        data = base64.b64decode(self.call("Page.captureScreenshot", {"format": "png"}, session=True)["data"])
        with open(path, "wb") as f:
            f.write(data)
        return data

    def close(self):
        try:
            self.call("Browser.close", timeout=10)
        except Exception:  # noqa: BLE001 - closing anyway
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


def put_entry(port, tok, key, meta, payload):
    digest = hashlib.sha256(payload).hexdigest()
    st, body, _ = request(port, "PUT", "/v1/blobs/" + digest, tok, body=payload)
    assert st in (200, 201), (st, body)
    manifest = {"files": {"kernel.so": {"digest": digest, "size": len(payload)}}, "meta": meta,
                "provenance": {"producer": "dashboard_chromium.py", "host": "test", "time": 1764580000,
                               "toolchain": {"mlk": "0.1.0"}, "measured": True}}
    st, body, _ = request(port, "PUT", "/v1/entries/" + key, tok, body=json.dumps(manifest))
    assert st in (200, 201), (st, body)


def report(created, median, key):
    return {"format": "mlk-bench", "format_version": 1, "created": created,
            "machine": {"host": "ci", "cpu": "Test CPU", "cores": 2, "features": ""}, "versions": {"mlk": "0.1.0"},
            "kernels": [{"id": KERNEL, "target": "host", "cache_key": key, "variant": "tuned",
                         "mlk": {"median_ms": median, "samples_ms": [median * 0.95, median, median * 1.1]}}]}


store = os.path.join(WORK, "server.db")
ci = token(MLK, store, "ci", "read,write-blobs,write-entries")
other = token(MLK, store, "other", "read,write-blobs,write-entries")
viewer = token(MLK, store, "ci", "read")  # the dashboard signs in read-only tokens only
srv = Server(MLK, store)
browser = None
key_a, key_b, key_evil, key_other = "a" * 64, "b" * 64, "c" * 64, "d" * 64
try:
    put_entry(srv.port, ci, key_a, {"fn": "rmsnorm", "target": "host", "dims": {"B": 8, "S": 64, "D": 512},
                                    "measured": True, "verify_report": {"passed": ["types", "identity", "envelope"]}},
              b"x" * 3000)
    put_entry(srv.port, ci, key_evil, {"fn": EVIL, "target": "host", "dims": {"N": 4}, "measured": False}, b"evil")
    put_entry(srv.port, other, key_other, {"fn": "other_teams_fn", "target": "host"}, b"other")
    for created, median, key in [("2026-11-01T10:00:00Z", 2.0, key_a), ("2026-11-02T10:00:00Z", 2.2, key_a),
                                 ("2026-11-03T10:00:00Z", 1.2, key_b)]:
        st, body, _ = request(srv.port, "POST", "/v1/bench/results", ci, body=json.dumps(report(created, median, key)))
        assert st == 201, (st, body)

    try:
        browser = Chromium(os.path.join(WORK, "profile"))
    except Exception as e:  # noqa: BLE001 - a missing or broken chromium fails the test with the reason
        res.check("chromium starts and answers on the DevTools pipe", False, str(e))
        raise SystemExit(res.finish())
    res.check("chromium starts and answers on the DevTools pipe", True)

    # Signed out: the form, no data.
    browser.navigate(srv.url + "/ui")
    dom = browser.js("document.documentElement.outerHTML")
    res.check("signed out: the sign-in form", browser.js("!!document.querySelector('form.login input#token')"),
              dom[:300])
    res.check("... and no data", "rmsnorm" not in dom and "pwned" not in dom and "2026-11" not in dom, dom[-500:])
    shot = browser.screenshot(os.path.join(WORK, "login.png"))
    res.check("a screenshot of the sign-in page", header(shot)[:2] == (WIDTH, HEIGHT) and len(shot) > 5000,
              f"{len(shot)} bytes, {header(shot)}")

    # Sign in through the form; the cookie is HttpOnly, scripts never see it.
    browser.js(f"document.getElementById('token').value = {json.dumps(viewer)}; "
               "document.querySelector('form.login').submit(); true")
    browser.wait_load()
    cookies = browser.call("Network.getCookies", {"urls": [srv.url + "/ui"]}, session=True)["cookies"]
    mine = [c for c in cookies if c["name"] == "mlk_session"]
    res.check("signing in keeps a session id, not the token, in an HttpOnly, SameSite=Strict cookie",
              len(mine) == 1 and len(mine[0]["value"]) == 43 and viewer not in mine[0]["value"]
              and mine[0]["httpOnly"] and mine[0]["sameSite"] == "Strict", str(cookies))
    res.check("... which page scripts cannot read", "mlk_session" not in browser.js("document.cookie"))
    res.check("... and returns to /ui", browser.js("location.pathname") == "/ui", browser.js("location.href"))

    # The index.
    rows = browser.js("Array.from(document.querySelectorAll('#entries tr.entry')).map("
                      "r => Array.from(r.cells).map(c => c.textContent))")
    by_fn = {r[0]: r for r in rows or []}
    res.check("the index lists the team's two entries, not the other team's",
              sorted(by_fn) == sorted(["rmsnorm", EVIL]), str(rows))
    r = by_fn.get("rmsnorm", [""] * 9)
    res.check("... with fn, target, shape, measured, verified, size, key",
              r[1:7] == ["host", "B=8, D=512, S=64", "yes", "types,identity,envelope", "2.9 KiB"] + [r[6]]
              and r[7] == "a" * 12 and "T" in r[6], str(r))
    res.check("... an entry that was timed links to its history, one never timed does not",
              r[8] == "plot" and by_fn.get(EVIL, [""] * 9)[8] == "-", str(rows))
    res.check("... the hostile name shown as text, no script element, nothing ran",
              EVIL in by_fn and browser.js("document.scripts.length") == 0 and browser.js("document.title") != "pwned",
              str(browser.js("document.title")))
    kernels = browser.js("Array.from(document.querySelectorAll('#kernels tr.kernel')).map(r => r.cells[0].textContent "
                         "+ '|' + r.cells[2].textContent)")
    res.check("... and the benchmarked kernel with its three results", kernels == [KERNEL + "|3"], str(kernels))
    shot = browser.screenshot(os.path.join(WORK, "index.png"))
    res.check("a screenshot of the index", header(shot)[:2] == (WIDTH, HEIGHT) and len(shot) > 20000,
              f"{len(shot)} bytes, {header(shot)}")

    # The kernel page, through the index's link.
    href = browser.js("document.querySelector('#kernels a').href")
    browser.navigate(href)
    res.check("the kernel page names the kernel", browser.js("document.getElementById('kernel').textContent")
              == KERNEL + " on host", str(browser.js("document.title")))
    plot = browser.js("(() => { const s = document.querySelector('svg.history'); if (!s) return null; "
                      "const b = s.getBoundingClientRect(); return {w: b.width, h: b.height, "
                      "points: s.querySelectorAll('circle.result').length, "
                      "line: s.querySelector('polyline.medians').getAttribute('points').trim().split(/\\s+/).length, "
                      "changes: s.querySelectorAll('.artifact-change').length}; })()")
    res.check("... plots the history: one point per result, the artifact change marked",
              plot is not None and plot["points"] == 3 and plot["line"] == 3 and plot["changes"] == 1
              and plot["w"] >= 800 and plot["h"] >= 250, str(plot))
    table = browser.js("Array.from(document.querySelectorAll('#results tr.result')).map(r => r.cells[0].textContent)")
    res.check("... and lists the results newest first",
              table == ["2026-11-03T10:00:00Z", "2026-11-02T10:00:00Z", "2026-11-01T10:00:00Z"], str(table))
    shot = browser.screenshot(os.path.join(WORK, "kernel.png"))
    res.check("a screenshot of the kernel page", header(shot)[:2] == (WIDTH, HEIGHT) and len(shot) > 20000,
              f"{len(shot)} bytes, {header(shot)}")

    # Signing out clears the cookie: the form again.
    browser.js("document.querySelector('header form').submit(); true")
    browser.wait_load()
    res.check("signing out: back to the form, no data",
              browser.js("location.pathname") == "/ui/login" and browser.js("!!document.querySelector('form.login')"))
    browser.navigate(srv.url + "/ui")
    res.check("... and /ui asks for a token again", browser.js("!!document.querySelector('form.login')")
              and "rmsnorm" not in browser.js("document.body.textContent"))

    # Issue 28, finding 9, in the browser: a page of another origin (another
    # port of this host) posts the sign-in form with a valid token; the
    # server refuses it (Sec-Fetch-Site: same-site) and sets no cookie.
    evil_dir = os.path.join(WORK, "evil")
    os.makedirs(evil_dir, exist_ok=True)
    with open(os.path.join(evil_dir, "index.html"), "w") as f:
        f.write(f'<!doctype html><form id="f" method="post" action="{srv.url}/ui/login">'
                f'<input name="token" value="{viewer}"><input name="next" value="/ui"></form>')

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    evil = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=evil_dir))
    threading.Thread(target=evil.serve_forever, daemon=True).start()
    try:
        browser.navigate(f"http://127.0.0.1:{evil.server_port}/index.html")
        browser.js("document.getElementById('f').submit(); true")
        browser.wait_load()
        text = browser.js("document.body.textContent")
        cookies = browser.call("Network.getCookies", {"urls": [srv.url + "/ui"]}, session=True)["cookies"]
        res.check("a sign-in posted from another origin is refused, and no session cookie is set",
                  "cross-site request" in text and not [c for c in cookies if c["name"] == "mlk_session"],
                  text[:300] + " " + str(cookies))
    finally:
        evil.shutdown()
finally:
    if browser:
        browser.close()
    srv.stop()

print(f"in {time.time() - t0:.1f} s")
sys.exit(res.finish())
