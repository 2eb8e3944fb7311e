"""Each product's rate in fns that Halide's profiler times: for every fn
named, builds it with `mlk build --profile-stages` (the cached tuned
schedule, else the default one), calls it (bench/halide_profile.py's
child), and prints one row per matmul stage: its shape, its FLOPs, the
product's own time and GFLOP/s, and the same with its copies (the packed
operands it reads and its result tiles' wrapper). Then the rate of all the
products of each fn, so that a backward's products can be set beside its
forward's (issue: the backward's products at 90% of the forward's rate).

usage: python3 bench/product_rates.py BUILD_DIR FILE.tl --fns F1,F2,.. --dims D=V,.. [--target T] [--calls N]
  e.g. python3 bench/product_rates.py build bench/encoder_blocks.tl \\
         --fns ffn_block__fwd,ffn_block__bwd --dims B=8,S=128,D=256,F=1024
Each fn gets the dims it declares out of --dims. The shared library's
stages are named by Halide (fNN_matmul); the k-th product in that
numbering is stage matmulk of `mlk build --dump-after stages`. The
profiler charges time to the stage being produced: a product computed
inside another stage's tiles (the scores of a fused attention) is partly
charged there, so its rate can read above the machine's peak.
"""
import math
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def arg(name, default=None):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def extents(text):
    return [int(v) for v in re.findall(r"=[^:\]]+:(\d+)", text)]


def products(stage_lines):
    """[(stage, pure extents, reduction extents)] of the matmul stages, in order."""
    out = []
    for line in stage_lines:
        m = re.match(r"(matmul\d+) matmul pure\[([^\]]*)\] reduction\[([^\]]*)\]", line)
        if m:
            out.append((m.group(1), extents("[" + m.group(2) + "]"), extents("[" + m.group(3) + "]")))
    return out


def profile(build, art, calls):
    """{Halide func name: ms per run} from the profiler's report."""
    out = subprocess.run([sys.executable, os.path.join(HERE, "halide_profile.py"), build, art, "--calls",
                          str(calls), "--child"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(out.stderr[-2000:])
    ms = {}
    for line in out.stdout.splitlines():
        m = re.match(r"\s+(\S+):\s+([0-9.]+)ms", line)
        if m:
            ms[m.group(1)] = float(m.group(2))
    return ms


def fn_dims(build, tl, fn, dims):
    """The subset of `dims` that `fn` declares (its dimension list in `mlk check --dump`-free terms:
    the fn's header `fn NAME [A, B, ..]` as the IR dump prints it)."""
    out = subprocess.run([os.path.join(build, "mlk"), "build", tl, "--fn", fn, "--target", "host", "--dims",
                          ",".join("%s=%d" % kv for kv in dims.items()), "--dump-after", "ir", "-o",
                          tempfile.mkdtemp(prefix="mlk-rates-"), "--no-cache"], capture_output=True, text=True)
    m = re.search(r"^fn \S+ \[([^\]]*)\]", out.stdout, re.M)
    names = [n.strip() for n in m.group(1).split(",")] if m else list(dims)
    return {n: dims[n] for n in names if n in dims}


def main():
    if len(sys.argv) < 3 or not arg("--fns") or not arg("--dims"):
        sys.exit(__doc__)
    build, tl = sys.argv[1], sys.argv[2]
    target, calls = arg("--target", "host"), int(arg("--calls", "30"))
    dims = {k: int(v) for k, v in (kv.split("=") for kv in arg("--dims").split(","))}
    print("%-22s %-9s %-26s %9s %9s %8s %10s %8s" % ("fn", "stage", "batch x M x K x N", "MFLOP", "ms",
                                                     "GFLOP/s", "+copies ms", "GFLOP/s"))
    totals = []
    for fn in arg("--fns").split(","):
        d = fn_dims(build, tl, fn, dims)
        art = tempfile.mkdtemp(prefix="mlk-rates-")
        built = subprocess.run([os.path.join(build, "mlk"), "build", tl, "--fn", fn, "--target", target, "--dims",
                                ",".join("%s=%d" % kv for kv in d.items()), "--profile-stages", "--dump-after",
                                "stages", "-o", art], capture_output=True, text=True)
        if built.returncode != 0:
            sys.exit(built.stderr)
        stages = products(built.stdout.splitlines())
        ms = profile(build, art, calls)
        funcs = sorted((n for n in ms if re.fullmatch(r"f\d+_matmul", n)), key=lambda n: int(n[1:].split("_")[0]))
        if len(funcs) != len(stages):
            sys.exit("%s: %d products in the stage table, %d timed (%s)" % (fn, len(stages), len(funcs), funcs))
        flops_all = ms_all = copies_all = 0.0
        for (stage, pure, red), f in zip(stages, funcs):
            flops = 2.0 * math.prod(pure) * math.prod(red)
            own = ms[f]
            copies = own + sum(v for n, v in ms.items() if n.startswith(f + "_global_wrapper") or
                               re.search(r"_in_%s\$" % re.escape(f), n))
            shape = "x".join(str(e) for e in pure[:-2] + [pure[-2], red[0], pure[-1]])
            print("%-22s %-9s %-26s %9.1f %9.3f %8.1f %10.3f %8.1f" % (fn, stage, shape, flops / 1e6, own,
                                                                     flops / own / 1e6 if own else 0, copies,
                                                                     flops / copies / 1e6 if copies else 0))
            flops_all += flops
            ms_all += own
            copies_all += copies
        totals.append((fn, flops_all, ms_all, copies_all))
    print()
    for fn, flops, own, copies in totals:
        print("%-22s all products: %8.1f MFLOP in %7.3f ms (%6.1f GFLOP/s), %7.3f ms with copies (%6.1f GFLOP/s)"
              % (fn, flops / 1e6, own, flops / own / 1e6 if own else 0, copies, flops / copies / 1e6 if copies else 0))


main()
