"""Where an artifact's time goes, stage by stage, by Halide's own profiler:
builds nothing itself, but calls an artifact directory that
`mlk build --profile-stages` made (the cached tuned schedule, built with the
profiler in it) with inputs of its manifest's shape, N times, and prints the
per-stage table Halide reports when the process exits, sorted, with each
stage's share of the time. Sampling is every millisecond or so: give it at
least a second of calls.

usage: python3 bench/halide_profile.py BUILD_DIR ARTIFACT_DIR [--calls N] [--threads T]
  e.g. MLK_CACHE=C.db build/mlk build examples/minilm/minilm.tl --fn layer --target host \\
         --dims B=8,S=128,D=384,H=12,F=1536 --profile-stages -o /tmp/layer_prof
       python3 bench/halide_profile.py build /tmp/layer_prof --calls 100
Inputs: F32 uniform in [-0.5, 0.5), integer tensors 1 (a mask keeping every
token), scalars 0.125 (the first) and 1e-12 (the rest, as MiniLM's scale and eps).
"""
import json
import os
import re
import subprocess
import sys


def child(build, art, calls):
    sys.path.insert(0, os.path.join(build, "python"))
    import numpy as np
    import mlk

    man = json.load(open(os.path.join(art, "manifest.json")))
    fn = getattr(mlk.load(art), man["function"])
    sig, dims = man["signature"], man["dims"]
    records = {r["first"]: r for r in fn._sig.get("records") or []}  # the runtime's view of the parameters
    rng = np.random.default_rng(0)
    flat, scalars = [], 0
    for p in sig["params"]:
        shape = [extent(d, dims) for d in p["shape"]]
        if not shape:
            flat.append(np.array(0.125 if scalars == 0 else 1e-12, np.float32))
            scalars += 1
        elif p["dtype"].startswith("F"):
            flat.append((rng.random(shape, dtype=np.float32) - 0.5).astype(np.float32))
        else:
            flat.append(np.ones(shape, np.int64))
    # A record parameter is passed as a dict of its leaves (mlk/records.py:
    # a leaf `p_a_b` of record `p` is key `a_b`).
    args, i = [], 0
    while i < len(flat):
        r = records.get(i)
        if r is None:
            args.append(flat[i])
            i += 1
            continue
        names = [q["name"][len(r["name"]) + 1:] for q in sig["params"][i:i + r["count"]]]
        args.append(dict(zip(names, flat[i:i + r["count"]])))
        i += r["count"]
    for _ in range(calls):
        fn(*args, dims=dims)


def extent(d, dims):
    """A dim of the signature: a number, a name, or an expression of names ("D / H", "B*S")."""
    if not isinstance(d, str):
        return d
    expr = re.sub(r"[A-Za-z_]\w*", lambda m: str(dims[m.group()]), d).replace("/", "//")
    return int(eval(expr, {"__builtins__": {}}))  # digits and + - * // ( ) only, from a manifest


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    build, art = sys.argv[1], sys.argv[2]
    calls = int(sys.argv[sys.argv.index("--calls") + 1]) if "--calls" in sys.argv else 100
    if "--child" in sys.argv:
        return child(build, art, calls)
    out = subprocess.run([sys.executable, __file__, build, art, "--calls", str(calls), "--child"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(out.stderr[-2000:])
    lines = out.stdout.splitlines()
    head = [l for l in lines if "total time" in l]
    if not head:
        sys.exit("no profile in the output: was %s built with --profile-stages?\n%s" % (art, out.stdout[-1000:]))
    total = float(re.search(r"time per run: ([0-9.]+) ms", head[0]).group(1))
    rows = []
    for l in lines:
        m = re.match(r"\s+(\S+):\s+([0-9.]+)ms \(\s*([0-9.]+)%\)\s+threads: ([0-9.]+)", l)
        if m:
            rows.append((float(m.group(2)), m.group(1), float(m.group(3)), float(m.group(4))))
    print(head[0].strip())
    print("%-44s %10s %7s %8s" % ("stage", "ms/run", "share", "threads"))
    small = [0.0, 0]
    for ms, name, pct, thr in sorted(rows, reverse=True):
        if pct >= 0.1:
            print("%-44s %10.3f %6.1f%% %8.2f" % (name, ms, pct, thr))
        else:
            small[0] += ms
            small[1] += 1
    print("%-44s %10.3f" % ("%d stages under 0.1%% each" % small[1], small[0]))
    print("per run: %.3f ms" % total)


if __name__ == "__main__":
    main()
