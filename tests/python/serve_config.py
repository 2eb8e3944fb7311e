"""`mlk serve --config FILE` and the deployment files of deploy/ (docs/deploy.md):

1. deploy/mlk-serve.toml names every flag of `mlk serve` as a key (set or
   commented out), and the server starts from it with flags overriding it
   (--cache, --listen, --threads), answers /healthz, logs SIGHUP as reloading
   nothing and keeps serving, and stops on SIGTERM with exit 0.
2. Bad files are usage errors (exit 2) that name FILE:LINE:COLUMN and what is
   wrong: an unknown key (with the nearest flag), a wrong type, a switch
   given a string, an array for a flag that is not repeatable, a key naming
   `config`, a value the flag refuses, a TOML syntax error; a missing file
   with the system's reason; --config given twice.
3. A table of a repeatable NAME=VALUE flag works like the flag given per name.
4. deploy/mlk-serve.service passes `systemd-analyze verify` with no warning
   (skipped, and said so, where systemd-analyze is missing).
5. deploy/Containerfile's final stage installs the Debian package of every
   shared library the mlk binary links directly (outside the Python wheels).

usage: serve_config.py MLK_BINARY SOURCE_DIR WORK_DIR
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

MLK, SRC, WORK = sys.argv[1:4]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_common import check, results  # noqa: E402

shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
TOML = os.path.join(SRC, "deploy", "mlk-serve.toml")
UNIT = os.path.join(SRC, "deploy", "mlk-serve.service")
CONTAINER = os.path.join(SRC, "deploy", "Containerfile")


def write(name, text):
    path = os.path.join(WORK, name)
    with open(path, "w") as f:
        f.write(text)
    return path


# 1. Every flag has its key in the documented file.
helptext = subprocess.run([MLK, "serve", "--help"], capture_output=True, text=True).stdout
flags = sorted(set(re.findall(r"^\s+--([a-z][a-z0-9-]*)", helptext, re.M)) - {"config", "help", "routes"})  # routes: an action, refused in a file
documented = open(TOML).read()
missing = [f for f in flags if not re.search(r"^#?\s*(%s)\s*=|^\[%s\]" % (re.escape(f), re.escape(f)), documented, re.M)]
check("deploy/mlk-serve.toml names all %d flags of `mlk serve`" % len(flags), len(flags) > 20 and not missing, missing)


def start(*args):
    p = subprocess.Popen([MLK, "serve", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    return p, line


def healthz(port):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port, timeout=10) as r:
            return r.status
    except Exception as e:  # noqa: BLE001
        return str(e)


store = os.path.join(WORK, "cache.db")
p, line = start("--config", TOML, "--cache", store, "--listen", "127.0.0.1:0", "--threads", "2")
m = re.search(r"listening on http://127\.0\.0\.1:(\d+) \(store (.*), (\d+) worker threads\)", line)
check("the documented file starts a server, flags overriding its listen, cache and threads",
      m and m.group(2) == store and m.group(3) == "2", line + p.stderr.read() if not m else line)
if m:
    port = int(m.group(1))
    check("it answers /healthz", healthz(port) == 200)
    p.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    check("SIGHUP does not stop it", p.poll() is None and healthz(port) == 200)
    p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = "still running"
    err = p.stderr.read()
    check("SIGTERM stops it with exit 0", rc == 0, rc)
    check("SIGHUP is logged as reloading nothing", "SIGHUP: nothing to reload" in err, err[-600:])
    check("the file's access-log-json = true took effect (a JSON line per request)",
          re.search(r'^\{.*"target":"/healthz".*\}$', err, re.M) is not None, err[-600:])
else:
    p.kill()


# 2. Bad files.
def refused(name, text, want, *extra):
    path = write(name + ".toml", text) if text is not None else os.path.join(WORK, "missing.toml")
    # Nothing on the command line that would replace the file's bad key.
    r = subprocess.run([MLK, "serve", "--config", path, *extra],
                       capture_output=True, text=True, timeout=60)
    want = want.replace("FILE", path)
    check("refused: %s" % name, r.returncode == 2 and want in r.stderr, "rc %s: %s\nwant: %s" % (r.returncode, r.stderr, want))


refused("unknown key", 'threads = 2\nlistne = "0.0.0.0:1"\n',
        "FILE:2:1: unknown key `listne` for `mlk serve` (did you mean `listen`?)")
refused("wrong type", "max-body = 1.5\n", "FILE:1:12: max-body takes SIZE, a string or an integer, not a floating-point number")
refused("switch given a string", 'access-log = "yes"\n', "FILE:1:14: access-log is a switch: give true or false, not a string")
refused("array for a single flag", 'threads = [1, 2]\n', "FILE:1:11: threads takes one N, not an array")
refused("nested config", 'config = "other.toml"\n', "FILE:1:1: a config file cannot name another one")
refused("a value the flag refuses", '\n\nthreads = 0\n', "FILE:3:11: --threads: `0` is not a number from 1 to 1024")
refused("a bad table value", '[quota]\nvision = "lots"\n', "FILE:2:10: --quota: `lots` is not a size")
refused("TOML syntax", 'listen = "127.0.0.1:0\n', "FILE:1:")
refused("missing file", None, "--config: cannot read FILE: No such file or directory")
refused("given twice", "", "--config is given twice", "--config", "x.toml")
refused("an action as a key", "routes = true\n", "FILE:1:1: `routes` is an action of the command line, not a setting")

# 3. A table of a repeatable flag: [quota] makes the team's limit; a --quota
# on the command line replaces the whole table (vision's limit is gone); a
# --cache replaces the file's `store`.
qpath = write("quota.toml", '[quota]\nvision = "1K"\n')
tok = subprocess.run([MLK, "token", "create", "--cache", store, "--team", "vision", "--scopes",
                      "read,write-blobs,write-entries"], capture_output=True, text=True).stdout.split()[0]


def put_4k(*extra, seed=b"x"):
    p, line = start("--config", qpath, "--cache", store, "--listen", "127.0.0.1:0", "--threads", "2", *extra)
    m = re.search(r":(\d+) \(store", line)
    status = line + p.stderr.read() if not m else None
    if m:
        body = seed * 4096
        req = urllib.request.Request("http://127.0.0.1:%s/v1/blobs/%s" % (m.group(1), __import__("hashlib").sha256(body).hexdigest()),
                                     data=body, method="PUT", headers={"Authorization": "Bearer " + tok})
        try:
            status = urllib.request.urlopen(req, timeout=30).status
        except urllib.error.HTTPError as e:
            status = e.code
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=60)
    return status


got = put_4k()
check("[quota] vision = \"1K\" limits team vision (a 4 KiB blob gets 507)", got == 507, got)
got = put_4k("--quota", "other=1K", seed=b"y")
check("--quota on the command line replaces the file's [quota] table (vision unlimited: 201)", got == 201, got)
p, line = start("--config", write("store_only.toml", 'store = "postgresql://nobody@127.0.0.1:1/none"\n'),
                "--cache", store, "--listen", "127.0.0.1:0", "--threads", "2")
check("--cache on the command line replaces the file's `store` (the SQLite store serves)",
      "(store %s," % store in line, line + (p.stderr.read() if p.poll() is not None else ""))
p.send_signal(signal.SIGTERM)
p.wait(timeout=60)

# 4. The unit file, with ExecStart pointing at this build's binary.
if shutil.which("systemd-analyze"):
    unit = write("mlk-serve.service", open(UNIT).read().replace("/usr/local/bin/mlk", os.path.abspath(MLK)))
    r = subprocess.run(["systemd-analyze", "verify", unit], capture_output=True, text=True, timeout=120)
    check("systemd-analyze verify passes deploy/mlk-serve.service with no warning",
          r.returncode == 0 and r.stdout.strip() == "" and r.stderr.strip() == "", r.stdout + r.stderr)
    bad = write("bad.service", open(unit).read().replace("ProtectSystem=strict", "ProtectSystem=strict\nProtectSystm=yes"))
    r = subprocess.run(["systemd-analyze", "verify", bad], capture_output=True, text=True, timeout=120)
    check("(and this check sees a misspelt key)", "ProtectSystm" in r.stderr, r.stderr)
else:
    print("skipped: systemd-analyze is not installed, so the unit file is not verified")

# 5. The container's final stage has the package of each library mlk links directly.
text = open(CONTAINER).read()
final = text[text.rindex("\nFROM "):]
packages = set(re.findall(r"\b(lib[a-z0-9.+-]+|openmpi-bin|ca-certificates)\b", final.split("&& rm -rf")[0]))
base = {"libc6", "libgcc-s1", "libstdc++6", "zlib1g"}  # in debian:12-slim
needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", subprocess.run(
    ["readelf", "-d", MLK], capture_output=True, text=True).stdout)
paths = dict(re.findall(r"^\s*(\S+) => (\S+)", subprocess.run(["ldd", MLK], capture_output=True, text=True).stdout, re.M))
uncovered = []
for lib in needed:
    path = paths.get(lib, "")
    if "/site-packages/" in path or not path:
        continue  # Halide and Arrow: copied from the wheels
    owner = subprocess.run(["dpkg", "-S", os.path.realpath(path)], capture_output=True, text=True).stdout
    if not owner:
        owner = subprocess.run(["dpkg", "-S", path], capture_output=True, text=True).stdout
    pkg = owner.split(":")[0].strip()
    if pkg not in packages and pkg not in base:
        uncovered.append("%s (%s)" % (lib, pkg or "no package"))
check("deploy/Containerfile installs the package of every library mlk links (%d checked)" % len(needed),
      len(needed) > 5 and not uncovered, uncovered)

failed = [r for r in results if not r[1]]
for name, ok, note in results:
    print("%s %s%s" % ("ok  " if ok else "FAIL", name, "" if ok else "\n     %s" % (note,)))
print("%d checks, %d failed" % (len(results), len(failed)))
sys.exit(1 if failed else 0)
