#!/usr/bin/env bash
# prep_resume.sh GRIT - grit prep survives being killed: a run killed at any
# point and rerun gives byte-identical outputs to an uninterrupted run, and
# the rerun skips the (stage, shard) units that were finished (their marker
# and outputs are not rewritten: same inode).
#   1. crash injection (GRIT_PREP_CRASH_AFTER=N: _exit right after the N-th
#      marker) at N = 1, 5 (docs stage), S+1 (right after dedup) and S+3
#      (inside tokenize), S = number of shards;
#   2. a real SIGKILL while the docs stage runs.
# Also: rerunning a finished run does nothing; a changed setting on an
# existing output directory is refused.
set -euo pipefail
grit=$1
here=$(cd "$(dirname "$0")" && pwd)
tok=$here/../data/gpt-neox-20b-tokenizer.json
hb=/usr/share/doc/debian-handbook/html
for d in en-US de-DE fr-FR; do
  [ -d "$hb/$d" ] || { echo "prep_resume: $hb/$d missing (make deps installs debian-handbook)"; exit 1; }
done
tmp=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
fail=0
args=(--threads 2 --files-per-shard 16 --minhash cheap --tokenizer "$tok" --quiet)
inputs=("$hb/en-US" "$hb/de-DE" "$hb/fr-FR")

digest() { # the run's outputs, not the timings in markers and report
  (cd "$1" && find tokens docs dedup plan.json -type f | sort | xargs sha256sum)
}

"$grit" prep -o "$tmp/ref" "${args[@]}" "${inputs[@]}"
digest "$tmp/ref" > "$tmp/ref.sum"
S=$(ls "$tmp/ref/done" | grep -c '^docs\.')
echo "prep_resume: reference run: $S shards, $(grep -c . "$tmp/ref.sum") output files"
[ "$S" -ge 8 ] || { echo "FAIL: expected at least 8 shards, got $S"; exit 1; }

for n in 1 5 $((S + 1)) $((S + 3)); do
  out=$tmp/crash$n
  rc=0
  GRIT_PREP_CRASH_AFTER=$n "$grit" prep -o "$out" "${args[@]}" "${inputs[@]}" || rc=$?
  if [ $rc -ne 137 ]; then echo "FAIL: crash at marker $n: rc $rc (want 137)"; fail=1; continue; fi
  # markers only: a kill can leave a marker's temp file (NAME.json.tmp.PID) beside them
  before=$(ls "$out/done" | grep -c '\.json$')
  (cd "$out" && stat -c '%n %i' done/*.json | sort) > "$tmp/inodes$n"
  [ "$before" -ge "$n" ] || { echo "FAIL: crash at $n left $before markers"; fail=1; }
  "$grit" prep -o "$out" "${args[@]}" "${inputs[@]}"
  (cd "$out" && stat -c '%n %i' done/*.json | sort) > "$tmp/inodes$n.after"
  # every marker that existed is untouched (not redone)
  if ! join "$tmp/inodes$n" "$tmp/inodes$n.after" | awk '$2 != $3 {bad=1} END {exit bad}'; then
    echo "FAIL: crash at $n: finished units were redone"; fail=1
  fi
  ran=$(python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['run']; print(sum(r['units_run'].values()), sum(r['units_skipped'].values()))" "$out/report.json")
  total=$((2 * S + 1))
  if [ "$ran" != "$((total - before)) $before" ]; then
    echo "FAIL: crash at $n: units run/skipped '$ran', want '$((total - before)) $before'"; fail=1
  fi
  digest "$out" > "$tmp/sum$n"
  if ! cmp -s "$tmp/ref.sum" "$tmp/sum$n"; then
    echo "FAIL: crash at $n: outputs differ from the uninterrupted run:"; diff "$tmp/ref.sum" "$tmp/sum$n" | head; fail=1
  fi
  echo "prep_resume: crash after marker $n: $before units kept, rerun identical"
done

# a real kill -9 during the docs stage (one thread, so it lasts long enough)
out=$tmp/kill
"$grit" prep -o "$out" "${args[@]}" --threads 1 --minhash refinedweb "${inputs[@]}" &
pid=$!
for _ in $(seq 1 2000); do
  n=$( (ls "$out/done" 2>/dev/null || true) | wc -l)
  [ "$n" -ge 2 ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.01
done
if kill -9 "$pid" 2>/dev/null; then
  wait "$pid" 2>/dev/null || true
  pid=
  before=$(ls "$out/done" | grep -c '\.json$')
  "$grit" prep -o "$out" "${args[@]}" --minhash refinedweb "${inputs[@]}"
  "$grit" prep -o "$tmp/ref2" "${args[@]}" --minhash refinedweb "${inputs[@]}"
  if ! cmp -s <(digest "$out") <(digest "$tmp/ref2"); then
    echo "FAIL: kill -9 then rerun: outputs differ"; fail=1
  fi
  echo "prep_resume: kill -9 with $before markers done, rerun identical"
else
  wait "$pid" || true
  pid=
  echo "FAIL: the run ended before it could be killed"; fail=1
fi

# rerun of a finished run: everything skipped, nothing rewritten
(cd "$tmp/ref" && stat -c '%n %i' done/* tokens/* | sort) > "$tmp/i1"
"$grit" prep -o "$tmp/ref" "${args[@]}" "${inputs[@]}"
(cd "$tmp/ref" && stat -c '%n %i' done/* tokens/* | sort) > "$tmp/i2"
cmp -s "$tmp/i1" "$tmp/i2" || { echo "FAIL: rerun of a finished run rewrote files"; fail=1; }
# another setting on the same directory is refused with a clear message
rc=0
msg=$("$grit" prep -o "$tmp/ref" "${args[@]}" --min-lang-score 0.9 "${inputs[@]}" 2>&1) || rc=$?
if [ $rc -ne 1 ] || ! grep -q "made from other inputs or settings" <<<"$msg"; then
  echo "FAIL: changed settings on an existing output: rc $rc: $msg"; fail=1
fi
[ $fail -eq 0 ] && echo "prep_resume: all checks passed"
exit $fail
