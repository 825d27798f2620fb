#!/usr/bin/env bash
# cluster.sh GRIT SCENARIO - `grit cluster` with the local provider: every node a network-
# namespace host on a private bridge (the test's own: GRIT_CLUSTER_TEST_BRIDGE, default
# gcltest0, 10.79.60.0/24, ports 18500+), real munge, slurmctld and slurmd. State in a temp
# folder; the trap deletes the cluster even on failure, and every scenario ends with
# `grit cluster delete` and a check that nothing is left: no namespace, link, process,
# mount or folder of the cluster.
#
#   lifecycle  controller + 3 workers; n3's OnCreate exits 3: n3 is Failure with the
#              script's output in describe-node, the cluster InService, n2/n4 idle in
#              Slurm. Then replace-node n3 (script fixed) -> Running; n4 marked with a
#              health fault: replace-node n4 is never admitted (2 fresh nodes tried), n4
#              not in service in Slurm. update-software runs OnCreate again on the
#              Running nodes. --json fields in HyperPod's names.
#   resume     1 controller + 4 workers + 1 spare; `grit cluster create` SIGKILLed mid-
#              create, then run again: converges (6 nodes Running, one NodeId per slot,
#              one slurmd per worker, 5 idle in sinfo, one bridge, 6 namespaces).
#   scale      1 controller + 2 workers; update to 4 workers SIGKILLed mid-way and run
#              again: converges (4 idle, one NodeId per slot, one slurmd each); a 4-node job
#              runs while update shrinks to 2: the job completes, then n4/n5 are removed
#              (not in Slurm, no namespace, rows Terminated).
#   mpi        1 controller + 2 workers: admission's MPI check (mpirun of grit health on
#              the new node and a healthy peer): n2 has no peer, n3 is paired with n2; a
#              replacement n3 whose all-reduce is corrupt (GRIT_HEALTH_FAULT) passes grit
#              health alone but is not admitted; with the fault cleared it is.
#   heal       1 controller + 4 workers + 1 warm spare; a training job (sbatch -N 5,
#              srun --auto-resume=1 grit train, 4 ranks + the spare, 80 steps) loses worker n3
#              mid-run (every process SIGKILLed): the job resumes on the spare and ends
#              bitwise equal to a fault-free run; the agent replaces n3 (same name,
#              new NodeId) and it is idle again; then Action:Replace and Action:Reboot
#              set by hand with scontrol are acted on; describe shows it all.
#   spare      1 controller + 1 worker + 1 warm spare: `provide-spare` prints the warm
#              spare the job does not hold (alone on stdout), exits 1 when the job holds
#              it; grit launch --spares 0 --on-no-spare "grit cluster provide-spare" loses
#              node1 and resumes on n3, bitwise equal; GRIT_FAILED_NODE=n2 (a worker) is
#              replaced in place (new NodeId) and n2 printed. Then --backend slurm: a batch
#              job on n2+n3 (grit launch --spares 0 --on-no-spare provide-spare) loses n3;
#              the cluster replaces it in place, outside the job's allocation; grit launch
#              expands the allocation onto it (Slurm job expansion), resumes, bitwise
#              equal to a fault-free run; prints the times from the kill to resumed.
# Exit 77 (skipped, said loudly): not root, no Slurm/munge, no namespaces/bridges.
# The waits of a failing run add up to less than the CTest timeout, so the trap (delete
# and the removal of the temp folder) always runs.
set -euo pipefail
grit=$(realpath "$1") scenario=$2
here=$(cd "$(dirname "$0")" && pwd)
lc=$here/../../scripts/slurm-local-cluster.sh
skip() { echo "SKIP (cluster): $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (namespaces, munged, slurmd)"
for b in slurmctld slurmd munged sbatch srun scontrol sinfo ip nsenter unshare; do
  command -v "$b" > /dev/null || [ -x "/usr/sbin/$b" ] || skip "$b not installed (scripts/install-deps.sh)"
done
unshare --pid --fork --mount-proc true 2> /dev/null || skip "cannot create PID namespaces"
bridge=${GRIT_CLUSTER_TEST_BRIDGE:-gcltest0} subnet=${GRIT_CLUSTER_TEST_SUBNET:-10.79.60}
probe=${bridge}p
probe_ok=0
if ip link add "$probe" type bridge 2> /dev/null && ip netns add "$probe" 2> /dev/null &&
  ip link add "$probe-v" type veth peer name eth0 netns "$probe" 2> /dev/null; then probe_ok=1; fi
ip link del "$probe-v" 2> /dev/null || true
ip netns del "$probe" 2> /dev/null || true
ip link del "$probe" 2> /dev/null || true
[ "$probe_ok" = 1 ] || skip "cannot create a bridge, network namespace or veth here"
if [ "$scenario" = heal ]; then
  spank=$(dirname "$grit")/spank_grit.so
  [ -f "$spank" ] || skip "heal: spank_grit.so was not built (no slurm/spank.h)"
fi

tmp=$(mktemp -d /tmp/grit-cluster-test.XXXXXX)
chmod 0755 "$tmp" # munged runs as user munge
state=$tmp/state name=ctest
G=("$grit" cluster --state "$state" --health --quick)
bg=""
cleanup() {
  [ -n "$bg" ] && kill -9 "$bg" 2> /dev/null
  if [ -f "$state/state.db" ]; then "${G[@]}" --quiet delete "$name" > /dev/null 2>&1 || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok   $*"; }
export SLURM_CONF=$state/$name/slurm/etc/slurm.conf
export GRIT_SLURM_DIR=$state/$name/slurm # for slurm-local-cluster.sh kill-node/fault-node

# spec GROUPS_JSON: the cluster's spec with the test's network
mkdir -p "$tmp/lc"
cat > "$tmp/lc/on_create.sh" << 'EOF'
#!/bin/bash
# a lifecycle script: says where it runs; fails where a fail.<node> marker exists
echo "on_create $GRIT_LIFECYCLE_REASON: node $GRIT_NODE_NAME host $(hostname) id $GRIT_NODE_ID group $GRIT_INSTANCE_GROUP_NAME type $GRIT_INSTANCE_TYPE addr $GRIT_NODE_ADDR role $GRIT_NODE_ROLE controller $GRIT_CONTROLLER_ADDR uid $(id -u)"
ip -4 -o addr show eth0 | awk '{print "eth0", $4}'
if [ -e "$GRIT_LIFECYCLE_DIR/fail.$GRIT_NODE_NAME" ]; then
  echo "installing the driver... error: package grit-test-broken is not installable" >&2
  exit 3
fi
EOF
spec() {
  cat > "$tmp/spec.json" << EOF
{"ClusterName": "$name",
 "Network": {"Bridge": "$bridge", "Subnet": "$subnet", "Port": 18500},
 "InstanceGroups": [
  {"InstanceGroupName": "controller", "Role": "controller", "InstanceType": "ml.c5.xlarge",
   "InstanceCount": 1, "LifeCycleConfig": {"SourceS3Uri": "lc", "OnCreate": "on_create.sh"}},
  {"InstanceGroupName": "workers", "Role": "worker", "InstanceType": "ml.g5.xlarge",
   "InstanceCount": $1, "WarmSpares": $2, "ThreadsPerCore": 1,
   "LifeCycleConfig": {"SourceS3Uri": "lc", "OnCreate": "on_create.sh"}}]}
EOF
}
status_of() { "${G[@]}" --json describe-node "$name" "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["NodeDetails"]["InstanceStatus"]["Status"])'; }
id_of() { "${G[@]}" --json describe-node "$name" "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["NodeDetails"]["NodeId"])'; }
# wait_job JID SECS: until the Slurm job ends (at most SECS); its final state in $js
wait_job() {
  local end=$((SECONDS + $2))
  while [ "$SECONDS" -lt "$end" ]; do
    js=$(scontrol show job "$1" 2> /dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
    case $js in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL) return 0 ;; esac
    sleep 0.5
  done
}
slurm_state() { sinfo -h -N -n "$1" -o '%T' 2> /dev/null | head -1; }
# wait_for SECONDS 'SHELL CONDITION': until it holds (evaluated anew each time)
wait_for() {
  local end=$((SECONDS + $1)); shift
  while [ "$SECONDS" -lt "$end" ]; do eval "$1" > /dev/null 2>&1 && return 0; sleep 0.2; done
  return 1
}

# delete, then nothing of the cluster may be left
delete_and_check() {
  "${G[@]}" delete "$name" || fail "delete failed"
  local left
  left=$( { ip netns list; ip -o link show; } 2> /dev/null | grep -E "(^| )$bridge(-n[0-9]+)?[@: ]" || true)
  [ -z "$left" ] || fail "left after delete: network: $left"
  left=""
  for p in /proc/[0-9]*; do
    c=$(tr '\0' ' ' 2> /dev/null < "$p/cmdline" || true)
    d=$(readlink "$p/cwd" 2> /dev/null || true)
    if [[ $c == *"$state"* || $d == "$state"* ]] && [ "${p#/proc/}" != $$ ]; then left+=" ${p#/proc/}:$c"; fi
  done
  [ -z "$left" ] || fail "left after delete: processes:$left"
  left=$(grep -F "$state" /proc/self/mountinfo || true)
  [ -z "$left" ] || fail "left after delete: mounts: $left"
  [ ! -e "$state/$name" ] || fail "left after delete: $state/$name"
  [ "$(sqlite3 -cmd ".timeout 10000" "$state/state.db" 'select count(*) from clusters; select count(*) from nodes')" = $'0\n0' ] ||
    fail "left after delete: rows in the state database"
  "${G[@]}" describe "$name" > /dev/null 2>&1 && fail "describe of a deleted cluster succeeded"
  [ "$fails" -eq 0 ] && ok "$scenario: delete left no namespace, link, process, mount, folder or row"
  return 0
}

case $scenario in
lifecycle)
  spec 3 0
  touch "$tmp/lc/fail.n3"
  "${G[@]}" create "$tmp/spec.json" || fail "create failed (one failing node must not fail the cluster)"
  st=$("${G[@]}" --json describe "$name")
  [ "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["ClusterStatus"])' <<< "$st")" = InService ] ||
    fail "cluster not InService: $st"
  [ "$(status_of n3)" = Failure ] || fail "n3 is $(status_of n3), expected Failure"
  out=$("${G[@]}" describe-node "$name" n3)
  grep -q "error: package grit-test-broken is not installable" <<< "$out" || fail "describe-node n3 lacks the script's output: $out"
  grep -q "exited with status 3" <<< "$out" || fail "describe-node n3 lacks the exit status: $out"
  for n in n2 n4; do
    [ "$(status_of $n)" = Running ] || fail "$n is $(status_of $n), expected Running"
    [ "$(slurm_state $n)" = idle ] || fail "$n is '$(slurm_state $n)' in Slurm, expected idle"
    grep -q "on_create OnCreate: node $n host $n id i-.* group workers type ml.g5.xlarge addr $subnet.1[0-9] role worker controller $subnet.11 uid 0" \
      <<< "$("${G[@]}" describe-node "$name" $n)" || fail "$n: lifecycle output lacks its variables: $("${G[@]}" describe-node "$name" $n)"
  done
  [ "$(slurm_state n3)" != idle ] || fail "n3 (lifecycle failed) is idle in Slurm"
  grep -q "on_create OnCreate: node n1 host n1 .* role controller" <<< "$("${G[@]}" describe-node "$name" n1)" ||
    fail "the controller's OnCreate did not run in n1"
  "${G[@]}" --json list-nodes "$name" | python3 -c '
import json, sys
j = json.load(sys.stdin)["ClusterNodeSummaries"]
assert len(j) == 4, j
for n in j:
    for k in ("NodeId", "InstanceGroupName", "InstanceType", "LaunchTime", "InstanceStatus"):
        assert k in n, (k, n)
    assert n["InstanceStatus"]["Status"] in ("Pending", "Running", "ShuttingDown", "Failure", "SystemUpdating"), n
    assert n["NodeId"].startswith("i-") and n["LaunchTime"].endswith("Z"), n
' || fail "list-nodes --json: not HyperPod-shaped"
  ok "lifecycle: n3's failing OnCreate failed n3 only (Failure, log in describe-node), n2/n4 idle"

  # the script fixed: a replacement of n3 is admitted
  rm "$tmp/lc/fail.n3"
  old=$(id_of n3)
  "${G[@]}" replace-node "$name" n3 > "$tmp/r1.out" 2>&1 & r1=$!; bg=$r1
  # a second replace of the same node judged on the same NodeId (the agent and grit launch's
  # provide-spare at once) waits for the one under way and then leaves the fresh node alone
  lock="$state/$name/locks/n3.lock"
  for _ in $(seq 1 400); do [ -e "$lock" ] && ! flock -n "$lock" true && break; sleep 0.05; done
  "${G[@]}" --if-node-id "$old" replace-node "$name" n3 > "$tmp/r2.out" 2>&1 || fail "replace-node --if-node-id failed: $(cat "$tmp/r2.out")"
  wait "$r1" || fail "replace-node n3 failed: $(tail -n 3 "$tmp/r1.out")"; bg=""
  grep -q "waiting for it" "$tmp/r2.out" && grep -q "replaced meanwhile, nothing to do" "$tmp/r2.out" &&
    [ "$(sqlite3 -cmd ".timeout 10000" "$state/state.db" "select count(*) from nodes where slot = 3 and status = 'Terminated'")" = 1 ] ||
    fail "two replaces of n3 at once: $(cat "$tmp/r2.out" | tr '\n' ';')"
  [ "$(status_of n3)" = Running ] && [ "$(id_of n3)" != "$old" ] || fail "n3 after replace: $(status_of n3) $(id_of n3) (was $old)"
  wait_for 20 'test "$(slurm_state n3)" = idle' || fail "n3 is '$(slurm_state n3)' after replace, expected idle"
  # a node whose health check fails is never admitted: both fresh nodes of n4 fail
  "$lc" fault-node n4 gemm_bitflip
  "${G[@]}" --attempts 2 replace-node "$name" n4 || fail "replace-node n4 failed as a command"
  [ "$(status_of n4)" = Failure ] || fail "n4 with a health fault is $(status_of n4), expected Failure"
  grep -q "admission health check failed" <<< "$("${G[@]}" describe-node "$name" n4)" || fail "n4: no admission failure message"
  [ "$(sqlite3 -cmd ".timeout 10000" "$state/state.db" "select count(*) from nodes where slot = 4 and status = 'Terminated'")" = 2 ] ||
    fail "n4: expected 2 terminated nodes (the original and the first failed replacement)"
  s4=$(slurm_state n4)
  [[ $s4 == idle* || $s4 == mixed* || $s4 == alloc* ]] && fail "n4 failed admission but is '$s4' in Slurm"
  [ "$fails" -eq 0 ] && ok "admission: replacement n3 admitted; n4 with a failing health check not admitted after 2 tries (Slurm: $s4)"

  "${G[@]}" update-software "$name" || fail "update-software failed"
  n=$(grep -c "on_create UpdateSoftware: node n2" "$(ls "$state/$name/logs/"*.lifecycle.log | xargs grep -l 'node n2 ' | head -1)" || true)
  [ "$n" = 1 ] || fail "update-software did not run OnCreate again on n2"
  [ "$(status_of n2)" = Running ] || fail "n2 after update-software: $(status_of n2)"
  "${G[@]}" describe "$name" | grep -q "UpdateClusterSoftware .*Succeeded" || fail "describe lacks the software update"
  ok "update-software: OnCreate ran again on the Running nodes"
  delete_and_check
  ;;

resume)
  spec 4 1
  "${G[@]}" create "$tmp/spec.json" > "$tmp/create1.out" 2>&1 &
  bg=$!
  # kill it once the first worker runs (the others still to come)
  wait_for 60 'grep -q "n2 (.*): Running" "$tmp/create1.out"' || fail "create did not get to n2"
  kill -9 "$bg"; wait "$bg" 2> /dev/null || true; bg=""
  pending=$(sqlite3 -cmd ".timeout 10000" "$state/state.db" "select count(*) from nodes where status != 'Running'")
  echo "killed create with $pending of 6 nodes not Running yet"
  [ "$pending" -gt 0 ] || fail "the kill came too late to test resuming (all nodes Running)"
  "${G[@]}" create "$tmp/spec.json" || fail "the second create failed"
  [ "$(sqlite3 -cmd ".timeout 10000" "$state/state.db" "select count(*), count(distinct slot), sum(status = 'Running') from nodes where status != 'Terminated'")" = "6|6|6" ] ||
    fail "after resume: nodes $(sqlite3 -cmd ".timeout 10000" "$state/state.db" 'select slot, id, status from nodes')"
  [ "$(sqlite3 -cmd ".timeout 10000" "$state/state.db" 'select count(*) from clusters')" = 1 ] || fail "more than one cluster row"
  [ "$(sinfo -h -N -o '%N %T' | grep -c ' idle$')" = 5 ] || fail "sinfo: $(sinfo -h -N -o '%N %T')"
  for i in 2 3 4 5 6; do
    k=$(for p in $("$lc" node-pids "n$i"); do cat "/proc/$p/comm" 2> /dev/null; done | grep -c '^slurmd$' || true)
    [ "$k" = 1 ] || fail "n$i runs $k slurmd, expected 1"
  done
  [ "$(ip netns list | grep -cE "^$bridge-n[0-9]+")" = 6 ] || fail "namespaces: $(ip netns list)"
  [ "$(ip -o link show type bridge | grep -c "$bridge")" = 1 ] || fail "bridges: $(ip -o link show type bridge)"
  [ "$(pgrep -fc "cluster --state $state .*agent $name" || true)" = 1 ] || fail "expected exactly one agent"
  ok "resume: create killed mid-way, run again: 6 nodes Running, nothing duplicated"
  delete_and_check
  ;;

scale)
  spec 2 0
  "${G[@]}" create "$tmp/spec.json" || fail "create failed"
  cp "$tmp/spec.json" "$tmp/spec2.json"
  spec 4 0
  "${G[@]}" update "$name" "$tmp/spec.json" > "$tmp/up1.out" 2>&1 &
  bg=$!
  wait_for 60 'grep -q "n4 (.*): Running" "$tmp/up1.out"' || fail "update did not get to n4"
  kill -9 "$bg"; wait "$bg" 2> /dev/null || true; bg=""
  echo "killed update with $(sqlite3 -cmd ".timeout 10000" "$state/state.db" "select count(*) from nodes where status = 'Pending'") node(s) Pending"
  "${G[@]}" update "$name" "$tmp/spec.json" || fail "the second update failed"
  [ "$(sqlite3 -cmd ".timeout 10000" "$state/state.db" "select count(*), count(distinct slot), sum(status = 'Running') from nodes where status != 'Terminated'")" = "5|5|5" ] ||
    fail "after resumed scale-up: $(sqlite3 "$state/state.db" 'select slot, id, status from nodes')"
  [ "$(sinfo -h -N -o '%N %T' | grep -c ' idle$')" = 4 ] || fail "sinfo after scale-up: $(sinfo -h -N -o '%N %T')"
  for i in 2 3 4 5; do
    k=$(for p in $("$lc" node-pids "n$i"); do cat "/proc/$p/comm" 2> /dev/null; done | grep -c '^slurmd$' || true)
    [ "$k" = 1 ] || fail "n$i runs $k slurmd, expected 1"
  done
  [ "$fails" -eq 0 ] && ok "scale: 2 -> 4 workers, killed mid-way and run again: 4 idle, nothing duplicated"
  jid=$(sbatch --parsable -N 4 -o /dev/null --wrap="sleep 8")
  wait_for 20 'test "$(squeue -h -j "$jid" -o %T)" = RUNNING' || fail "the job did not start"
  "${G[@]}" update "$name" "$tmp/spec2.json" || fail "scale-down failed"
  js=$(scontrol show job "$jid" | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
  [ "$js" = COMPLETED ] || fail "scale-down: the running job ended $js, expected COMPLETED (waited for)"
  [ "$(sinfo -h -N -o '%N' | sort | tr '\n' ' ')" = "n2 n3 " ] || fail "scale-down: Slurm nodes $(sinfo -h -N -o '%N %T')"
  [ -z "$(ip netns list | grep -E "^$bridge-n[45]( |$)")" ] || fail "scale-down: namespaces of n4/n5 left: $(ip netns list)"
  [ "$(sqlite3 -cmd ".timeout 10000" "$state/state.db" "select group_concat(status) from nodes where slot in (4, 5)")" = "Terminated,Terminated" ] ||
    fail "scale-down: rows $(sqlite3 "$state/state.db" 'select slot, status from nodes')"
  "${G[@]}" describe "$name" | grep -q "UpdateCluster .*Succeeded .*workers nodes: 4 -> 2" || fail "describe lacks the scale-down"
  [ "$fails" -eq 0 ] && ok "scale: 4 -> 2 workers while a job ran: the job completed, n4/n5 removed"
  delete_and_check
  ;;

heal)
  spec 4 1
  "${G[@]}" create "$tmp/spec.json" || fail "create failed"
  [ "$(sinfo -h -N -o '%N %T' | grep -c ' idle$')" = 5 ] || fail "sinfo: workers not idle: $(sinfo -h -N -o '%N %T')"
  # 4 data-parallel ranks + 1 spare, 80 steps, a checkpoint every 5
  python3 - "$here/../configs/slurm_job.json" "$tmp/job.json" << 'PY'
import json, sys
j = json.load(open(sys.argv[1]))
j["optim"]["global_batch"] = 8
j["optim"]["total_steps"] = 80
json.dump(j, open(sys.argv[2], "w"))
PY
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe --bind-to none -np 4 \
    "$grit" train "$tmp/job.json" --run-dir "$tmp/ref" --quiet > "$tmp/ref.out" 2>&1 || {
    cat "$tmp/ref.out"; fail "reference run failed"; exit 1; }
  run=$tmp/run
  cat > "$tmp/batch.sh" << EOF
#!/bin/bash
export GRIT_LAUNCH_OPTS="--run $run --spares 1 --no-spare give_up --hang-timeout 5 --health-timeout 20 --backoff 0.1 --straggler-factor 0 --bind \$(getent hosts \$SLURMD_NODENAME | awk '{print \$1}')"
srun --auto-resume=1 "$grit" train "$tmp/job.json" --run-dir "$run" --quiet
EOF
  old3=$(id_of n3)
  jid=$(sbatch --parsable -N 5 --no-kill --requeue --open-mode=append -o "$tmp/job.out" "$tmp/batch.sh")
  wait_for 90 'test "$(grep -c "\"step\"" "$run/metrics.jsonl" 2> /dev/null)" -ge 10' || fail "heal: training did not start"
  "$lc" kill-node n3
  echo "n3 killed at step $(grep -c '"step"' "$run/metrics.jsonl")"
  wait_job "$jid" 150
  [ "$js" = COMPLETED ] || fail "heal: job ended $js, expected COMPLETED"
  cmp -s "$tmp/ref/model.safetensors" "$run/model.safetensors" || fail "heal: final weights differ from the fault-free run"
  grep -q '"event":"cordon","node":"n3"' "$run/events.jsonl" || fail "heal: grit launch did not cordon n3"
  # the agent: n3 replaced (a new NodeId under the same name), idle again
  wait_for 30 'test "$(id_of n3)" != "$old3"' || fail "heal: the agent did not replace n3"
  wait_for 30 'test "$(status_of n3)" = Running' || fail "heal: n3 is $(status_of n3) after the agent"
  wait_for 30 'test "$(slurm_state n3)" = idle' || fail "heal: n3 is '$(slurm_state n3)' in Slurm after the agent"
  d=$("${G[@]}" describe "$name")
  grep -q "DetectNode .*n3: Slurm state" <<< "$d" && grep -q "ReplaceNode *$old3 .*Succeeded .*provisioning" <<< "$d" ||
    fail "heal: describe lacks the detection and replacement of n3: $d"
  python3 -c '
import json, sys
g = [x for x in json.load(sys.stdin)["InstanceGroups"] if x["InstanceGroupName"] == "workers"][0]
assert g["CurrentCount"] == 4 and g["CurrentWarmSpares"] == 1, g' <<< "$("${G[@]}" --json describe "$name")" ||
    fail "heal: the pool is not 4 workers + 1 spare again"
  [ "$fails" -eq 0 ] && ok "heal: n3 killed mid-job; the job resumed on the spare, weights bitwise equal; agent replaced n3 ($old3 -> $(id_of n3))"

  # by hand: Action:Replace on n4, Action:Reboot on n2
  old4=$(id_of n4)
  scontrol update nodename=n4 state=fail reason="Action:Replace"
  scontrol update nodename=n2 state=drain reason="Action:Reboot"
  wait_for 30 'test "$(id_of n4)" != "$old4"' || fail "Action:Replace on n4 was not acted on"
  wait_for 30 'test "$(slurm_state n4)" = idle' || fail "n4 is '$(slurm_state n4)' after Action:Replace"
  wait_for 30 'test "$(slurm_state n2)" = idle' || fail "n2 is '$(slurm_state n2)' after Action:Reboot"
  "${G[@]}" describe "$name" | grep -q "RebootNode .*Succeeded" || fail "no RebootNode operation for Action:Reboot"
  [ "$fails" -eq 0 ] && ok "Action:Replace (n4 $old4 -> $(id_of n4)) and Action:Reboot (n2) acted on"
  if [ "$fails" -ne 0 ]; then
    echo "--- job output"; cat "$tmp/job.out" || true
    echo "--- events"; grep -v '"step"' "$run/events.jsonl" | cut -c1-300 || true
    echo "--- agent"; cat "$state/$name/logs/agent.log" || true
    sinfo -N -o '%N %T %E' || true
  fi
  "${G[@]}" describe "$name"
  delete_and_check
  ;;
mpi)
  # admission's MPI check: n2 (the first worker) has no peer yet; n3 is paired with n2; a
  # replacement n3 whose all-reduce is corrupt passes grit health alone but is not admitted
  command -v mpirun > /dev/null || skip "mpi: mpirun not installed (openmpi-bin)"
  spec 2 0
  "${G[@]}" create "$tmp/spec.json" || fail "create failed"
  for n in n2 n3; do [ "$(status_of $n)" = Running ] || fail "$n is $(status_of $n), expected Running"; done
  grep -q "MPI check skipped: no healthy worker" "$state/$name/logs/$(id_of n2).mpi.log" ||
    fail "n2's MPI log does not say it had no peer: $(cat "$state/$name/logs/$(id_of n2).mpi.log")"
  log3=$state/$name/logs/$(id_of n3).mpi.log
  grep -q "all-reduce of n2 (peer) and n3" "$log3" && grep -q "network.allreduce_correct" "$log3" ||
    fail "n3 was not paired with n2 in an MPI all-reduce: $(cat "$log3")"
  grep -q "allreduce_correct.*FAIL\|FAIL.*allreduce_correct" "$log3" && fail "n3's MPI check reports a failure: $(cat "$log3")"
  [ "$fails" -eq 0 ] && ok "mpi: n3 admitted after an MPI all-reduce with n2"
  old=$(id_of n3)
  bash "$lc" fault-node n3 allreduce_corrupt
  "${G[@]}" --attempts 1 replace-node "$name" n3 && true
  new=$(id_of n3)
  [ "$new" != "$old" ] || fail "replace-node n3 made no new node"
  [ "$(status_of n3)" = Failure ] || fail "n3 with a corrupt all-reduce is $(status_of n3), expected Failure"
  out=$("${G[@]}" --json describe-node "$name" n3)
  grep -q "admission MPI check with n2 failed" <<< "$out" || fail "n3's message does not name the MPI check: $out"
  grep -q "allreduce_correct" "$state/$name/logs/$new.mpi.log" || fail "no all-reduce result in n3's MPI log"
  tail -n 3 "$state/$name/logs/$new.health.log" | grep -qw HEALTHY || fail "n3's own grit health did not pass (the MPI check must be what failed): $(tail -n 5 "$state/$name/logs/$new.health.log")"
  [ "$(slurm_state n3)" != idle ] || fail "n3 (MPI check failed) is idle in Slurm"
  [ "$fails" -eq 0 ] && ok "mpi: a node with a corrupt all-reduce passed grit health but was not admitted"
  bash "$lc" fault-node n3 -
  "${G[@]}" replace-node "$name" n3 || fail "replace-node n3 (fault cleared) failed"
  [ "$(status_of n3)" = Running ] || fail "n3 is $(status_of n3) after the fault was cleared"
  wait_for 30 'test "$(slurm_state n3)" = idle' || fail "n3 is '$(slurm_state n3)' after the fault was cleared"
  [ "$fails" -eq 0 ] && ok "mpi: with the fault cleared the replacement is admitted"
  [ "$fails" -eq 0 ] || { tail -n 40 "$state/$name/logs/"*.mpi.log; }
  delete_and_check
  ;;
spare)
  # grit launch --on-no-spare "grit cluster provide-spare NAME" (docs/cluster.md)
  spec 1 1 # n2 a worker, n3 its warm spare
  # the agent waits 120 s before it replaces a DOWN node: n3, killed below, is replaced by
  # provide-spare, not by both at once
  "${G[@]}" --down-grace 120 create "$tmp/spec.json" || fail "create failed"
  held() { # NAMES...: a job's cluster.json holding them
    local s="" n
    for n in "$@"; do s+="${s:+,}{\"name\":\"$n\",\"state\":\"active\",\"position\":0}"; done
    echo "{\"version\":1,\"nodes\":[$s]}" > "$tmp/held.json"
  }
  held node0 node1
  rc=0; out=$(GRIT_FAILED_NODE=node1 GRIT_CLUSTER_JSON=$tmp/held.json "${G[@]}" provide-spare "$name" 2> "$tmp/ps.err") || rc=$?
  [ $rc -eq 0 ] && [ "$out" = n3 ] && ok "provide-spare: the warm spare n3, alone on stdout" ||
    fail "provide-spare: rc=$rc stdout '$out' $(tail -2 "$tmp/ps.err")"
  held node0 n3
  rc=0; out=$(GRIT_FAILED_NODE=node1 GRIT_CLUSTER_JSON=$tmp/held.json "${G[@]}" provide-spare "$name" 2> "$tmp/ps.err") || rc=$?
  [ $rc -eq 1 ] && [ -z "$out" ] && grep -q "no Running warm spare left" "$tmp/ps.err" &&
    ok "provide-spare: the job holds the only spare: exit 1, said why" || fail "provide-spare, none left: rc=$rc '$out' $(cat "$tmp/ps.err")"

  # the whole chain: a job on 2 virtual nodes, no spare, node1 dies; the cluster's spare joins
  cat > "$tmp/job.json" << CFG
{"model": {"hidden_size": 64, "num_layers": 2, "num_heads": 4, "intermediate_size": 256,
           "vocab_size": 500, "max_positions": 256},
 "optim": {"micro_batch": 2, "global_batch": 8, "seq_len": 64, "lr": 3e-3, "min_lr": 3e-4,
           "warmup_steps": 2, "total_steps": 16},
 "data": {"synthetic_vocab": 500}, "seed": 42, "threads": 1,
 "checkpoint": {"interval_steps": 4, "keep_last": 3}}
CFG
  for r in ref job; do
    inj=(); [ $r = job ] && inj=(--inject kill:node=node1:step=6 --on-no-spare "$grit cluster --state $state --health --quick --no-mpi-check provide-spare $name")
    "$grit" launch --nodes 2 --spares 0 --run "$tmp/$r" --backoff 0.1 --straggler-factor 0 --no-dashboard "${inj[@]}" \
      -- "$grit" train "$tmp/job.json" --run-dir "$tmp/$r" --quiet > "$tmp/$r.out" 2>&1 || fail "launch $r failed: $(tail -3 "$tmp/$r.out")"
  done
  e=$tmp/job/events.jsonl
  if cmp -s "$tmp/ref/model.safetensors" "$tmp/job/model.safetensors" &&
     grep -q '"event":"spare_provided","node":"n3","for":"node1"' "$e" &&
     grep -q '"event":"launch","attempt":1,.*"nodes":"node0,n3"' "$e" && grep -q '"event":"done"' "$e"; then
    ok "spare: grit launch with no spare got n3 from the cluster, resumed, bitwise equal"
  else
    fail "spare chain: $(grep -E 'giving|spare|attempt' "$tmp/job.out" | head -4)"
  fi

  # a worker of the cluster named as the failed node: replaced in place (same name, new NodeId)
  old=$(id_of n2)
  rc=0; out=$(GRIT_FAILED_NODE=n2 "${G[@]}" --no-mpi-check provide-spare "$name" 2> "$tmp/ps.err") || rc=$?
  if [ $rc -eq 0 ] && [ "$out" = n2 ] && [ "$(id_of n2)" != "$old" ] && [ "$(status_of n2)" = Running ]; then
    ok "provide-spare: GRIT_FAILED_NODE=n2 replaced in place ($old -> $(id_of n2))"
  else
    fail "provide-spare in place: rc=$rc '$out' $(id_of n2) (was $old) $(tail -2 "$tmp/ps.err")"
  fi

  # --backend slurm: a batch job on n2+n3 runs grit launch --spares 0; n3 dies; the cluster
  # replaces it in place (a fresh machine outside the job's allocation, which --no-kill
  # shrank) and the supervisor expands the allocation onto it (salloc
  # --dependency=expand, NumNodes=0) before its health check and the next srun
  sed 's/"total_steps": 16/"total_steps": 60/' "$tmp/job.json" > "$tmp/job60.json"
  "$grit" launch --nodes 2 --spares 0 --run "$tmp/ref60" --backoff 0.1 --straggler-factor 0 --no-dashboard \
    -- "$grit" train "$tmp/job60.json" --run-dir "$tmp/ref60" --quiet > "$tmp/ref60.out" 2>&1 ||
    fail "launch ref60 failed: $(tail -3 "$tmp/ref60.out")"
  run=$tmp/srun
  # the local provider replaces a node with the host's namespaces (ip netns, veths), which
  # a batch script inside node n2 cannot reach: --on-no-spare is a relay that hands the
  # request to provide-spare run here (as a real job would ask the cluster's service)
  mkdir "$tmp/relay"
  cat > "$tmp/relay.sh" << EOF
#!/bin/bash
echo "\$GRIT_FAILED_NODE" > $tmp/relay/req.tmp && mv $tmp/relay/req.tmp $tmp/relay/req
for _ in \$(seq 1200); do
  [ -e $tmp/relay/rc ] && { cat $tmp/relay/err >&2; cat $tmp/relay/out; exit \$(cat $tmp/relay/rc); }
  sleep 0.1
done
echo "relay: no answer from provide-spare in 120 s" >&2; exit 1
EOF
  chmod +x "$tmp/relay.sh"
  (for _ in $(seq 1500); do
    [ -e "$tmp/relay/req" ] || { sleep 0.1; continue; }
    rc=0
    GRIT_FAILED_NODE=$(cat "$tmp/relay/req") GRIT_CLUSTER_JSON=$run/cluster.json \
      "${G[@]}" --no-mpi-check provide-spare "$name" > "$tmp/relay/out" 2> "$tmp/relay/err" || rc=$?
    echo "$rc" > "$tmp/relay/rc.tmp" && mv "$tmp/relay/rc.tmp" "$tmp/relay/rc"
    exit 0
  done) &
  bg=$!
  cat > "$tmp/grow.sh" << EOF
#!/bin/bash
exec "$grit" launch --backend slurm --run $run --spares 0 --hang-timeout 5 --health-timeout 20 --backoff 0.1 \\
  --straggler-factor 0 --no-dashboard --bind \$(getent hosts \$SLURMD_NODENAME | awk '{print \$1}') \\
  --on-no-spare $tmp/relay.sh \\
  -- "$grit" train "$tmp/job60.json" --run-dir "$run" --quiet
EOF
  old3=$(id_of n3)
  jid=$(sbatch --parsable -N 2 -w n2,n3 --no-kill -o "$tmp/grow.out" "$tmp/grow.sh")
  wait_for 90 'test "$(grep -c "\"step\"" "$run/metrics.jsonl" 2> /dev/null)" -ge 12' || fail "grow: training did not start"
  "$lc" kill-node n3
  t_kill=$(date +%s.%N)
  echo "grow: n3 killed at step $(grep -c '"step"' "$run/metrics.jsonl")"
  wait_job "$jid" 150
  kill -9 "$bg" 2> /dev/null || true # the relay (done by now, unless no request came)
  wait "$bg" 2> /dev/null || true
  bg=""
  e=$run/events.jsonl
  if [ "$js" = COMPLETED ] && cmp -s "$tmp/ref60/model.safetensors" "$run/model.safetensors" &&
     grep -q '"event":"spare_provided","node":"n3","for":"n3","in_place":true' "$e" &&
     grep -q "\"event\":\"allocation_grown\",\"node\":\"n3\",\"detail\":\"job $jid expanded onto n3 " "$e" &&
     grep -q '"event":"launch","attempt":1,.*"nodes":"n2,n3"' "$e" && grep -q '"event":"done"' "$e" &&
     [ "$(id_of n3)" != "$old3" ]; then
    python3 -c '
import json, sys
t = {}
for l in open(sys.argv[1]):
    x = json.loads(l)
    t.setdefault(x["event"], x)
k = float(sys.argv[2])
print("grow: after the kill: spare requested %.1f s, node provided %.1f s (allocation grown in %.2f s), "
      "training resumed %.1f s" % (t["spare_requested"]["ts"] - k, t["spare_provided"]["ts"] - k,
      t["allocation_grown"]["seconds"], t["recovered"]["ts"] - k))' "$e" "$t_kill"
    ok "grow: --backend slurm lost n3; the cluster replaced it ($old3 -> $(id_of n3)) outside the allocation, the allocation grew onto it, resumed, bitwise equal"
  else
    fail "grow: job $js; $(grep -E 'giving|spare|expanded|attempt' "$tmp/grow.out" | head -6)"
    grep -v '"step"' "$e" | cut -c1-300 | tail -25 || true
    tail -20 "$tmp/relay/err" 2> /dev/null || true
  fi
  delete_and_check
  ;;
*) echo "unknown scenario $scenario"; exit 2 ;;
esac
exit "$fails"
