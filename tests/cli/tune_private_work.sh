#!/usr/bin/env bash
# tune_private_work.sh MLK EXAMPLES WORK: review 8 of issue 49. `mlk tune
# --no-cache` built, linked and loaded its candidates in $TMPDIR/mlk-tune-work,
# a fixed path another local user could make first and fill (the objects it
# then linked, loaded and, with --sign, signed). It now works in a private
# folder made for the run (mode 0700) and removes it at exit: a planted
# folder at the old path gets nothing.
set -u
mlk=$1; examples=$2; work=$3
rm -rf "$work"; mkdir -p "$work/planted/mlk-tune-work"
fail() { echo "FAIL: $*"; exit 1; }
TMPDIR="$work/planted" "$mlk" tune "$examples/norms.tl" --fn rmsnorm --target host --dims B=2,S=8,D=64 --trials 2 \
  --no-autoschedulers --no-cache -q > "$work/out" 2>&1 || fail "tune: $(cat "$work/out")"
[ -z "$(ls -A "$work/planted/mlk-tune-work")" ] || fail "the tune wrote into the planted folder: $(ls "$work/planted/mlk-tune-work")"
left=$(ls -d "$work"/planted/mlk-tune-work-* 2>/dev/null)
[ -z "$left" ] || fail "its private folder was left behind: $left"
# Review 9: with a store, the tune works in STORE.work, beside it, which a
# store in a shared folder let another user make first. A link there is
# refused, naming it; a folder of the user's own is made private.
mkdir -p "$work/shared" "$work/elsewhere"
ln -s "$work/elsewhere" "$work/shared/c.db.work"
"$mlk" tune "$examples/norms.tl" --fn rmsnorm --target host --dims B=2,S=8,D=64 --trials 2 --no-autoschedulers \
  --cache "$work/shared/c.db" -q > "$work/out2" 2>&1 && fail "a linked STORE.work was used: $(cat "$work/out2")"
grep -q "c.db.work is not a directory (a link or a file stands there)" "$work/out2" || fail "unclear refusal: $(cat "$work/out2")"
[ -z "$(ls -A "$work/elsewhere")" ] || fail "the tune wrote through the link: $(ls "$work/elsewhere")"
rm "$work/shared/c.db.work"; mkdir -m 0755 "$work/shared/c.db.work"
"$mlk" tune "$examples/norms.tl" --fn rmsnorm --target host --dims B=2,S=8,D=64 --trials 2 --no-autoschedulers \
  --cache "$work/shared/c.db" -q > "$work/out3" 2>&1 || fail "tune with a store: $(cat "$work/out3")"
[ "$(stat -c %a "$work/shared/c.db.work")" = 700 ] || fail "STORE.work is $(stat -c %a "$work/shared/c.db.work"), not 700"
echo ok
