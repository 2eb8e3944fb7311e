"""A file mlk cannot read is named with the system's reason (strerror), not a
guess: "cannot read PATH: No such file or directory" for a missing file and
"cannot read PATH: Permission denied" for an unreadable one, through each
command that reads a file the user names: check FILE.tl, build --schedule,
bench --suite and bench --baseline. Exit status 1 in every case.

The unreadable case needs a user that permissions apply to: as root (uid 0)
it is skipped, and the test says so.

usage: file_errors.py MLK_BINARY EXAMPLES_DIR WORK_DIR
"""
import os
import shutil
import subprocess
import sys

MLK, EXAMPLES, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
NORMS = os.path.join(EXAMPLES, "norms.tl")
MLP = os.path.join(EXAMPLES, "mlp.tl")
failures = []


def commands(target):
    """Each command with `target` as the file it must read first."""
    return {
        "check": ["check", target],
        "build --schedule": ["build", NORMS, "--fn", "rmsnorm", "--target", "host", "--schedule", target,
                             "-o", os.path.join(WORK, "out")],
        "bench --suite": ["bench", "--suite", target],
        "bench --baseline": ["bench", MLP, "--fn", "sgemm", "--dims", "M=16,K=16,N=16", "--target", "host",
                             "--baseline", target, "--cache", os.path.join(WORK, "cache.db"), "-q"],
    }


def expect(case, target, reason):
    for name, args in commands(target).items():
        p = subprocess.run([MLK, *args], capture_output=True, text=True, timeout=120)
        want = f"cannot read {target}: {reason}"
        if p.returncode != 1 or want not in p.stderr:
            failures.append(f"{name}, {case}: expected exit 1 and {want!r} on stderr; "
                            f"got exit {p.returncode}, stderr {p.stderr.strip()[-300:]!r}")
        else:
            print(f"ok   {name}, {case}: {want}")


expect("a missing file", os.path.join(WORK, "nope.json"), "No such file or directory")

if os.getuid() == 0:
    print("skip the unreadable file: running as root (uid 0), which reads any file whatever its mode")
else:
    locked = os.path.join(WORK, "locked.json")
    with open(locked, "w") as f:
        f.write("{}")
    os.chmod(locked, 0)
    expect("an unreadable file", locked, "Permission denied")
    os.chmod(locked, 0o600)

for f in failures:
    print("FAIL " + f)
sys.exit(1 if failures else 0)
