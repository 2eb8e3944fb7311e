#!/usr/bin/env bash
# Configures (once) and builds mlk into build/ with Ninja. Assumes
# scripts/install.sh has run. Uses every core unless MLK_JOBS says otherwise.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="${MLK_BUILD_TYPE:-RelWithDebInfo}" >/dev/null
fi
cmake --build build -j "${MLK_JOBS:-$(nproc)}"
