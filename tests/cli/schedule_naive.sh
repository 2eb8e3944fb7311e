#!/usr/bin/env bash
# schedule_naive.sh MLK EXAMPLES WORK: issue 51. Untuned, `mlk build` and
# `mlk verify` use the default schedule, the rules' plan for the target (a
# matmul computed per register tile at its output); `--schedule naive`
# builds the naive one (every knob at its default, the tuner's baseline: a
# matmul at root, tiled over its own loops), and says so.
set -u
mlk=$1; examples=$2; work=$3
rm -rf "$work"; mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
shape=(--fn sgemm --target cpu_avx2 --dims M=64,K=64,N=64 --no-cache)
def=$("$mlk" build "$examples/mlp.tl" "${shape[@]}" --dump-after schedule -o "$work/def" 2>&1) || fail "build: $def"
naive=$("$mlk" build "$examples/mlp.tl" "${shape[@]}" --schedule naive --dump-after schedule -o "$work/naive" 2>&1) ||
  fail "build --schedule naive: $naive"
grep -q '"at_stage": "output"' <<<"$def" || fail "the default schedule computes the product at its output tiles: $def"
grep -q '"at_stage": "output"' <<<"$naive" && fail "the naive schedule has no output tiles: $naive"
grep -q '"op": "compute_root"' <<<"$naive" || fail "the naive schedule computes the product at root: $naive"
grep -q '"schedule_hash"' "$work/naive/manifest.json" || fail "no schedule_hash in the manifest"
[ "$(grep -o '"schedule_hash": *"[0-9a-f]*"' "$work/def/manifest.json")" != \
  "$(grep -o '"schedule_hash": *"[0-9a-f]*"' "$work/naive/manifest.json")" ] || fail "the two builds have one schedule"
out=$("$mlk" verify "$examples/mlp.tl" "${shape[@]}" --schedule naive --level types 2>&1) || fail "verify --schedule naive: $out"
grep -q "built now with the naive schedule" <<<"$out" || fail "verify does not say which schedule it built: $out"
out=$("$mlk" verify "$examples/mlp.tl" "${shape[@]}" --level types 2>&1) || fail "verify: $out"
grep -q "built now with the default schedule" <<<"$out" || fail "verify does not say which schedule it built: $out"
echo "ok"
