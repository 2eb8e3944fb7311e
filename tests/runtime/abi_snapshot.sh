#!/usr/bin/env bash
# The ABI snapshot test: the symbols libmlk_runtime.so exports and the layouts
# and constants of its C ABI (and of the artifacts' mlk_abi.h) must equal the
# committed snapshot. An intended ABI change updates the snapshot in the same
# commit:  abi_snapshot.sh LIB LAYOUT_BIN SNAPSHOT --update
set -euo pipefail
lib=$1 layout=$2 snapshot=$3
current=$(mktemp)
trap 'rm -f "$current"' EXIT
{
  echo "# exported symbols of libmlk_runtime.so"
  nm -D --defined-only "$lib" | awk '{print $NF}' | sed 's/@.*//' | grep -v '^MLK_RUNTIME_1$' | sort
  echo "# layouts and constants"
  "$layout"
} > "$current"
if [ "${4:-}" = "--update" ]; then
  cp "$current" "$snapshot"
  echo "updated $snapshot"
  exit 0
fi
if ! diff -u "$snapshot" "$current"; then
  echo "abi_snapshot: the C ABI changed (diff above: - snapshot, + now). If intended, bump the ABI version" >&2
  echo "and run: $0 $lib $layout $snapshot --update" >&2
  exit 1
fi
echo "abi_snapshot: C ABI matches $snapshot"
