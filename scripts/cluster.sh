#!/usr/bin/env bash
# The shared backend of `mlk serve` on one machine, on loopback only
# (docs/deploy.md): PostgreSQL 15 (initdb into a fresh folder), an S3
# endpoint (moto_server from .venv-moto, made by scripts/install.sh), two
# `mlk serve` replicas on the same database and bucket, and measurement
# workers (`mlk worker --device-key cpu-loopback`, named worker1, worker2, ...:
# $MLK_CLUSTER_WORKERS of them, else two; their lease is $MLK_CLUSTER_LEASE
# seconds, else 30). Each replica serves with $MLK_CLUSTER_THREADS threads,
# else 4 (cpp-httplib gives a keep-alive connection one thread).
#
#   scripts/cluster.sh start    prints `export` lines: MLK_SERVERS (the
#                               replicas' URLs, comma-separated), MLK_TOKEN
#                               (read and write in namespace `default`) and
#                               what tests need besides (pids, URLs, an
#                               admin token); the same lines go to DIR/env
#   scripts/cluster.sh status   each component: up or down; exit 1 when any is down
#   scripts/cluster.sh stop     ends all of it and removes DIR
#
# DIR is $MLK_CLUSTER_DIR, else build/cluster. The mlk binary is $MLK_BIN,
# else build/mlk. PostgreSQL refuses to run as root: as root, the server runs
# as the `postgres` user (runuser) on a folder it owns.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${MLK_CLUSTER_DIR:-$root/build/cluster}"
mlk="${MLK_BIN:-$root/build/mlk}"
pgbin=/usr/lib/postgresql/15/bin
moto="$root/.venv-moto/bin/moto_server"

die() { echo "cluster.sh: $*" >&2; exit 1; }

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Runs a PostgreSQL program as the user that owns the data folder.
as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

wait_http() {  # URL SECONDS
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    curl -s -o /dev/null "$1" && return 0
    sleep 0.1
  done
  return 1
}

start_replica() {  # N: starts replica N, writes its pid and url to DIR
  local n=$1 out="$dir/replica$1.out"
  AWS_ACCESS_KEY_ID=mlk AWS_SECRET_ACCESS_KEY=mlk-secret \
    setsid "$mlk" serve --store "$(cat "$dir/store")" --blobs "$(cat "$dir/blobs")" \
    --blob-cache "$dir/replica$n-blobs" --listen 127.0.0.1:0 --threads "${MLK_CLUSTER_THREADS:-4}" >"$out" 2>"$dir/replica$n.log" &
  echo $! >"$dir/replica$n.pid"
  local i
  for ((i = 0; i < 100; i++)); do
    if grep -q "listening on" "$out" 2>/dev/null; then
      sed -n 's/.*listening on \(http:\/\/[0-9.:]*\).*/\1/p' "$out" >"$dir/replica$n.url"
      return 0
    fi
    kill -0 "$(cat "$dir/replica$n.pid")" 2>/dev/null || break
    sleep 0.1
  done
  cat "$dir/replica$n.log" >&2
  die "replica $n did not start (log above)"
}

start_worker() {  # N TOKEN: starts worker N on both replicas, writes its pid to DIR
  local n=$1
  MLK_TOKEN=$2 setsid "$mlk" worker --server "$(cat "$dir/replica1.url"),$(cat "$dir/replica2.url")" \
    --device-key cpu-loopback --run-artifacts --name "worker$n" --lease "${MLK_CLUSTER_LEASE:-30}" >"$dir/worker$n.out" \
    2>"$dir/worker$n.log" &
  echo $! >"$dir/worker$n.pid"
  local i
  for ((i = 0; i < 100; i++)); do
    grep -q "registered as worker" "$dir/worker$n.log" 2>/dev/null && return 0
    kill -0 "$(cat "$dir/worker$n.pid")" 2>/dev/null || break
    sleep 0.1
  done
  cat "$dir/worker$n.log" >&2
  die "worker $n did not start (log above)"
}

start_moto() {  # on the port in DIR/s3port; moto keeps its objects in memory only
  local s3port
  s3port=$(cat "$dir/s3port")
  setsid "$moto" -H 127.0.0.1 -p "$s3port" >>"$dir/moto.log" 2>&1 &
  echo $! >"$dir/moto.pid"
  wait_http "http://127.0.0.1:$s3port/" 30 || { cat "$dir/moto.log" >&2; die "moto_server did not start"; }
}

start() {
  [ -e "$dir/env" ] && die "a cluster is already running in $dir (scripts/cluster.sh stop first)"
  local nworkers="${MLK_CLUSTER_WORKERS:-2}" n pids=""
  [[ "$nworkers" =~ ^[0-9]+$ ]] || die "MLK_CLUSTER_WORKERS=$nworkers is not a whole number of workers"
  [ -x "$mlk" ] || die "no mlk binary at $mlk (build first, or set MLK_BIN)"
  [ -x "$pgbin/initdb" ] || die "PostgreSQL 15 is not installed ($pgbin/initdb); run scripts/install.sh"
  [ -x "$moto" ] || die "moto_server is not installed ($moto); run scripts/install.sh"
  rm -rf "$dir"
  mkdir -p "$dir/pg" "$dir/pgsock"
  [ "$(id -u)" = 0 ] && chown postgres "$dir/pg" "$dir/pgsock"
  local pgport s3port
  pgport=$(free_port)
  s3port=$(free_port)
  as_pg "$pgbin/initdb" -D "$dir/pg/data" -A trust -U mlk --no-sync >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; die "initdb failed"; }
  as_pg "$pgbin/pg_ctl" -D "$dir/pg/data" -l "$dir/pg/server.log" -w -t 30 \
    -o "-c listen_addresses=127.0.0.1 -p $pgport -k $dir/pgsock -c fsync=off -c max_connections=200" start >/dev/null ||
    { cat "$dir/pg/server.log" >&2; die "PostgreSQL did not start"; }
  "$pgbin/createdb" -h 127.0.0.1 -p "$pgport" -U mlk mlk || die "createdb failed"
  echo "postgresql://mlk@127.0.0.1:$pgport/mlk" >"$dir/store"

  echo "$s3port" >"$dir/s3port"
  start_moto
  echo "s3://mlk?endpoint=http://127.0.0.1:$s3port" >"$dir/blobs"

  start_replica 1
  start_replica 2
  local store token admin
  store=$(cat "$dir/store")
  token=$("$mlk" token create --store "$store" --team default --scopes read,write-blobs,write-entries,worker \
          --note cluster.sh 2>/dev/null) || die "mlk token create failed"
  admin=$("$mlk" token create --store "$store" --team ops --scopes admin --note cluster.sh 2>/dev/null) ||
    die "mlk token create failed"
  echo "$nworkers" >"$dir/workers"
  for ((n = 1; n <= nworkers; n++)); do
    start_worker "$n" "$token"
    pids="$pids${pids:+,}$(cat "$dir/worker$n.pid")"
  done
  {
    echo "export MLK_SERVERS=$(cat "$dir/replica1.url"),$(cat "$dir/replica2.url")"
    echo "export MLK_TOKEN=$token"
    echo "export MLK_ADMIN_TOKEN=$admin"
    echo "export MLK_CLUSTER_DIR=$dir"
    echo "export MLK_CLUSTER_STORE=$store"
    echo "export MLK_CLUSTER_BLOBS='$(cat "$dir/blobs")'"
    echo "export MLK_CLUSTER_S3=http://127.0.0.1:$s3port"
    echo "export MLK_CLUSTER_PIDS=$(cat "$dir/replica1.pid"),$(cat "$dir/replica2.pid")"
    echo "export MLK_CLUSTER_MOTO_PID=$(cat "$dir/moto.pid")"
    echo "export MLK_CLUSTER_WORKER_PIDS=$pids"
  } >"$dir/env"
  cat "$dir/env"
}

status() {
  [ -e "$dir/env" ] || { echo "no cluster in $dir"; return 1; }
  local bad=0 port
  port=$(sed -n 's/.*127.0.0.1:\([0-9]*\)\/mlk/\1/p' "$dir/store")
  if "$pgbin/pg_isready" -q -h 127.0.0.1 -p "$port"; then echo "postgresql  up    $(cat "$dir/store")"; else echo "postgresql  down"; bad=1; fi
  local s3
  s3=$(sed -n 's/.*endpoint=\(.*\)/\1/p' "$dir/blobs")
  if curl -s -o /dev/null "$s3/"; then echo "s3          up    $s3"; else echo "s3          down  $s3"; bad=1; fi
  for n in 1 2; do
    local url
    url=$(cat "$dir/replica$n.url" 2>/dev/null || true)
    if curl -sf -o /dev/null "$url/healthz"; then echo "replica$n    up    $url"; else echo "replica$n    down  $url"; bad=1; fi
  done
  for ((n = 1; n <= $(cat "$dir/workers" 2>/dev/null || echo 2); n++)); do
    if kill -0 "$(cat "$dir/worker$n.pid" 2>/dev/null)" 2>/dev/null; then echo "worker$n     up    cpu-loopback"; else echo "worker$n     down"; bad=1; fi
  done
  return $bad
}

stop() {
  [ -d "$dir" ] || return 0
  # The workers first (they finish the job in hand), while the replicas still answer.
  for f in "$dir"/worker*.pid; do
    [ -e "$f" ] || continue
    kill -TERM "$(cat "$f")" 2>/dev/null || true
  done
  for f in "$dir"/worker*.pid; do
    [ -e "$f" ] || continue
    pid=$(cat "$f")
    for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  for f in "$dir"/replica*.pid "$dir/moto.pid"; do
    [ -e "$f" ] || continue
    pid=$(cat "$f")
    kill -TERM "$pid" 2>/dev/null || true
  done
  for f in "$dir"/replica*.pid "$dir/moto.pid"; do
    [ -e "$f" ] || continue
    pid=$(cat "$f")
    for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  if [ -e "$dir/pg/data/postmaster.pid" ]; then
    as_pg "$pgbin/pg_ctl" -D "$dir/pg/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
}

case "${1:-}" in
  start) start ;;
  status) status ;;
  stop) stop ;;
  restart-blobs) # used by the tests after they stopped the S3 endpoint: an empty one on the same port
    start_moto ;;
  *) echo "usage: scripts/cluster.sh start|status|stop" >&2; exit 2 ;;
esac
