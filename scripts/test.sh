#!/usr/bin/env bash
# README command 2: install what is missing, build, and run every test
# (GoogleTest suites, CLI tests, Python peer tests and bounded fuzz runs, all
# through ctest). Exits non-zero on any failure. .ci/run calls exactly this.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/install.sh
bash scripts/build.sh
cd build
ctest --output-on-failure -j "${MLK_JOBS:-$(nproc)}"
