#!/usr/bin/env bash
# npm-once.sh - `npm install` in DIR once, whoever asks first.
#
#   npm-once.sh DIR LABEL FILE...
#
# FILEs (relative to DIR/node_modules) must exist afterwards; if they all do and
# the last install finished (node_modules/.grit-complete), nothing runs.
# CTest starts tests in parallel and several may find the packages missing: two
# `npm install`s into one node_modules trip over each other (ENOTEMPTY,
# half-unpacked native bindings). An exclusive flock on DIR/.npm-install.lock
# serialises them; whoever gets it second finds everything and returns.
# `make deps` calls it for web/ and tests/data/ before any test starts.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: npm-once.sh DIR LABEL FILE..." >&2; exit 2; }
dir=$(cd "$1" && pwd) label=$2; shift 2
nm=$dir/node_modules
complete() {
  local f
  [ -f "$nm/.grit-complete" ] || return 1
  for f in "$@"; do [ -e "$nm/$f" ] || return 1; done
}
complete "$@" && exit 0
exec 9>"$dir/.npm-install.lock"
flock -w 600 9 || { echo "$label: waited 600 s for $dir/.npm-install.lock" >&2; exit 1; }
complete "$@" && exit 0
echo "$label: npm install in $dir"
# npm does not repair a half-finished earlier install (killed, or the race the
# lock prevents): start from nothing
rm -rf "$nm"
(cd "$dir" && npm install --no-audit --no-fund --no-save >/dev/null)
for f in "$@"; do
  [ -e "$nm/$f" ] || { echo "$label: npm install in $dir left no node_modules/$f" >&2; exit 1; }
done
touch "$nm/.grit-complete"
