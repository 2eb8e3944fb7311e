"""A damaged tuning log (a line of the right JSON syntax but the wrong shape)
is a corruption error naming the log, exit 1, not an internal error.

usage: tune_log_damage.py MLK_BINARY EXAMPLES_DIR WORK_DIR
"""
import os
import shutil
import subprocess
import sys

MLK, EXAMPLES, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
good, bad = os.path.join(WORK, "good.jsonl"), os.path.join(WORK, "bad.jsonl")
tune = [MLK, "tune", os.path.join(EXAMPLES, "mlp.tl"), "--target", "host", "--fn", "sgemm", "--dims", "M=16,K=16,N=16",
        "--trials", "1", "--time", "20", "--no-autoschedulers", "--no-cache", "-q"]
p = subprocess.run([*tune, "--log", good], capture_output=True, text=True, timeout=120)
if p.returncode != 0:
    sys.exit(f"FAIL tuning to make a log: exit {p.returncode}: {p.stderr}")
header = open(good).readline()
with open(bad, "w") as f:
    f.write(header + "[1]\n" + '{"trial": 1}\n')
p = subprocess.run([*tune, "--log", bad], capture_output=True, text=True, timeout=120)
want = f"mlk tune: sgemm: {bad} is not a tuning log of mlk ("
if p.returncode != 1 or want not in p.stderr:
    sys.exit(f"FAIL damaged log: exit {p.returncode} (expected 1), stderr {p.stderr.strip()!r} lacks {want!r}")
print("ok   damaged tuning log: " + p.stderr.strip())
