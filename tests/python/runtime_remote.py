"""The runtime pulling pretuned kernels from `mlk serve`: a kernel tuned into
one store is pushed to a server; the C++ example (C ABI) and a PyTorch script
(the mlk module), each with an empty local mirror, pull it and run it
correctly; a token of another team gets nothing. Runs under the venv (the
installed mlk package, PyTorch).

usage: runtime_remote.py MLK_BINARY PULL_AND_RUN EXAMPLES_DIR MODULE_DIR WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

MLK, PULL, EXAMPLES, MODULE_DIR, WORK = sys.argv[1:6]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_common import Server, token  # noqa: E402

shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
results = []


def check(name, cond, note=""):
    results.append((name, bool(cond), note))


norms = os.path.join(EXAMPLES, "norms.tl")
tuned_store = os.path.join(WORK, "tuned.db")
p = subprocess.run([MLK, "tune", norms, "--fn", "rmsnorm", "--dims", "B=1,S=16,D=64", "--target", "host",
                    "--trials", "1", "--cache", tuned_store, "--json", "-q"], capture_output=True, text=True)
check("tune", p.returncode == 0, p.stderr[-300:])
key = json.loads(p.stdout.strip().splitlines()[-1])[0]["key"]

server = Server(MLK, os.path.join(WORK, "server.db"))
try:
    tok = token(MLK, server.store, "ml", "read,write-blobs,write-entries")
    other = token(MLK, server.store, "vision", "read,write-blobs,write-entries")
    env = dict(os.environ, MLK_TOKEN=tok)
    p = subprocess.run([MLK, "cache", "push", key, "--remote", server.url, "--cache", tuned_store], env=env,
                       capture_output=True, text=True)
    check("push", p.returncode == 0, p.stderr[-300:])

    # The C++ example through the C ABI, from an empty mirror.
    env_cpp = dict(env, MLK_LOCAL_CACHE=os.path.join(WORK, "mirror_cpp.db"))
    p = subprocess.run([PULL, server.url, norms, "host", "1", "16", "64"], env=env_cpp, capture_output=True, text=True)
    check("C++ example pulls and runs", p.returncode == 0 and "pulled from the server" in p.stdout
          and "max relative error" in p.stdout, p.stdout + p.stderr)
    # The same program at another shape uses the pulled artifact (tuned at 1x16x64).
    p = subprocess.run([PULL, server.url, norms, "host", "2", "8", "64"], env=env_cpp, capture_output=True, text=True)
    check("C++ example at another shape", p.returncode == 0 and "tuned at B=1,D=64,S=16" in p.stdout, p.stdout + p.stderr)

    # Issue 49, finding 11: require=verified:LEVELS without keys reads only
    # reports a tune on this machine wrote. The pulled entry's report (it
    # passed types when tuned) is its writer's word: passed over, saying why.
    p = subprocess.run([PULL, server.url, norms, "host;require=verified:types", "1", "16", "64"], env=env_cpp,
                       capture_output=True, text=True)
    check("a pulled entry's own report does not satisfy require=verified without keys", p.returncode == 1
          and "was not tuned on this machine" in p.stderr and "signed:KEYS" in p.stderr, p.stdout + p.stderr)
    env_here = dict(env, MLK_LOCAL_CACHE=tuned_store)
    p = subprocess.run([PULL, server.url, norms, "host;require=verified:types", "1", "16", "64"], env=env_here,
                       capture_output=True, text=True)
    check("the entry a tune here stored satisfies require=verified:types", p.returncode == 0
          and "max relative error" in p.stdout, p.stdout + p.stderr)

    # Issue 49, finding 11, the second review: the mirror is shared by every
    # run of the user. An entry that another team's run pulled from its own
    # namespace (signed for it, by a key both trust) is not one this team's
    # runtime takes from the same mirror: a signature counts only for a
    # namespace this cache reads, of its server.
    third = token(MLK, server.store, "audio", "read,write-blobs,write-entries")
    subprocess.run([MLK, "key", "create", os.path.join(WORK, "k.pem")], capture_output=True, check=True)
    pub = open(os.path.join(WORK, "k.pem.pub")).read().split()[0]
    audio_store = os.path.join(WORK, "tuned_audio.db")
    shutil.copy(tuned_store, audio_store)
    p = subprocess.run([MLK, "cache", "push", key, "--remote", server.url, "--cache", audio_store, "--sign",
                        os.path.join(WORK, "k.pem")], env=dict(os.environ, MLK_TOKEN=third), capture_output=True, text=True)
    check("push --sign signs for the token's namespace", p.returncode == 0 and "for namespace audio" in p.stdout,
          p.stdout + p.stderr[-300:])
    shared = os.path.join(WORK, "mirror_shared.db")
    signed_policy = "host;require=signed:" + pub
    p = subprocess.run([PULL, server.url, norms, signed_policy, "1", "16", "64"],
                       env=dict(os.environ, MLK_TOKEN=third, MLK_LOCAL_CACHE=shared), capture_output=True, text=True)
    check("a runtime of team audio loads the entry signed for audio", p.returncode == 0
          and "pulled from the server" in p.stdout and "max relative error" in p.stdout, p.stdout + p.stderr)
    p = subprocess.run([PULL, server.url, norms, signed_policy, "1", "16", "64"],
                       env=dict(os.environ, MLK_TOKEN=tok, MLK_LOCAL_CACHE=shared), capture_output=True, text=True)
    check("a runtime of team ml does not take it from the same mirror", p.returncode == 1
          and "for namespace `audio`" in p.stderr and "does not read now" in p.stderr, p.stdout + p.stderr)

    # Another shape from a mirror that has never seen the program: the exact
    # key misses, and the server's query API finds the entry tuned at the
    # nearest shape, which is pulled and run.
    env_near = dict(env, MLK_LOCAL_CACHE=os.path.join(WORK, "mirror_near.db"))
    p = subprocess.run([PULL, server.url, norms, "host;require=tuned", "2", "8", "64"], env=env_near,
                       capture_output=True, text=True)
    check("an empty mirror finds the nearest shape through the server's query", p.returncode == 0
          and "pulled from the server" in p.stdout and "tuned at B=1,D=64,S=16 (the nearest tuned shape)" in p.stdout
          and "max relative error" in p.stdout, p.stdout + p.stderr)

    # PyTorch, from another empty mirror.
    script = f"""
import sys; sys.path.insert(0, {MODULE_DIR!r})
import mlk, torch
ops = mlk.load({norms!r}, target="cuda_sm90,host", cache={server.url!r}, token={tok!r})
x, w = torch.randn(1, 16, 64), torch.randn(64)
y = ops.rmsnorm(x, w, 1e-6)
want = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
print("SELECTION", ops.rmsnorm.kernel(x, w, 1e-6).selection.replace(chr(10), " | "))
print("CLOSE", bool(torch.allclose(y, want, rtol=2e-5, atol=2e-5)))
"""
    env_py = dict(os.environ, MLK_LOCAL_CACHE=os.path.join(WORK, "mirror_py.db"))
    env_py.pop("MLK_TOKEN", None)
    p = subprocess.run([sys.executable, "-c", script], env=env_py, capture_output=True, text=True)
    check("PyTorch pulls and runs", p.returncode == 0 and "CLOSE True" in p.stdout and "pulled from the server" in p.stdout,
          p.stdout + p.stderr[-600:])

    # Another team's token: the server refuses, the mirror is empty: a clear error.
    env_other = dict(os.environ, MLK_LOCAL_CACHE=os.path.join(WORK, "mirror_other.db"), MLK_TOKEN=other)
    p = subprocess.run([PULL, server.url, norms, "host;require=tuned", "1", "16", "64"], env=env_other,
                       capture_output=True, text=True)
    check("another team's token gets no tuned kernel", p.returncode == 1 and "no artifact of `rmsnorm`" in p.stderr,
          p.stdout + p.stderr)
finally:
    rc, err = server.stop()
    check("server stops cleanly", rc == 0, err[-300:])

failed = [r for r in results if not r[1]]
for name, ok, note in results:
    print("%s %s%s" % ("PASS" if ok else "FAIL", name, "" if ok else ": " + note))
print("%d checks, %d failed" % (len(results), len(failed)))
sys.exit(1 if failed else 0)
