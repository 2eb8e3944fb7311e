#!/usr/bin/env bash
# signing.sh MLK EXAMPLES WORK: `mlk key create` and `--sign KEYFILE` on
# `mlk build` and `mlk verify` (docs/signing.md): the key file is 0600 and
# never replaced, DIR's manifest.json gets a signature by the key, the
# report `mlk verify --sign` attaches gets the verifier's, and a bad key
# fails the command before it builds.
set -u
mlk=$1; examples=$2; work=$3
rm -rf "$work"; mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
out=$("$mlk" key create "$work/k.pem") || fail "key create: $out"
pub=$(cat "$work/k.pem.pub")
id=$(printf '%s\n' "$out" | sed -n 's/^key id: //p')
[[ $pub =~ ^[0-9a-f]{64}$ ]] || fail "k.pem.pub: $pub"
[[ $id =~ ^[0-9a-f]{16}$ ]] || fail "key id: $out"
[ "$(stat -c %a "$work/k.pem")" = 600 ] || fail "k.pem is not 0600"
grep -q "BEGIN PRIVATE KEY" "$work/k.pem" || fail "k.pem is not PEM PKCS#8"
out=$("$mlk" key create "$work/k.pem" 2>&1) && fail "key create replaced a key"
[[ $out == *"never replaced"* ]] || fail "key create over a key: $out"
out=$("$mlk" key show "$work/k.pem") || fail "key show: $out"
[[ $out == *"public key: $pub"* ]] || fail "key show: $out"
out=$("$mlk" build "$examples/mlp.tl" --fn sgemm --target host --dims M=4,K=8,N=4 -o "$work/dir" --no-cache \
      --sign "$work/k.pem" 2>&1) || fail "build --sign: $out"
[[ $out == *"signed $work/dir/manifest.json with key $id"* ]] || fail "build --sign: $out"
grep -q "\"public_key\": \"$pub\"" "$work/dir/manifest.json" || fail "no signature in manifest.json"
out=$("$mlk" verify "$examples/mlp.tl" --fn sgemm --target host --dims M=4,K=8,N=4 --artifact "$work/dir" \
      --level cheap --sign "$work/k.pem" 2>&1) || fail "verify --sign: $out"
python3 - "$work/dir/manifest.json" "$pub" <<'PY' || fail "the report is not signed"
import json, sys
m = json.load(open(sys.argv[1]))
assert m["verify_report"]["signature"]["public_key"] == sys.argv[2], m["verify_report"]
assert m["signatures"][0]["public_key"] == sys.argv[2]
PY
out=$("$mlk" build "$examples/mlp.tl" --fn sgemm --target host --dims M=4,K=8,N=4 -o "$work/dir2" --no-cache \
      --sign "$work/nope.pem" 2>&1) && fail "build with a missing key succeeded"
[[ $out == *"--sign: cannot read $work/nope.pem"* ]] || fail "missing key: $out"
[ ! -e "$work/dir2" ] || fail "a build with a bad key wrote $work/dir2"
echo "ok: signing"
