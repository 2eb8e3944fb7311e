#!/usr/bin/env bash
# Tuning throughput of measurement workers (not a test; the Performance part
# of the workers work, docs/deploy.md, "Measurement workers"): candidates
# measured per minute by `mlk tune --workers cpu-loopback` on the cluster of
# scripts/cluster.sh started with one worker, then with two.
#
# A tune sends as many candidates at once as its key has live workers when it
# starts (TuneOptions::parallel_measurements): the rule seeds go out
# together, and each evolution batch of three picks as two, then one; the
# default schedule and the final round go one at a time. So the row of one
# tune says what two workers give a single tune, and the row of TUNES tunes
# started together (each of a different shape of sgemm, examples/mlp.tl, so
# none is a cache hit) what they give when tunes keep them busy. The column
# "at once" is how many candidates a tune may send at once (the live workers
# it found, from its progress line), not a measured overlap.
# Candidates are the jobs the workers measured (the tunes' `[workers ...] job
# N measured by worker NAME` lines); the rate is their number over the wall
# time from the first tune's start to the last one's end. Tuners, workers,
# replicas and PostgreSQL all share this machine's cores (printed with the
# table): on a 2-core machine two workers compete with everything else, so
# the numbers say what one machine allows, not what two worker machines would.
#
# usage: bench/worker_throughput.sh [TRIALS] [TUNES] [WORK_DIR]
#   TRIALS    --trials of each tune (default 20)
#   TUNES     how many tunes run at once in the second run (default 2)
#   WORK_DIR  default build/bench-worker-throughput (removed and re-made)
# Needs the mlk binary ($MLK_BIN, else build/mlk) and what scripts/cluster.sh
# needs (PostgreSQL 15, .venv-moto).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
trials=${1:-20} tunes=${2:-2} work=${3:-$root/build/bench-worker-throughput}
mlk="${MLK_BIN:-$root/build/mlk}"
die() { echo "worker_throughput.sh: $*" >&2; exit 1; }
[[ "$trials" =~ ^[1-9][0-9]*$ ]] || die "TRIALS must be a positive integer (given \`$trials\`)"
[[ "$tunes" =~ ^[1-9][0-9]*$ ]] || die "TUNES must be a positive integer (given \`$tunes\`)"
[ -x "$mlk" ] || die "no mlk binary at $mlk (build first, or set MLK_BIN)"

rm -rf "$work" && mkdir -p "$work"
export MLK_CLUSTER_DIR="$work/cluster" MLK_BIN="$mlk"
trap 'bash "$root/scripts/cluster.sh" stop || true' EXIT
unset MLK_CACHE MLK_NAMESPACES

now() { date +%s.%N; }
row() { printf '%-8s %-14s %-8s %10s %8s %16s  %s\n' "$@"; }
results=()

# RUN_DIR TUNE_COUNT FIRST_SHAPE: TUNE_COUNT tunes at once, shapes M=32+8*i for
# i from FIRST_SHAPE; prints "CANDIDATES SECONDS AT_ONCE WORKERS_USED" (AT_ONCE:
# the most candidates a tune may send at once, from its progress line).
timed_tunes() {
  local dir=$1 count=$2 first=$3 i pids=() t0 t1
  mkdir -p "$dir"
  t0=$(now)
  for ((i = 0; i < count; i++)); do
    MLK_LOCAL_CACHE="$dir/mirror$i.db" "$mlk" tune "$root/examples/mlp.tl" --fn sgemm \
      --dims "M=$((32 + 8 * (first + i))),K=48,N=24" --target host --trials "$trials" --time 3600 \
      --no-autoschedulers --cache "$MLK_SERVERS" --workers cpu-loopback --worker-wait 120 \
      >"$dir/tune$i.out" 2>"$dir/tune$i.err" &
    pids+=($!)
  done
  for ((i = 0; i < count; i++)); do
    wait "${pids[$i]}" || { tail -20 "$dir/tune$i.err" >&2; die "tune $i in $dir failed (its stderr above)"; }
  done
  t1=$(now)
  local n used par
  n=$(cat "$dir"/tune*.err | grep -c "measured by worker" || true)
  par=$(cat "$dir"/tune*.err | grep -o "measuring up to [0-9]*" | awk '{print $4}' | sort -n | tail -1)
  used=$(cat "$dir"/tune*.err | grep -o "measured by worker [^ ]*" | awk '{print $4}' | sort -u | paste -sd, -)
  echo "$n $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}') ${par:-1} ${used:--}"
}

for workers in 1 2; do
  echo "cluster with $workers worker(s) ..." >&2
  exports=$(MLK_CLUSTER_WORKERS=$workers bash "$root/scripts/cluster.sh" start) ||
    die "scripts/cluster.sh start failed"
  eval "$exports"
  for count in 1 "$tunes"; do
    first=$([ "$count" = 1 ] && echo 0 || echo 1)
    timed_tunes "$work/w$workers-t$count" "$count" "$first" >"$work/result"
    read -r n secs par used <"$work/result"
    ((n > 0)) || die "no candidate was measured by a worker (see $work/w$workers-t$count/tune*.err)"
    rate=$(awk -v n="$n" -v s="$secs" 'BEGIN {printf "%.1f", 60 * n / s}')
    results+=("$workers|$count|$par|$n|$secs|$rate|$used")
  done
  bash "$root/scripts/cluster.sh" stop
done

echo "mlk tune --workers cpu-loopback: sgemm [M=32+8i,K=48,N=24] host, --trials $trials each, no autoschedulers"
echo "tuners, workers, replicas and PostgreSQL share this machine's $(nproc) cores"
row "workers" "tunes at once" "at once" "candidates" "wall s" "candidates/min" "measured by"
for r in "${results[@]}"; do
  IFS='|' read -r w c par n s rate used <<<"$r"
  row "$w" "$c" "$par" "$n" "$s" "$rate" "$used"
done
