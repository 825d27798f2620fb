#!/usr/bin/env bash
# no_spare.sh GRIT PART - grit launch asks for a node when its spares ran out (--on-no-spare,
# src/supervise/sup_provision.c), and quarantines a node that keeps failing (--strikes,
# src/supervise/sup_strikes.c). Real processes: grit launch, mpirun, grit train, and a
# small provider script per case that records each call. PART: provider (ok, fails,
# timeout, garbage) or strikes, two CTest tests so each stays under a minute.
#   ok        2 nodes, 0 spares, node1 killed: the script is called once with
#             GRIT_FAILED_NODE=node1 and GRIT_RUN, prints node7; the run resumes on
#             node0,node7 and ends DONE, bitwise equal to a fault-free run
#   fails     the script exits 3: gave up, its reason (and its stderr) in events.jsonl,
#             on stderr and in the summary
#   timeout   the script sleeps: killed after --on-no-spare-timeout (its child too)
#   stop      SIGTERM to grit launch while the command runs: it is ended, STOPPED, 143
#   garbage   two lines, a bad name, a node the job runs on: each refused, gave up
#   strikes   rank 1 killed twice (2 nodes + 1 spare): the first time node1 is healthy
#             and reused (as before), the second time quarantined, node2 takes its
#             place; DONE bitwise equal; the ledger keeps it, a rerun after an operator
#             set node1 back to "spare" cordons it again; with no spare left, a provider
#             that hands node1 back is refused
set -euo pipefail
grit=$1 part=${2:-provider}
case $part in provider | strikes) ;; *) echo "usage: no_spare.sh GRIT provider|strikes"; exit 2 ;; esac
tmp=$(mktemp -d)
bg=""
cleanup() { [ -n "$bg" ] && kill -9 "$bg" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
command -v mpirun >/dev/null || { echo "FAIL: mpirun not found (make deps)"; exit 1; }
. "$(dirname "$0")/sup_lib.sh"  # fail, tiny_job
tiny_job "$tmp/job.json" 8 24 4
L() { # DIR SPARES [launch options...]: the job on 2 nodes; stdout+stderr in DIR.out
  local d=$1 k=$2; shift 2
  "$grit" launch --nodes 2 --spares "$k" --run "$d" --hang-timeout 3 --backoff 0.1 \
    --straggler-factor 0 --no-dashboard "$@" \
    -- "$grit" train "$tmp/job.json" --run-dir "$d" --quiet > "$d.out" 2>&1
}
provider() { # NAME BODY: a script that records its call and environment, then BODY
  cat > "$tmp/$1.sh" <<EOF
#!/bin/bash
echo "\$GRIT_FAILED_NODE|\$GRIT_RUN" >> "$tmp/$1.calls"
$2
EOF
  chmod +x "$tmp/$1.sh"
}
calls() { [ -f "$tmp/$1.calls" ] && wc -l < "$tmp/$1.calls" || echo 0; }

L "$tmp/ref" 0 || fail "reference run failed: $(tail -3 "$tmp/ref.out")"

if [ "$part" = provider ]; then
# --- ok: the script gives node7 -------------------------------------------------------
provider ok 'echo node7'
rc=0; L "$tmp/ok" 0 --on-no-spare "$tmp/ok.sh" --inject kill:node=node1:step=6 || rc=$?
e="$tmp/ok/events.jsonl"
if [ $rc -eq 0 ] && [ "$(calls ok)" -eq 1 ] && grep -qx "node1|$tmp/ok" "$tmp/ok.calls" &&
   cmp -s "$tmp/ref/model.safetensors" "$tmp/ok/model.safetensors" &&
   grep -q '"event":"spare_provided","node":"node7","for":"node1"' "$e" &&
   grep -q '"event":"cordon","node":"node1".*"replacement":"node7"' "$e" &&
   grep -q '"event":"launch","attempt":1,.*"nodes":"node0,node7"' "$e" &&
   grep -q '"from":"REPAIRING","to":"PROVISIONING"' "$e" &&
   grep -q '"from":"PROVISIONING","to":"REPAIRING"' "$e" &&
   grep -q '"event":"done"' "$e" && grep -q '"name": "node7"' "$tmp/ok/cluster.json"; then
  echo "ok   no spare: the provider was called once, node7 replaced node1, bitwise equal"
else
  fail "ok: rc=$rc calls=$(calls ok) $(cat "$tmp/ok.calls" 2>/dev/null) $(grep -E 'giving|spare' "$tmp/ok.out" | head -3)"
fi

gave_up() { # NAME WANT: exit 1, the reason in events.jsonl, on stderr and in the summary
  local n=$1 want=$2 e="$tmp/$1/events.jsonl"
  if [ "$3" -eq 1 ] && grep -q '"event":"gave_up".*"cause":"on_no_spare"' "$e" &&
     grep '"event":"gave_up"' "$e" | grep -qF "$want" &&
     grep "giving up: " "$tmp/$n.out" | grep -qF "$want" &&
     grep -E "^  reason +node node1 failed and no spare is left; --on-no-spare " "$tmp/$n.out" |
       grep -qF "$want" &&
     grep -qE '^  result +GAVE_UP' "$tmp/$n.out" && ! grep -q '"event":"done"' "$e" &&
     grep -q '"from":"PROVISIONING","to":"GAVE_UP"' "$e"; then
    echo "ok   $n: gave up: $(grep -o "giving up: .*" "$tmp/$n.out" | head -1 | cut -c1-150)"
  else
    fail "$n: rc=$3, expected '$want': $(grep -E 'giving|reason' "$tmp/$n.out" | head -3)"
  fi
}

# --- fails: exit 3 with a message on stderr -------------------------------------------
provider fails 'echo "no capacity in us-east-1" >&2; exit 3'
rc=0; L "$tmp/fails" 0 --on-no-spare "$tmp/fails.sh" --inject kill:node=node1:step=2 || rc=$?
gave_up fails "exited with 3: no capacity in us-east-1" $rc
[ "$(calls fails)" -eq 1 ] || fail "fails: called $(calls fails) times, expected 1"

# --- timeout: the script (and its child) killed ---------------------------------------
provider slow "sleep 60 & echo \$! > $tmp/slow.child; wait"
t0=$(date +%s)
rc=0; L "$tmp/slow" 0 --on-no-spare "$tmp/slow.sh" --on-no-spare-timeout 1 \
  --inject kill:node=node1:step=2 || rc=$?
gave_up slow "timed out after 1 s" $rc
[ $(( $(date +%s) - t0 )) -lt 40 ] || fail "timeout: took $(( $(date +%s) - t0 )) s"
child=$(cat "$tmp/slow.child" 2>/dev/null || echo "")
# gone, or a zombie nobody reaped yet (its parent, the script, was killed with it)
if [ -n "$child" ] && kill -0 "$child" 2>/dev/null &&
   [ "$(awk '{print $3}' "/proc/$child/stat" 2>/dev/null)" != Z ]; then
  fail "timeout: the command's child $child still runs"; kill -9 "$child"
fi

# --- stop: SIGTERM to grit launch while it waits for the command: STOPPED, command ended
provider hold "echo \$\$ > $tmp/hold.pid; sleep 60 & wait"
"$grit" launch --nodes 2 --spares 0 --run "$tmp/stop" --hang-timeout 3 --backoff 0.1 \
  --straggler-factor 0 --no-dashboard --on-no-spare "$tmp/hold.sh" --on-no-spare-timeout 120 \
  --inject kill:node=node1:step=2 -- "$grit" train "$tmp/job.json" --run-dir "$tmp/stop" --quiet \
  > "$tmp/stop.out" 2>&1 &
bg=$!
for _ in $(seq 1 600); do [ -s "$tmp/hold.pid" ] && break; sleep 0.1; done
kill -TERM "$bg"; rc=0; wait "$bg" || rc=$?; bg=""
hp=$(cat "$tmp/hold.pid" 2>/dev/null || echo "")
e="$tmp/stop/events.jsonl"
if [ $rc -eq 143 ] && grep -q '"from":"PROVISIONING","to":"STOPPED"' "$e" &&
   grep -q '"event":"spare_request_ended"' "$e" && grep -qE '^  result +STOPPED' "$tmp/stop.out" &&
   { [ -z "$hp" ] || ! kill -0 "$hp" 2>/dev/null || [ "$(awk '{print $3}' "/proc/$hp/stat" 2>/dev/null)" = Z ]; }; then
  echo "ok   stop: SIGTERM while asking: the command ended, STOPPED, exit 143"
else
  fail "stop while asking: rc=$rc $(grep -E 'STOPPED|stop' "$tmp/stop.out" | head -3)"
fi

# --- garbage: two lines; a bad name; a node the job already runs on -------------------
provider two 'printf "node7\nnode8\n"'
rc=0; L "$tmp/two" 0 --on-no-spare "$tmp/two.sh" --inject kill:node=node1:step=2 || rc=$?
gave_up two "printed 'node7|node8|' (expected one line" $rc
provider bad 'echo "node 7!"'
rc=0; L "$tmp/bad" 0 --on-no-spare "$tmp/bad.sh" --inject kill:node=node1:step=2 || rc=$?
gave_up bad "printed 'node 7!" $rc
provider busy 'echo node0'
rc=0; L "$tmp/busy" 0 --on-no-spare "$tmp/busy.sh" --inject kill:node=node1:step=2 || rc=$?
gave_up busy "named node0, which the job already runs on" $rc
rc=0; "$grit" launch --run "$tmp/x" --no-spare wait --on-no-spare /bin/true -- true \
  > "$tmp/x.out" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q -- "--on-no-spare with --no-spare wait: expected give_up" "$tmp/x.out" &&
  echo "ok   --on-no-spare with --no-spare wait: refused (exit 2)" || fail "usage: rc=$rc $(cat "$tmp/x.out")"

fi

if [ "$part" = strikes ]; then
# --- strikes: rank 1 (node1) killed on attempt 0 and again on attempt 1 --------------
two_kills=kill:rank=1:step=6,kill:rank=1:step=14:attempt=1
rc=0; L "$tmp/st" 1 --inject "$two_kills" || rc=$?
e="$tmp/st/events.jsonl"
if [ $rc -eq 0 ] && cmp -s "$tmp/ref/model.safetensors" "$tmp/st/model.safetensors" &&
   [ "$(grep -c '"event":"detected","kind":"exit","node":"node1"' "$e")" -eq 2 ] &&
   grep -q '"event":"launch","attempt":1,.*"nodes":"node0,node1"' "$e" &&
   grep -q '"event":"launch","attempt":2,.*"nodes":"node0,node2"' "$e" &&
   [ "$(grep -c '"event":"quarantined"' "$e")" -eq 1 ] &&
   grep -q '"event":"quarantined","node":"node1","incidents":2,"strikes":2' "$e" &&
   [ "$(grep -c '"event":"cordon"' "$e")" -eq 1 ] &&
   grep -q '"quarantined":\[{"node":"node1"' "$tmp/st/supervisor.json" &&
   grep -qE '^  quarantined +node1 \(quarantined: 2 incidents within 3600 s' "$tmp/st.out"; then
  echo "ok   strikes: node1 reused after its first death, quarantined after its second, bitwise equal"
else
  fail "strikes: rc=$rc $(grep -E 'quarant|cordon|attempt' "$tmp/st.out" | head -5)"
fi
# an operator (or a script) sets node1 back to spare; a rerun keeps it out
sed -i '/"name": "node1"/,/}/ s/"state": "cordoned"/"state": "spare"/' "$tmp/st/cluster.json"
grep -A1 '"name": "node1"' "$tmp/st/cluster.json" | grep -q '"spare"' || fail "strikes: could not edit cluster.json"
"$grit" launch --nodes 2 --spares 1 --run "$tmp/st" --straggler-factor 0 --no-dashboard \
  -- "$grit" train "$tmp/job.json" --run-dir "$tmp/st" --quiet > "$tmp/st2.out" 2>&1 ||
  fail "strikes: the rerun failed: $(tail -3 "$tmp/st2.out")"
if grep -q '"event":"quarantine_kept","node":"node1","was":"spare"' "$e" &&
   grep -A1 '"name": "node1"' "$tmp/st/cluster.json" | grep -q '"cordoned"' &&
   ! grep -q '"event":"launch","attempt":3,.*node1' "$e"; then
  echo "ok   strikes: a restarted supervisor keeps node1 quarantined (set back to spare: cordoned)"
else
  fail "strikes rerun: $(grep -E 'quarant' "$tmp/st2.out" | head -3)"
fi
# no spare left and the provider hands the quarantined node back: refused
provider same 'echo "$GRIT_FAILED_NODE"'
rc=0; L "$tmp/sq" 0 --on-no-spare "$tmp/same.sh" --inject "$two_kills" || rc=$?
e="$tmp/sq/events.jsonl"
if [ $rc -eq 1 ] && [ "$(calls same)" -eq 1 ] && grep -q '"event":"quarantined","node":"node1"' "$e" &&
   grep -q '"event":"gave_up".*named node1, which is quarantined' "$e"; then
  echo "ok   strikes: a provider that hands the quarantined node back is refused"
else
  fail "strikes + provider: rc=$rc calls=$(calls same) $(grep -E 'giving|quarant' "$tmp/sq.out" | head -3)"
fi

fi

if [ "$fails" -eq 0 ]; then echo "no_spare: all cases passed"; else echo "no_spare: $fails failure(s)"; fi
[ "$fails" -eq 0 ]
