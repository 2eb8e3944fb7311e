#!/usr/bin/env bash
# GET throughput of `mlk serve` on the shared backend (not a test; the
# Performance part of the replicas work, docs/deploy.md): wrk on loopback
# against GET /v1/blobs/{sha256} of the largest file of one tuned artifact,
#   1. one replica (PostgreSQL + S3 backend, scripts/cluster.sh),
#   2. both replicas at once: two wrk processes started together, one per
#      replica, each with half the threads and connections of run 1; their
#      requests/s summed, the larger of their p99s,
#   3. one SQLite `mlk serve` (--cache FILE) with the same bytes,
# and prints one table of requests/s and p99. The replicas serve the blob from
# their local blob cache after the first GET (each is warmed by the
# byte-for-byte check below), so the runs measure the server and its database
# round trips, not S3. Everything, wrk included, shares this machine's cores
# (printed with the table): on a 2-core machine a second replica adds no CPU,
# so the comparison says what one machine's cores allow, not what two
# machines would.
#
# usage: bench/serve_replicas.sh [SECONDS] [CONNECTIONS] [WORK_DIR]
#   SECONDS      each wrk run (default 10)
#   CONNECTIONS  of runs 1 and 3; run 2 uses half on each replica (default 8, even)
#   WORK_DIR     default build/bench-serve-replicas (removed and re-made)
# Needs wrk (bench/setup_peers.sh installs it), the mlk binary ($MLK_BIN, else
# build/mlk) and what scripts/cluster.sh needs (PostgreSQL 15, .venv-moto).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
secs=${1:-10} conns=${2:-8} work=${3:-$root/build/bench-serve-replicas}
mlk="${MLK_BIN:-$root/build/mlk}"
die() { echo "serve_replicas.sh: $*" >&2; exit 1; }
command -v wrk >/dev/null || die "wrk is not installed (bash bench/setup_peers.sh)"
[[ "$secs" =~ ^[1-9][0-9]*$ ]] || die "SECONDS must be a positive integer (given \`$secs\`)"
[[ "$conns" =~ ^[1-9][0-9]*$ ]] && ((conns % 2 == 0)) ||
  die "CONNECTIONS must be a positive even integer (given \`$conns\`)"
[ -x "$mlk" ] || die "no mlk binary at $mlk (build first, or set MLK_BIN)"

rm -rf "$work" && mkdir -p "$work"
export MLK_CLUSTER_DIR="$work/cluster" MLK_BIN="$mlk"
serve_pid=""
cleanup() {
  [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null || true
  bash "$root/scripts/cluster.sh" stop || true
}
trap cleanup EXIT

# One tuned artifact in a local store (the bytes all three runs serve).
src=$work/tuned.db
echo "tuning sgemm [M=40,K=48,N=24] host, 3 trials ..." >&2
key=$("$mlk" tune "$root/examples/mlp.tl" --fn sgemm --dims M=40,K=48,N=24 --target host --trials 3 \
        --cache "$src" --json -q | python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["key"])')
read -r name digest size < <(sqlite3 -separator ' ' "$src" \
  "SELECT r.name, r.digest, r.size FROM refs r JOIN entries e ON e.id=r.entry_id WHERE e.key='$key' ORDER BY r.size DESC LIMIT 1")
sqlite3 "$src" "SELECT writefile('$work/blob', data) FROM blobs WHERE digest='$digest'" >/dev/null

# The cluster without workers (they would only poll for jobs), the artifact pushed through replica 1.
exports=$(MLK_CLUSTER_WORKERS=0 MLK_CLUSTER_THREADS="$conns" bash "$root/scripts/cluster.sh" start) || die "scripts/cluster.sh start failed"
eval "$exports"
url1=${MLK_SERVERS%,*} url2=${MLK_SERVERS#*,} rtok=$MLK_TOKEN
MLK_TOKEN=$rtok "$mlk" cache push "$key" --remote "$url1" --cache "$src" >/dev/null

# The SQLite server, as many threads as a replica: one per connection
# (cpp-httplib holds a thread per keep-alive connection; fewer threads than
# connections would measure the queue, not the server).
store=$work/serve.db
stok=$("$mlk" token create --cache "$store" --team bench --scopes read,write-blobs,write-entries 2>/dev/null)
"$mlk" serve --cache "$store" --listen 127.0.0.1:0 --threads "$conns" >"$work/serve.out" 2>"$work/serve.err" &
serve_pid=$!
for _ in $(seq 100); do grep -q listening "$work/serve.out" && break; sleep 0.1; done
surl=$(sed -E 's/.*listening on (http:[^ ]+).*/\1/' "$work/serve.out")
[ -n "$surl" ] || { cat "$work/serve.err" >&2; die "the SQLite mlk serve did not start"; }
MLK_TOKEN=$stok "$mlk" cache push "$key" --remote "$surl" --cache "$src" >/dev/null

# The same bytes from each (this also warms each replica's blob cache).
for u in "$url1|$rtok" "$url2|$rtok" "$surl|$stok"; do
  curl -sf -o "$work/check" -H "Authorization: Bearer ${u#*|}" "${u%|*}/v1/blobs/$digest" ||
    die "GET ${u%|*}/v1/blobs/$digest failed"
  cmp -s "$work/check" "$work/blob" || die "${u%|*} served other bytes than the store holds"
done

wrk_run() {  # OUT THREADS CONNECTIONS TOKEN URL
  wrk -t"$2" -c"$3" -d"${secs}s" --latency -H "Authorization: Bearer $4" "$5/v1/blobs/$digest" >"$1"
}
rps() { awk '/Requests\/sec/ {print $2}' "$1"; }
p99() { awk '$1=="99%" {print $2}' "$1"; }
errs() { grep -hE 'Non-2xx|Socket errors' "$@" | tr -s ' ' | paste -sd';' - || true; }
row() { printf '%-44s %12s %10s  %s\n' "$1" "$2" "$3" "$4"; }

wrk_run "$work/one.txt" 2 "$conns" "$rtok" "$url1"
wrk_run "$work/both1.txt" 1 $((conns / 2)) "$rtok" "$url1" &
w1=$!
wrk_run "$work/both2.txt" 1 $((conns / 2)) "$rtok" "$url2" &
w2=$!
wait "$w1" "$w2"
wrk_run "$work/sqlite.txt" 2 "$conns" "$stok" "$surl"

both_rps=$(awk -v a="$(rps "$work/both1.txt")" -v b="$(rps "$work/both2.txt")" 'BEGIN {printf "%.2f", a + b}')
# p99 of the two runs: the larger, compared in microseconds (wrk prints us, ms or s).
both_p99=$(for f in "$work/both1.txt" "$work/both2.txt"; do p99 "$f"; done | awk '
  { v = $1; u = 1; if (v ~ /us$/) u = 1; else if (v ~ /ms$/) u = 1000; else if (v ~ /s$/) u = 1000000
    n = v; sub(/[a-z]+$/, "", n); if (n * u > best) { best = n * u; text = v } }
  END { print text }')

echo "GET /v1/blobs/{sha256}: $name of sgemm [M=40,K=48,N=24] host, $size bytes, sha256 ${digest:0:16}"
echo "wrk ${secs}s on loopback, $conns connections in all per run; servers and wrk share this machine's $(nproc) cores"
row "setup" "requests/s" "p99" "errors"
row "one replica (PostgreSQL + S3, $conns threads)" "$(rps "$work/one.txt")" "$(p99 "$work/one.txt")" "$(errs "$work/one.txt")"
row "two replicas (one wrk each, summed)" "$both_rps" "$both_p99" "$(errs "$work/both1.txt" "$work/both2.txt")"
row "SQLite mlk serve ($conns threads)" "$(rps "$work/sqlite.txt")" "$(p99 "$work/sqlite.txt")" "$(errs "$work/sqlite.txt")"
