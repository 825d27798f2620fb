#!/usr/bin/env bash
# ckpt_save.sh - checkpoint speed for the pythia-160m shape, in one run:
#   1. save throughput (GB/s) of grit's commit protocol (synchronous saves, fsync per
#      file) vs a plain sequential write of the same bytes with fsync (dd), same disk;
#   2. training stall per async save as a percentage of step time (micro batch 8 x 512);
#   3. load time to first step when resuming from that checkpoint.
# Override: DIR (where to write, default a temp dir under /tmp), THREADS.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
grit=${GRIT:-$root/build/grit}
THREADS=${THREADS:-2}
. "$(dirname "$0")/blas_coretype.sh"
tmp=$(mktemp -d "${DIR:-/tmp}/grit-ckpt-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

mkcfg() { # NAME MICRO SEQ STEPS INTERVAL ASYNC
  cat > "$tmp/$1.json" <<CFG
{"model": "pythia-160m", "optim": {"micro_batch": $2, "seq_len": $3, "warmup_steps": 1,
 "total_steps": $4}, "threads": $THREADS, "data": {"synthetic_vocab": 50277},
 "checkpoint": {"interval_steps": $5, "keep_last": 2, "async": $6}, "run_dir": "$tmp/$1"}
CFG
}

echo "bench: 1/3 synchronous saves (pythia-160m, 3 saves)"
mkcfg sync 1 64 3 1 false
"$grit" train "$tmp/sync.json" --quiet
bytes=$(python3 -c "
import json; ev=[json.loads(l) for l in open('$tmp/sync/events.jsonl') if '\"ckpt_saved\"' in l]
print(int(ev[-1]['bytes']))")
echo "bench: the same $bytes bytes written sequentially with fsync (dd), 3 times"
dd_all=""
for i in 1 2 3; do
  t0=$(date +%s.%N)
  dd if=/dev/zero of="$tmp/dd.bin" bs=8M count=$(( (bytes + 8388607) / 8388608 )) conv=fsync status=none
  dd_all="$dd_all $(python3 -c "import time; print(time.time() - $t0)")"
  rm -f "$tmp/dd.bin"
done
dd_s=$(python3 -c "v = sorted(map(float, '$dd_all'.split())); print(v[1])")
rm -f "$tmp/dd.bin"

echo "bench: 2/3 async saves during training (micro batch 8 x 512, save every 2 steps)"
mkcfg async 8 512 4 2 true
"$grit" train "$tmp/async.json" --quiet

echo "bench: 3/3 resume: load time to first step"
mkcfg resume 1 64 4 2 false
GRIT_CKPT_FAULT=crash:latest@1 "$grit" train "$tmp/resume.json" --quiet 2>/dev/null || true
t0=$(date +%s.%N)
"$grit" train "$tmp/resume.json" --quiet
python3 - "$tmp" "$dd_s" "$bytes" "$t0" <<'PY'
import json, sys
tmp, dd_s, nbytes, t0 = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
def events(run): return [json.loads(l) for l in open(f"{tmp}/{run}/events.jsonl")]
saves = [e for e in events("sync") if e["event"] == "ckpt_saved"]
gbs = sorted(e["bytes"] / e["seconds"] / 1e9 for e in saves)[len(saves) // 2]
dd = nbytes / dd_s / 1e9
m = [json.loads(l) for l in open(f"{tmp}/async/metrics.jsonl")]
step_t = sorted(r["step_time_s"] for r in m)[len(m) // 2]
stalls = [r["ckpt_stall_s"] for r in m if "ckpt_stall_s" in r][:-1] or [float("nan")]
rev = events("resume")
t_resume_start = [e["ts"] for e in rev if e["event"] == "train_start"][-1]
first = [json.loads(l) for l in open(f"{tmp}/resume/metrics.jsonl")]
resumed_at = [e["step"] for e in rev if e["event"] == "resume"][-1]
row = [r for r in first if r["step"] == resumed_at + 1][0]
# first step ends at: train_start ts + its step time (train_start is emitted after loading)
load = t_resume_start - t0
print(f"\ncheckpoint size          {nbytes / 1e9:.2f} GB (pythia-160m: weights + AdamW moments)")
print(f"grit save (sync)         {gbs:.2f} GB/s  (median of {len(saves)} saves; this VM disk varies 1.2-4 GB/s run to run)")
print(f"dd + fsync, same bytes   {dd:.2f} GB/s  (median of 3) -> grit at {gbs / dd:.0%} of a plain write")
print(f"async save stall         {max(stalls):.3f} s per save; step time {step_t:.2f} s "
      f"-> {100 * max(stalls) / step_t:.2f}% of a step (goal < 2%)")
print(f"resume: load to start    {load:.2f} s; first step done after {load + row['step_time_s']:.2f} s")
PY
