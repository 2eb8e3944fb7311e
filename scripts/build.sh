#!/usr/bin/env bash
# Configures (once) and builds mlk into build/ with Ninja. Assumes
# scripts/install.sh has run. Uses every core unless MLK_JOBS says otherwise.
# Then builds the mlk wheel (build/wheel) and installs it into .venv.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="${MLK_BUILD_TYPE:-RelWithDebInfo}" >/dev/null
fi
cmake --build build -j "${MLK_JOBS:-$(nproc)}"
# The mlk Python package from this tree: its wheel in build/wheel (pyproject.toml:
# scikit-build-core reuses build/, so this packages what was just built, stripped,
# and compiles nothing), installed into .venv, where the Python tests import it.
rm -rf build/wheel
CMAKE_BUILD_PARALLEL_LEVEL="${MLK_JOBS:-$(nproc)}" .venv/bin/python -m pip wheel -q --disable-pip-version-check \
  --no-build-isolation --no-deps -C cmake.build-type="${MLK_BUILD_TYPE:-RelWithDebInfo}" -w build/wheel .
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --force-reinstall build/wheel/mlk-*.whl
