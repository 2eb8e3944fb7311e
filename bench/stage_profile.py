"""Where a kernel's time goes, stage by stage: runs COMMAND under `perf
record` and attributes the samples that fall in the artifact's shared
library to its functions (Halide names each parallel loop's closure after
its stage: `..._par_for_f77_matmul_..._matmul6_no`), by the library's symbol
table (`nm -n`), since mlk loads a private copy whose symbols perf cannot
resolve. Prints each function's share of the library's samples, largest
first. docs/benchmarks-history.md ("Where a MiniLM layer's time goes") used it.

usage: python3 bench/stage_profile.py ARTIFACT_DIR [--top N] [--freq HZ] -- COMMAND [ARGS...]
       (ARTIFACT_DIR: an `mlk build -o DIR` directory, or a tuned artifact written
        there from the cache; COMMAND calls that kernel, e.g. a script that loads
        DIR with mlk.load and calls it in a loop)
Needs perf (Debian's linux-perf) and nm (binutils).
"""
import bisect
import collections
import glob
import os
import subprocess
import sys
import tempfile


def symbols(lib):
    out = subprocess.run(["nm", "-n", lib], capture_output=True, text=True, check=True).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tT":
            syms.append((int(parts[0], 16), parts[2]))
    return syms


def samples(data, libname):
    """(percent, address or symbol) of each sampled location in the library."""
    rep = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "dso,sym", "-g", "none",
                          "--stdio"], capture_output=True, text=True).stdout
    rows = []
    for line in rep.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[0].endswith("%") and parts[1] == libname:
            rows.append((float(parts[0][:-1]), parts[3]))
    return rows


def main():
    if "--" not in sys.argv or len(sys.argv) < 4:
        sys.exit(__doc__)
    mine, cmd = sys.argv[1:sys.argv.index("--")], sys.argv[sys.argv.index("--") + 1:]
    art = mine[0]
    top = int(mine[mine.index("--top") + 1]) if "--top" in mine else 16
    freq = mine[mine.index("--freq") + 1] if "--freq" in mine else "2000"
    libs = glob.glob(os.path.join(art, "lib*.so"))
    if len(libs) != 1 or not cmd:
        sys.exit("%s: expected one lib*.so in %s and a command after --" % (sys.argv[0], art))
    lib = libs[0]
    syms = symbols(lib)
    if not syms:
        sys.exit("%s: %s has no symbols" % (sys.argv[0], lib))
    addrs = [a for a, _ in syms]
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "perf.data")
        r = subprocess.run(["perf", "record", "-o", data, "-F", freq, "--"] + cmd, stdout=subprocess.DEVNULL)
        if r.returncode != 0:
            sys.exit("%s: the command or perf failed (exit %d)" % (sys.argv[0], r.returncode))
        rows = samples(data, os.path.basename(lib))
    acc, total = collections.Counter(), 0.0
    for pct, where in rows:
        total += pct
        if where.startswith("0x"):
            i = bisect.bisect_right(addrs, int(where, 16)) - 1
            acc[syms[i][1] if i >= 0 else "?"] += pct
        else:
            acc[where] += pct
    if total == 0:
        sys.exit("%s: no samples in %s: does the command call this artifact?" % (sys.argv[0], lib))
    print("%s: %.1f%% of all samples" % (os.path.basename(lib), total))
    for name, pct in acc.most_common(top):
        print("%5.1f%%  %s" % (100 * pct / total, name))


if __name__ == "__main__":
    main()
