#!/usr/bin/env bash
# tune_gate.sh MLK SOURCE_DIR: `mlk tune --require-verified` stores a winner
# only when the levels pass. `quantize` (a float-to-integer cast) cannot pass
# bounded equivalence, so its winner is refused and the store stays empty; `scale`
# passes, and its entry carries the report (`mlk cache ls` shows the levels).
set -u
mlk=$1; src=$2
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
fail() { printf 'FAIL: %s\n--- output ---\n%s\n' "$1" "$2"; exit 1; }

out=$("$mlk" tune "$src/tests/verify/defects.tl" --fn quantize --target host --dims N=16 --trials 2 \
      --no-autoschedulers -q --cache "$dir/c.db" --require-verified equivalence 2>&1); code=$?
[ "$code" = 1 ] || fail "refused tune exited $code, expected 1" "$out"
want='mlk tune: quantize: refused: the winner of `quantize` is not verified at equivalence (its report passes: types,identity); nothing was stored'
[[ $out == *"$want"* ]] || fail "no refusal message" "$out"
[[ $out == *'verify equivalence: FAIL ('*'not checked: a float-to-integer cast is not modelled'* ]] || fail "no level line" "$out"
ls=$("$mlk" cache ls --cache "$dir/c.db" 2>&1)
[[ $ls == *"no entries in $dir/c.db"* ]] || fail "the refused winner was stored" "$ls"

out=$("$mlk" tune "$src/tests/verify/defects.tl" --fn scale --target host --dims N=16 --trials 2 \
      --no-autoschedulers -q --cache "$dir/c.db" --require-verified equivalence 2>&1); code=$?
[ "$code" = 0 ] || fail "verified tune exited $code" "$out"
[[ $out =~ verify\ types:\ pass\ \([0-9.]+\ s\).*verify\ identity:\ pass.*verify\ equivalence:\ pass ]] || fail "no level times" "$out"
ls=$("$mlk" cache ls --cache "$dir/c.db" 2>&1)
[[ $ls == *"mlk tune     types,identity,equivalence"* ]] || fail "ls does not show the levels" "$ls"
echo "ok: tune gate"
