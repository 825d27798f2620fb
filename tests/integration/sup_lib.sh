# sup_lib.sh - sourced by the integration tests that run small jobs under mpirun and
# grit launch (launch, sigterm, multi_death, hb_flood, silent_cpu, silent_gpu, silent_net,
# tp_ckpt, no_spare, slurm):
#   fail MSG              print FAIL: MSG and count it in $fails
#   tiny_job FILE GB STEPS INTERVAL [KEEP]
#                         the 2-layer GPT-NeoX job they train (global batch GB, STEPS
#                         steps, a checkpoint every INTERVAL steps, KEEP kept, default 3)
#   wait_step DIR STEP    until DIR/metrics.jsonl has STEP (at most 60 s; 1 if never)
#   rank_pid DIR RANK     the PID of MPI rank RANK of the grit train writing DIR (its own
#                         process, not mpirun's); nothing and 1 when there is none
#   steps_for SECS DIR N T0
#                         a job length in steps for about SECS s of running here and now,
#                         from the step times of the N-step calibration run in DIR that
#                         started at T0 (date +%s.%N): the median after step 5, else its
#                         wall time per step (mpirun's start-up dominates that on an idle
#                         host); 300..8000
#   cpu_cgroup_open NAME  a CPU cgroup to throttle a process with, its path in $cg: cgroup v2
#                         cpu.max where the cpu controller is enabled, else v1's CFS quota;
#                         calls the test's skip() (exit 77, said loudly) when none can be
#                         written; not root: skip too
#   cpu_cgroup_close      moves what is left in $cg back to its parent and removes it (for
#                         the test's cleanup trap; nothing when there is none)
#   cpu_throttle "PIDS" PCT
#                         measures the CPU of the processes PIDS (a space-separated list:
#                         one rank, or every process of a Slurm node) over 2 s (on a host
#                         loaded by other jobs a rank may get a fifth of a core, and a limit
#                         of PCT% of a whole core would throttle nothing), then moves them,
#                         by PID, into $cg limited to PCT% of that (what they fork later
#                         starts in $cg too); sets throttle_got (cores) and throttle_quota
#                         (us per 100 ms); a PID that has ended meanwhile is left out
#   replaced_ok WHAT DIR REF NODE T0
#                         after a slow node was found in the run in DIR: NODE (and only it)
#                         cordoned, a recovered and a done event, final weights bitwise
#                         equal to the fault-free run in REF, and the first detection within
#                         60 s of T0 (date +%s.%N); its latency in $det_latency ("": none)
# A test sets grit, py and tmp before sourcing it.
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

tiny_job() {
  cat > "$1" <<CFG
{"model": {"hidden_size": 64, "num_layers": 2, "num_heads": 4, "intermediate_size": 256,
           "vocab_size": 500, "max_positions": 256},
 "optim": {"micro_batch": 2, "global_batch": $2, "seq_len": 64, "lr": 3e-3, "min_lr": 3e-4,
           "warmup_steps": 2, "total_steps": $3},
 "data": {"synthetic_vocab": 500}, "seed": 42, "threads": 1,
 "checkpoint": {"interval_steps": $4, "keep_last": ${5:-3}}}
CFG
}

wait_step() {
  for _ in $(seq 1 1200); do grep -qs "\"step\":$2," "$1/metrics.jsonl" && return 0; sleep 0.05; done
  return 1
}

rank_pid() {
  local p
  for p in $(pgrep -f -- "--run-dir $1" || true); do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = mpirun ] && continue
    grep -qz "^OMPI_COMM_WORLD_RANK=$2\$" "/proc/$p/environ" 2>/dev/null &&
      grep -q grit "/proc/$p/cmdline" 2>/dev/null && { echo "$p"; return 0; }
  done
  return 1
}

steps_for() {
  "$py" - "$2/metrics.jsonl" "$(date +%s.%N)" "$4" "$3" "$1" <<'PY'
import json, statistics, sys
path, t1, t0, n, secs = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
try:
    rows = [json.loads(l) for l in open(path) if l.strip()]
    per = statistics.median(r["step_time_s"] for r in rows if r.get("step", 0) > 5)
except (OSError, ValueError, KeyError, statistics.StatisticsError):
    per = (t1 - t0) / n
print(max(300, min(8000, int(secs / max(per, 1e-4)))))
PY
}

cg=""
cpu_cgroup_open() {
  [ "$(id -u)" = 0 ] || skip "needs root to create a CPU cgroup"
  if grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2> /dev/null && mkdir "/sys/fs/cgroup/$1" 2> /dev/null; then
    cg=/sys/fs/cgroup/$1
    echo "max 100000" > "$cg/cpu.max" || skip "cannot write $cg/cpu.max"
  elif [ -w /sys/fs/cgroup/cpu ] && mkdir "/sys/fs/cgroup/cpu/$1" 2> /dev/null; then
    cg=/sys/fs/cgroup/cpu/$1
    echo 100000 > "$cg/cpu.cfs_period_us" && echo -1 > "$cg/cpu.cfs_quota_us" ||
      skip "cannot write the CFS quota of $cg"
  else
    skip "no writable CPU cgroup (cgroup v2 without the cpu controller and no v1 cpu hierarchy)"
  fi
  echo "cgroup $cg"
}

cpu_cgroup_close() {
  [ -n "$cg" ] && [ -d "$cg" ] || return 0
  local p
  for p in $(cat "$cg/cgroup.procs" 2> /dev/null); do echo "$p" > "$(dirname "$cg")/cgroup.procs" 2> /dev/null || true; done
  rmdir "$cg" 2> /dev/null || echo "WARN: could not remove cgroup $cg"
}

cpu_throttle() {
  local c0 c1 w0 w1 p
  # utime + stime of every PID that still runs, in clock ticks
  ticks() { for p in $1; do cat "/proc/$p/stat" 2> /dev/null; done | awk '{ s += $14 + $15 } END { print s + 0 }'; }
  c0=$(ticks "$1"); w0=$(date +%s.%N)
  sleep 2
  c1=$(ticks "$1"); w1=$(date +%s.%N)
  throttle_got=$("$py" -c "import os; print((${c1} - ${c0}) / os.sysconf('SC_CLK_TCK') / ($w1 - $w0))")
  throttle_quota=$("$py" -c "print(max(1000, int($2 / 100 * $throttle_got * 100000)))")
  if [ -f "$cg/cpu.max" ]; then echo "$throttle_quota 100000" > "$cg/cpu.max"; else echo "$throttle_quota" > "$cg/cpu.cfs_quota_us"; fi
  for p in $1; do echo "$p" > "$cg/cgroup.procs" 2> /dev/null || [ ! -d "/proc/$p" ] || fail "cannot move PID $p into $cg"; done
}


replaced_ok() {
  local what=$1 d=$2 ref=$3 node=$4 t0=$5 ev=$2/events.jsonl t_det
  grep -q "\"event\":\"cordon\",\"node\":\"$node\"" "$ev" || fail "$what: $node was not cordoned"
  [ "$(grep -c '"event":"cordon"' "$ev" || true)" -eq 1 ] || fail "$what: not exactly $node cordoned"
  grep -q '"event":"recovered"' "$ev" || fail "$what: no recovered event"
  grep -q '"event":"done"' "$ev" || fail "$what: no done event"
  cmp -s "$ref/model.safetensors" "$d/model.safetensors" || fail "$what: final weights differ from the fault-free run"
  det_latency=""
  t_det=$(grep -o '"ts":[0-9.]*,"event":"detected"' "$ev" | head -1 | grep -o '[0-9.]*' | head -1 || true)
  [ -n "$t_det" ] || return 0
  det_latency=$("$py" -c "print(round($t_det - $t0, 1))")
  "$py" -c "import sys; sys.exit(0 if $t_det - $t0 <= 60 else 1)" || fail "$what: detected after $det_latency s (> 60 s)"
}
