#!/usr/bin/env bash
# silent_net.sh GRIT PYTHON - a slow link made by the kernel, not by grit: four nodes, each a
# network namespace this test creates (a veth to a bridge in the root namespace), 3 active
# + 1 spare, one grit train rank per node under mpirun with Open MPI's TCP transport only,
# so every all-reduce crosses the veths; the supervisor listens on the bridge (--bind).
# After the silent detector's baseline, node1's link is throttled with tc tbf on both ends
# of its veth to ${GRIT_NET_RATE:-4mbit} (a NIC that negotiated down; the others run at
# veth speed, hundreds of MB/s). Nothing is injected into grit's processes.
#
#   healthy    the fault-free run (checkpoint saves included) raises no alarm
#
# The slow link that must be found (a "network" incident naming the node, cordoned, the
# spare in, bitwise equal) is tests/integration/slurm.sh slow_link: the same tbf on a
# local Slurm cluster's node. GRIT_SILENT_BENCH=1 (bench/silent.sh): the slow-link run
# here only, one line
# "BENCH net <rate> detected=<yes|no> latency_s=<s>", no checks.
# Exit 77 (skipped, said loudly) where namespaces, veth, a bridge or tbf are not available.
# tc netem (latency, loss) is not used: this kernel may lack sch_netem (then said loudly).
set -euo pipefail
grit=$1 py=$2
rate=${GRIT_NET_RATE:-4mbit}
skip() { echo "SKIP (netns): $*"; exit 77; }
command -v mpirun > /dev/null || { echo "FAIL: mpirun not found (make deps)"; exit 1; }
[ "$(id -u)" = 0 ] || skip "needs root for network namespaces and tc"
command -v ip > /dev/null && command -v tc > /dev/null || skip "ip or tc missing (iproute2)"

tmp=$(mktemp -d /tmp/grit-silent-net.XXXXXX)
chmod 0755 "$tmp"
tag=gs$$ lpid="" made=""
sub=10.$((200 + $$ % 50)).$(( ($$ / 50) % 250 ))
br=${tag}br
cleanup() {
  [ -n "$lpid" ] && kill -9 "$lpid" 2> /dev/null || true
  for n in $made; do ip netns del "$tag-$n" 2> /dev/null || true; ip link del "${tag}v${n#node}" 2> /dev/null || true; done
  ip link del "$br" 2> /dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
ip link add "$br" type bridge 2> /dev/null || skip "cannot create a bridge"
ip addr add "$sub.1/24" dev "$br" && ip link set "$br" up
for i in 0 1 2 3; do
  n=node$i ns=$tag-node$i
  ip netns add "$ns" 2> /dev/null || skip "cannot create network namespaces"
  made="$made $n"
  ip link add "${tag}v$i" type veth peer name "${tag}p$i" 2> /dev/null || skip "cannot create veth pairs"
  ip link set "${tag}p$i" netns "$ns"
  ip link set "${tag}v$i" master "$br" up
  ip netns exec "$ns" ip addr add "$sub.$((10 + i))/24" dev "${tag}p$i"
  ip netns exec "$ns" ip link set "${tag}p$i" up
  ip netns exec "$ns" ip link set lo up
done
tc qdisc add dev "${tag}v1" root tbf rate 1gbit burst 1mb latency 50ms 2> /dev/null ||
  skip "tc tbf not available in this kernel"
tc qdisc del dev "${tag}v1" root
tc qdisc add dev "${tag}v1" root netem delay 1ms 2> /dev/null && tc qdisc del dev "${tag}v1" root ||
  echo "NOTE: tc netem is missing in this kernel (sch_netem): latency and loss are not tested"

# each rank runs in its node's namespace; it is alone there, so it is its node's local
# rank 0 (it samples its node's interfaces) and its node is its machine (GRIT_HOST_ID)
cat > "$tmp/wrap.sh" << 'W'
#!/bin/sh
r=$OMPI_COMM_WORLD_RANK
node=$(echo "${GRIT_NODES:-node$r}" | cut -d, -f$((r + 1)))
export OMPI_COMM_WORLD_LOCAL_RANK=0 GRIT_HOST_ID=$node
exec ip netns exec "$SILENT_TAG-$node" "$@"
W
chmod +x "$tmp/wrap.sh"
export SILENT_TAG=$tag OMPI_MCA_btl=tcp,self OMPI_MCA_btl_tcp_if_include=$sub.0/24
export PMIX_MCA_ptl_tcp_remote_connections=1 PMIX_MCA_ptl_tcp_if_include=$sub.0/24

. "$(dirname "$0")/sup_lib.sh"
tiny_job "$tmp/job.json" 6 30 50
now() { date +%s.%N; }
# the job's length: about 20 s of healthy running here and now (see silent_cpu.sh)
c0=$(now)
GRIT_NODES=node0,node1,node2 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  mpirun --oversubscribe --bind-to none -np 3 "$tmp/wrap.sh" "$grit" train "$tmp/job.json" \
  --run-dir "$tmp/cal" --quiet > "$tmp/cal.out" 2>&1 || { tail -20 "$tmp/cal.out"; echo "FAIL: calibration run across the namespaces failed"; exit 1; }
# steps for ~20 s from the calibration run's own step times (sup_lib.sh steps_for): the
# detector's 8 s warm-up and two 5 s windows with a margin; the bench's slow-link run keeps
# 35 s (its throttle comes 12 s in)
steps=${GRIT_SILENT_STEPS:-$(steps_for "$([ "${GRIT_SILENT_BENCH:-0}" = 1 ] && echo 35 || echo 20)" "$tmp/cal" 30 "$c0")}
sed -i "s/\"total_steps\": 30/\"total_steps\": $steps/" "$tmp/job.json"
echo "job: $steps steps, nodes in namespaces $tag-node0..3 on $sub.0/24"

L() { # DIR: grit launch on 3 nodes + 1 spare, in the background ($lpid)
  local d=$1
  "$grit" launch --nodes 3 --spares 1 --run "$d" --bind "$sub.1" --hang-timeout 30 --backoff 0.1 \
    --straggler-factor 0 --util-factor 0 --net-factor 0.5 --net-min-rate 2e5 \
    --signal-warmup 8 --signal-window 5 \
    -- "$tmp/wrap.sh" "$grit" train "$tmp/job.json" --run-dir "$d" --quiet > "$d.out" 2>&1 &
  lpid=$!
}

bench=${GRIT_SILENT_BENCH:-0}
if [ "$bench" != 1 ]; then
  L "$tmp/ref"; wait "$lpid" || fail "healthy: grit launch exited $?"; lpid=""
  grep -q '"event":"done"' "$tmp/ref/events.jsonl" || { tail -20 "$tmp/ref.out"; fail "healthy: no done event"; exit 1; }
  ! grep -q '"event":"detected"' "$tmp/ref/events.jsonl" ||
    fail "healthy: a failure was detected: $(grep -o '"event":"detected".*' "$tmp/ref/events.jsonl" | head -1)"
  echo "ok   healthy: no alarm"
fi

# bench: the slow link, once the baseline is learned
if [ "$bench" = 1 ]; then
  L "$tmp/slow"
  sleep 12
  tc qdisc add dev "${tag}v1" root tbf rate "$rate" burst 16kb latency 400ms
  ip netns exec "$tag-node1" tc qdisc add dev "${tag}p1" root tbf rate "$rate" burst 16kb latency 400ms
  t_thr=$(now)
  echo "throttled node1's link to $rate both ways"
  wait "$lpid" || fail "slow link: grit launch exited $?"; lpid=""
  ev=$tmp/slow/events.jsonl
  t_det=$(grep -o '"ts":[0-9.]*,"event":"detected","kind":"network","node":"node1"' "$ev" | head -1 | grep -o '[0-9.]*' | head -1 || true)
  echo "BENCH net $rate detected=$([ -n "$t_det" ] && echo yes || echo no) latency_s=$([ -n "$t_det" ] && "$py" -c "print(round($t_det - $t_thr, 1))" || echo -) other_alarms=$(grep '"event":"detected"' "$ev" | grep -vc '"kind":"network","node":"node1"' || true)"
  exit 0
fi
[ $fails -eq 0 ] && echo "ok   silent_net: all checks passed"
exit $((fails > 0))
