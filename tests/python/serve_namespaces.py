"""The client's read order, `--namespaces LIST` (and the Python module's
`namespaces=`), on the cluster scripts/cluster.sh started: team A tunes a
kernel into its namespace; with A's read grant, team B's `mlk build
--namespaces own,ns-a` pulls it from the other replica (where $MLK_NAMESPACES
alone, set to `own`, misses: the flag overrides it); so does mlk.load(...,
namespaces=...) in PyTorch; after the grant is revoked the same command warns
that the grant was revoked (never a silent miss) and builds the default
schedule; a malformed list is a usage error naming the flag.

usage: serve_namespaces.py MLK_BINARY EXAMPLES_DIR CLUSTER_DIR MODULE_DIR WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

from serve_common import Results, request

MLK, EXAMPLES, CLUSTER, MODULE_DIR, WORK = sys.argv[1:6]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
R = Results()

env = {}
for line in open(os.path.join(CLUSTER, "env")):
    k, v = line.strip().removeprefix("export ").split("=", 1)
    env[k] = v.strip("'")
URL1, URL2 = env["MLK_SERVERS"].split(",")
STORE = env["MLK_CLUSTER_STORE"]
MLP = os.path.join(EXAMPLES, "mlp.tl")
DIMS = "M=4,K=8,N=4"


def mlk(*args, **extra_env):
    e = {k: v for k, v in os.environ.items() if k not in ("MLK_CACHE", "MLK_SERVERS", "MLK_NAMESPACES", "MLK_TOKEN")}
    e.update(extra_env)
    return subprocess.run([MLK, *args], capture_output=True, text=True, env=e)


def new_token(team):
    p = mlk("token", "create", "--store", STORE, "--team", team, "--scopes", "read,write-blobs,write-entries")
    if p.returncode != 0:
        raise RuntimeError(p.stderr)
    return p.stdout.strip()


def mirror(name):
    return os.path.join(WORK, name + ".db")


ta, tb = new_token("ns-a"), new_token("ns-b")

# Team A tunes sgemm through replica 1; the winner is pushed to namespace ns-a.
p = mlk("tune", MLP, "--fn", "sgemm", "--dims", DIMS, "--target", "host", "--trials", "1", "--no-autoschedulers",
        "--cache", URL1, "--json", "-q", MLK_TOKEN=ta, MLK_LOCAL_CACHE=mirror("a"))
key = json.loads(p.stdout.strip().splitlines()[-1])[0]["key"] if p.returncode == 0 else ""
port2 = int(URL2.rsplit(":", 1)[1])
st = request(port2, "GET", f"/v1/entries/{key}?namespace=ns-a", ta)[0] if key else 0
R.check("team A's tune is stored in namespace ns-a, read through the other replica", st == 200, p.stderr[-500:])
g = mlk("token", "grant", "--store", STORE, "--namespace", "ns-a", "--team", "ns-b")
R.check("mlk token grant ns-a to ns-b", g.returncode == 0, g.stderr)


def build_b(name, *flags, **extra_env):
    """Team B's `mlk build` of the same fn and shape through replica 2, from an empty mirror."""
    return mlk("build", MLP, "--fn", "sgemm", "--dims", DIMS, "--target", "host", "-o", os.path.join(WORK, name),
               *flags, MLK_SERVERS=URL2, MLK_TOKEN=tb, MLK_LOCAL_CACHE=mirror(name), **extra_env)


p = build_b("env-own", MLK_NAMESPACES="own")
R.check("with $MLK_NAMESPACES=own, B's build misses (its own namespace lacks the key) and builds the default",
        p.returncode == 0 and "cached:" not in p.stdout and "pulled" not in p.stderr, p.stdout + p.stderr)
p = build_b("flag", "--namespaces", "own,ns-a", MLK_NAMESPACES="own")
R.check("--namespaces own,ns-a overrides $MLK_NAMESPACES: B pulls A's artifact and it is the build",
        p.returncode == 0 and f"pulled {key[:16]} from {URL2} namespace `ns-a`" in p.stderr and
        f"cached: tuned on" in p.stdout and f"(key {key[:16]}" in p.stdout, p.stdout + p.stderr)
p = build_b("flag-over-bad-env", "--namespaces", "own,ns-a", MLK_NAMESPACES="no-own-here")
R.check("the flag replaces even a malformed $MLK_NAMESPACES", p.returncode == 0 and "cached:" in p.stdout,
        p.stdout + p.stderr)
p = build_b("bad-env", MLK_NAMESPACES="no-own-here")
R.check("without the flag a malformed $MLK_NAMESPACES is a usage error naming it", p.returncode == 2 and
        "mlk build: $MLK_NAMESPACES: the read order `no-own-here` must name `own`" in p.stderr, p.stderr)
p = build_b("bad-flag", "--namespaces", "ns-a,own,own")
R.check("a malformed --namespaces is a usage error naming the flag", p.returncode == 2 and
        "mlk build: --namespaces: `own` appears twice in the read order `ns-a,own,own`" in p.stderr, p.stderr)

# The Python module, in PyTorch, from an empty mirror.
script = f"""
import sys; sys.path.insert(0, {MODULE_DIR!r})
import mlk, torch
try:
    mlk.load({MLP!r}, cache={URL2!r}, token={tb!r}, namespaces="ns-a")
except mlk.BoundaryError as e:
    print("BAD", e)
ops = mlk.load({MLP!r}, cache={URL2!r}, token={tb!r}, namespaces="own,ns-a", require="exact")
a, b = torch.randn(4, 8), torch.randn(8, 4)
print("CLOSE", bool(torch.allclose(ops.sgemm(a, b), a @ b, rtol=1e-5, atol=1e-5)))
print("SELECTION", ops.sgemm.kernel(a, b).selection.replace(chr(10), " | "))
"""
py_env = {k: v for k, v in os.environ.items() if k not in ("MLK_CACHE", "MLK_SERVERS", "MLK_NAMESPACES", "MLK_TOKEN")}
py_env["MLK_LOCAL_CACHE"] = mirror("python")
p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=py_env)
R.check("mlk.load(..., namespaces='own,ns-a') pulls A's artifact and runs it correctly",
        p.returncode == 0 and "CLOSE True" in p.stdout and f"namespace `ns-a`" in p.stderr and
        "tuned artifact" in p.stdout, p.stdout + p.stderr[-800:])
R.check("mlk.load with a malformed namespaces= raises BoundaryError naming it",
        "BAD namespaces: the read order `ns-a` must name `own`" in p.stdout, p.stdout)

u = mlk("token", "ungrant", "--store", STORE, "--namespace", "ns-a", "--team", "ns-b")
R.check("mlk token ungrant", u.returncode == 0, u.stderr)
p = build_b("revoked", "--namespaces", "own,ns-a")
R.check("after the grant is revoked, the flag's read is a warning naming the revocation, never a silent miss",
        p.returncode == 0 and "HTTP 403" in p.stderr and "its read grant to team `ns-b` was revoked" in p.stderr and
        "skipping namespace `ns-a`" in p.stderr and "cached:" not in p.stdout, p.stdout + p.stderr)
sys.exit(R.finish())
