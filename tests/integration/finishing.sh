#!/usr/bin/env bash
# finishing.sh GRIT PYTHON - a job whose ranks finish at different times is not a hang: two
# ranks under grit launch (--hang-timeout 3) speak the heartbeat protocol through
# python/grit_client.py, step to 5, and rank 1 says done at once while rank 0 spends 8 s on
# "final files" (no step marks that) before it says done: the run ends DONE with no incident.
# Then both ranks stop for good after their last step, nobody done: a hang within seconds.
# restart: the first attempt beats 3 steps and dies; the second never reaches a step but
# prints a line every 0.3 s (a start stuck retrying): a program that beats gets the startup
# timeout (5 s) whatever its log does, so that is a hang, and the third attempt finishes.
set -euo pipefail
grit=$1 py=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$here/sup_lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
cat > "$tmp/job.py" <<'PY'
import os, sys, time
import grit_client as g
g.init()
r, mode = g.rank(), sys.argv[1]
if mode == "restart":
    counter = "%s.%d" % (sys.argv[2], r)
    attempt = int(open(counter).read()) + 1 if os.path.exists(counter) else 1
    open(counter, "w").write(str(attempt))
    if attempt == 1:
        for step in range(1, 4):
            time.sleep(0.2)
            g.beat(step, loss=1.0 / step, step_time=0.2)
        sys.exit(1)
    while attempt == 2:
        print("waiting for the data server", flush=True)
        time.sleep(0.3)
for step in range(1, 6):
    time.sleep(0.2)
    g.beat(step, loss=1.0 / step, step_time=0.2)
if mode == "finish" and r == 0:
    time.sleep(8)  # rank 0 writes its final files; rank 1 is done already
if mode == "stuck":
    time.sleep(60)  # nobody says done: a hang
g.done(5)
PY
L() { # NAME MODE [launch options]
  local name=$1 mode=$2; shift 2
  PYTHONPATH="$here/../../python" timeout 90 "$grit" launch --run "$tmp/$name" --nodes 2 --spares 0 \
    --max-restarts 0 --hang-timeout 3 --startup-timeout 30 --straggler-factor 0 --backoff 0.1 "$@" \
    -- "$py" "$tmp/job.py" "$mode" "$tmp/attempts" > "$tmp/$name.out" 2>&1
}
rc=0; L fin finish || rc=$?
[ $rc -eq 0 ] && grep -q '"event":"done"' "$tmp/fin/events.jsonl" &&
  ! grep -q '"event":"detected"' "$tmp/fin/events.jsonl" ||
  fail "finishing: rc $rc: $(grep -o '"event":"detected".*' "$tmp/fin/events.jsonl" | head -1)"
rc=0; t0=$(date +%s); L stuck stuck || rc=$?
grep -q '"event":"detected","kind":"hang"' "$tmp/stuck/events.jsonl" ||
  fail "stuck: no hang detected (rc $rc)"
[ $(( $(date +%s) - t0 )) -lt 20 ] || fail "stuck: took $(( $(date +%s) - t0 )) s (hang timeout 3 s)"
rc=0; t0=$(date +%s); L restart restart --max-restarts 3 --startup-timeout 5 || rc=$?
ev=$tmp/restart/events.jsonl
[ $rc -eq 0 ] && grep -q '"event":"done"' "$ev" || fail "restart: rc $rc, no done event"
grep -q '"event":"detected","kind":"exit"' "$ev" || fail "restart: the first attempt's exit was not detected"
grep -q '"event":"detected","kind":"hang".*no progress for [0-9.]* s (timeout 5.0 s)' "$ev" ||
  fail "restart: the stuck start was not a hang at the startup timeout: $(grep -o '"event":"detected".*' "$ev" | tail -1)"
grep -q '"event":"launch","attempt":2' "$ev" || fail "restart: no third attempt"
grep -q 'waiting for the data server' "$tmp/restart/logs/attempt_01.log" || fail "restart: the second attempt printed nothing"
[ $fails -eq 0 ] && echo "ok   restart: a start that prints but never steps is a hang after $(( $(date +%s) - t0 )) s in all"
[ $fails -eq 0 ] && echo "finishing: a finishing rank is given time, a stuck one is a hang"
exit $fails
