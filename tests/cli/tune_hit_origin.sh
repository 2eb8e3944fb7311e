#!/usr/bin/env bash
# tune_hit_origin.sh MLK EXAMPLES WORK: `mlk tune --require-verified LEVELS`
# takes a cache hit only when a tune on this machine stored it (issue 49,
# finding 11): the same entry imported from an archive carries the report
# its writer wrote, which is not evidence, and the hit is refused, saying so.
set -u
mlk=$1; examples=$2; work=$3
rm -rf "$work"; mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
tune() { "$mlk" tune "$examples/mlp.tl" --fn sgemm --target host --dims M=4,K=8,N=4 --trials 1 -q --cache "$1" \
           --require-verified types; }
out=$(tune "$work/here.db" 2>&1) || fail "tune: $out"
out=$(tune "$work/here.db" 2>&1) || fail "a hit a tune here stored was refused: $out"
[[ $out == *"cached"* ]] || fail "the second tune was no cache hit: $out"
out=$("$mlk" cache export "$work/all.mlkc" --cache "$work/here.db" 2>&1) || fail "export: $out"
out=$("$mlk" cache import "$work/all.mlkc" --cache "$work/there.db" 2>&1) || fail "import: $out"
out=$(tune "$work/there.db" 2>&1) && fail "a hit imported from a file passed --require-verified: $out"
[[ $out == *"was not stored by a tune on this machine (origin \`import:"* ]] || fail "the refusal: $out"
[[ $out == *"its writer's word"* ]] || fail "the refusal does not say why: $out"
echo "ok: tune_hit_origin"
