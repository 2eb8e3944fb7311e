#!/bin/bash
# `cmake --install` into a temporary prefix gives a working mlk and a
# linkable runtime: the installed mlk checks a program; a separate CMake
# project finds the package (find_package(mlk)), builds the C ABI example
# (examples/runtime/pull_and_run.cpp, which includes <mlk/mlk_runtime.h>)
# against mlk::mlk_runtime, and runs it (the JIT plugin installed next to
# the library); the man page and the completions are installed.
#
# usage: install_prefix.sh BUILD_DIR SOURCE_DIR WORK_DIR
set -euo pipefail
build=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" --component runtime > "$work/install.log"
fail() { echo "FAIL: $*"; exit 1; }
for f in bin/mlk bin/mlk-rank lib/libmlk_runtime.so lib/libmlk_jit.so include/mlk/mlk_runtime.h \
         lib/cmake/mlk/mlkConfig.cmake share/man/man1/mlk.1 share/bash-completion/completions/mlk \
         share/zsh/vendor-completions/_mlk; do
  [[ -f $prefix/$f ]] || fail "not installed: $f"
done
# (Outputs are captured before grep: under pipefail, `grep -q` ending a pipe early fails its writer.)
version=$("$prefix/bin/mlk" version) || fail "the installed mlk does not run"
grep -q '^mlk ' <<< "$version" || fail "the installed mlk prints no version"
checked=$("$prefix/bin/mlk" check "$src/examples/norms.tl") || fail "the installed mlk does not check a program"
grep -q ': ok' <<< "$checked" || fail "the installed mlk does not say the program checks"
mkdir -p "$work/consumer"
cat > "$work/consumer/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.20)
project(consumer CXX)
find_package(mlk 0.1 REQUIRED CONFIG)
add_executable(pull_and_run ${EXAMPLE})
target_link_libraries(pull_and_run PRIVATE mlk::mlk_runtime)
CMAKE
cmake -S "$work/consumer" -B "$work/consumer/b" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
      -DEXAMPLE="$src/examples/runtime/pull_and_run.cpp" > "$work/consumer.log" 2>&1 || { cat "$work/consumer.log"; fail "configure"; }
cmake --build "$work/consumer/b" >> "$work/consumer.log" 2>&1 || { cat "$work/consumer.log"; fail "build"; }
libs=$(ldd "$work/consumer/b/pull_and_run")
grep -q "$prefix/lib/libmlk_runtime.so" <<< "$libs" || fail "not linked to the installed runtime"
out=$(MLK_LOCAL_CACHE="$work/mirror.db" "$work/consumer/b/pull_and_run" "$work/cache.db" "$src/examples/norms.tl" host 1 8 64)
echo "$out"
grep -q 'max relative error' <<< "$out" || fail "the example did not run its kernel"
echo "ok: installed, found by find_package(mlk), linked, run"
