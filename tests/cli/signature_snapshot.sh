#!/usr/bin/env bash
# signature_snapshot.sh MLK EXAMPLES WORK: issue 53 item 4. `mlk signature`
# prints every public fn's signature and C prototype as a snapshot;
# --check passes on the same program and names what changed on another;
# `mlk build` writes <fn>.h with the same declarations, a header a C caller
# compiles against and links with the artifact.
set -u
mlk=$1; examples=$2; work=$3
rm -rf "$work"; mkdir -p "$work"; cd "$work" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
"$mlk" signature "$examples/mlp.tl" > mlp.abi 2>err || fail "signature: $(cat err)"
grep -qx '/\* mlk kernel sgemm \[M, K, N\] (a: Tensor\[F32, \[M, K\]\], b: Tensor\[F32, \[K, N\]\]) -> Tensor\[F32, \[M, N\]\]' mlp.abi ||
  fail "no signature line of sgemm: $(cat mlp.abi)"
grep -q '^ \*   args\[1\]  b  MLK_F32  \[K, N\]$' mlp.abi || fail "no argument line: $(cat mlp.abi)"
grep -q '^int mlk_sgemm(const mlk_tensor_t\* args, int32_t nargs, mlk_tensor_t\* out, const int64_t\* dims,$' mlp.abi ||
  fail "no prototype: $(cat mlp.abi)"
out=$("$mlk" signature "$examples/mlp.tl" --check mlp.abi 2>&1) || fail "--check of the same program: $out"
grep -q "match mlp.abi" <<<"$out" || fail "no match line: $out"
# A parameter's shape changes, a fn is renamed: both named, with the lines.
sed -e 's/b: Tensor\[F32, \[K, N\]\]) -> Tensor\[F32, \[M, N\]\]/b: Tensor[F32, [N, K]]) -> Tensor[F32, [M, N]]/' \
    -e 's/matmul(a, b)/matmul(a, transpose(b, [1, 0]))/' -e 's/public fn mlp /public fn mlp2 /' -e 's/^tune mlp /tune mlp2 /' \
    "$examples/mlp.tl" > changed.tl
"$mlk" check changed.tl >/dev/null 2>&1 || fail "the changed program does not check: $("$mlk" check changed.tl 2>&1)"
out=$("$mlk" signature changed.tl --check mlp.abi 2>&1); rc=$?
[ "$rc" = 1 ] || fail "a changed signature: exit $rc, not 1: $out"
grep -q '`sgemm` changed:' <<<"$out" || fail "sgemm's change not named: $out"
grep -q '^  -  \*   args\[1\]  b  MLK_F32  \[K, N\]$' <<<"$out" || fail "the old line not shown: $out"
grep -q '^  +  \*   args\[1\]  b  MLK_F32  \[N, K\]$' <<<"$out" || fail "the new line not shown: $out"
grep -q '`mlp2` is new' <<<"$out" || fail "the new fn not named: $out"
grep -q '`mlp` was removed' <<<"$out" || fail "the removed fn not named: $out"
# mlk build writes sgemm.h: C that includes it compiles, links and runs.
out=$("$mlk" build "$examples/mlp.tl" --fn sgemm --target host --dims M=2,K=3,N=2 --no-cache -o art 2>&1) ||
  fail "build: $out"
[ -f art/sgemm.h ] || fail "no art/sgemm.h"
grep -q '"sgemm.h"' art/manifest.json || fail "sgemm.h is not listed in the manifest"
sed -n '/^\/\* mlk kernel sgemm/,/^    int32_t ndims);$/p' art/sgemm.h | diff - <(sed -n '/^\/\* mlk kernel sgemm/,/^    int32_t ndims);$/p' mlp.abi) ||
  fail "the header's declarations differ from the snapshot's"
cat > caller.c <<'C'
#include <stdio.h>
#include "sgemm.h"
int main(void) {
  float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 0, 0, 1, 1, 1}, c[4] = {0};
  int64_t sa[2] = {2, 3}, sb[2] = {3, 2}, sc[2] = {2, 2};
  mlk_tensor_t args[2] = {{a, MLK_F32, 2, sa, NULL}, {b, MLK_F32, 2, sb, NULL}};
  mlk_tensor_t out = {c, MLK_F32, 2, sc, NULL};
  int rc = mlk_sgemm(args, 2, &out, NULL, 0);
  printf("%d %g %g %g %g\n", rc, c[0], c[1], c[2], c[3]);
  return rc;
}
C
cc -Wall -Werror -Iart caller.c -o caller art/libsgemm.so -Wl,-rpath,"$PWD/art" 2>err || fail "caller.c: $(cat err)"
[ "$(./caller)" = "0 4 5 10 11" ] || fail "the caller's result: $(./caller)"
# The dims array in the artifact's order (by name), whatever order the fn declares.
printf 'public fn fill [N, M](s: Scalar[F32]) -> Tensor[F32, [N, M]] = broadcast(s, [N, M])\n' > fill.tl
"$mlk" signature fill.tl > fill.abi 2>err || fail "signature fill.tl: $(cat err)"
grep -q '^ \*   dims: dims\[0\] = M, dims\[1\] = N$' fill.abi || fail "dims not in the artifact's order: $(cat fill.abi)"
out=$("$mlk" build fill.tl --fn fill --target host --dims N=2,M=3 --no-cache -o fillart 2>&1) || fail "build fill: $out"
grep -q '^ \*   dims: dims\[0\] = M, dims\[1\] = N$' fillart/fill.h || fail "fill.h's dims: $(cat fillart/fill.h)"
python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["signature"]["unbound_dims"] == ["M", "N"]' \
  fillart/manifest.json || fail "the manifest's unbound_dims are not M, N"
echo "ok"
