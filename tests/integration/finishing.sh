#!/usr/bin/env bash
# finishing.sh GRIT PYTHON - a job whose ranks finish at different times is not a hang: two
# ranks under grit launch (--hang-timeout 3) speak the heartbeat protocol through
# python/grit_client.py, step to 5, and rank 1 says done at once while rank 0 spends 8 s on
# "final files" (no step marks that) before it says done: the run ends DONE with no incident.
# Then both ranks stop for good after their last step, nobody done: a hang within seconds.
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
for step in range(1, 6):
    time.sleep(0.2)
    g.beat(step, loss=1.0 / step, step_time=0.2)
if mode == "finish" and r == 0:
    time.sleep(8)  # rank 0 writes its final files; rank 1 is done already
if mode == "stuck":
    time.sleep(60)  # nobody says done: a hang
g.done(5)
PY
L() { # NAME MODE
  PYTHONPATH="$here/../../python" "$grit" launch --run "$tmp/$1" --nodes 2 --spares 0 \
    --max-restarts 0 --hang-timeout 3 --startup-timeout 30 --straggler-factor 0 \
    -- "$py" "$tmp/job.py" "$2" > "$tmp/$1.out" 2>&1
}
rc=0; L fin finish || rc=$?
[ $rc -eq 0 ] && grep -q '"event":"done"' "$tmp/fin/events.jsonl" &&
  ! grep -q '"event":"detected"' "$tmp/fin/events.jsonl" ||
  fail "finishing: rc $rc: $(grep -o '"event":"detected".*' "$tmp/fin/events.jsonl" | head -1)"
rc=0; t0=$(date +%s); L stuck stuck || rc=$?
grep -q '"event":"detected","kind":"hang"' "$tmp/stuck/events.jsonl" ||
  fail "stuck: no hang detected (rc $rc)"
[ $(( $(date +%s) - t0 )) -lt 20 ] || fail "stuck: took $(( $(date +%s) - t0 )) s (hang timeout 3 s)"
[ $fails -eq 0 ] && echo "finishing: a finishing rank is given time, a stuck one is a hang"
exit $fails
