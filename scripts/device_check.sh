#!/usr/bin/env bash
# The GPU check of mlk's CUDA path (docs/targets.md, "Checking on a GPU"), in
# three steps, so that the GPU machine needs neither Halide nor a compiler:
#
#   scripts/device_check.sh --prepare DIR [BUILD]
#       here: tunes SGEMM 4096^3 F32 and F16, softmax and RMSNorm for cuda_sm90
#       (ranked by the cost model) and exports each search's best candidates as
#       built artifacts (`mlk tune --export-candidates`) to DIR/kernels/NAME,
#       with the runner mlk-measure, the peer mlk-cuda-peer (cuBLAS and a
#       bandwidth probe) and DIR/run.sh; refuses a set that, with a stripped
#       libmlk_runtime.so, takes 48 MiB or more. MLK_DEVICE_TRIALS: the trials
#       of each search (default 24).
#   bash DIR/run.sh
#       there: mlk-measure on every kernel's candidates, then the peers; the
#       results go to $OUT (default DIR/results), one file per kernel plus
#       peers.json, nvidia-smi.txt and run.log.
#   scripts/device_check.sh --import RESULTS DIR [BUILD]
#       here again: imports each kernel's measurements (`mlk tune
#       --import-measurements`), stores the winners in the cache ($MLK_CACHE,
#       default RESULTS/cache.db) and prints the table of mlk against cuBLAS and
#       the copy bandwidth (Markdown) for docs/benchmarks.md.
#
#   scripts/device_check.sh --dry-run [BUILD]
#       all three on this machine with CPU candidates at small shapes (the
#       `host` profile): the set is prepared, measured here by mlk-measure, and
#       imported; the peer must report the missing driver cleanly. A ctest.
#
# BUILD is the build directory (default build). Exit 0 on success.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
limit_mib=48

die() { echo "device_check: $*" >&2; exit 1; }

mode=${1:-}
case "$mode" in
  --prepare) [ $# -ge 2 ] || die "--prepare needs DIR"; dir=$2; build=${3:-$root/build} ;;
  --import) [ $# -ge 3 ] || die "--import needs RESULTS and DIR"; results=$2; dir=$3; build=${4:-$root/build} ;;
  --dry-run) build=${2:-$root/build} ;;
  *) die "usage: device_check.sh --prepare DIR [BUILD] | --import RESULTS DIR [BUILD] | --dry-run [BUILD]" ;;
esac
build=$(cd "$build" 2>/dev/null && pwd) || die "no build directory (build first: scripts/build.sh)"
mlk=$build/mlk
for b in "$mlk" "$build/mlk-measure" "$build/mlk-cuda-peer"; do
  [ -x "$b" ] || die "missing $b (build it: scripts/build.sh)"
done

# name | program | fn | dims : the check's kernels (GPU), or their CPU stand-ins (--dry-run)
gpu_kernels=(
  "sgemm_f32|examples/mlp.tl|sgemm|M=4096,K=4096,N=4096"
  "sgemm_f16|bench/device_kernels.tl|hgemm|M=4096,K=4096,N=4096"
  "softmax|examples/softmax.tl|softmax_builtin|N=16384,C=4096"
  "rmsnorm|examples/norms.tl|rmsnorm|B=16,S=1024,D=4096"
)
cpu_kernels=(
  "sgemm_f32|examples/mlp.tl|sgemm|M=128,K=128,N=128"
  "softmax|examples/softmax.tl|softmax_builtin|N=256,C=256"
  "rmsnorm|examples/norms.tl|rmsnorm|B=2,S=64,D=256"
)

# prepare DIR TARGET TRIALS KERNEL...: the candidate sets, the binaries, run.sh.
prepare() {
  local dir=$1 target=$2 trials=$3; shift 3
  [ -e "$dir" ] && [ -n "$(ls -A "$dir" 2>/dev/null)" ] && die "$dir is not empty"
  mkdir -p "$dir/kernels" || die "cannot create $dir"
  local k name prog fn dims
  for k in "$@"; do
    IFS='|' read -r name prog fn dims <<< "$k"
    echo "device_check: exporting $name ($fn at $dims) for $target" >&2
    "$mlk" tune "$root/$prog" --fn "$fn" --target "$target" --dims "$dims" --trials "$trials" --time 120 \
      --no-autoschedulers --export-candidates "$dir/kernels/$name" --candidates 8 --no-cache -q \
      --log "$dir/$name.tuning.jsonl" >&2 || die "exporting $name failed"
    rm -f "$dir/$name.tuning.jsonl"
    printf '%s|%s|%s|%s\n' "$name" "$prog" "$fn" "$dims" >> "$dir/kernels.txt"
  done
  cp "$build/mlk-measure" "$build/mlk-cuda-peer" "$dir/" || die "cannot copy the binaries"
  cp "$root/scripts/device_run.sh" "$dir/run.sh"
  # The runner's one library beyond libc, for a machine without OpenSSL 3 (run.sh uses it only then).
  mkdir -p "$dir/lib" && cp "$(ldd "$build/mlk-measure" | awk '/libcrypto/ {print $3}')" "$dir/lib/" ||
    die "cannot copy libcrypto for the runner"
  # The budget counts the runtime library too (stripped), though mlk-measure
  # links the artifact loader statically and the set does not carry it.
  local kib rt_kib tmp
  kib=$(du -sk "$dir" | cut -f1)
  tmp=$(mktemp) && strip -o "$tmp" "$build/libmlk_runtime.so" && rt_kib=$(du -k "$tmp" | cut -f1) && rm -f "$tmp" ||
    die "cannot strip $build/libmlk_runtime.so"
  echo "device_check: $dir holds $kib KiB; with a stripped libmlk_runtime.so ($rt_kib KiB)" \
       "$(( (kib + rt_kib) / 1024 )) MiB, the limit is $limit_mib MiB" >&2
  [ $((kib + rt_kib)) -lt $((limit_mib * 1024)) ] || die "$dir is over $limit_mib MiB"
  echo "device_check: prepared $dir; on the GPU machine run: bash $dir/run.sh" >&2
}

# import RESULTS DIR TARGET: each kernel's measurements into the cache; the table.
import() {
  local results=$1 dir=$2 target=$3 name prog fn dims failed=0
  export MLK_CACHE=${MLK_CACHE:-$results/cache.db}
  while IFS='|' read -r name prog fn dims; do
    "$mlk" tune "$root/$prog" --fn "$fn" --target "$target" --dims "$dims" --json -q \
      --import-measurements "$results/$name.json" --export-candidates "$dir/kernels/$name" \
      > "$results/$name.import.json" || { echo "device_check: importing $name failed" >&2; failed=1; }
  done < "$dir/kernels.txt"
  python3 "$root/scripts/device_table.py" "$results" "$dir/kernels.txt" || failed=1
  return $failed
}

case "$mode" in
  --prepare) prepare "$dir" cuda_sm90 "${MLK_DEVICE_TRIALS:-24}" "${gpu_kernels[@]}" ;;
  --import) import "$results" "$dir" cuda_sm90 ;;
  --dry-run)
    work=${OUT:-$build/device_check_dry}
    rm -rf "$work" && mkdir -p "$work" || die "cannot create $work"
    prepare "$work/set" host 6 "${cpu_kernels[@]}"
    OUT=$work/results bash "$work/set/run.sh" || die "run.sh failed"
    for k in "${cpu_kernels[@]}"; do
      IFS='|' read -r name _ <<< "$k"
      [ -s "$work/results/$name.json" ] || die "no measurements of $name"
    done
    grep -q '"missing": "cuda"' "$work/results/peers.json" || die "the peer did not report the missing driver"
    import "$work/results" "$work/set" host || die "import failed"
    echo "device_check: dry run passed" ;;
esac
