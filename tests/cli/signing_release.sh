#!/usr/bin/env bash
# signing_release.sh MLK EXAMPLES WORK: the signed publishing path over a
# real `mlk serve` on loopback (docs/signing.md). `mlk tune --sign` stores a
# winner signed by the signer; a namespace that trusts that signer and
# releases only what a trusted verifier signed refuses the push (the
# tuner's own report is not the verifier's), `mlk verify --sign` attaches
# the verifier's report (the signer's signature stays valid), and the push
# is taken. A signature is for one namespace: the winner signed for the
# local store's `default` is refused by the server's `alpha` (issue 49,
# finding 11).
set -u
mlk=$1; examples=$2; work=$3
rm -rf "$work"; mkdir -p "$work"; cd "$work" || exit 1
fail() { echo "FAIL: $*"; [ -n "${sp:-}" ] && kill "$sp"; exit 1; }
"$mlk" key create signer.pem >/dev/null || fail "key create"
"$mlk" key create verifier.pem >/dev/null || fail "key create"
out=$("$mlk" tune "$examples/norms.tl" --fn rmsnorm --dims B=2,S=4,D=64 --target host --trials 1 --time 20 \
      --cache local.db -q --sign signer.pem 2>&1) || fail "tune --sign: $out"
token=$("$mlk" token create --team alpha --scopes read,write-blobs,write-entries --cache serve.db 2>/dev/null | tail -1)
"$mlk" serve --cache serve.db --listen 127.0.0.1:0 --threads 2 --trusted-signers alpha=signer.pem.pub \
  --require-verified alpha=cheap --trusted-verifiers alpha=verifier.pem.pub > serve.out 2>&1 &
sp=$!
for _ in $(seq 50); do grep -q listening serve.out && break; sleep 0.1; done
port=$(head -1 serve.out | grep -o '127.0.0.1:[0-9]*' | cut -d: -f2)
[ -n "$port" ] || fail "serve did not start: $(cat serve.out)"
key=$("$mlk" cache ls --cache local.db | awk 'NR==2{print $2}')
export MLK_TOKEN=$token
out=$("$mlk" cache push "$key" --cache local.db --remote "http://127.0.0.1:$port" 2>&1) && fail "push for default: $out"
[[ $out == *"HTTP 403"*"is signed by key"*"for namespace \`default\`, not for \`alpha\`"* ]] || fail "push 0: $out"
out=$("$mlk" tune "$examples/norms.tl" --fn rmsnorm --dims B=2,S=4,D=64 --target host --trials 1 --time 20 \
      --cache local.db --namespace alpha -q --sign signer.pem 2>&1) || fail "tune --sign --namespace alpha: $out"
out=$("$mlk" cache push "$key" --cache local.db --namespace alpha --remote "http://127.0.0.1:$port" 2>&1) &&
  fail "push before verify: $out"
[[ $out == *"HTTP 403"*"verification report is signed by key"*"which is not a trusted verifier"* ]] || fail "push 1: $out"
out=$("$mlk" verify "$examples/norms.tl" --fn rmsnorm --target host --dims B=2,S=4,D=64 --level cheap --cache local.db \
      --namespace alpha --sign verifier.pem 2>&1) || fail "verify --sign: $out"
out=$("$mlk" cache push "$key" --cache local.db --namespace alpha --remote "http://127.0.0.1:$port" 2>&1) ||
  fail "push after verify: $out"
[[ $out == "pushed alpha/$key"* ]] || fail "push 2: $out"
kill "$sp"; wait "$sp" 2>/dev/null
echo "ok: signing_release"
