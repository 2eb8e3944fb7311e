"""`mlk bench --plot FILE.png` end to end: the speedup chart of one kernel
against OpenBLAS, written as SVG and as PNG by two runs; the PNG (rendered
by librsvg) is a valid file (signature, every chunk's CRC) of the SVG's
width and height, and not blank: mostly white, with the peer's bar in its
colour. A PNG that cannot be written is an error naming the file.

usage: bench_plot_png.py MLK_BINARY EXAMPLES_DIR WORK_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from png_check import PngError, colour_counts, header, pixels  # noqa: E402
from serve_common import Results  # noqa: E402

MLK, EXAMPLES, WORK = (os.path.abspath(a) for a in sys.argv[1:4])
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
res = Results()
t0 = time.time()
base = [MLK, "bench", os.path.join(EXAMPLES, "mlp.tl"), "--fn", "sgemm", "--dims", "M=64,K=64,N=64",
        "--target", "host", "--cache", os.path.join(WORK, "store.db"), "--peers", "openblas", "--min-time", "20", "-q"]


def run(*extra):
    return subprocess.run([*base, *extra], capture_output=True, text=True)


svg_path, png_path, out = (os.path.join(WORK, n) for n in ("plot.svg", "plot.png", "bench.json"))
p = run("--plot", svg_path)
res.check("--plot FILE.svg", p.returncode == 0 and os.path.exists(svg_path), p.stderr[-500:])
svg = open(svg_path).read() if os.path.exists(svg_path) else ""
m = re.search(r'<svg [^>]*width="(\d+)" height="(\d+)"', svg)
want = (int(m.group(1)), int(m.group(2))) if m else None

p = run("--plot", png_path, "--json", out)
res.check("--plot FILE.png", p.returncode == 0 and os.path.exists(png_path), p.stderr[-500:])
data = open(png_path, "rb").read() if os.path.exists(png_path) else b""
try:
    w, h, depth, colour = header(data)
    res.check("a valid PNG (signature, CRCs) of the SVG's width and height", want is not None and (w, h) == want,
              f"{(w, h)} vs {want}")
    w, h, rows = pixels(data)
    counts = colour_counts(rows)
    white = counts.get((255, 255, 255, 255), 0) / (w * h)
    res.check("not blank: a white page with something drawn on it", 0.6 < white < 0.995 and len(counts) > 10,
              f"{white:.3f} white, {len(counts)} colours")
    measured = json.load(open(out))["kernels"][0]["peers"][0].get("speedup") if os.path.exists(out) else None
    blue = counts.get((0x00, 0x72, 0xB2, 255), 0)
    res.check("the OpenBLAS bar in the first series' colour (or its reason when OpenBLAS is not there)",
              blue > 200 if measured else "openblas" in svg, f"{blue} pixels, speedup {measured}")
except PngError as e:
    res.check("a valid PNG", False, str(e))

p = run("--plot", os.path.join(WORK, "no-such-dir", "plot.png"))
res.check("an unwritable PNG: exit 1, names it",
          p.returncode == 1 and "cannot write " + os.path.join(WORK, "no-such-dir", "plot.png") in p.stderr,
          p.stderr[-500:])
print(f"in {time.time() - t0:.1f} s")
sys.exit(res.finish())
