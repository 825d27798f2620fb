#!/usr/bin/env bash
# cluster.sh [GRIT] [REPS] [HEALTH_ARGS] - `grit cluster` on the local provider (network-
# namespace hosts with real Slurm). Run as root. Per repetition:
#   create_s     `grit cluster create` of 1 controller + 4 workers + 1 warm spare, until
#                InService (every worker through OnCreate, admission `grit health
#                HEALTH_ARGS` (default --quick) and slurmd registration)
#   then two node failures, each measured from the fault to the node admitted again (idle
#   in Slurm under the same name, new NodeId), split as the agent records it:
#     crash      every process of n3 SIGKILLed (no job): Slurm notices (SlurmdTimeout=5)
#                and the agent replaces a node DOWN longer than --down-grace (here 0 s)
#     action     scontrol update node=n4 state=fail reason=Action:Replace
#   detect_s     fault -> the agent's DetectNode; provision_s (fresh namespace, old
#                processes ended), lifecycle_s, health_s, rejoin_s (slurmd registered,
#                RESUME), total_s fault -> ReplaceNode ended
#   scale_up_s   `grit cluster update` 4 -> 8 workers (4 new nodes created and admitted,
#                Slurm reconfigured)
#   scale_down_s `grit cluster update` 8 -> 4 workers (idle: drained and removed at once)
#   delete_s     `grit cluster delete` (nothing left)
# Prints one line per measurement and the medians. The machine is shared: repeat, compare
# medians.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
grit=${1:-$here/../build/grit}
reps=${2:-3}
health=${3:---quick}
grit=$(cd "$(dirname "$grit")" && pwd)/$(basename "$grit")
lc=$here/../scripts/slurm-local-cluster.sh
[ "$(id -u)" = 0 ] || { echo "bench/cluster: needs root" >&2; exit 1; }
tmp=$(mktemp -d /tmp/grit-cluster-bench.XXXXXX)
chmod 0755 "$tmp"
state=$tmp/state name=bench
G=("$grit" cluster --state "$state" --health "$health" --down-grace 0 --quiet)
cleanup() {
  [ -f "$state/state.db" ] && "${G[@]}" delete "$name" > /dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
export SLURM_CONF=$state/$name/slurm/etc/slurm.conf GRIT_SLURM_DIR=$state/$name/slurm
mkdir -p "$tmp/lc"
printf '#!/bin/bash\necho "configured $GRIT_NODE_NAME"\n' > "$tmp/lc/on_create.sh"
cat > "$tmp/spec.json" << EOF
{"ClusterName": "$name",
 "Network": {"Bridge": "${GRIT_CLUSTER_BENCH_BRIDGE:-gclbench0}", "Subnet": "${GRIT_CLUSTER_BENCH_SUBNET:-10.79.61}", "Port": 18600},
 "InstanceGroups": [
  {"InstanceGroupName": "controller", "Role": "controller", "InstanceType": "ml.c5.xlarge",
   "InstanceCount": 1, "LifeCycleConfig": {"SourceS3Uri": "lc", "OnCreate": "on_create.sh"}},
  {"InstanceGroupName": "workers", "Role": "worker", "InstanceType": "ml.g5.xlarge",
   "InstanceCount": 4, "WarmSpares": 1,
   "LifeCycleConfig": {"SourceS3Uri": "lc", "OnCreate": "on_create.sh"}}]}
EOF
sed 's/"InstanceCount": 4, "WarmSpares": 1/"InstanceCount": 8, "WarmSpares": 1/' "$tmp/spec.json" > "$tmp/spec8.json"
now() { date +%s.%N; }
node_id() { sqlite3 -cmd ".timeout 10000" "$state/state.db" "select id from nodes where slot = $1 and status != 'Terminated'"; }
# replacement NODE FAULT_TIME OLD_ID KIND: waits, then prints the split
replacement() {
  local slot=${1#n} t0=$2 old=$3 kind=$4 st=""
  for _ in $(seq 600); do
    st=$(sqlite3 -cmd ".timeout 10000" "$state/state.db" "select status from operations where kind = 'ReplaceNode' and target = '$old'")
    [ "$st" = Succeeded ] || [ "$st" = Failed ] && break
    sleep 0.1
  done
  [ "$st" = Succeeded ] || { echo "bench/cluster: $kind: replacement of $1 did not succeed ($st)" >&2; exit 1; }
  sqlite3 -cmd ".timeout 10000" -separator ' ' "$state/state.db" \
    "select d.started, r.ended, r.detail from operations d, operations r where d.kind = 'DetectNode' and d.target = '$old' and r.kind = 'ReplaceNode' and r.target = '$old'" |
    python3 -c '
import re, sys
t0, kind = float(sys.argv[1]), sys.argv[2]
det, end, rest = sys.stdin.read().split(" ", 2)
m = dict(re.findall(r"(provisioning|lifecycle|health|rejoin) ([0-9.]+) s", rest))
print("%-7s detect_s %6.2f provision_s %5.2f lifecycle_s %5.2f health_s %5.2f rejoin_s %5.2f total_s %6.2f" % (
    kind, float(det) - t0, float(m["provisioning"]), float(m["lifecycle"]), float(m["health"]),
    float(m["rejoin"]), float(end) - t0))' "$t0" "$kind"
}
echo "bench/cluster: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs; admission: grit health $health; $reps repetitions"
out=$tmp/results
: > "$out"
for r in $(seq "$reps"); do
  t=$(now)
  "${G[@]}" create "$tmp/spec.json"
  printf 'create  create_s %.2f\n' "$(echo "$(now) - $t" | bc)" | tee -a "$out"
  for kind in crash action; do
    if [ $kind = crash ]; then n=n3; else n=n4; fi
    old=$(node_id "${n#n}")
    t=$(now)
    if [ $kind = crash ]; then "$lc" kill-node $n 2> /dev/null; else scontrol update nodename=$n state=fail reason="Action:Replace"; fi
    replacement $n "$t" "$old" $kind | tee -a "$out"
  done
  t=$(now)
  "${G[@]}" update "$name" "$tmp/spec8.json"
  printf 'scale   scale_up_s %.2f\n' "$(echo "$(now) - $t" | bc)" | tee -a "$out"
  t=$(now)
  "${G[@]}" update "$name" "$tmp/spec.json"
  printf 'scale   scale_down_s %.2f\n' "$(echo "$(now) - $t" | bc)" | tee -a "$out"
  t=$(now)
  "${G[@]}" delete "$name"
  printf 'delete  delete_s %.2f\n' "$(echo "$(now) - $t" | bc)" | tee -a "$out"
done
python3 - "$out" << 'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    for k, v in zip(f[1::2], f[2::2]):
        rows.setdefault((f[0], k), []).append(float(v))
print("medians:")
for (kind, k), v in rows.items():
    print("  %-7s %-12s %7.2f  (n=%d)" % (kind, k, statistics.median(v), len(v)))
PY
