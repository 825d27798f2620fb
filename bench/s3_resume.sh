#!/usr/bin/env bash
# s3_resume.sh - how long a training run takes to resume from a checkpoint on S3 (a real
# S3 server on loopback: scripts/s3-local.sh, Swift's S3 API), in one run:
#   grit              grit train resumes straight from s3:// (find, verify, load: each
#                     file downloaded once, verify and load share it)
#   grit 2x           the same with checkpoint.s3.read_cache_mib = 1: every large file is
#                     downloaded twice, once to verify, once to load (grit before the
#                     restore cache)
#   awscli + local    what a user does without S3 support: `aws s3 cp --recursive` of the
#                     newest step, then grit train resumes from the local copy
# The checkpoint is a MODEL-shape one (default pythia-70m: 843 MB of weights and AdamW
# moments) written by one training step. Times are the best of REPS (default 2): the
# `resume` event's seconds (find + verify + load) and the whole command's wall time
# (process start, model set-up, resume; no training step is left to run).
# Override: MODEL, REPS, DIR.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
grit=${GRIT:-$root/build/grit}
MODEL=${MODEL:-pythia-70m}
REPS=${REPS:-2}
. "$(dirname "$0")/blas_coretype.sh"
tmp=$(mktemp -d "${DIR:-/tmp}/grit-s3-resume.XXXXXX")
S3=""
trap '[ -n "$S3" ] && "$root/scripts/s3-local.sh" stop "$S3" >/dev/null 2>&1; rm -rf "$tmp"' EXIT
S3=$("$root/scripts/s3-local.sh" start "$tmp/s3")
. "$S3/env"
export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
aws=(/usr/bin/aws --endpoint-url "$AWS_ENDPOINT_URL")

cfg() { # NAME DIR [S3-EXTRA]
  cat > "$tmp/$1.json" <<CFG
{"model": "$MODEL", "optim": {"micro_batch": 1, "seq_len": 64, "warmup_steps": 1,
 "total_steps": 1}, "threads": 2, "data": {"synthetic_vocab": 50277},
 "checkpoint": {"interval_steps": 1, "dir": "$2", "s3": {${3:-}}}}
CFG
}
cfg write s3://ckpt/run
cfg once s3://ckpt/run
cfg twice s3://ckpt/run '"read_cache_mib": 1'
echo "bench: load average $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores (shared machine)"
"$grit" train "$tmp/write.json" --run-dir "$tmp/write" --quiet
mb=$("${aws[@]}" s3 ls --recursive s3://ckpt/run/ | awk '{ s += $3 } END { printf "%.0f", s / 1e6 }')
echo "bench: $MODEL checkpoint on S3: $mb MB"

# resume_s NAME: the seconds of the newest resume event of run dir NAME
resume_s() { grep -o '"event":"resume".*"seconds":[0-9.e+-]*' "$tmp/$1/events.jsonl" | tail -1 | sed 's/.*"seconds"://'; }

best_load="" best_wall=""
keep_best() { # LOAD WALL
  if [ -z "$best_wall" ] || [ "$(echo "$2 < $best_wall" | bc -l)" = 1 ]; then best_load=$1 best_wall=$2; fi
}
row() { printf '  %-16s resume %6.2f s   command %6.2f s   %6.0f MB/s of checkpoint\n' "$1" "$best_load" "$best_wall" "$(echo "$mb / $best_wall" | bc -l)"; }

echo "bench: resume (best of $REPS)"
for name in once twice; do
  best_load="" best_wall=""
  for _ in $(seq "$REPS"); do
    rm -rf "$tmp/$name"
    t0=$(date +%s.%N)
    "$grit" train "$tmp/$name.json" --run-dir "$tmp/$name" --quiet
    t1=$(date +%s.%N)
    keep_best "$(resume_s "$name")" "$(echo "$t1 - $t0" | bc -l)"
  done
  [ $name = once ] && row "grit" || row "grit 2x"
done
best_load="" best_wall=""
step=$("${aws[@]}" s3 cp s3://ckpt/run/LATEST -)
cfg peer "$tmp/local"
for _ in $(seq "$REPS"); do
  rm -rf "$tmp/local" "$tmp/peer"
  t0=$(date +%s.%N)
  "${aws[@]}" s3 cp --recursive --quiet "s3://ckpt/run/$step" "$tmp/local/$step"
  printf '%s\n' "$step" > "$tmp/local/LATEST"
  "$grit" train "$tmp/peer.json" --run-dir "$tmp/peer" --quiet
  t1=$(date +%s.%N)
  keep_best "$(resume_s peer)" "$(echo "$t1 - $t0" | bc -l)"
done
row "awscli + local"
echo "bench: 'resume' is find + verify + load inside grit train; 'command' is the whole wall time"
