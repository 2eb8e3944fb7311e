#!/usr/bin/env bash
# expect.sh CODE REGEX CMD...: runs CMD, fails unless it exits with CODE and
# its combined stdout+stderr matches the extended regex REGEX (POSIX ERE,
# applied to the whole output: `.` and `[^x]` also match newlines).
set -u
want_code=$1; regex=$2; shift 2
out=$("$@" 2>&1); code=$?
if [ "$code" != "$want_code" ]; then
  printf 'exit code %s, expected %s, from: %s\n--- output ---\n%s\n' "$code" "$want_code" "$*" "$out"
  exit 1
fi
# Bash's =~ matches across lines, so REGEX may contain newlines.
if ! [[ $out =~ $regex ]]; then
  printf 'output of %s does not match /%s/\n--- output ---\n%s\n' "$*" "$regex" "$out"
  exit 1
fi
echo "ok: $*"
