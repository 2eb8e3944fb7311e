#!/usr/bin/env bash
# run_fuzz.sh TARGET CORPUS_DIR SECONDS SEED_DIR...: copies the seeds into the
# corpus, then runs libFuzzer for SECONDS. Fails on any crash, leak or timeout.
set -euo pipefail
target=$1; corpus=$2; seconds=$3; shift 3
mkdir -p "$corpus"
for d in "$@"; do cp -f "$d"/* "$corpus"/ 2>/dev/null || true; done
exec "$target" "$corpus" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 -print_final_stats=1
