"""Debian's real ccache against `mlk serve`: a small C project is compiled from
two empty local caches with remote_storage pointing at the server; the second
build is all remote hits and produces the same objects. Also: another team's
token sees none of it, an unknown token gets only misses (and the server counts
the 401s), layout=flat finds what layout=subdirs stored, layout=bazel works.

usage: serve_ccache.py MLK_BINARY WORK_DIR
"""
import os
import shutil
import subprocess
import sys

from serve_common import Results, Server, request, token

MLK, WORK = sys.argv[1], sys.argv[2]
CCACHE = shutil.which("ccache")
CC = shutil.which("gcc") or shutil.which("cc")
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
R = Results()
if not CCACHE or not CC:
    print("ccache or a C compiler is missing (scripts/install.sh installs them)")
    sys.exit(1)

src = os.path.join(WORK, "project")
os.makedirs(src)
with open(os.path.join(src, "util.h"), "w") as f:
    f.write("int add(int a, int b);\nint mul(int a, int b);\n")
sources = {
    "add.c": '#include "util.h"\nint add(int a, int b) { return a + b; }\n',
    "mul.c": '#include "util.h"\nint mul(int a, int b) { int r = 0; for (int i = 0; i < b; ++i) r = add(r, a); return r; }\n',
    "main.c": '#include <stdio.h>\n#include "util.h"\nint main(void) { printf("%d\\n", mul(6, 7)); return 0; }\n',
    "table.c": "const int table[64] = {" + ",".join(str(i * i) for i in range(64)) + "};\n",
}
for name, text in sources.items():
    with open(os.path.join(src, name), "w") as f:
        f.write(text)

store = os.path.join(WORK, "server.db")
build_tok = token(MLK, store, "build", "read,write-blobs,write-entries")
other_tok = token(MLK, store, "other", "read,write-blobs,write-entries")
admin_tok = token(MLK, store, "ops", "admin")
server = Server(MLK, store)
empty_conf = os.path.join(WORK, "empty.conf")
open(empty_conf, "w").close()


def build(name, remote):
    """Compiles every source with a fresh local cache; returns (stats, objects)."""
    cache_dir = os.path.join(WORK, "ccache-" + name)
    out_dir = os.path.join(WORK, "out-" + name)
    os.makedirs(out_dir)
    env = dict(os.environ, CCACHE_DIR=cache_dir, CCACHE_CONFIGPATH=empty_conf, CCACHE_REMOTE_STORAGE=remote,
               CCACHE_LOGFILE=os.path.join(WORK, name + ".log"))
    env.pop("CCACHE_DISABLE", None)
    objects = {}
    for s in sorted(sources):
        obj = os.path.join(out_dir, s[:-2] + ".o")
        p = subprocess.run([CCACHE, CC, "-O2", "-c", os.path.join(src, s), "-o", obj], env=env, capture_output=True,
                           text=True, cwd=src)
        if p.returncode != 0:
            raise RuntimeError(p.stderr)
        objects[s] = open(obj, "rb").read()
    stats = subprocess.run([CCACHE, "--print-stats"], env=env, capture_output=True, text=True).stdout
    return {k: int(v) for k, v in (line.split("\t") for line in stats.splitlines() if "\t" in line)}, objects


n = len(sources)
url = f"{server.url}/ccache"
first, objs1 = build("first", f"{url}|bearer-token={build_tok}")
R.check("first build: all misses, uploaded", first["remote_storage_miss"] >= n and first["remote_storage_hit"] == 0
        and first["remote_storage_error"] == 0, str({k: v for k, v in first.items() if k.startswith("remote")}))
second, objs2 = build("second", f"{url}|bearer-token={build_tok}")
R.check("second build from an empty local cache: all remote hits",
        second["remote_storage_hit"] == n and second["remote_storage_miss"] == 0 and second["local_storage_hit"] == 0
        and second["cache_miss"] == 0, str({k: v for k, v in second.items() if k.startswith(("remote", "local", "cache"))}))
R.check("remote hits give the same objects", objs1 == objs2)

other, _ = build("other", f"{url}|bearer-token={other_tok}")
R.check("another team's token sees none of it", other["remote_storage_hit"] == 0 and other["remote_storage_miss"] >= n,
        str(other))
nobody, _ = build("nobody", f"{url}|bearer-token=mlk_not_a_real_token_at_all")
R.check("an unknown token only misses", nobody["remote_storage_hit"] == 0, str(nobody))
flat, _ = build("flat", f"{url}|layout=flat|bearer-token={build_tok}")
R.check("layout=flat finds what layout=subdirs stored", flat["remote_storage_hit"] == n, str(flat))
bazel1, _ = build("bazel1", f"{url}|layout=bazel|bearer-token={build_tok}")
bazel2, _ = build("bazel2", f"{url}|layout=bazel|bearer-token={build_tok}")
R.check("layout=bazel: second build all hits", bazel1["remote_storage_hit"] == 0 and bazel2["remote_storage_hit"] == n,
        str((bazel1["remote_storage_hit"], bazel2["remote_storage_hit"])))

status, body, _ = request(server.port, "GET", "/metrics", admin_tok)
text = body.decode()
R.check("metrics count ccache hits of team build", 'mlk_cache_hits_total{namespace="build",kind="ccache"}' in text, text[:300])
R.check("metrics count the unknown token's 401s", 'mlk_rejects_total{namespace="",reason="unauthenticated"}' in text)
rc, err = server.stop()
R.check("server stops on SIGTERM with exit 0", rc == 0 and "stopped" in err, err[-300:])
v = subprocess.run([MLK, "cache", "verify", "--cache", store], capture_output=True, text=True)
R.check("the store verifies clean", v.returncode == 0, v.stdout[-300:])
sys.exit(R.finish())
