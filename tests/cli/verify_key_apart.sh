#!/usr/bin/env bash
# verify_key_apart.sh MLK EXAMPLES WORK: the second review's findings 1 and 2
# on `mlk verify --sign KEY`. It loaded the verifier's private key and then
# dlopened the artifact it verifies, so a constructor in a library that any
# writer bound could read the key from the process's memory (or its file,
# or the verifier's environment), and whatever the process that loaded it
# reported was signed. Here an artifact's library has a constructor that
# scans every readable page of the process that loads it for the key's raw
# 32 bytes and the PEM file's text, tries to read the key file itself and
# to reach the network, and reports through a FIFO. The artifact must run
# where none of that is there, and the report must still be signed.
# Review 4 of issue 49: a sandboxed fork of the verifier still held what the
# verifier held (its cache token, its arguments); the artifact now runs in
# a fresh runner. The program's path, which the verifier holds in its
# arguments and heap, stands for such a secret here: the scan must not
# find it either. And the values the artifact chose stay out of the signed
# report (only a rounded ratio).
set -u
mlk=$1; examples=$2; work=$3
rm -rf "$work" "$work.fifo" "$work.link" "$work.tmp"; mkdir -p "$work" "$work.fifo" "$work.link" "$work.tmp"  # the key's folder is masked: the report goes beside it
# The verifier's $TMPDIR (a CI job's folder, say) holds a file of its own
# (review 8 of issue 49: the sandbox hid the key's folders and $HOME only).
echo "the verifier's temporary file" > "$work.tmp/secret.txt"
export TMPDIR="$work.tmp"
fail() { echo "FAIL: $*"; exit 1; }
shape=(--fn sgemm --target host --dims M=4,K=8,N=4)
out=$("$mlk" key create "$work/k.pem") || fail "key create: $out"
out=$("$mlk" build "$examples/mlp.tl" "${shape[@]}" -o "$work/art" --no-cache 2>&1) || fail "build: $out"
# The needles, reversed in the library's text so that it does not hold them as they are.
raw_rev=$(sed -n '2p' "$work/k.pem" | base64 -d | tail -c 32 | xxd -p -c 64 | fold -w2 | tac | tr -d '\n')
pem_rev=$(sed -n '2p' "$work/k.pem" | rev)
secret="verifier-secret-$RANDOM$RANDOM$RANDOM"
cp "$examples/mlp.tl" "$work/$secret.tl"
secret_rev=$(printf '%s' "$secret" | rev)
mkfifo "$work.fifo/scan"
exec 3<>"$work.fifo/scan"  # held open both ways: the library's open never blocks, reading never ends at EOF
cat > "$work/scan.c" <<C
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
static size_t unhex(const char* h, unsigned char* out) {
  size_t n = strlen(h) / 2;
  for (size_t i = 0; i < n; ++i) sscanf(h + 2 * i, "%2hhx", &out[i]);
  return n;
}
/* A private mapping between two inaccessible pages, so that the kernel never
   merges it with a neighbouring anonymous mapping: a merged region, read
   from a line of /proc/self/maps taken before the merge, once made the scan
   find its own needles. */
static unsigned char* fenced(size_t len) {
  unsigned char* p = mmap(0, len + 2 * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED || mprotect(p + 4096, len, PROT_READ | PROT_WRITE) != 0) return 0;
  return p + 4096;
}
static int overlaps(unsigned long a, unsigned long b, const unsigned char* p, size_t len) {
  return p && a < (unsigned long)p + len && (unsigned long)p < b;
}
__attribute__((constructor)) static void scan(void) {
  const char *raw_rev = "$raw_rev", *pem_rev = "$pem_rev", *secret_rev = "$secret_rev";
  /* The needles live in one fenced mapping, skipped by the scan. */
  unsigned char* mine = fenced(1 << 16);
  if (!mine) return;
  unsigned char *raw = mine, *pem = mine + 64, *sec = mine + 1024, *buf = 0;
  size_t nraw = unhex(raw_rev, raw), npem = strlen(pem_rev), nsec = strlen(secret_rev);
  for (size_t i = 0; i < nsec; ++i) sec[i] = secret_rev[nsec - 1 - i];
  for (size_t i = 0; i < nraw / 2; ++i) { unsigned char t = raw[i]; raw[i] = raw[nraw - 1 - i]; raw[nraw - 1 - i] = t; }
  for (size_t i = 0; i < npem; ++i) pem[i] = pem_rev[npem - 1 - i];
  FILE* maps = fopen("/proc/self/maps", "r");
  int mem = open("/proc/self/mem", O_RDONLY);
  char line[512];
  int found_raw = 0, found_pem = 0, found_sec = 0, regions = 0;
  size_t cap = 0;
  while (maps && mem >= 0 && fgets(line, sizeof line, maps)) {
    unsigned long a, b;
    char perms[8];
    if (sscanf(line, "%lx-%lx %7s", &a, &b, perms) != 3 || perms[0] != 'r') continue;
    if (strstr(line, "[vvar]") || strstr(line, "[vsyscall]")) continue;
    if (overlaps(a, b, mine, 1 << 16) || overlaps(a, b, buf, cap)) continue;
    size_t len = b - a;
    if (len > cap) {
      if (buf) munmap(buf - 4096, cap + 2 * 4096);
      cap = len;
      buf = fenced(cap);
      if (!buf) { cap = 0; continue; }
    }
    ssize_t got = pread(mem, buf, len, (off_t)a);
    if (got <= 0) continue;
    regions++;
    if (memmem(buf, (size_t)got, raw, nraw)) found_raw = 1;
    if (memmem(buf, (size_t)got, pem, npem)) found_pem = 1;
    if (memmem(buf, (size_t)got, sec, nsec)) found_sec = 1;
  }
  char key[256];
  FILE* kf = fopen("$work/k.pem", "r");
  if (!kf) kf = fopen("k.pem", "r");  /* relative: from where the verifier stood */
  size_t kn = kf ? fread(key, 1, sizeof key, kf) : 0;
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {0};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(9);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int net = s >= 0 && (connect(s, (struct sockaddr*)&sa, sizeof sa) == 0 || errno == ECONNREFUSED);
  FILE* tf = fopen("$work.tmp/secret.txt", "r");
  FILE* out = fopen("$work.fifo/scan", "w");
  if (out)
    fprintf(out, "pid=%d regions=%d raw=%d pem=%d secret=%d key_file=%s network=%s environ=%s tmpdir_file=%s\n", (int)getpid(), regions,
            found_raw, found_pem, found_sec, kn > 0 ? "read" : "hidden", net ? "reachable" : "none", getenv("HOME") && strcmp(getenv("HOME"), "/tmp") ? "the verifier's" : "scrubbed",
            tf ? "read" : "hidden"),
        fclose(out);
}
C
lib=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["library"])' "$work/art/manifest.json")
cc -shared -fPIC -O1 -o "$work/art/libscan_forward.so" "$work/scan.c" -Wl,--no-as-needed -L"$work/art" -l:"$lib" \
  -Wl,-rpath,'$ORIGIN' \
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
# The key is named through a link in another folder (review 5, L1: only the
# link's folder was masked, and the key file itself stayed readable).
ln -s "$work/k.pem" "$work.link/k.pem"
out=$("$mlk" verify "$work/$secret.tl" "${shape[@]}" --artifact "$work/art" --level envelope,memory --sign "$work.link/k.pem" 2>&1)
# And from the key's own folder, named relatively (review 5: the sandbox kept
# the caller's folder, so the masked key stayed readable as ./k.pem).
out=$(cd "$work" && "$mlk" verify "$work/$secret.tl" "${shape[@]}" --artifact "$work/art" --level envelope,memory --sign k.pem 2>&1)
seen=""
while read -r -t 1 l <&3; do seen+="$l"$'\n'; done
printf '%s' "$seen"
[ -n "$seen" ] || fail "the artifact's library was never loaded: $out"
[[ $seen == *"regions="[1-9]* ]] || fail "the scan read nothing"
[[ $seen == *"raw=1"* || $seen == *"pem=1"* ]] && fail "a process that loaded the artifact held the verifier's key: $seen"
[[ $seen == *"secret=1"* ]] && fail "a process that loaded the artifact held the verifier's memory (its arguments): $seen"
[[ $seen == *"key_file=read"* ]] && fail "a process that loaded the artifact could read the key file: $seen"
[[ $seen == *"tmpdir_file=read"* ]] && fail "a process that loaded the artifact could read the verifier's \$TMPDIR: $seen"
[[ $seen == *"network=reachable"* ]] && fail "a process that loaded the artifact could reach the network: $seen"
[[ $seen == *"environ=the verifier's"* ]] && fail "a process that loaded the artifact had the verifier's environment: $seen"
[[ $out == *"envelope: pass"* && $out == *"memory: pass"* ]] || fail "verify: $out"
grep -q '"signature"' "$work/art/manifest.json" || fail "the report was not signed: $out"
[[ $out == *"worst: error "*" of its bound (the element and its values are kept out"* ]] \
  || fail "the signed report names values the artifact chose: $out"
[[ $out == *"got "* ]] && fail "the signed report names a value the artifact chose: $out"
echo "ok: verify_key_apart"
