#!/usr/bin/env bash
# The runtime links no compiler: neither libmlk_runtime.so nor the Python
# module may need libHalide or libLLVM, directly (readelf -d, NEEDED) or
# through another library (ldd), nor carry a run path into the Halide SDK.
# The JIT fallback is the plugin libmlk_jit.so, loaded at run time.
#   links_no_compiler.sh HALIDE_LIB_DIR FILE...
set -uo pipefail
halide_dir=$1
shift
status=0
for f in "$@"; do
  if [ ! -f "$f" ]; then
    echo "FAIL: $f does not exist"
    status=1
    continue
  fi
  dyn=$(readelf -d "$f") || { echo "FAIL: readelf -d $f failed"; status=1; continue; }
  needed=$(grep '(NEEDED)' <<<"$dyn")
  if grep -E 'lib(Halide|LLVM)' <<<"$needed"; then
    echo "FAIL: $f needs a compiler library directly (readelf -d, NEEDED above)"
    status=1
  fi
  if grep -E '\((RPATH|RUNPATH)\)' <<<"$dyn" | grep -F "$halide_dir"; then
    echo "FAIL: $f has a run path into the Halide SDK ($halide_dir)"
    status=1
  fi
  deps=$(ldd "$f" 2>&1) || { echo "FAIL: ldd $f failed: $deps"; status=1; continue; }
  if grep -E 'lib(Halide|LLVM)' <<<"$deps"; then
    echo "FAIL: $f loads a compiler library (ldd above)"
    status=1
  fi
  [ "$status" = 0 ] && echo "ok: $f: $(grep -c . <<<"$needed") NEEDED entries, none of them Halide or LLVM"
done
exit $status
