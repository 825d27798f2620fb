#!/usr/bin/env bash
# silent_gpu.sh GRIT PYTHON FAKE_NVML - a GPU that slows down, seen through NVML: three
# nodes + 1 spare under grit launch (local backend), each node's rank alone on its "node"
# (its local rank 0: it samples its node's GPUs) with the stand-in NVML
# (tests/fake/fake_nvml.c) reading that node's GPU utilisation and SM clock from files
# this test writes ($tmp/gpu/NODE.util, NODE.clock: 95% and 1950 of 1980 MHz, noisy).
# After the silent detector's baseline node1's files drop to 35% and 990 MHz AND its rank
# is slowed for real (a CPU cgroup, sup_lib.sh cpu_throttle, so the job's steps slow: the
# detector's cross-check).
#
#   throttled  a "utilisation" incident naming node1 and its gpu_util and sm_clock values,
#              the node's health check run and recorded (the diagnosis event's health,
#              the ledger's incident), node1 cordoned, the spare swapped in, and the run
#              ends DONE with final weights bitwise equal to the fault-free run
#   healthy    the fault-free run, GPUs at a noisy 95% (checkpoints every 50 steps),
#              raises no alarm
#
# The straggler detector is off so the GPU signal is the one under test. Exit 77 (skipped,
# said loudly) where no CPU cgroup can be written (not root, no cpu controller).
set -euo pipefail
grit=$1 py=$2 fake=$3
skip() { echo "SKIP (cgroup): $*"; exit 77; }
command -v mpirun > /dev/null || { echo "FAIL: mpirun not found (make deps)"; exit 1; }
[ -f "$fake" ] || { echo "FAIL: stand-in NVML $fake not built"; exit 1; }
tmp=$(mktemp -d /tmp/grit-silent-gpu.XXXXXX)
lpid="" noise=""
. "$(dirname "$0")/sup_lib.sh"
cleanup() {
  for p in $noise $lpid; do kill -9 "$p" 2> /dev/null || true; done
  cpu_cgroup_close
  rm -rf "$tmp"
}
trap cleanup EXIT
cpu_cgroup_open "grit-silent-gpu-$$"

# each rank is its node's local rank 0 and its node's GPUs are the files of its node
mkdir "$tmp/gpu"
cat > "$tmp/wrap.sh" << 'W'
#!/bin/sh
r=$OMPI_COMM_WORLD_RANK
node=$(echo "${GRIT_NODES:-node$r}" | cut -d, -f$((r + 1)))
export OMPI_COMM_WORLD_LOCAL_RANK=0 GRIT_HOST_ID=$node FAKE_NVML_GPUS=1 \
  FAKE_NVML_UTIL_FILE=$SILENT_GPU_DIR/$node.util FAKE_NVML_CLOCK_FILE=$SILENT_GPU_DIR/$node.clock
exec "$@"
W
chmod +x "$tmp/wrap.sh"
export SILENT_GPU_DIR=$tmp/gpu GRIT_NVML_LIB=$fake FAKE_NVML_MAX_CLOCK_MHZ=1980
gpus() { # NODE UTIL% CLOCK_MHZ
  echo "$2" > "$tmp/gpu/$1.util.new" && mv "$tmp/gpu/$1.util.new" "$tmp/gpu/$1.util"
  echo "$3" > "$tmp/gpu/$1.clock.new" && mv "$tmp/gpu/$1.clock.new" "$tmp/gpu/$1.clock"
}
# healthy GPUs are noisy: between 85 and 100%, 1900..1980 MHz, a new value every 0.3 s
# (a background writer, $noise, of the nodes named)
noisy() {
  (
    i=0
    while :; do
      for n in "$@"; do gpus "$n" $((85 + (i * 7 + ${#n} * 3) % 16)) $((1900 + (i * 13) % 81)); done
      i=$((i + 1)); sleep 0.3
    done
  ) &
  noise=$!
}
for n in node0 node1 node2 node3; do gpus "$n" 95 1950; done
noisy node0 node1 node2 node3

tiny_job "$tmp/job.json" 6 30 50
now() { date +%s.%N; }
# the job's length: about 25 s of healthy running here and now (see silent_cpu.sh)
c0=$(now)
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe --bind-to none -np 3 \
  "$tmp/wrap.sh" "$grit" train "$tmp/job.json" --run-dir "$tmp/cal" --quiet > "$tmp/cal.out" 2>&1 ||
  { tail -20 "$tmp/cal.out"; echo "FAIL: calibration run failed"; exit 1; }
steps=${GRIT_SILENT_STEPS:-$(steps_for 25 "$tmp/cal" 30 "$c0")}
sed -i "s/\"total_steps\": 30/\"total_steps\": $steps/" "$tmp/job.json"
echo "job: $steps steps on 3 nodes + 1 spare"
L() { # DIR: grit launch in the background ($lpid)
  local d=$1
  "$grit" launch --nodes 3 --spares 1 --run "$d" --hang-timeout 20 --backoff 0.1 \
    --straggler-factor 0 --util-factor 0.6 --clock-factor 0.8 --net-factor 0 \
    --signal-warmup 8 --signal-window 5 \
    -- "$tmp/wrap.sh" "$grit" train "$tmp/job.json" --run-dir "$d" --quiet > "$d.out" 2>&1 &
  lpid=$!
}

t0=$(now)
L "$tmp/ref"; wait "$lpid" || fail "healthy: grit launch exited $?"; lpid=""
ev=$tmp/ref/events.jsonl
grep -q '"event":"done"' "$ev" || { tail -20 "$tmp/ref.out"; fail "healthy: no done event"; exit 1; }
! grep -q '"event":"detected"' "$ev" ||
  fail "healthy: a failure was detected: $(grep -o '"event":"detected".*' "$ev" | head -1)"
! grep -q '"event":"cordon"' "$ev" || fail "healthy: a healthy node was cordoned"
echo "ok   healthy: no alarm in $("$py" -c "print(round($(now) - $t0, 1))") s (GPUs at 85-100%, checkpoints every 50 steps)"

# node1 slows after the baseline (8 s after the launch; 12 s leaves a margin)
GRIT_SILENT_TRACE=1 L "$tmp/thr"
sleep 12
pid=""
for _ in $(seq 300); do pid=$(rank_pid "$tmp/thr" 1) && break; sleep 0.2; done
[ -n "$pid" ] || { fail "throttled: rank 1's process not found"; exit 1; }
kill -9 "$noise"; wait "$noise" 2> /dev/null || true # the writer stopped: node1's files are ours
gpus node1 35 990
t_thr=$(now)
noisy node0 node2 node3
cpu_throttle "$pid" 40
echo "node1 (rank 1, pid $pid): GPU at 35%, SM clock 990 of 1980 MHz, CPU limited to $throttle_quota us per 100 ms (it got $throttle_got cores)"
wait "$lpid" || fail "throttled: grit launch exited $?"; lpid=""
ev=$tmp/thr/events.jsonl
grep -q '"event":"detected","kind":"utilisation","node":"node1"' "$ev" ||
  fail "throttled: no utilisation incident naming node1: $(grep -o '"event":"detected".*' "$ev" | head -1)"
det=$(grep -o '"event":"detected".*' "$ev" | head -1)
for want in "gpu_util 0.3" "sm_clock 0.5" "of max vs peers 0.9"; do
  case "$det" in *"$want"*) ;; *) fail "throttled: the incident does not name '$want': $det" ;; esac
done
grep -q '"event":"diagnosis".*"node":"node1".*"health":"healthy"' "$ev" ||
  fail "throttled: no health check verdict for node1 in the diagnosis: $(grep -o '"event":"diagnosis".*' "$ev" | head -1)"
grep -q '"health": *"healthy"' "$tmp/thr/supervisor.json" ||
  fail "throttled: the incident in supervisor.json has no health verdict"
replaced_ok throttled "$tmp/thr" "$tmp/ref" node1 "$t_thr"
[ -z "$det_latency" ] || echo "ok   throttled: detected $det_latency s after the slowdown: $(grep -o 'detected utilisation[^;]*;' "$tmp/thr.out" | head -1)"
[ $fails -eq 0 ] || { echo "the detector's last ticks (GRIT_SILENT_TRACE):"; grep '^silent:' "$tmp/thr.out" | tail -12; }
[ $fails -eq 0 ] && echo "ok   silent_gpu: all checks passed"
exit $((fails > 0))
