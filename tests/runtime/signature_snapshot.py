"""The signature snapshot test: every public fn of examples/*.tl and
examples/*/*.tl is built with `mlk build`, and what its manifest.json says of
the kernel's public face (entry symbol, ABI version, dimension variables,
parameters with dtypes and shapes, result, refinements) must equal the
committed snapshot, so that an accidental signature change fails CI with a
readable diff. It stands beside the C ABI snapshot (abi_snapshot.sh).

An intended change updates the snapshot in the same commit:
  tests/runtime/signature_snapshot.py build/mlk examples tests/runtime/signature_snapshot.txt --update

usage: signature_snapshot.py MLK EXAMPLES_DIR SNAPSHOT [--update]
       signature_snapshot.py MLK --self-test
Exits 0 when the snapshot matches (or was updated), 1 with a diff when not.
"""
import difflib
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HEADER = [
    "# The public kernels of examples/ as `mlk build` writes them in manifest.json: the entry",
    "# symbol, ABI version and signature of each. Checked by the test runtime.signature_snapshot;",
    "# an intended change updates it in the same commit (docs/artifacts.md, \"The signature snapshot\"):",
    "#   tests/runtime/signature_snapshot.py build/mlk examples tests/runtime/signature_snapshot.txt --update",
]
FN_LINE = re.compile(r"^fn (\w+) \[([^\]]*)\] .* public$")


class Failure(Exception):
    pass


def public_fns(mlk, path):
    """[(fn, [dim vars])] of the public fns of a .tl file, in source order."""
    p = subprocess.run([mlk, "check", "--emit-ir", path], capture_output=True, text=True)
    if p.returncode != 0:
        raise Failure("`mlk check --emit-ir %s` failed (exit %d):\n%s" % (path, p.returncode, p.stderr))
    out = []
    for line in p.stdout.splitlines():
        m = FN_LINE.match(line)
        if m:
            out.append((m.group(1), [d.strip() for d in m.group(2).split(",") if d.strip()]))
    return out


def describe(label, fn, manifest):
    sig = manifest["signature"]

    def shape(s):
        return "[" + ", ".join(s) + "]"
    lines = ["%s %s" % (label, fn),
             "  entry %s (ABI %d)" % (manifest["entry_symbol"], manifest["abi_version"]),
             "  dims %s, unbound %s" % (shape(sig["dim_vars"]), shape(sig["unbound_dims"]))]
    for p in sig["params"]:
        lines.append("  param %s: %s %s" % (p["name"], p["dtype"], shape(p["shape"])))
    lines.append("  result %s %s" % (sig["result"]["dtype"], shape(sig["result"]["shape"])))
    lines.append("  refinements: %s" % ("; ".join(sig["refinements"]) or "none"))
    return lines


def snapshot(mlk, files, label_of, work):
    """The snapshot text of the public fns of `files` (built in `work`)."""
    lines = list(HEADER)
    for path in files:
        for fn, dims in public_fns(mlk, path):
            out = os.path.join(work, "%s_%s" % (os.path.basename(path), fn))
            # The signature does not depend on the shape the schedule is made for: 8 for every dim.
            cmd = [mlk, "build", path, "--fn", fn, "--target", "host", "--no-cache", "-o", out]
            if dims:
                cmd += ["--dims", ",".join("%s=8" % d for d in dims)]
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                raise Failure("`%s` failed (exit %d):\n%s" % (" ".join(cmd), p.returncode, p.stderr))
            with open(os.path.join(out, "manifest.json")) as f:
                lines += describe(label_of(path), fn, json.load(f))
            shutil.rmtree(out)
    return "\n".join(lines) + "\n"


def example_files(examples):
    return sorted(glob.glob(os.path.join(examples, "*.tl")) + glob.glob(os.path.join(examples, "*", "*.tl")))


def check(current, snapshot_path, how_to_update):
    with open(snapshot_path) as f:
        committed = f.read()
    if committed == current:
        return True, ""
    diff = "".join(difflib.unified_diff(committed.splitlines(True), current.splitlines(True),
                                        snapshot_path + " (committed)", "now (mlk build)"))
    return False, diff + ("signature_snapshot: the signature of a public kernel changed (diff above: - committed, "
                          "+ now). If intended, update the snapshot in the same commit:\n  %s\n" % how_to_update)


SELF_TEST_PROGRAM = "public fn square [N](x: Tensor[F32, [N]]) -> Tensor[F32, [N]] =\n  x * x\n"


def self_test(mlk):
    """A program matches its own snapshot; changing its dtype fails with a diff naming the fn's lines."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "square.tl")
        with open(src, "w") as f:
            f.write(SELF_TEST_PROGRAM)
        label = lambda p: "examples/" + os.path.basename(p)  # noqa: E731
        snap = os.path.join(tmp, "snapshot.txt")
        with open(snap, "w") as f:
            f.write(snapshot(mlk, [src], label, tmp))
        ok, _ = check(snapshot(mlk, [src], label, tmp), snap, "(self-test)")
        if not ok:
            raise Failure("self-test: an unchanged program does not match its own snapshot")
        with open(src, "w") as f:
            f.write(SELF_TEST_PROGRAM.replace("F32", "F64"))
        ok, diff = check(snapshot(mlk, [src], label, tmp), snap, "(self-test)")
        want = ["-  param x: F32 [N]", "+  param x: F64 [N]", "-  result F32 [N]", "+  result F64 [N]",
                "signature_snapshot: the signature of a public kernel changed"]
        if ok or not all(w in diff for w in want):
            raise Failure("self-test: a changed dtype is not reported as expected:\n" + diff)
    print("signature_snapshot self-test passed")


def main():
    if sys.argv[2:] == ["--self-test"]:
        try:
            self_test(sys.argv[1])
            return 0
        except Failure as e:
            print("signature_snapshot: %s" % e, file=sys.stderr)
            return 1
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    mlk, examples, snapshot_path = sys.argv[1:4]
    try:
        root = os.path.dirname(os.path.abspath(examples))
        label = lambda p: os.path.relpath(p, root)  # noqa: E731
        with tempfile.TemporaryDirectory() as work:
            current = snapshot(mlk, example_files(examples), label, work)
        if sys.argv[4:] == ["--update"]:
            with open(snapshot_path, "w") as f:
                f.write(current)
            print("updated %s" % snapshot_path)
            return 0
        ok, diff = check(current, snapshot_path, "%s %s %s %s --update" % (sys.argv[0], mlk, examples, snapshot_path))
        if not ok:
            sys.stderr.write(diff)
            return 1
        print("signature_snapshot: every public kernel of %s matches %s" % (examples, snapshot_path))
        return 0
    except Failure as e:
        print("signature_snapshot: %s" % e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
