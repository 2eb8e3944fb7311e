#!/usr/bin/env bash
# shared_folder.sh MLK EXAMPLES WORK: review 10 of issue 49, files another
# local user could put in place first. A store in a folder other users may
# write to is refused unless that folder is sticky (/tmp), and there its
# files must be this user's own plain files (a planted store was opened and
# its entries loaded and signed as made there); `mlk key create` never
# writes its public key into a file that was there before.
set -u
mlk=$1; examples=$2; work=$3
rm -rf "$work"; mkdir -p "$work/open" "$work/sticky" "$work/elsewhere"
chmod 0777 "$work/open"; chmod 1777 "$work/sticky"
fail() { echo "FAIL: $*"; exit 1; }
out=$("$mlk" cache ls --cache "$work/open/c.db" 2>&1) && fail "a store in a world-writable, non-sticky folder was opened: $out"
[[ $out == *"the folder $work/open is writable by other users and not sticky"* ]] || fail "unclear refusal: $out"
"$mlk" tune "$examples/norms.tl" --fn rmsnorm --target host --dims B=2,S=8,D=64 --trials 1 --no-autoschedulers \
  --cache "$work/elsewhere/real.db" -q > /dev/null 2>&1 || fail "a store in a private folder"
ln -s "$work/elsewhere/real.db" "$work/sticky/c.db"
out=$("$mlk" cache ls --cache "$work/sticky/c.db" 2>&1) && fail "a link as the store in a sticky shared folder was opened: $out"
[[ $out == *"$work/sticky/c.db is not a plain file"* ]] || fail "unclear refusal: $out"
out=$("$mlk" cache ls --cache "$work/elsewhere/real.db" 2>&1) || fail "the store itself, in its own folder: $out"
# Review 11: a folder of another user on the way is refused too (a store
# one folder deeper than the shared one was opened). Run as a user who is
# not root (root may keep a store in any user's folder); needs root to set
# the owners up.
if [ "$(id -u)" = 0 ] && command -v setpriv > /dev/null; then
  mkdir -p "$work/sticky/theirs"; cp "$work/elsewhere/real.db" "$work/sticky/theirs/c.db"  # a real store, planted
  : > "$work/sticky/theirs/c.db-wal"; : > "$work/sticky/theirs/c.db-shm"  # what SQLite needs beside it, left open
  chmod 0755 "$work/sticky/theirs"; chmod 0666 "$work/sticky/theirs"/c.db*; chown -R 12345 "$work/sticky/theirs"
  out=$(HOME=/nonexistent setpriv --reuid=65534 --regid=65534 --clear-groups "$mlk" cache ls \
          --cache "$work/sticky/theirs/c.db" 2>&1) && fail "a store in another user's folder was opened: $out"
  [[ $out == *"the folder $work/sticky/theirs belongs to user 12345"* ]] || fail "unclear refusal: $out"
fi
echo "not the key" > "$work/k.pem.pub"
out=$("$mlk" key create "$work/k.pem" 2>&1) && fail "key create wrote over an existing .pub: $out"
[[ $out == *"k.pem.pub already exists"* ]] || fail "unclear refusal: $out"
[ -e "$work/k.pem" ] && fail "the private key was made though its .pub could not be"
[ "$(cat "$work/k.pem.pub")" = "not the key" ] || fail "the existing .pub was changed"
echo ok
