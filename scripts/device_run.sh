#!/usr/bin/env bash
# The part of scripts/device_check.sh that runs on the machine with the GPU,
# copied into the prepared set as run.sh: needs only the set itself (the
# runner, the peer, the candidates) and the NVIDIA driver; cuBLAS for the
# peer is looked up where CUDA toolkits and wheels put it.
#
#   bash DIR/run.sh        results under $OUT (default DIR/results):
#     NAME.json            mlk-measure's measurements of each kernel's candidates
#     peers.json           cuBLAS SGEMM / F16 GemmEx at 4096^3, the copy bandwidth
#     nvidia-smi.txt, run.log, repeat.log (MLK_DEVICE_REPEAT=1)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/results}
mkdir -p "$out"
log=$out/run.log
: > "$log"
command -v nvidia-smi > /dev/null && nvidia-smi > "$out/nvidia-smi.txt" 2>&1
lib=$(find /usr/local/cuda*/lib64 /usr/local/lib /opt /usr/lib -name 'libcublas.so.1[23]*' 2>/dev/null | head -1)
[ -n "$lib" ] && export LD_LIBRARY_PATH=$(dirname "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "cuBLAS: ${lib:-not found}" >> "$log"
# The runner's libcrypto, carried in lib/, where this machine has none.
ldd "$here/mlk-measure" | grep -q 'not found' && export LD_LIBRARY_PATH=$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
status=0
while IFS='|' read -r name _; do
  start=$(date +%s)
  timeout 240 "$here/mlk-measure" "$here/kernels/$name" -o "$out/$name.json" >> "$log" 2>&1
  rc=$?
  echo "mlk-measure $name: exit $rc in $(( $(date +%s) - start )) s" | tee -a "$log"
  [ "$rc" = 0 ] || [ "$rc" = 2 ] || status=1
done < "$here/kernels.txt"
# MLK_DEVICE_REPEAT=1: each kernel measured a second time, its medians to
# repeat.log, to see how much the times move between two runs.
if [ "${MLK_DEVICE_REPEAT:-0}" = 1 ]; then
  while IFS='|' read -r name _; do
    "$here/mlk-measure" "$here/kernels/$name" -o "/tmp/mlk_repeat_$name.json" --quiet 2>> "$log"
    python3 - "$out/$name.json" "/tmp/mlk_repeat_$name.json" "$name" >> "$out/repeat.log" 2>&1 <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for x, y in zip(a["results"], b["results"]):
    print(sys.argv[3], x["id"], x["verdict"], x["median_ms"], y["median_ms"])
PY
  done < "$here/kernels.txt"
fi
peer=$here/mlk-cuda-peer
{
  echo "{\"bandwidth\": $(timeout 60 "$peer" bandwidth 1024),"
  echo " \"gemm_f32\": $(timeout 60 "$peer" gemm 4096 4096 4096 f32),"
  echo " \"gemm_f16\": $(timeout 60 "$peer" gemm 4096 4096 4096 f16)}"
} > "$out/peers.json" 2>> "$log"
cat "$out/peers.json" | tee -a "$log"
exit $status
