"""The mlk wheel (pyproject.toml, built by scripts/build.sh into build/wheel)
installed into a fresh virtual environment, away from the checkout: `import
mlk` finds the installed package, with `mlk.__version__` the project's version;
the `mlk` entry point runs the bundled command; a kernel is compiled by the
JIT plugin the wheel carries (Halide from the `halide` wheel it depends on) and
agrees with numpy; the Arrow ingress loads (libarrow from `pyarrow`); every
binary in the wheel finds its libraries through relative RPATHs, never the
build tree. Also: the test venv (.venv) runs the same installed package.

usage: wheel_install.py WHEEL_DIR PROJECT_VERSION EXAMPLES_DIR WORK_DIR SOURCE_DIR BUILD_DIR HALIDE_ROOT
"""
import glob
import os
import shutil
import subprocess
import sys
import zipfile

WHEEL_DIR, VERSION, EXAMPLES, WORK, SRC, BUILD, HALIDE_ROOT = sys.argv[1:8]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_common import check, results  # noqa: E402

shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
wheels = glob.glob(os.path.join(WHEEL_DIR, "mlk-*.whl"))
check("one wheel in %s (scripts/build.sh makes it)" % WHEEL_DIR, len(wheels) == 1, str(wheels))
if len(wheels) != 1:
    print("FAIL: no wheel")
    sys.exit(1)
wheel = wheels[0]
check("the wheel is named for the project version %s" % VERSION, os.path.basename(wheel).startswith("mlk-%s-" % VERSION))

# The package as this test's own interpreter (.venv) imports it.
import mlk  # noqa: E402

site = os.path.dirname(os.path.dirname(os.path.abspath(mlk.__file__)))
check("the test venv imports the installed package (%s), not build/python" % site,
      os.path.basename(site) == "site-packages" and "build" not in os.path.relpath(mlk.__file__, sys.prefix).split(os.sep))

# RPATHs: relative to the package ($ORIGIN), never a path of the build machine.
with zipfile.ZipFile(wheel) as z:
    names = z.namelist()
    bins = [n for n in names if n.endswith(".so") or n.startswith("mlk/bin/")]
    check("the wheel carries the modules, the JIT plugin and the command (%d binaries)" % len(bins),
          {"mlk/libmlk_jit.so", "mlk/bin/mlk", "mlk/bin/mlk-rank", "mlk/torch.py", "mlk/_cli.py"} <= set(names)
          and any(n.startswith("mlk/_mlk.") for n in names) and any(n.startswith("mlk/_arrow.") for n in names),
          str(names))
    z.extractall(os.path.join(WORK, "unpacked"))
bad = []
for b in bins:
    dyn = subprocess.run(["readelf", "-d", os.path.join(WORK, "unpacked", b)], capture_output=True, text=True).stdout
    for line in dyn.splitlines():
        if "RPATH" in line or "RUNPATH" in line:
            path = line.split("[", 1)[1].rstrip("]")
            if any(p and not p.startswith("$ORIGIN") for p in path.split(":")):
                bad.append("%s: %s" % (b, path))
check("every RPATH in the wheel is relative ($ORIGIN)", not bad, "\n".join(bad))
# No path of the build machine's Halide SDK compiled in (the autoscheduler plugins are found
# next to the libHalide.so the process loaded).
sdk = os.path.join(HALIDE_ROOT, "lib64").encode()
bad = [b for b in bins if sdk in open(os.path.join(WORK, "unpacked", b), "rb").read()]
check("no binary of the wheel names the build's Halide SDK directory", not bad, str(bad))

# The installed package is this tree's: its Python files are the sources', its modules
# the build's (the GNU build ID survives stripping). Stale after an edit without
# scripts/build.sh, which installs it.
import hashlib  # noqa: E402


def build_id(path):
    notes = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
    return [line.split(":", 1)[1].strip() for line in notes.splitlines() if "Build ID" in line]


pkg = os.path.dirname(os.path.abspath(mlk.__file__))
stale = [f for f in os.listdir(os.path.join(SRC, "python", "mlk")) if f.endswith(".py") and
         hashlib.sha256(open(os.path.join(SRC, "python", "mlk", f), "rb").read()).digest() !=
         hashlib.sha256(open(os.path.join(pkg, f), "rb").read()).digest()]
for mod in [m for m in os.listdir(pkg) if m.endswith(".so")]:
    if build_id(os.path.join(pkg, mod)) != build_id(os.path.join(BUILD, "python", "mlk", mod)):
        stale.append(mod)
check("the package .venv imports is this tree's (run scripts/build.sh after an edit)", not stale,
      "differs from the tree: %s" % stale)

# A fresh venv: the wheel and its dependencies (numpy, halide, pyarrow) only.
venv = os.path.join(WORK, "venv")
base = getattr(sys, "_base_executable", sys.executable)
subprocess.run([base, "-m", "venv", venv], check=True)
py = os.path.join(venv, "bin", "python")
p = subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", wheel],
                   capture_output=True, text=True)
check("pip install of the wheel into a fresh venv", p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:])

probe = r"""
import os, sys
import numpy as np
import mlk
print("file", mlk.__file__)
print("version", mlk.__version__)
ops = mlk.load(sys.argv[1], cache=sys.argv[2])
x = np.random.default_rng(0).standard_normal((2, 3, 8)).astype(np.float32)
w = np.linspace(0.5, 1.5, 8).astype(np.float32)
y = np.asarray(ops.rmsnorm(x, w, 1e-6))
want = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w
print("err", float(np.abs(y - want).max()))
print("source", ops.rmsnorm.kernel(x, w, 1e-6).source)
from mlk import _arrow
print("arrow", _arrow.arrow_version())
"""
p = subprocess.run([py, "-c", probe, os.path.join(EXAMPLES, "norms.tl"), os.path.join(WORK, "cache.db")],
                   capture_output=True, text=True, cwd=WORK)
out = dict(line.split(" ", 1) for line in p.stdout.splitlines() if " " in line)
check("the fresh venv imports mlk from itself", p.returncode == 0 and out.get("file", "").startswith(venv),
      p.stdout + p.stderr[-3000:])
check("mlk.__version__ is the project version (%s)" % out.get("version"), out.get("version") == VERSION)
check("a kernel compiled by the wheel's JIT plugin agrees with numpy (max error %s)" % out.get("err"),
      out.get("source") == "default-jit" and float(out.get("err", "inf")) < 1e-5, p.stdout + p.stderr[-2000:])
check("the Arrow ingress loads libarrow from pyarrow (%s)" % out.get("arrow"), bool(out.get("arrow")))
p = subprocess.run([os.path.join(venv, "bin", "mlk"), "version"], capture_output=True, text=True, cwd=WORK)
check("the `mlk` entry point runs the bundled command", p.returncode == 0 and p.stdout.startswith("mlk %s" % VERSION),
      p.stdout + p.stderr)
p = subprocess.run([os.path.join(venv, "bin", "mlk"), "check", os.path.join(EXAMPLES, "mlp.tl")],
                   capture_output=True, text=True, cwd=WORK)
check("the `mlk` entry point checks a program", p.returncode == 0, p.stdout + p.stderr)

# The entry point of a package without its command says so (exit 127), naming the path.
bare = os.path.join(WORK, "bare", "mlk")
os.makedirs(bare)
shutil.copy(os.path.join(SRC, "python", "mlk", "_cli.py"), bare)
p = subprocess.run([sys.executable, os.path.join(bare, "_cli.py"), "version"], capture_output=True, text=True)
check("the entry point without its bundled command exits 127 naming it", p.returncode == 127 and
      "mlk: %s is missing; this mlk package has no command" % os.path.join(bare, "bin", "mlk") in p.stderr, p.stderr)

failed = [x for x in results if not x[1]]
for name, ok, note in results:
    print("%s %s%s" % ("ok  " if ok else "FAIL", name, "" if ok else "\n     " + note))
print("%d checks, %d failed" % (len(results), len(failed)))
sys.exit(1 if failed else 0)
