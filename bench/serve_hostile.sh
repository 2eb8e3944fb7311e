#!/usr/bin/env bash
# Honest clients of `mlk serve` beside hostile ones (not a test;
# docs/benchmarks.md, "The server", and docs/benchmarks-history.md, "Hostile
# clients"; issue 28). Loopback only, bounded in connections and time, stops
# by itself:
#   1. quiet: 16 honest keep-alive connections (wrk, 2 threads) run a GET/PUT
#      mix for SECONDS: 3 GETs of a 64 KiB blob to 1 PUT of a 4 KiB ccache
#      object;
#   2. hostile: the same, while bench/serve_hostile.py runs idle sockets, slow
#      headers, trickled bodies, oversized and chunked uploads, deeply nested
#      JSON, range storms and oversized heads against the same server, from
#      127.0.0.2 and up (the honest clients are on 127.0.0.1); and, with a
#      hostile team's own write and read tokens (its namespace under a 64 MiB
#      quota): a metadata flood, benchmark-report amplification and history
#      reads, a read token's trickled uploads, 40 slow readers of an 8 MiB
#      blob, and 8 concurrent writers; /healthz is timed throughout.
# Prints honest requests/s, p99 and errors of both runs, what the hostile
# clients got, /healthz's latencies, and the server's peak RSS after each run.
# Everything shares this machine's cores: the hostile clients are paced, and
# run at the lowest priority (nice 19), so that they test the server's
# defences rather than race it for CPU (an attacker's own CPU is elsewhere).
#
# usage: bench/serve_hostile.sh [SECONDS] [WORK_DIR]
#   SECONDS   each run (default 60)
#   WORK_DIR  default build/bench-serve-hostile (removed and re-made)
# Needs wrk (bench/setup_peers.sh installs it), curl, the mlk binary ($MLK_BIN,
# else build/mlk) and the project's .venv (scripts/install.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
secs=${1:-60} work=${2:-$root/build/bench-serve-hostile}
mlk="${MLK_BIN:-$root/build/mlk}"
py="$root/.venv/bin/python"
die() { echo "serve_hostile.sh: $*" >&2; exit 1; }
command -v wrk >/dev/null || die "wrk is not installed (bash bench/setup_peers.sh)"
[[ "$secs" =~ ^[1-9][0-9]*$ ]] || die "SECONDS must be a positive integer (given \`$secs\`)"
[ -x "$mlk" ] || die "no mlk binary at $mlk (build first, or set MLK_BIN)"
[ -x "$py" ] || die "no $py (bash scripts/install.sh)"

rm -rf "$work" && mkdir -p "$work"
store=$work/serve.db
tok=$("$mlk" token create --cache "$store" --team bench --scopes read,write-blobs,write-entries 2>/dev/null)
mal=$("$mlk" token create --cache "$store" --team mallory --scopes read,write-blobs,write-entries 2>/dev/null)
mal_ro=$("$mlk" token create --cache "$store" --team mallory --scopes read 2>/dev/null)
"$mlk" serve --cache "$store" --listen 127.0.0.1:0 --quota mallory=64M --answer-memory 256M \
  > "$work/serve.out" 2> "$work/serve.err" &
serve_pid=$! hostile_pid=""
cleanup() {
  [ -n "$hostile_pid" ] && kill "$hostile_pid" 2>/dev/null || true
  kill "$serve_pid" 2>/dev/null || true
}
trap cleanup EXIT
for _ in $(seq 50); do grep -q listening "$work/serve.out" && break; sleep 0.1; done
url=$(sed -E 's/.*listening on (http:[^ ]+).*/\1/' "$work/serve.out")
port=${url##*:}
head -c 65536 /dev/urandom > "$work/blob"
digest=$(sha256sum "$work/blob" | cut -d' ' -f1)
curl -sf -o /dev/null -X PUT --data-binary @"$work/blob" -H "Authorization: Bearer $tok" \
  -H "Content-Type: application/octet-stream" "$url/v1/blobs/$digest" || die "cannot upload the blob to $url"
head -c 8388608 /dev/urandom > "$work/big"
big=$(sha256sum "$work/big" | cut -d' ' -f1)
curl -sf -o /dev/null -X PUT --data-binary @"$work/big" -H "Authorization: Bearer $mal" \
  -H "Content-Type: application/octet-stream" "$url/v1/blobs/$big" || die "cannot upload the 8 MiB blob to $url"
peak() { awk '/VmHWM/ {printf "%.0f MB", $2 / 1024}' "/proc/$serve_pid/status"; }

cat > "$work/mix.lua" <<'LUA'
-- 3 GETs of the blob to 1 PUT of a 4 KiB ccache object (1000 keys per thread).
local token, blob = os.getenv("MLK_BENCH_TOKEN"), os.getenv("MLK_BENCH_BLOB")
local object = string.rep("o", 4096)
local n = 0
request = function()
  n = n + 1
  if n % 4 == 0 then
    return wrk.format("PUT", string.format("/ccache/%040d", n % 1000),
                      {["Authorization"] = "Bearer " .. token, ["Content-Type"] = "application/octet-stream"}, object)
  end
  return wrk.format("GET", "/v1/blobs/" .. blob, {["Authorization"] = "Bearer " .. token})
end
LUA

honest() {  # label: one wrk run; prints a table row
  local out rps p99 errs
  out=$(MLK_BENCH_TOKEN=$tok MLK_BENCH_BLOB=$digest wrk -t2 -c16 -d"${secs}s" --timeout 5s --latency \
          -s "$work/mix.lua" "$url")
  echo "$out" > "$work/$(tr -c 'a-z\n' '_' <<<"$1").wrk"
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p99=$(awk '$1=="99%" {print $2}' <<<"$out")
  errs=$(grep -E 'Non-2xx|Socket errors' <<<"$out" | tr -s ' ' | paste -sd ';' || true)
  printf '%-28s %10s req/s  p99 %8s  errors: %s\n' "$1" "$rps" "$p99" "${errs:-none}"
}

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores" >&2
honest "honest, quiet"
echo "server peak RSS after the quiet run: $(peak)"
nice -n 19 "$py" "$root/bench/serve_hostile.py" "$port" "$tok" "$digest" "$((secs + 5))" "$mal" "$mal_ro" "$big" \
  > "$work/hostile.json" &
hostile_pid=$!
sleep 3  # the hostile clients in place
honest "honest, beside hostile"
wait "$hostile_pid" || true
hostile_pid=""
echo "hostile clients (kind: outcome count): $(cat "$work/hostile.json")"
health=$(curl -s -o /dev/null -w '%{http_code} in %{time_total} s' "$url/healthz" || echo "no answer")
echo "after the run: /healthz $health"
echo "server peak RSS after the hostile run: $(peak)"
