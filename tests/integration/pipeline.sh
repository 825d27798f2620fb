#!/usr/bin/env bash
# pipeline.sh PP_CHECK - the 1F1B pipeline schedule (src/train/pipeline.c) over real MPI
# ranks (mpirun --oversubscribe), one rank per stage of a 4-layer model:
#  - GPT-NeoX, Llama (GQA) and untied Falcon at 2 and 4 stages, with 1 micro-batch (fewer
#    than the warm-up wants), 3, and 8 per step, and with full recomputation: two steps each,
#    the loss and every stage's weights and gradients bitwise the single rank's gradient
#    accumulation (grit-pp-check checks, each stage against its own whole-model reference);
#  - a hung stage (alive, silent): every other stage fails within the dist deadline
#    (GRIT_DIST_TIMEOUT=4) naming the pipeline exchange, and the job ends; mpirun and its
#    ranks are ended by PID if they outlive the check.
set -euo pipefail
check=$1
tmp=$(mktemp -d)
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMP_WAIT_POLICY=PASSIVE
command -v mpirun >/dev/null || { echo "FAIL: mpirun not found (make deps installs openmpi-bin)"; exit 1; }
fail=0

one() { # NP FAMILY MICRO [--recompute]
  local out="$tmp/out" rc=0
  mpirun -np "$1" "$check" "$2" "$3" "${@:4}" >"$out" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ] || [ "$(grep -c "bitwise the single rank's" "$out")" -ne $((2 * $1)) ]; then
    echo "FAIL: PP=$1 $2 micro=$3 ${*:4} (exit $rc):"; cat "$out"; fail=1
  else
    echo "ok: PP=$1 $2, $3 micro-batches ${*:4}: 2 steps bitwise the single rank's on every stage"
    grep "step 1" "$out" | sed 's/^/    /'
  fi
}

one 2 neox 3
one 2 neox 1
one 4 neox 8
one 2 llama 3
one 4 llama 3 --recompute
one 2 falcon 3 --recompute
one 4 falcon 8

# a hung stage: the others fail by the deadline, not a person
start=$(date +%s)
setsid env GRIT_DIST_TIMEOUT=4 mpirun -np 4 "$check" neox 4 --hang 2 >"$tmp/hang" 2>&1 &
pids+=($!)
mp=$!
for _ in $(seq 1 60); do kill -0 "$mp" 2>/dev/null || break; sleep 1; done
took=$(( $(date +%s) - start ))
nerr=$(grep -c "failed after .* pipeline stage .* exchange with stage .* failed" "$tmp/hang" || true)
if kill -0 "$mp" 2>/dev/null; then
  echo "FAIL: with stage 2 hung, mpirun still runs after ${took} s:"; cat "$tmp/hang"; fail=1
elif [ "$nerr" -lt 1 ]; then
  echo "FAIL: with stage 2 hung, no stage reported a failed pipeline exchange:"; cat "$tmp/hang"; fail=1
else
  echo "ok: stage 2 of 4 hung: $nerr stage(s) failed by the 4 s deadline, the job ended in ${took} s"
  grep "failed after" "$tmp/hang" | sed 's/^/    /'
fi
[ "$fail" -eq 0 ] && echo "PASS" || exit 1
