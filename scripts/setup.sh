#!/usr/bin/env bash
# README command 1: install everything, build, then run the main job: check
# the example models, and tune one (SGEMM 512^3 from examples/mlp.tl) for this
# machine's CPU into the local artifact cache, printing the result. A second
# run finds it in the cache and returns at once.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
echo "== install" >&2
bash scripts/install.sh
echo "== build" >&2
bash scripts/build.sh
echo "== main job" >&2
./build/mlk version
./build/mlk check examples/*.tl
./build/mlk tune examples/mlp.tl --fn sgemm --dims M=512,K=512,N=512 --target host --trials 20 --time 90
