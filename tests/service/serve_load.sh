#!/usr/bin/env bash
# Load benchmark of `mlk serve` (not a test; docs/benchmarks.md, "The server";
# the runs: docs/benchmarks-history.md, "mlk serve load"): wrk on loopback
# against GET of a cached artifact's bytes, beside nginx serving the same
# bytes as a static file.
#
# usage: tests/service/serve_load.sh MLK_BINARY STORE_WITH_A_TUNED_ENTRY WORK_DIR [SECONDS] [CONNECTIONS]
# Needs wrk and nginx (Debian: wrk, nginx-light). Prints one line per run.
set -euo pipefail
mlk=$1 src=$2 work=$3 secs=${4:-10} conns=${5:-8}
rm -rf "$work" && mkdir -p "$work/www" "$work/nginx"
store=$work/serve.db
key=$(sqlite3 "$src" "SELECT key FROM entries WHERE ns='default' ORDER BY id LIMIT 1")
[ -n "$key" ] || { echo "no entry in namespace default of $src" >&2; exit 1; }
tok=$("$mlk" token create --cache "$store" --team bench --scopes read,write-blobs,write-entries 2>/dev/null)
"$mlk" serve --cache "$store" --listen 127.0.0.1:0 --threads "$conns" > "$work/serve.out" 2> "$work/serve.err" &
serve_pid=$!
trap 'kill $serve_pid 2>/dev/null || true; [ -f "$work/nginx/nginx.pid" ] && kill "$(cat "$work/nginx/nginx.pid")" 2>/dev/null || true' EXIT
for _ in $(seq 50); do grep -q listening "$work/serve.out" && break; sleep 0.1; done
url=$(sed -E 's/.*listening on (http:[^ ]+).*/\1/' "$work/serve.out")
MLK_TOKEN=$tok "$mlk" cache push "$key" --remote "$url" --cache "$src" >/dev/null
# The largest file of the entry: the kernel library.
read -r name digest size < <(sqlite3 -separator ' ' "$src" \
  "SELECT r.name, r.digest, r.size FROM refs r JOIN entries e ON e.id=r.entry_id WHERE e.key='$key' ORDER BY r.size DESC LIMIT 1")
sqlite3 "$src" "SELECT writefile('$work/www/blob', data) FROM blobs WHERE digest='$digest'" >/dev/null
echo "artifact file: $name, $size bytes, sha256 $digest"
port2=$((20000 + RANDOM % 20000))
cat > "$work/nginx/nginx.conf" <<CONF
worker_processes 2;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  keepalive_requests 1000;
  client_body_temp_path $work/nginx/body; proxy_temp_path $work/nginx/proxy;
  fastcgi_temp_path $work/nginx/fcgi; uwsgi_temp_path $work/nginx/uwsgi; scgi_temp_path $work/nginx/scgi;
  server { listen 127.0.0.1:$port2; root $work/www; }
}
CONF
nginx -c "$work/nginx/nginx.conf" -p "$work/nginx"
sleep 0.3
run() {  # label, wrk args...
  local label=$1; shift
  local out
  out=$(wrk -t2 -c"$conns" -d"${secs}s" --latency "$@")
  local rps p99 errs
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p99=$(awk '$1=="99%" {print $2}' <<<"$out")
  errs=$(grep -E 'Non-2xx|Socket errors' <<<"$out" || true)
  printf '%-34s %10s req/s  p99 %8s  %s\n' "$label" "$rps" "$p99" "$errs"
}
curl -sf -o "$work/check" -H "Authorization: Bearer $tok" "$url/v1/blobs/$digest"
cmp "$work/check" "$work/www/blob"
curl -sf -o "$work/check2" "http://127.0.0.1:$port2/blob"
cmp "$work/check2" "$work/www/blob"
run "mlk serve GET /v1/blobs/{sha256}" -H "Authorization: Bearer $tok" "$url/v1/blobs/$digest"
run "nginx static file" "http://127.0.0.1:$port2/blob"
run "mlk serve GET /v1/entries/{key}" -H "Authorization: Bearer $tok" "$url/v1/entries/$key"
run "mlk serve GET /healthz (no store)" "$url/healthz"
