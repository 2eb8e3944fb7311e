"""The second review's finding 5: a write-entries token runs code on the
measurement workers. A job of built artifacts (a candidate pack) is native
code that any writer of the namespace chose; `mlk worker --run-artifacts`
ran it in a plain fork of the worker, with MLK_TOKEN in its environment, the
worker's secret in its memory and the network open.

Here a writer submits a pack whose library has a constructor that probes
what it can reach from inside the worker: the token in its environment, a
TCP connection to the server, the worker's own environment through /proc,
and whether it may gain privileges. The candidate must still be measured,
and every probe must come back empty.

usage: worker_sandbox.py MLK EXAMPLES WORK
"""
import ctypes
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time

from serve_common import Results, Server, request, token

MLK, EXAMPLES, WORK = sys.argv[1:4]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
R = Results()

store = os.path.join(WORK, "server.db")
TOKEN = token(MLK, store, "default", "read,write-blobs,write-entries,worker")
server = Server(MLK, store)
KEY = "cpu-sandbox"
log = open(os.path.join(WORK, "worker.log"), "w")
# A descriptor the worker inherits without close-on-exec (as a service
# manager's socket or a log file would be): the sandbox must close it.
leaked = os.open(os.path.join(WORK, "worker-secret.txt"), os.O_RDWR | os.O_CREAT, 0o600)
# The worker's home holds a secret and, as an install under $HOME would, the
# runner itself (the fourth review: the home was then left readable).
HOME = os.path.join(WORK, "home")
os.makedirs(os.path.join(HOME, "bin"))
HOME_SECRET = os.path.join(HOME, "secret.txt")
open(HOME_SECRET, "w").write("the worker user's secret\n")
shutil.copy2(os.path.join(os.path.dirname(MLK), "mlk-measure"), os.path.join(HOME, "bin", "mlk-measure"))
# The worker's $TMPDIR is not /tmp (review 7 of issue 49): the folder of
# another job there (another worker's of this user) must stay hidden.
TMP = os.path.join(WORK, "tmp")
os.makedirs(os.path.join(TMP, "mlk-worker-other"))
SIBLING = os.path.join(TMP, "mlk-worker-other", "candidate.txt")
open(SIBLING, "w").write("another job's candidate\n")
worker = subprocess.Popen([MLK, "worker", "--server", server.url, "--device-key", KEY, "--name", "sandboxed",
                           "--run-artifacts", "--lease", "30"], stdout=log, stderr=log,
                          env=dict(os.environ, MLK_TOKEN=TOKEN, HOME=HOME, TMPDIR=TMP,
                                   MLK_MEASURE=os.path.join(HOME, "bin", "mlk-measure")), pass_fds=(leaked,))
os.close(leaked)

# A real one-candidate set, built here.
sdir = os.path.join(WORK, "set")
p = subprocess.run([MLK, "tune", os.path.join(EXAMPLES, "mlp.tl"), "--fn", "sgemm", "--target", "host", "--dims",
                    "M=32,K=32,N=32", "--trials", "2", "--time", "60", "--no-autoschedulers", "--export-candidates",
                    sdir, "--candidates", "1", "--no-cache", "-q"], capture_output=True, text=True)
R.check("export a one-candidate set", p.returncode == 0, p.stderr[-600:])

# The probing library: forwards to the real one (dlsym searches its
# dependencies) and, when loaded, writes what it could reach into a FIFO the
# test holds open (the sandbox's file systems are read-only; a FIFO is not
# a file system write), and tries a unix socket the test listens on.
probe = os.path.join(WORK, "probe.fifo")
os.mkfifo(probe)
probe_fd = os.open(probe, os.O_RDONLY | os.O_NONBLOCK)
sock_path = os.path.join(WORK, "probe.sock")
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(sock_path)
listener.listen(1)
cand = json.load(open(os.path.join(sdir, "candidates.json")))["candidates"][0]["id"]
cdir = os.path.join(sdir, cand)
man = json.load(open(os.path.join(cdir, "manifest.json")))
# A System V shared memory segment outside the sandbox, which the candidate must not see.
libc = ctypes.CDLL(None, use_errno=True)
SHM_KEY = 0x6d6c6b00 + (os.getpid() & 0xff)
shm_id = libc.shmget(SHM_KEY, 4096, 0o1600)  # IPC_CREAT | 0600
R.check("make a System V segment outside the sandbox", shm_id >= 0, "errno %d" % ctypes.get_errno())
src = os.path.join(WORK, "probe.c")
open(src, "w").write(r'''
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sched.h>
#include <dirent.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>
__attribute__((constructor)) static void probe(void) {
  /* Descriptors it was given, before it opens any: none may be a socket (the
     worker's connection to the server) or a file of the worker's. */
  char fds[2048] = "";
  DIR* d = opendir("/proc/self/fd");
  struct dirent* e;
  while (d && (e = readdir(d))) {
    int fd = atoi(e->d_name);
    if (e->d_name[0] == '.' || fd == dirfd(d)) continue;
    char link[64], target[256] = "";
    snprintf(link, sizeof link, "/proc/self/fd/%%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n > 0) target[n] = 0;
    if (strlen(fds) + strlen(target) + 16 < sizeof fds) snprintf(fds + strlen(fds), sizeof fds - strlen(fds), "%%d:%%s ", fd, target);
  }
  if (d) closedir(d);
  FILE* out = fopen("%(probe)s", "w");
  if (!out) return;
  fprintf(out, "fds=%%s\n", fds);
  /* System V IPC: the segment the test made outside must not be visible. */
  fprintf(out, "sysv_ipc=%%s\n", shmget(%(shm_key)d, 0, 0) >= 0 ? "shared" : "private");
  const char* tok = getenv("MLK_TOKEN");
  fprintf(out, "token=%%s\n", tok ? "present" : "none");
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons(%(port)d);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int c = s < 0 ? -1 : connect(s, (struct sockaddr*)&a, sizeof a);
  fprintf(out, "net=%%s\n", c == 0 ? "connected" : strerror(errno));
  int u = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un ua = {0};
  ua.sun_family = AF_UNIX;
  strncpy(ua.sun_path, "%(sock)s", sizeof ua.sun_path - 1);
  int uc = u < 0 ? -1 : connect(u, (struct sockaddr*)&ua, sizeof ua);
  fprintf(out, "unix_socket=%%s\n", uc == 0 ? "connected" : strerror(errno));
  char path[64];
  snprintf(path, sizeof path, "/proc/%%d/environ", (int)getppid());
  FILE* env = fopen(path, "r");
  char buf[4096];
  size_t n = env ? fread(buf, 1, sizeof buf, env) : 0;
  fprintf(out, "worker_environ=%%s\n", env && n > 0 ? "read" : "denied");
  FILE* st = fopen("/proc/self/status", "r");
  char line[256];
  while (st && fgets(line, sizeof line, st))
    if (strncmp(line, "NoNewPrivs:", 11) == 0) fprintf(out, "no_new_privs=%%d\n", atoi(line + 11));
  char params[120] = {0};  /* struct io_uring_params */
  long ring = syscall(__NR_io_uring_setup, 1, params);
  fprintf(out, "io_uring=%%s\n", ring >= 0 ? "allowed" : "denied");
  fprintf(out, "new_user_namespace=%%s\n", unshare(CLONE_NEWUSER) == 0 ? "allowed" : "denied");
  FILE* secret = fopen("%(home_secret)s", "r");
  fprintf(out, "home_secret=%%s\n", secret ? "read" : "hidden");
  FILE* sibling = fopen("%(sibling)s", "r");
  fprintf(out, "sibling_job=%%s\n", sibling ? "read" : "hidden");
  int tty = open("/dev/tty", O_RDWR);
  fprintf(out, "terminal=%%s\n", tty >= 0 ? "open" : "none");
  fprintf(out, "done\n");
  fclose(out);
}
''' % {"probe": probe, "port": server.port, "sock": sock_path, "shm_key": SHM_KEY, "home_secret": HOME_SECRET,
       "sibling": SIBLING})
lib = man["library"]
os.rename(os.path.join(cdir, lib), os.path.join(cdir, "libreal.so"))
p = subprocess.run(["cc", "-shared", "-fPIC", "-o", os.path.join(cdir, lib), src, "-Wl,--no-as-needed", "-L" + cdir,
                    "-l:libreal.so", "-Wl,-rpath,$ORIGIN"], capture_output=True, text=True)
R.check("build the probing library", p.returncode == 0, p.stderr[-600:])


def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def pack_and_run(name):
    """Packs the set as `mlk tune --workers` does (artifact/candidate_set.h), submits it as a job of
    the writer's and waits for its end: the job as the submitter reads it back."""
    man["files"][lib] = sha(os.path.join(cdir, lib))
    man["files"]["libreal.so"] = sha(os.path.join(cdir, "libreal.so"))
    json.dump(man, open(os.path.join(cdir, "manifest.json"), "w"), indent=2)
    cs = json.load(open(os.path.join(sdir, "candidates.json")))
    cs["candidates"][0]["library_sha256"] = man["files"][lib]
    json.dump(cs, open(os.path.join(sdir, "candidates.json"), "w"), indent=1)
    paths = sorted(os.path.relpath(os.path.join(d, f), sdir) for d, _, fs in os.walk(sdir) for f in fs)
    body = b"".join(open(os.path.join(sdir, q), "rb").read() for q in paths)
    header = json.dumps({"files": [{"path": q, "size": os.path.getsize(os.path.join(sdir, q))} for q in paths]})
    pack = b"mlk-candidate-pack 1\n" + str(len(header)).encode() + b"\n" + header.encode() + body
    st, data, _ = request(server.port, "POST", "/v1/jobs/setups", TOKEN, pack)
    R.check("the writer uploads the %s pack" % name, st == 201, data[:300])
    setup = json.loads(data).get("setup", "") if st == 201 else ""
    st, data, _ = request(server.port, "POST", "/v1/jobs/submit", TOKEN,
                          json.dumps({"device_key": KEY, "setup": setup,
                                      "payload": {"kind": "candidates", "schedule": {}}}).encode())
    R.check("... and submits it as a job", st == 201, data[:300])
    job = json.loads(data).get("id", 0) if st == 201 else 0
    state = {}
    end = time.time() + 120
    while time.time() < end:
        st, data, _ = request(server.port, "GET", f"/v1/jobs/{job}", TOKEN)
        state = json.loads(data) if st == 200 else {}
        if state.get("state") in ("done", "failed"):
            break
        time.sleep(0.2)
    return state


state = pack_and_run("probing")
result = state.get("result") or {}
R.check("Review 13: the numbers a candidate reports come back coarsened (times to 3 significant digits)",
        result.get("times_ms") and all(float("%.3g" % t) == t for t in result["times_ms"] + [result["median_ms"]]),
        json.dumps(result)[:600])
R.check("the worker measured the candidate", state.get("state") == "done" and
        (state.get("result") or {}).get("verdict") == "ok", json.dumps(state)[:600])
try:
    seen = os.read(probe_fd, 65536).decode(errors="replace")
except BlockingIOError:
    seen = ""
print(seen.strip())
R.check("the candidate's code ran (its probe reported)", "done" in seen, seen)
R.check("Round2 finding 5: the candidate does not see the worker's token", "token=none" in seen, seen)
R.check("Round2 finding 5: the candidate cannot reach the network (the server on loopback)",
        "net=" in seen and "net=connected" not in seen, seen)
R.check("Round2 finding 5: the candidate cannot read the worker's environment or memory",
        "worker_environ=denied" in seen, seen)
R.check("Round2 finding 5: the candidate runs with no_new_privs", "no_new_privs=1" in seen, seen)
R.check("Round2 finding 5 (review): no io_uring, no new user namespace, no terminal in the sandbox",
        "io_uring=denied" in seen and "new_user_namespace=denied" in seen and "terminal=none" in seen, seen)
R.check("Round2 finding 5: the candidate cannot reach a unix socket on disk",
        "unix_socket=" in seen and "unix_socket=connected" not in seen, seen)

R.check("Round2 review 4: the worker's home is hidden though its runner lives there (bound back alone)",
        "home_secret=hidden" in seen, seen)
R.check("Review 7: under a $TMPDIR other than /tmp, another job's folder there is hidden",
        "sibling_job=hidden" in seen, seen)
R.check("Round2 finding 5 (review): System V IPC outside the sandbox is not visible in it",
        "sysv_ipc=private" in seen, seen)
fds = next((ln[4:] for ln in seen.splitlines() if ln.startswith("fds=")), None)
R.check("Round2 finding 5 (review): the candidate inherits no socket and no file of the worker's",
        fds is not None and "socket:" not in fds and "worker-secret" not in fds, str(fds))
# Review 12, M3: what the candidate's process prints, or writes as free text, went back to the
# submitter in the job's result, so a candidate could read any file the (read-only) sandbox shows and
# send it home that way. A candidate that prints such a file and fails: only this worker's words and
# numbers reach the result; the text stays in the worker's own log.
VISIBLE = os.path.join(WORK, "visible.txt")
open(VISIBLE, "w").write("visible-worker-file-4f1c\n")
leaker = os.path.join(WORK, "leaker.c")
open(leaker, "w").write(r'''
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void leak(void) {
  char secret[256] = "";
  FILE* f = fopen("%s", "r");
  size_t n = f ? fread(secret, 1, sizeof secret - 1, f) : 0;
  secret[n] = 0;
  fprintf(stdout, "%%s", secret);
  fprintf(stderr, "%%s", secret);
  fflush(NULL);
  _exit(3);
}
''' % VISIBLE)
p = subprocess.run(["cc", "-shared", "-fPIC", "-o", os.path.join(cdir, lib), leaker, "-Wl,--no-as-needed", "-L" + cdir,
                    "-l:libreal.so", "-Wl,-rpath,$ORIGIN"], capture_output=True, text=True)
R.check("build the leaking library", p.returncode == 0, p.stderr[-600:])
state = pack_and_run("leaking")
R.check("Review 12 M3: the leaking candidate's job fails, in the worker's words",
        state.get("state") in ("done", "failed") and "exit 3" in json.dumps(state), json.dumps(state)[:600])
R.check("Review 12 M3: nothing the candidate printed reaches the job's result",
        "visible-worker-file-4f1c" not in json.dumps(state), json.dumps(state)[:600])
R.check("Review 12 M3: ... it is in the worker's own log",
        "visible-worker-file-4f1c" in open(os.path.join(WORK, "worker.log")).read())

if shm_id >= 0:
    libc.shmctl(shm_id, 0, None)  # IPC_RMID
worker.terminate()
worker.wait(timeout=30)
server.stop()
sys.exit(R.finish())
