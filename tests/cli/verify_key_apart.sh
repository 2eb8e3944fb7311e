#!/usr/bin/env bash
# verify_key_apart.sh MLK EXAMPLES WORK: the second review's finding 2.
# `mlk verify --sign KEY` loaded the verifier's private key and then
# dlopened the artifact it verifies, so a constructor in a library that any
# writer bound could read the key from the process's memory. Here an
# artifact's library has such a constructor: it scans every readable page of
# the process that loads it for the key's raw 32 bytes and for the PEM
# file's text, and writes what it found. The levels must run in a process
# that never held the key.
set -u
mlk=$1; examples=$2; work=$3
rm -rf "$work"; mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
shape=(--fn sgemm --target host --dims M=4,K=8,N=4)
out=$("$mlk" key create "$work/k.pem") || fail "key create: $out"
out=$("$mlk" build "$examples/mlp.tl" "${shape[@]}" -o "$work/art" --no-cache 2>&1) || fail "build: $out"
# The needles, reversed so that the environment does not hold them as they are.
raw=$(sed -n '2p' "$work/k.pem" | base64 -d | tail -c 32 | xxd -p -c 64)
pem=$(sed -n '2p' "$work/k.pem")
export MLK_TEST_RAW_REVERSED=$(printf '%s' "$raw" | fold -w2 | tac | tr -d '\n')
export MLK_TEST_PEM_REVERSED=$(printf '%s' "$pem" | rev)
export MLK_TEST_REPORT="$work/scan.txt"
cat > "$work/scan.c" <<'C'
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
static size_t unhex(const char* h, unsigned char* out) {
  size_t n = strlen(h) / 2;
  for (size_t i = 0; i < n; ++i) sscanf(h + 2 * i, "%2hhx", &out[i]);
  return n;
}
__attribute__((constructor)) static void scan(void) {
  const char *raw_rev = getenv("MLK_TEST_RAW_REVERSED"), *pem_rev = getenv("MLK_TEST_PEM_REVERSED"),
             *report = getenv("MLK_TEST_REPORT");
  if (!raw_rev || !pem_rev || !report) return;
  /* The needles live in one private mapping, skipped by the scan. */
  unsigned char* mine = mmap(0, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  unsigned char *raw = mine, *pem = mine + 64, *buf = 0;
  size_t nraw = unhex(raw_rev, raw), npem = strlen(pem_rev);
  for (size_t i = 0; i < nraw / 2; ++i) { unsigned char t = raw[i]; raw[i] = raw[nraw - 1 - i]; raw[nraw - 1 - i] = t; }
  for (size_t i = 0; i < npem; ++i) pem[i] = pem_rev[npem - 1 - i];
  FILE* maps = fopen("/proc/self/maps", "r");
  int mem = open("/proc/self/mem", O_RDONLY);
  char line[512];
  int found_raw = 0, found_pem = 0, regions = 0;
  size_t cap = 0;
  while (maps && mem >= 0 && fgets(line, sizeof line, maps)) {
    unsigned long a, b;
    char perms[8];
    if (sscanf(line, "%lx-%lx %7s", &a, &b, perms) != 3 || perms[0] != 'r') continue;
    if (strstr(line, "[vvar]") || strstr(line, "[vsyscall]")) continue;
    if (a == (unsigned long)mine || (buf && a <= (unsigned long)buf && (unsigned long)buf < b)) continue;
    size_t len = b - a;
    if (len > cap) {
      if (buf) munmap(buf, cap);
      cap = len;
      buf = mmap(0, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (buf == MAP_FAILED) { buf = 0; cap = 0; continue; }
    }
    ssize_t got = pread(mem, buf, len, (off_t)a);
    if (got <= 0) continue;
    regions++;
    if (memmem(buf, (size_t)got, raw, nraw)) found_raw = 1;
    if (memmem(buf, (size_t)got, pem, npem)) found_pem = 1;
  }
  FILE* out = fopen(report, "a");
  if (out) fprintf(out, "pid=%d regions=%d raw=%d pem=%d\n", (int)getpid(), regions, found_raw, found_pem), fclose(out);
}
C
lib=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["library"])' "$work/art/manifest.json")
cc -shared -fPIC -O1 -o "$work/art/libscan_forward.so" "$work/scan.c" -Wl,--no-as-needed "$work/art/$lib" -Wl,-rpath,'$ORIGIN' \
  || fail "cannot compile the scanning library"
# The artifact now names the scanning library, which forwards to the real one
# (dlsym searches its dependencies); its manifest's digests match.
python3 - "$work/art" <<'PY' || fail "cannot rewrite the manifest"
import hashlib, json, os, sys
d = sys.argv[1]
m = json.load(open(os.path.join(d, "manifest.json")))
m["library"] = "libscan_forward.so"
m["files"]["libscan_forward.so"] = hashlib.sha256(open(os.path.join(d, "libscan_forward.so"), "rb").read()).hexdigest()
json.dump(m, open(os.path.join(d, "manifest.json"), "w"), indent=2)
PY
out=$("$mlk" verify "$examples/mlp.tl" "${shape[@]}" --artifact "$work/art" --level envelope --sign "$work/k.pem" 2>&1)
[ -s "$work/scan.txt" ] || fail "the artifact's library was never loaded: $out"
cat "$work/scan.txt"
grep -q "regions=[1-9]" "$work/scan.txt" || fail "the scan read nothing"
grep -q "raw=1\|pem=1" "$work/scan.txt" && fail "the process that loaded the artifact held the verifier's key: $(cat "$work/scan.txt")"
[[ $out == *"envelope: pass"* ]] || fail "verify: $out"
grep -q '"signature"' "$work/art/manifest.json" || fail "the report was not signed: $out"
echo "ok: verify_key_apart"
