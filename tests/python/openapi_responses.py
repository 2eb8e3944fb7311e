"""Real answers of `mlk serve` match docs/openapi.yaml.

Starts one `MLK serve` (SQLite store under WORK_DIR, two threads, a 64 KiB
--max-body), makes tokens with `MLK token create`, and sends requests that
cover every tag of the spec, successes and errors: health, metrics, whoami,
status; blobs (PUT new and again, GET, HEAD, one range: 206, a range past
the end and several ranges: 416, a missing blob, a digest mismatch, a body
over --max-body, a chunked body); entries (PUT of a manifest by hand, GET,
HEAD, the query, DELETE, a manifest whose blobs are missing: 409, a malformed
one); 401 (no token, an unknown one), 403 (a scope the token lacks, another
team's namespace), 400 (a bad namespace, key, query); 405 and 404 of the
route table; the benchmark history (a report with a baseline set, the
history, the set); measurement jobs (a setup, a submit, a worker that
registers, leases, heartbeats and reports, a cancel, the worker list,
the job's setup, and their errors); ccache objects in the flat, subdirs and
bazel layouts (PUT, GET, a range, HEAD, DELETE, Basic auth).

Each answer is validated with openapi-core (`OpenAPI.validate_response`):
its status must be one the operation lists (a HEAD operation's `default`
counts, it documents "an error status, no body"), its body and declared
headers must match the response's schema, and a body the response does not
describe is a failure. The requests meant to succeed are also validated
against the spec (`validate_request`). A method or path the spec has no
operation for (405, a 404 of an unknown route) must answer the Error schema
of the spec, with `Allow` where the route table refused the method. One line
per check, "ok  NAME" or "FAIL NAME" with why, then a summary; exit 1 on a
failure. The server is stopped with SIGTERM on every path out.

usage: openapi_responses.py MLK_BINARY OPENAPI_YAML WORK_DIR
"""
import atexit
import base64
import hashlib
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from urllib.parse import parse_qsl, urlsplit

import jsonschema
import yaml
from openapi_core import OpenAPI
from openapi_core.datatypes import RequestParameters
from werkzeug.datastructures import Headers, ImmutableMultiDict

from check_common import check, results

MLK, SPEC, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
STORE = os.path.join(WORK, "cache.db")
# The server the spec names: openapi-core matches a request's URL against
# `servers`, so requests are described as sent there (the port is the real
# server's business, not the spec's).
SPEC_HOST = "http://127.0.0.1:8080"

api = OpenAPI.from_file_path(SPEC)
with open(SPEC, encoding="utf-8") as f:
    spec = yaml.safe_load(f)
ERROR_SCHEMA = spec["components"]["schemas"]["Error"]
HTTP_METHODS = ("get", "head", "put", "post", "delete", "patch", "options", "trace")


def template_regex(path):
    return re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(path)) + "$")


# Spec paths, exact ones first, then by fewer parameters (openapi-core's order).
SPEC_PATHS = sorted(spec["paths"], key=lambda p: (p.count("{"), -len(p)))
PATH_RES = {p: template_regex(p) for p in SPEC_PATHS}


def spec_path_of(path):
    return next((p for p in SPEC_PATHS if PATH_RES[p].match(path)), None)


# --- the server and its tokens -------------------------------------------------------
def mlk(*args):
    p = subprocess.run([MLK, *args], capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        sys.exit(f"FAIL `mlk {' '.join(args)}` exited {p.returncode}: {p.stderr.strip()[-500:]}")
    return p.stdout.strip()


def token(team, scopes):
    return mlk("token", "create", "--cache", STORE, "--team", team, "--scopes", scopes)


RW = token("oa", "read,write-blobs,write-entries")
RO = token("oa", "read")
ADMIN = token("ops", "admin")
WORKER = token("oa", "worker")
OTHER = token("other", "read,write-blobs,write-entries")

server_log = open(os.path.join(WORK, "serve.log"), "w")
server = subprocess.Popen([MLK, "serve", "--cache", STORE, "--listen", "127.0.0.1:0", "--threads", "2",
                           "--max-body", "64K"],
                          stdout=subprocess.PIPE, stderr=server_log, text=True)


def stop_server():
    if server.poll() is None:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


atexit.register(stop_server)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # through atexit: the server stops too
first = server.stdout.readline()
m = re.match(r"mlk serve: listening on http://127\.0\.0\.1:(\d+) ", first)
if not m:
    stop_server()
    with open(os.path.join(WORK, "serve.log")) as f:
        sys.exit(f"FAIL mlk serve did not start: {first!r} {f.read()[-800:]}")
PORT = int(m.group(1))


# --- requests and responses in openapi-core's raw protocol ------------------------
class Req:
    """openapi_core.protocols.Request for what this script sends."""

    def __init__(self, method, url, headers, body):
        u = urlsplit(url)
        self.host_url = SPEC_HOST
        self.path = u.path
        self.method = method.lower()
        self.parameters = RequestParameters(query=ImmutableMultiDict(parse_qsl(u.query, keep_blank_values=True)),
                                            header=Headers(headers))
        self.body = body
        self.content_type = Headers(headers).get("Content-Type", "").lower()


class Resp:
    """openapi_core.protocols.Response for what came back."""

    def __init__(self, status, headers, data):
        self.status_code = status
        self.headers = Headers(headers)
        self.data = data
        self.content_type = self.headers.get("Content-Type", "").lower()

    def json(self):
        try:
            return json.loads(self.data)
        except ValueError:
            return None


def send(method, url, tok=None, body=None, ctype=None, headers=None, basic=False, chunked=False):
    h = dict(headers or {})
    if tok:
        h["Authorization"] = ("Basic " + base64.b64encode(b"ccache:" + tok.encode()).decode()) if basic \
            else "Bearer " + tok
    if isinstance(body, (dict, list)):
        body, ctype = json.dumps(body).encode(), ctype or "application/json"
    if ctype:
        h["Content-Type"] = ctype
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=60)
    try:
        if chunked:
            c.putrequest(method, url)
            for k, v in h.items():
                c.putheader(k, v)
            c.putheader("Transfer-Encoding", "chunked")
            c.endheaders()
            try:
                c.send(b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
            except OSError:
                pass  # the server may answer (411) and close before the body
        else:
            try:
                c.request(method, url, body=body, headers=h)
            except OSError:
                pass  # likewise, a 413 before the whole body
        r = c.getresponse()
        data = r.read()
        resp = Resp(r.status, r.getheaders(), data)
    finally:
        c.close()
    return Req(method, url, h, body), resp


# --- validation -----------------------------------------------------------------------
def problems_of(req, resp, want_request_valid, allow):
    """What is wrong with the answer (and the request, when it is meant to be valid) by the spec."""
    out = []
    method = req.method
    path = spec_path_of(req.path)
    item = spec["paths"].get(path, {}) if path else {}
    if method not in item:
        # No operation: the route table's 404/405 or the transport's 501, which info.description documents.
        if resp.status_code not in (404, 405, 501):
            out.append(f"no operation {method.upper()} {req.path} in the spec, and the status is "
                       f"{resp.status_code}, not a 404 or 405 of the route table or the transport's 501")
        if resp.status_code == 405 and allow is not None and resp.headers.get("Allow") != allow:
            out.append(f"Allow is {resp.headers.get('Allow')!r}, want {allow!r}")
        if method != "head":
            try:
                jsonschema.validate(json.loads(resp.data), ERROR_SCHEMA)
            except (ValueError, jsonschema.ValidationError) as e:
                out.append(f"the body is not the spec's Error: {str(e).splitlines()[0]}")
        return out
    op = item[method]
    responses = op.get("responses", {})
    status = str(resp.status_code)
    described = responses.get(status) or responses.get(status[0] + "XX")
    if described is None:
        if method == "head" and "default" in responses:
            described = responses["default"]
        else:
            out.append(f"status {status} is not listed for {op['operationId']} (only `default` would cover it)")
    if described is not None:
        while "$ref" in described:
            described = spec["components"]["responses"][described["$ref"].rsplit("/", 1)[1]]
        if resp.data and "content" not in described:
            out.append(f"a {len(resp.data)}-byte body ({resp.content_type}) that response {status} of "
                       f"{op['operationId']} does not describe: {resp.data[:120]!r}")
    if method == "head" and resp.data:
        out.append("a HEAD answer with a body")
    try:
        api.validate_response(req, resp)
    except Exception as e:  # noqa: BLE001 - every openapi-core error is a finding
        out.append(f"openapi-core: {type(e).__name__}: {e}")
        cause = getattr(e, "__cause__", None)
        if cause is not None and str(cause) not in str(e):
            out.append(f"  because: {cause}")
    if want_request_valid:
        try:
            api.validate_request(req)
        except Exception as e:  # noqa: BLE001
            out.append(f"the request is not valid by the spec: {type(e).__name__}: {e}"
                       + (f" ({e.__cause__})" if getattr(e, "__cause__", None) else ""))
    return out


def call(what, method, url, want, tok=None, body=None, ctype=None, headers=None, basic=False, chunked=False,
         allow=None, expect=None):
    """Sends the request; checks the status is `want` and the answer matches the spec. `expect(resp)` is
    an extra condition. Returns the Resp."""
    req, resp = send(method, url, tok, body, ctype, headers, basic, chunked)
    probs = []
    if resp.status_code != want:
        probs.append(f"status {resp.status_code}, want {want}: {resp.data[:300]!r}")
    probs += problems_of(req, resp, want < 300, allow)
    if expect is not None and not probs and not expect(resp):
        probs.append(f"unexpected answer: {dict(resp.headers)} {resp.data[:300]!r}")
    op = (spec["paths"].get(spec_path_of(req.path) or "", {}).get(req.method, {}).get("operationId")
          or "(no operation)")
    check(f"{method} {url[:90]} -> {want} [{op}] {what}", not probs, "\n     ".join(probs))
    return resp


def sha(b):
    return hashlib.sha256(b).hexdigest()


def field(resp, *path, default=None):
    j = resp.json()
    for p in path:
        if not isinstance(j, dict) or p not in j:
            return default
        j = j[p]
    return j


JSON = "application/json"
OCTET = "application/octet-stream"

# --- health, metrics, whoami, status ---------------------------------------------------
call("liveness", "GET", "/healthz", 200)
call("liveness, status only", "HEAD", "/healthz", 200)
call("metrics for an admin", "GET", "/metrics", 200, ADMIN, expect=lambda r: b"mlk_" in r.data)
call("metrics, status only", "HEAD", "/metrics", 200, ADMIN)
call("metrics without admin", "GET", "/metrics", 403, RW)
call("metrics without a token", "GET", "/metrics", 401)
call("metrics without a token, status only", "HEAD", "/metrics", 401)
call("who the token is", "GET", "/v1/whoami", 200, RW, expect=lambda r: field(r, "team") == "oa")
call("who the admin is, in another namespace", "GET", "/v1/whoami?namespace=oa", 200, ADMIN,
     expect=lambda r: field(r, "namespace") == "oa")
call("token check, status only", "HEAD", "/v1/whoami", 200, RO)
call("no token", "GET", "/v1/whoami", 401)
call("an unknown token", "GET", "/v1/whoami", 401, "mlk_notatoken0000000000000000")
call("a malformed Authorization header", "GET", "/v1/whoami", 401, headers={"Authorization": "Token x"})
call("a bad namespace name", "GET", "/v1/whoami?namespace=no%20such!", 400, RW)
call("another team's namespace", "GET", "/v1/whoami?namespace=other", 403, RW)
call("the namespace's usage", "GET", "/v1/status", 200, RO, expect=lambda r: "store" not in r.json())
call("every namespace and the store, for an admin", "GET", "/v1/status", 200, ADMIN,
     expect=lambda r: "store" in r.json())
call("one namespace, for an admin", "GET", "/v1/status?namespace=oa", 200, ADMIN)
call("status, status only", "HEAD", "/v1/status", 200, RO)
call("status without a token", "GET", "/v1/status", 401)
call("status of another team's namespace", "GET", "/v1/status?namespace=other", 403, RO)

# --- blobs ---------------------------------------------------------------------------
blob = b"openapi response test blob \x00\x01\xfe\xff " * 4
D = sha(blob)
call("a new blob", "PUT", f"/v1/blobs/{D}", 201, RW, blob, OCTET, expect=lambda r: field(r, "new") is True)
call("the same blob again", "PUT", f"/v1/blobs/{D}", 200, RW, blob, OCTET, expect=lambda r: field(r, "new") is False)
call("the blob", "GET", f"/v1/blobs/{D}", 200, RO, expect=lambda r: r.data == blob)
call("the blob by Basic auth", "GET", f"/v1/blobs/{D}", 200, RO, basic=True)
call("the blob, status only", "HEAD", f"/v1/blobs/{D}", 200, RO)
call("one range", "GET", f"/v1/blobs/{D}", 206, RO, headers={"Range": "bytes=4-9"},
     expect=lambda r: r.data == blob[4:10] and r.headers.get("Content-Range") == f"bytes 4-9/{len(blob)}")
call("a suffix range", "GET", f"/v1/blobs/{D}", 206, RO, headers={"Range": "bytes=-3"},
     expect=lambda r: r.data == blob[-3:])
call("a range past the end", "GET", f"/v1/blobs/{D}", 416, RO, headers={"Range": f"bytes={len(blob) + 10}-"},
     expect=lambda r: r.headers.get("Content-Range") == f"bytes */{len(blob)}")
call("several ranges", "GET", f"/v1/blobs/{D}", 416, RO, headers={"Range": "bytes=0-1,4-5"})
MISSING = sha(b"never stored")
call("a missing blob", "GET", f"/v1/blobs/{MISSING}", 404, RO)
call("a missing blob, status only", "HEAD", f"/v1/blobs/{MISSING}", 404, RO)
call("a digest that is not one", "GET", "/v1/blobs/xyz", 400, RO)
call("a body that does not hash to the digest", "PUT", f"/v1/blobs/{MISSING}", 422, RW, b"other bytes", OCTET)
call("a blob without the write-blobs scope", "PUT", f"/v1/blobs/{D}", 403, RO, blob, OCTET)
call("a blob without a token", "GET", f"/v1/blobs/{D}", 401)
call("a blob without a token, status only", "HEAD", f"/v1/blobs/{D}", 401)
big = b"x" * (70 * 1024)
call("a body over --max-body", "PUT", f"/v1/blobs/{sha(big)}", 413, RW, big, OCTET)
call("a chunked body (no Content-Length)", "PUT", f"/v1/blobs/{sha(b'chunk')}", 411, RW, b"chunk", OCTET, chunked=True)
call("a blob of another team's namespace", "GET", f"/v1/blobs/{D}?namespace=other", 403, RW)
call("a method the route does not allow", "DELETE", f"/v1/blobs/{D}", 405, RW, allow="GET, HEAD, PUT")

# --- entries -------------------------------------------------------------------------
blob2 = b"the second file of the entry\n"
D2 = sha(blob2)
call("the entry's second blob", "PUT", f"/v1/blobs/{D2}", 201, RW, blob2, OCTET)
KEY = sha(b"openapi entry key")
manifest = {
    "files": {"kernel.o": {"digest": D, "size": len(blob)}, "notes/readme.txt": {"digest": D2, "size": len(blob2)}},
    "meta": {"fn": "sgemm", "target": "host", "program_hash": "ab" * 8},
    "provenance": {"producer": "openapi-test", "host": "localhost", "time": 1700000000,
                   "toolchain": {"mlk": "test"}, "measured": False},
}
call("an entry", "PUT", f"/v1/entries/{KEY}", 201, RW, manifest,
     expect=lambda r: field(r, "size") == len(blob) + len(blob2))
call("the entry", "GET", f"/v1/entries/{KEY}", 200, RO, expect=lambda r: field(r, "manifest", "meta", "fn") == "sgemm")
call("the entry, status only", "HEAD", f"/v1/entries/{KEY}", 200, RO)
call("the query by fn and target", "GET", "/v1/entries?fn=sgemm&target=host&limit=5", 200, RO,
     expect=lambda r: [e["key"] for e in field(r, "entries", default=[])] == [KEY])
call("the query by producer, none", "GET", "/v1/entries?producer=nobody", 200, RO,
     expect=lambda r: field(r, "entries") == [])
call("the query, status only", "HEAD", "/v1/entries", 200, RO)
call("the query with an unknown parameter", "GET", "/v1/entries?colour=red", 400, RO)
call("the query with both target and profile", "GET", "/v1/entries?target=a&profile=b", 400, RO)
call("the query with limit 0", "GET", "/v1/entries?limit=0", 400, RO)
call("the query without a token", "GET", "/v1/entries", 401)
unknown = dict(manifest, files={"a": {"digest": MISSING, "size": 3}})
call("an entry whose blob is not uploaded", "PUT", f"/v1/entries/{KEY}x", 409, RW, unknown,
     expect=lambda r: field(r, "missing") == [MISSING])
call("a malformed manifest", "PUT", f"/v1/entries/{KEY}x", 400, RW, {"files": {}})
call("a manifest that is not JSON", "PUT", f"/v1/entries/{KEY}x", 400, RW, b"{", JSON)
call("an entry without the write-entries scope", "PUT", f"/v1/entries/{KEY}", 403, RO, manifest)
call("an entry key starting with a dot", "GET", "/v1/entries/.hidden", 400, RO)
call("a missing entry", "GET", f"/v1/entries/{MISSING}", 404, RO)
call("a missing entry, status only", "HEAD", f"/v1/entries/{MISSING}", 404, RO)
call("another team's entry", "GET", f"/v1/entries/{KEY}?namespace=other", 403, RO)
call("the entry in the other team's own (empty) namespace", "GET", f"/v1/entries/{KEY}", 404, OTHER)
call("a method the route does not allow", "POST", f"/v1/entries/{KEY}", 405, RW, {}, allow="GET, HEAD, PUT, DELETE")
call("delete the entry", "DELETE", f"/v1/entries/{KEY}", 200, RW, expect=lambda r: field(r, "deleted") == KEY)
call("delete it again", "DELETE", f"/v1/entries/{KEY}", 404, RW)
call("delete without the scope", "DELETE", f"/v1/entries/{KEY}", 403, RO)

# --- the route table -----------------------------------------------------------------
call("an unknown path", "GET", "/v2/nothing", 404, RW)
call("a method /v1/whoami does not allow", "POST", "/v1/whoami", 405, RW, {}, allow="GET, HEAD")
call("OPTIONS on /healthz", "OPTIONS", "/healthz", 405, allow="GET, HEAD")
# A method the transport does not know: 501 Not Implemented (RFC 9110), not a 405.
call("a method the transport does not know", "PROPFIND", "/healthz", 501)

# --- the benchmark history -----------------------------------------------------------
report = {
    "format": "mlk-bench", "format_version": 1, "created": "2024-05-01T12:00:00Z",
    "machine": {"cpu": "test"}, "versions": {"mlk": "test"},
    "kernels": [{"id": "sgemm-64", "target": "host", "cache_key": KEY, "variant": "tuned",
                 "mlk": {"median_ms": 1.25, "samples_ms": [1.2, 1.3], "round_sizes": [4, 4]}},
                {"id": "relu-8", "target": "host", "cache_key": D2, "variant": "default", "mlk": {}}],
}
call("a report as baseline set main", "POST", "/v1/bench/results?baseline_set=main", 201, RW, report,
     expect=lambda r: field(r, "stored") == 2)
call("a report without a set", "POST", "/v1/bench/results", 201, RW, dict(report, kernels=report["kernels"][:1]))
call("a report of another format", "POST", "/v1/bench/results", 400, RW, {"format": "x", "kernels": []})
call("a report with a bad baseline set name", "POST", "/v1/bench/results?baseline_set=a%24b", 400, RW, report)
call("a report without the write-entries scope", "POST", "/v1/bench/results", 403, RO, report)
call("the history", "GET", "/v1/bench/history", 200, RO, expect=lambda r: len(field(r, "results", default=[])) == 3)
call("one kernel's history", "GET", "/v1/bench/history?kernel=sgemm-64&target=host&limit=1", 200, RO,
     expect=lambda r: field(r, "results", default=[{}])[0].get("samples_ms") == [1.2, 1.3])
call("the history, status only", "HEAD", "/v1/bench/history", 200, RO)
call("the history with limit 0", "GET", "/v1/bench/history?limit=0", 400, RO)
call("the history without a token", "GET", "/v1/bench/history", 401)
call("baseline set main", "GET", "/v1/bench/baselines/main", 200, RO,
     expect=lambda r: len(field(r, "kernels", default=[])) == 2)
call("baseline set main, status only", "HEAD", "/v1/bench/baselines/main", 200, RO)
call("a missing baseline set", "GET", "/v1/bench/baselines/nope", 404, RO)
call("a missing baseline set, status only", "HEAD", "/v1/bench/baselines/nope", 404, RO)
call("a GET of the results", "GET", "/v1/bench/results", 405, RO, allow="POST")
call("an unknown bench route", "GET", "/v1/bench/nothing", 404, RO)

# --- measurement jobs ----------------------------------------------------------------
setup = b"mlk-measure-setup 1\nopenapi test setup, never decoded\n"
S = sha(setup)
call("a setup", "POST", "/v1/jobs/setups", 201, RW, setup, OCTET, expect=lambda r: field(r, "setup") == S)
call("the same setup again", "POST", "/v1/jobs/setups", 200, RW, setup, OCTET)
call("a body that is not a setup", "POST", "/v1/jobs/setups", 400, RW, b"garbage", OCTET)
call("a setup without the write-entries scope", "POST", "/v1/jobs/setups", 403, RO, setup, OCTET)
r = call("a job", "POST", "/v1/jobs/submit", 201, RW, {"device_key": "oa-cpu", "setup": S, "payload": {"tile": 8}})
JOB = field(r, "id", default=0)
call("a job whose setup is not in the namespace", "POST", "/v1/jobs/submit", 400, RW,
     {"device_key": "oa-cpu", "setup": MISSING, "payload": {}})
call("a job body that is not JSON", "POST", "/v1/jobs/submit", 400, RW, b"not json", JSON)
call("a job without the write-entries scope", "POST", "/v1/jobs/submit", 403, RO,
     {"device_key": "oa-cpu", "setup": S, "payload": {}})
call("the queued job", "GET", f"/v1/jobs/{JOB}", 200, RO, expect=lambda r: field(r, "state") == "queued")
call("the job, status only", "HEAD", f"/v1/jobs/{JOB}", 200, RO)
call("the job's setup", "GET", f"/v1/jobs/{JOB}/setup", 200, RO, expect=lambda r: r.data == setup)
call("a range of the job's setup", "GET", f"/v1/jobs/{JOB}/setup", 206, RO, headers={"Range": "bytes=0-16"},
     expect=lambda r: r.data == setup[:17])
call("a range past the job's setup", "GET", f"/v1/jobs/{JOB}/setup", 416, RO, headers={"Range": "bytes=9999-"})
call("the job's setup, status only", "HEAD", f"/v1/jobs/{JOB}/setup", 200, RO)
call("a missing job", "GET", "/v1/jobs/999999", 404, RO)
call("a missing job, status only", "HEAD", "/v1/jobs/999999", 404, RO)
call("a missing job's setup", "GET", "/v1/jobs/999999/setup", 404, RO)
call("a job id that is not a number", "GET", "/v1/jobs/abc", 404, RO)
call("a job of another team's namespace", "GET", f"/v1/jobs/{JOB}?namespace=other", 403, RO)
r = call("a worker registers", "POST", "/v1/jobs/workers", 201, WORKER,
         {"device_key": "oa-cpu", "name": "oa-worker-1", "fingerprint": "fp-test"},
         expect=lambda r: bool(field(r, "worker", "secret")))
W, SECRET = field(r, "worker", "id", default=0), field(r, "worker", "secret", default="")
call("a worker without the worker scope", "POST", "/v1/jobs/workers", 403, RW,
     {"device_key": "oa-cpu", "name": "w", "fingerprint": "fp"})
call("a worker with a bad name", "POST", "/v1/jobs/workers", 400, WORKER,
     {"device_key": "oa-cpu", "name": "a b", "fingerprint": "fp"})
call("the workers", "GET", "/v1/jobs/workers?device_key=oa-cpu", 200, RO,
     expect=lambda r: [w["name"] for w in field(r, "workers", default=[])] == ["oa-worker-1"])
call("the workers, status only", "HEAD", "/v1/jobs/workers", 200, RO)
call("the workers with seen_s 0", "GET", "/v1/jobs/workers?seen_s=0", 400, RO)
call("the worker leases the job", "POST", "/v1/jobs/lease", 200, WORKER, {"worker": W, "secret": SECRET, "lease_s": 60},
     expect=lambda r: field(r, "job", "id") == JOB and field(r, "job", "state") == "running")
call("nothing more to lease", "POST", "/v1/jobs/lease", 200, WORKER, {"worker": W, "secret": SECRET},
     expect=lambda r: field(r, "job", default=0) is None)
call("a lease with the wrong secret", "POST", "/v1/jobs/lease", 403, WORKER, {"worker": W, "secret": "wrong"})
call("a lease for an unknown worker", "POST", "/v1/jobs/lease", 404, WORKER, {"worker": 999999, "secret": "x"})
call("a lease without the secret", "POST", "/v1/jobs/lease", 400, WORKER, {"worker": W})
call("a lease by a token without the worker scope", "POST", "/v1/jobs/lease", 403, RW, {"worker": W, "secret": SECRET})
call("a heartbeat", "POST", f"/v1/jobs/{JOB}/heartbeat", 200, WORKER, {"worker": W, "secret": SECRET, "lease_s": 60})
call("a heartbeat with lease_s 0", "POST", f"/v1/jobs/{JOB}/heartbeat", 400, WORKER,
     {"worker": W, "secret": SECRET, "lease_s": 0})
call("the running job", "GET", f"/v1/jobs/{JOB}", 200, RO,
     expect=lambda r: field(r, "state") == "running" and field(r, "worker_name") == "oa-worker-1")
call("the result", "POST", f"/v1/jobs/{JOB}/result", 200, WORKER,
     {"worker": W, "secret": SECRET, "ok": True, "result": {"verdict": "ok", "median_ms": 0.5}})
call("the result again (the lease is gone)", "POST", f"/v1/jobs/{JOB}/result", 409, WORKER,
     {"worker": W, "secret": SECRET, "ok": True, "result": {}})
call("a heartbeat of a finished job", "POST", f"/v1/jobs/{JOB}/heartbeat", 409, WORKER, {"worker": W, "secret": SECRET})
call("a result without `result`", "POST", f"/v1/jobs/{JOB}/result", 400, WORKER, {"worker": W, "secret": SECRET, "ok": True})
call("a result for a missing job", "POST", "/v1/jobs/999999/result", 404, WORKER,
     {"worker": W, "secret": SECRET, "ok": True, "result": {}})
call("the finished job", "GET", f"/v1/jobs/{JOB}", 200, RO,
     expect=lambda r: field(r, "state") == "done" and field(r, "result", "verdict") == "ok")
r = call("a second job", "POST", "/v1/jobs/submit", 201, RW,
         {"device_key": "oa-none", "setup": S, "payload": {}, "fingerprint": "fp-other"})
JOB2 = field(r, "id", default=0)
call("cancel it", "POST", f"/v1/jobs/{JOB2}/cancel", 200, RW, {"why": "not needed"},
     expect=lambda r: field(r, "cancelled") is True)
call("cancel it again", "POST", f"/v1/jobs/{JOB2}/cancel", 200, RW, {}, expect=lambda r: field(r, "cancelled") is False)
call("the cancelled job", "GET", f"/v1/jobs/{JOB2}", 200, RO,
     expect=lambda r: field(r, "state") == "failed" and field(r, "result", "error") == "not needed")
call("cancel without the write-entries scope", "POST", f"/v1/jobs/{JOB2}/cancel", 403, RO, {})
call("cancel a missing job", "POST", "/v1/jobs/999999/cancel", 404, RW, {})
call("a GET of the lease route", "GET", "/v1/jobs/lease", 405, WORKER, allow="POST")
call("a POST to a job", "POST", f"/v1/jobs/{JOB}", 405, RW, {}, allow="GET, HEAD")
call("an unknown job route", "POST", f"/v1/jobs/{JOB}/nothing", 404, RW, {})

# --- ccache --------------------------------------------------------------------------
obj = b"ccache object bytes " * 3
FLAT = "0123456789abcdefghijklmnopqrstuv"
call("a flat object", "PUT", f"/ccache/{FLAT}", 201, RW, obj, OCTET,
     expect=lambda r: field(r, "key") == "ccache/" + FLAT)
call("the flat object", "GET", f"/ccache/{FLAT}", 200, RO, expect=lambda r: r.data == obj)
call("the flat object by Basic auth (as ccache sends it)", "GET", f"/ccache/{FLAT}", 200, RO, basic=True)
call("a range of the flat object", "GET", f"/ccache/{FLAT}", 206, RO, headers={"Range": "bytes=0-5"})
call("a range past the flat object", "GET", f"/ccache/{FLAT}", 416, RO, headers={"Range": "bytes=9999-"})
call("the flat object, status only", "HEAD", f"/ccache/{FLAT}", 200, RO)
call("the same key in the subdirs layout", "GET", f"/ccache/{FLAT[:2]}/{FLAT[2:]}", 200, RO,
     expect=lambda r: r.data == obj)
call("delete the flat object", "DELETE", f"/ccache/{FLAT}", 200, RW, expect=lambda r: field(r, "deleted") == "ccache/" + FLAT)
call("the deleted object", "GET", f"/ccache/{FLAT}", 404, RO)
call("the deleted object, status only", "HEAD", f"/ccache/{FLAT}", 404, RO)
call("delete it again", "DELETE", f"/ccache/{FLAT}", 404, RW)
SUB = "zz/0123456789abcdefghijklmn"
call("a subdirs object", "PUT", f"/ccache/{SUB}", 201, RW, obj, OCTET)
call("the subdirs object", "GET", f"/ccache/{SUB}", 200, RO)
call("the subdirs object, status only", "HEAD", f"/ccache/{SUB}", 200, RO)
call("a range of the subdirs object", "GET", f"/ccache/{SUB}", 206, RO, headers={"Range": "bytes=2-"})
call("delete the subdirs object", "DELETE", f"/ccache/{SUB}", 200, RW)
BAZEL = "ac/" + sha(b"bazel action")
call("a bazel action result", "PUT", f"/ccache/{BAZEL}", 201, RW, obj, OCTET,
     expect=lambda r: field(r, "key") == "ccache/" + BAZEL)
call("the bazel action result", "GET", f"/ccache/{BAZEL}", 200, RO)
call("an object key that is too short", "GET", "/ccache/abc", 400, RO)
call("an object path with upper case", "PUT", "/ccache/AB/cdefghijklmnopqrstuvwx", 400, RW, obj, OCTET)
call("an object without the write scopes", "PUT", f"/ccache/{FLAT}", 403, RO, obj, OCTET)
call("an object without a token", "GET", f"/ccache/{SUB}", 401)
call("a missing subdirs object", "GET", "/ccache/zz/nothingnothingnothing", 404, RO)
call("delete without the write-entries scope", "DELETE", f"/ccache/{BAZEL}", 403, RO)
call("a POST to ccache", "POST", f"/ccache/{FLAT}", 405, RW, obj, OCTET, allow="GET, HEAD, PUT, DELETE")

# --- the end -------------------------------------------------------------------------
server.send_signal(signal.SIGTERM)
try:
    rc = server.wait(timeout=30)
except subprocess.TimeoutExpired:
    server.kill()
    rc = server.wait()
check("mlk serve exits 0 on SIGTERM", rc == 0, f"exit {rc}")

failed = [r for r in results if not r[1]]
for name, ok, note in results:
    print("%s %s%s" % ("ok  " if ok else "FAIL", name, "" if ok else "\n     %s" % (note,)))
print("openapi responses: %d checks, %d failed" % (len(results), len(failed)))
sys.exit(1 if failed else 0)
