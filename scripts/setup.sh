#!/usr/bin/env bash
# README command 1: install everything, build, then run the main job on the
# embedded examples (type-check every example model and print the result).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
echo "== install" >&2
bash scripts/install.sh
echo "== build" >&2
bash scripts/build.sh
echo "== main job: mlk check examples/*.tl" >&2
./build/mlk version
./build/mlk check examples/*.tl
