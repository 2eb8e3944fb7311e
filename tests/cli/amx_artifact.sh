#!/usr/bin/env bash
# amx_artifact.sh MLK EXAMPLES WORK: a BF16 product built for a Sapphire
# Rapids-class CPU runs in AMX tiles, and its library asks Linux for the
# tile state itself: a C program that only dlopens it and calls its C ABI
# entry, in a process that never ran mlk, gets the product (without the
# request the first tile instruction dies with SIGILL). Built for this
# machine where it has AMX-BF16; elsewhere built for cpu_avx512_spr, whose
# entry must refuse with MLK_ERR_CPU (-9), saying why, before any tile.
set -u
mlk=$1; examples=$2; work=$3
rm -rf "$work"; mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
if grep -qw amx_bf16 /proc/cpuinfo; then amx=1; target=host; else amx=0; target=cpu_avx512_spr; fi
out=$("$mlk" build "$examples/mlp.tl" --fn sgemm --target $target --dims M=40,K=70,N=50 --precision bf16 \
  -o "$work/art" --no-cache 2>&1) || fail "build: $out"
objdump -d "$work/art/libsgemm.so" | grep -q tdpbf16ps || fail "the product is not in AMX tiles"
cat > "$work/call.c" <<'C'
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include "mlk_abi.h"
enum { M = 40, K = 70, N = 50 };
static float a[M][K], b[K][N], c[M][N];
/* The operands rounded to BF16, as the bf16 policy rounds them. */
static float bf16(float x) { unsigned u; memcpy(&u, &x, 4); u = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000u; memcpy(&x, &u, 4); return x; }
int main(int argc, char** argv) {
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) { printf("dlopen: %s\n", dlerror()); return 1; }
  int (*entry)(const mlk_tensor_t*, int32_t, mlk_tensor_t*, const int64_t*, int32_t) =
      (int (*)(const mlk_tensor_t*, int32_t, mlk_tensor_t*, const int64_t*, int32_t))dlsym(lib, "mlk_sgemm");
  const char* (*last_error)(void) = (const char* (*)(void))dlsym(lib, "mlk_last_error");
  for (int i = 0; i < M; ++i) for (int k = 0; k < K; ++k) a[i][k] = (float)((i * 7 + k * 3) % 11) / 4 - 1;
  for (int k = 0; k < K; ++k) for (int j = 0; j < N; ++j) b[k][j] = (float)((k * 5 + j) % 13) / 8 - 0.5f;
  int64_t sa[] = {M, K}, sb[] = {K, N}, sc[] = {M, N};
  mlk_tensor_t args[] = {{a, MLK_F32, 2, sa, NULL}, {b, MLK_F32, 2, sb, NULL}}, out = {c, MLK_F32, 2, sc, NULL};
  int rc = entry(args, 2, &out, NULL, 0);
  if (rc != 0) { printf("mlk_sgemm: %d: %s\n", rc, last_error()); return 1; }
  double worst = 0;
  for (int i = 0; i < M; ++i) for (int j = 0; j < N; ++j) {
    double s = 0;
    for (int k = 0; k < K; ++k) s += (double)bf16(a[i][k]) * bf16(b[k][j]);
    if (fabs(s - c[i][j]) > worst) worst = fabs(s - c[i][j]);
  }
  printf("worst error %g\n", worst);
  return worst < 1e-3 ? 0 : 1;
}
C
sed -i 's|#include <stdio.h>|#include <stdio.h>\n#include <string.h>|' "$work/call.c"
cc -O1 -I"$work/art" -o "$work/call" "$work/call.c" -ldl -lm || fail "cannot compile the caller"
got=$("$work/call" "$work/art/libsgemm.so" 2>&1); rc=$?
if [ $amx = 0 ]; then
  [ $rc -eq 1 ] && [[ $got == "mlk_sgemm: -9: this kernel uses AMX tiles, and Linux refused the process their state (arch_prctl ARCH_REQ_XCOMP_PERM: "* ]] \
    || fail "without AMX the entry must refuse with MLK_ERR_CPU (exit $rc): $got"
  echo "$got"; echo "ok: amx_artifact (refused: this CPU has no AMX-BF16)"; exit 0
fi
[ $rc -eq 0 ] || fail "the call (exit $rc): $got"
echo "$got"
# Where Linux refuses (here a seccomp filter answers EPERM to the tile
# state's query and request, as a sandbox may): MLK_ERR_CPU, saying why, and
# no SIGILL.
cat > "$work/deny.c" <<'C'
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char** argv) {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_arch_prctl, 0, 4),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x1022, 1, 0), /* ARCH_GET_XCOMP_SUPP */
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x1023, 0, 1), /* ARCH_REQ_XCOMP_PERM */
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {sizeof f / sizeof f[0], f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) { perror("seccomp"); return 2; }
  execv(argv[1], argv + 1);
  perror("execv");
  return 2;
}
C
cc -O1 -o "$work/deny" "$work/deny.c" || fail "cannot compile the seccomp launcher"
got=$("$work/deny" "$work/call" "$work/art/libsgemm.so" 2>&1); rc=$?
[ $rc -eq 1 ] && [[ $got == "mlk_sgemm: -9: this kernel uses AMX tiles, and Linux refused the process their state (arch_prctl ARCH_REQ_XCOMP_PERM: Operation not permitted)" ]] \
  || fail "refused the tile state, the entry must say so with MLK_ERR_CPU (exit $rc): $got"
echo "$got"
# And mlk itself, not offered the tile state, compiles for this machine without them.
out=$("$work/deny" "$mlk" build "$examples/mlp.tl" --fn sgemm --target host --dims M=40,K=70,N=50 --precision bf16 \
  -o "$work/plain" --no-cache 2>&1) || fail "build refused the tile state: $out"
objdump -d "$work/plain/libsgemm.so" | grep -q tdpbf16ps && fail "refused the tile state, mlk still built tiles"
got=$("$work/call" "$work/plain/libsgemm.so" 2>&1) || fail "the call of the plain build: $got"
echo "ok: amx_artifact"
