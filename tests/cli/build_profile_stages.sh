#!/usr/bin/env bash
# build_profile_stages.sh MLK PYTHON PYTHON_DIR EXAMPLES WORK: `mlk build
# --profile-stages` builds Halide's profiler into the kernel; a process that
# ran it prints, at exit, the time of each stage (docs/benchmarks.md). A
# build without the flag prints nothing of the kind.
set -u
mlk=$1; python=$2; pydir=$3; examples=$4; work=$5
rm -rf "$work"; mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
for mode in profiled plain; do
  flag=""; [ "$mode" = profiled ] && flag=--profile-stages
  "$mlk" build "$examples/norms.tl" --fn rmsnorm --target host --dims B=2,S=8,D=64 --no-cache $flag \
    -o "$work/$mode" > "$work/$mode.build" 2>&1 || fail "build $mode: $(cat "$work/$mode.build")"
  PYTHONPATH="$pydir" "$python" - "$work/$mode" > "$work/$mode.out" 2> "$work/$mode.err" <<'PY' || fail "run $mode: $(cat "$work/$mode.err")"
import sys
import numpy as np
import mlk
m = mlk.load(sys.argv[1])
x, w = np.ones((2, 8, 64), np.float32), np.ones(64, np.float32)
for _ in range(20):
    y = m.rmsnorm(x, w, np.array(1e-6, np.float32))
assert abs(float(y[0, 0, 0]) - 1.0) < 1e-3, y[0, 0, 0]
PY
done
grep -q '"halide_target": "[^"]*-profile' "$work/profiled/manifest.json" || fail "the manifest's target lacks -profile"
grep -q "^mlk_halide_rmsnorm$" "$work/profiled.out" || fail "no report of the pipeline: $(cat "$work/profiled.out")"
grep -q "total time: .* runs: 20 " "$work/profiled.out" || fail "no total of 20 runs: $(cat "$work/profiled.out")"
grep -q "total time" "$work/plain.out" && fail "a plain build printed a profile"
echo ok
