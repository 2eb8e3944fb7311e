#!/usr/bin/env bash
# verify_not_run.sh MLK EXAMPLES WORK: issue 53 item 6. `mlk verify` of a
# CUDA artifact on a machine without a GPU cannot run its envelope and
# memory levels: it says "not run" (neither pass nor fail), exits 4, and
# stores only the levels that ran; an earlier result of a level it could not
# run is kept, never overwritten.
set -u
mlk=$1; examples=$2; work=$3
rm -rf "$work"; mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
shape=(--fn sgemm --target cuda_sm90 --dims M=4,K=8,N=4)
out=$("$mlk" build "$examples/mlp.tl" "${shape[@]}" --no-cache -o "$work/a" 2>&1) || fail "build: $out"
out=$("$mlk" verify "$examples/mlp.tl" "${shape[@]}" --artifact "$work/a" 2>&1); rc=$?
[ "$rc" = 4 ] || fail "exit status $rc, not 4: $out"
grep -q "verify sgemm \[K=8,M=4,N=4\] cuda_sm90: INCOMPLETE (envelope, memory not run here)" <<<"$out" ||
  fail "no INCOMPLETE verdict: $out"
grep -q "  envelope: not run (" <<<"$out" || fail "envelope not said to be not run: $out"
grep -q "    not run: CUDA artifacts are not run by \`mlk verify\` on this machine" <<<"$out" || fail "no reason: $out"
grep -q "FAIL" <<<"$out" && fail "a level that could not run reads as a failure: $out"
grep -q "  types: pass" <<<"$out" || fail "types did not pass: $out"
python3 - "$work/a/manifest.json" <<'PY' || fail "the stored report"
import json, sys
rep = json.load(open(sys.argv[1]))["verify_report"]
levels = [l["level"] for l in rep["levels"]]
assert "envelope" not in levels and "memory" not in levels, levels
assert rep["passed"] == levels and rep["pass"] is True, rep
assert "not_run" not in rep, rep
PY
# An earlier result of a level not run here (a GPU machine's pass) is kept.
python3 - "$work/a/manifest.json" <<'PY' || fail "planting an earlier envelope pass"
import json, sys
m = json.load(open(sys.argv[1]))
m["verify_report"]["levels"].append({"level": "envelope", "pass": True, "checked": "on a GPU machine"})
json.dump(m, open(sys.argv[1], "w"), indent=2)
PY
out=$("$mlk" verify "$examples/mlp.tl" "${shape[@]}" --artifact "$work/a" --level types,envelope --json 2>&1); rc=$?
[ "$rc" = 4 ] || fail "--level types,envelope: exit status $rc, not 4: $out"
python3 - "$work/a/manifest.json" "$out" <<'PY' || fail "the earlier envelope pass was not kept"
import json, sys
rep = json.load(open(sys.argv[1]))["verify_report"]
assert "envelope" in rep["passed"], rep
j = json.loads(sys.argv[2])
assert j["not_run"] == ["envelope"] and j["pass"] is False and "pass" not in j["levels"][1], j
assert j["levels"][1]["not_run"].startswith("CUDA artifacts are not run"), j
assert rep["passed"] == ["types", "identity", "envelope", "equivalence"], rep
PY
echo "ok"
