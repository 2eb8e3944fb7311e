#!/usr/bin/env bash
# The GPU checks of mlk's CUDA path (docs/targets.md, "Checking on a GPU"), in
# one script for a machine with an NVIDIA GPU that has only the working tree
# and a carried build directory:
#   1. the CUDA tests of mlk_halide_tests (on a GPU they run kernels on device
#      memory and compare with the reference);
#   2. mlk tune --target cuda_sm90 with measurement (--require-measured) and
#      verification of SGEMM 4096^3 F32 and F16, softmax and RMSNorm;
#   3. the peers: cuBLAS SGEMM / F16 GemmEx at 4096^3 and a device-to-device
#      bandwidth probe (mlk-cuda-peer, bench/cuda_peer.cpp);
# and writes every result under $OUT (default BUILD/device_check), one file
# per step plus summary.txt.
#
#   scripts/device_check.sh [--dry-run] [BUILD_DIR]     (default BUILD_DIR: build)
#
# --dry-run (any machine): checks that every file the run needs exists and
# that the binaries' libraries resolve, runs the peer to see that it reports
# a missing driver cleanly, and prints what a run would do and how much the
# build directory weighs (the device tool carries 64 MiB at most). Exit 0
# when the run could start, 1 otherwise. It builds nothing: build first.
set -uo pipefail
dry=0
if [ "${1:-}" = "--dry-run" ]; then dry=1; shift; fi
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" 2>/dev/null && pwd) || { echo "device_check: no build directory ${1:-$root/build}" >&2; exit 1; }
out=${OUT:-$build/device_check}
mkdir -p "$out"
summary=$out/summary.txt
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }

mlk=$build/mlk
tests=$build/tests/mlk_halide_tests
peer=$build/mlk-cuda-peer
# name | program | fn | dims
kernels=(
  "sgemm_f32|$root/examples/mlp.tl|sgemm|M=4096,K=4096,N=4096"
  "sgemm_f16|$root/bench/device_kernels.tl|hgemm|M=4096,K=4096,N=4096"
  "softmax|$root/examples/softmax.tl|softmax_builtin|N=16384,C=4096"
  "rmsnorm|$root/examples/norms.tl|rmsnorm|B=16,S=1024,D=4096"
)

missing=0
for f in "$mlk" "$tests" "$peer"; do
  if [ -x "$f" ]; then say "have: $f"; else say "MISSING: $f (build it: scripts/build.sh)"; missing=1; fi
done
for k in "${kernels[@]}"; do
  IFS='|' read -r name prog fn dims <<< "$k"
  [ -f "$prog" ] || { say "MISSING: $prog"; missing=1; }
done
for b in "$mlk" "$tests"; do
  [ -x "$b" ] || continue
  unresolved=$(ldd "$b" 2>/dev/null | awk '/not found/ {print $1}' | tr '\n' ' ')
  if [ -n "$unresolved" ]; then say "UNRESOLVED for $(basename "$b"): $unresolved"; missing=1; fi
done

if [ "$dry" = 1 ]; then
  say "dry run: the peer without a device must say what is missing:"
  if [ -x "$peer" ]; then
    "$peer" bandwidth 1 > "$out/peer_dry.json"
    rc=$?
    say "  mlk-cuda-peer bandwidth -> exit $rc: $(cat "$out/peer_dry.json")"
    if [ "$rc" != 0 ] && [ "$rc" != 2 ]; then missing=1; fi
  fi
  for k in "${kernels[@]}"; do
    IFS='|' read -r name prog fn dims <<< "$k"
    if [ -x "$mlk" ] && ! "$mlk" check "$prog" > /dev/null 2>&1; then say "  $prog does not check"; missing=1; fi
    say "  would run: mlk tune $prog --fn $fn --target cuda_sm90 --dims $dims --require-measured --json"
  done
  say "  would run: mlk_halide_tests --gtest_filter='Cuda*:GpuCostModel*'"
  say "  would run: mlk-cuda-peer bandwidth 1024; gemm 4096 4096 4096 f32; gemm 4096 4096 4096 f16"
  say "  the build directory: $(du -sh "$build" 2>/dev/null | cut -f1) (mlk $(du -sh "$mlk" 2>/dev/null | cut -f1));" \
      "libHalide.so: $(du -sh "$(ldd "$mlk" 2>/dev/null | awk '/libHalide/ {print $3}')" 2>/dev/null | cut -f1)"
  [ "$missing" = 0 ] && say "dry run: ready" || say "dry run: NOT ready (see above)"
  exit "$missing"
fi

[ "$missing" = 0 ] || { say "device_check: cannot start (see above)"; exit 1; }
command -v nvidia-smi > /dev/null && nvidia-smi > "$out/nvidia-smi.txt" 2>&1
"$mlk" targets > "$out/targets.txt" 2>&1

# 1. The CUDA tests.
"$tests" --gtest_filter='Cuda*:GpuCostModel*' > "$out/tests.txt" 2>&1
say "tests: exit $? ($(grep -c '^\[       OK' "$out/tests.txt") ok, $(grep -c '^\[  FAILED' "$out/tests.txt") failed lines)"

# 2. Tuning with measurement and verification.
export MLK_CACHE=$out/cache.db
for k in "${kernels[@]}"; do
  IFS='|' read -r name prog fn dims <<< "$k"
  timeout 150 "$mlk" tune "$prog" --fn "$fn" --target cuda_sm90 --dims "$dims" --trials 12 --time 60 \
    --require-measured --json --log "$out/tune_$name.log" > "$out/tune_$name.json" 2> "$out/tune_$name.err"
  say "tune $name: exit $? $(tr -d '\n' < "$out/tune_$name.json" | cut -c1-400)"
done

# 3. The peers.
"$peer" bandwidth 1024 > "$out/bandwidth.json" 2>&1
say "bandwidth: exit $? $(cat "$out/bandwidth.json")"
for dt in f32 f16; do
  "$peer" gemm 4096 4096 4096 "$dt" > "$out/cublas_$dt.json" 2>&1
  say "cublas $dt: exit $? $(cat "$out/cublas_$dt.json")"
done
say "results in $out"
