#!/usr/bin/env bash
# tp_ckpt.sh GRIT PYTHON - checkpoints under tensor and pipeline parallelism are written
# by each rank of replica 0 as its own slices (params and AdamW moments), the manifest says
# which slice of which Hugging Face tensor each holds, and any layout resumes any other
# (issue #17), on a Llama shape with grouped-query attention over real MPI ranks:
#  - saving at TP=2 does not change the run (final weights bitwise equal to no saves);
#    no model.safetensors is gathered; an independent reader (mp_assemble.py: the manifest
#    and safetensors bytes only) assembles whole tensors with the shapes of a TP=1
#    checkpoint's, every element from exactly one shard; grit ckpt export of it too;
#  - TP=2 resumed at TP=2 from step 10: bitwise equal to the uninterrupted run;
#  - TP=2's step-10 checkpoint resumed at TP=1, at TP=2 x DP=2 with ZeRO-1, and TP=1's
#    resumed at TP=2: step 11 (the same weights, only the fp32 summation order differs)
#    within 1.5 ulp of loss and 5e-8 of grad norm of the run that wrote it, steps 12-20
#    (they depend on the moments moved too) within 1e-5;
#  - init_from a TP=1 checkpoint at TP=2: the weights only, the same step-1 loss;
#  - pipeline stages: PP=2 (saving) bitwise the single-rank run, its checkpoints' weights and
#    moments bitwise the single rank's, PP=2 resumed at PP=2 bitwise; TP=2 x PP=2 x DP=2's
#    step-10 checkpoint (assembled: the single rank's shapes) resumed at one rank, at TP=2
#    and at DP=4 ZeRO-3, one rank's at PP=2 x DP=2 ZeRO-1, within the bounds above;
#    Falcon's tied embeddings at PP=2 (assembled: one embedding, each tensor (weights and moments) within 1e-5
#    relative L2 of the single rank's checkpoint: the two halves of the tied gradient are
#    added in another order) resumed at PP=2 (bitwise) and at one rank;
#  - ZeRO-3 at TP=2 x DP=2 and PP=2 x DP=2: final weights and checkpoint files bitwise
#    ZeRO-2's; ZeRO-3 TP=2 x DP=2 resumed at step 10 bitwise;
#  - PP=2 stage 1 killed after writing its step-20 file (before the commit): no step 20,
#    the rerun resumes from 10 bitwise; its write failing (ENOSPC) with on_error "continue":
#    the save reported failed naming rank 1, nothing of it left, the next save fine;
#  - SIGTERM to one rank of a TP=2 x DP=2 job: every rank stops after the same step with
#    a final checkpoint (the stop flag goes round the TP group and the DP group), and the
#    rerun ends bitwise equal to the uninterrupted run.
set -euo pipefail
grit=$1 py=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
mp=""
cleanup() { [ -n "$mp" ] && kill -9 "$mp" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
command -v mpirun >/dev/null || { echo "FAIL: mpirun not found (make deps installs openmpi-bin)"; exit 1; }
. "$(dirname "$0")/sup_lib.sh"
fail=0
bad() { echo "FAIL: $*"; fail=1; }

cat > "$tmp/base.json" <<CFG
{"model": "llama-tiny",
 "optim": {"micro_batch": 2, "global_batch": 8, "seq_len": 64, "lr": 3e-3, "min_lr": 3e-4,
           "warmup_steps": 2, "total_steps": 20},
 "data": {"synthetic_vocab": 500}, "seed": 42, "threads": 1,
 "checkpoint": {"interval_steps": 10, "keep_last": 3}}
CFG
lay() { sed "s/\"seed\": 42/\"seed\": 42, \"parallel\": $1/" "$tmp/base.json"; }
lay '{"tensor": 2}' > "$tmp/tp2.json"
lay '{"tensor": 2, "zero": 1}' > "$tmp/tp2z.json"
sed 's/"interval_steps": 10/"interval_steps": 0/' "$tmp/tp2.json" > "$tmp/tp2-nosave.json"
run() { # NP CONFIG DIR
  if [ "$1" -eq 1 ]; then "$grit" train "$2" --run-dir "$3" --quiet 2>"$3.log" >/dev/null
  else mpirun -np "$1" "$grit" train "$2" --run-dir "$3" --quiet 2>"$3.log" >/dev/null; fi ||
    { bad "run $1 $2 $3 failed: $(tail -3 "$3.log")"; return 1; }
}
from10() { # SRC DIR: DIR starts with SRC's step-10 checkpoint
  mkdir -p "$2/ckpt" && cp -r "$1/ckpt/step_00000010" "$2/ckpt/"
}
close() { # A B FIRST-STEP: metrics of both runs from FIRST-STEP on
  "$py" - "$1/metrics.jsonl" "$2/metrics.jsonl" "$3" <<'PY' || fail=1
import json, struct, sys
def rows(p):
    return {r["step"]: r for r in map(json.loads, open(p))}
a, b, first = rows(sys.argv[1]), rows(sys.argv[2]), int(sys.argv[3])
def ulp(x):
    i = struct.unpack("<I", struct.pack("<f", x))[0]
    return abs(struct.unpack("<f", struct.pack("<I", i + 1))[0] - struct.unpack("<f", struct.pack("<f", x))[0])
steps = [s for s in sorted(b) if s >= first]
ok = steps == list(range(first, 21)) and all(s in a for s in steps)
wl = wg = 0.0
for s in steps if ok else []:
    l = abs(a[s]["loss"] - b[s]["loss"]) / ulp(a[s]["loss"])
    g = abs(a[s]["grad_norm"] - b[s]["grad_norm"]) / a[s]["grad_norm"]
    gb = 5e-8 if s == first else 1e-5
    ok = ok and l <= 1.5 and g <= gb
    wl, wg = max(wl, l), max(wg, g)
name = lambda p: p.split("/")[-2]
print(f"{'ok  ' if ok else 'FAIL:'} resumed {name(sys.argv[2])} vs writer {name(sys.argv[1])} from step {first}: "
      f"loss {wl:.2f} ulp, grad norm {wg:.2e} rel")
sys.exit(0 if ok else 1)
PY
}

# saving changes nothing; the checkpoint has whole tensors
run 2 "$tmp/tp2.json" "$tmp/a"
run 2 "$tmp/tp2-nosave.json" "$tmp/nosave"
cmp -s "$tmp/a/model.safetensors" "$tmp/nosave/model.safetensors" &&
  echo "ok   TP=2: saving checkpoints leaves the run bitwise unchanged" || bad "TP=2: saves changed the run"
run 1 "$tmp/base.json" "$tmp/one"
# every rank of replica 0 wrote its own slices; an independent reader assembles them
ls "$tmp/a/ckpt/step_00000010" | grep -qx model.safetensors && bad "TP=2 wrote model.safetensors (a gather)"
"$py" "$here/mp_assemble.py" "$tmp/a/ckpt/step_00000010" "$tmp/one/ckpt/step_00000010" --layout 2x1 || fail=1
"$grit" ckpt export "$tmp/a/ckpt" 10 "$tmp/a-hf" > /dev/null &&
  "$py" - "$tmp/a-hf" "$tmp/one/ckpt/step_00000010" <<'PY' || fail=1
import json, struct, sys
def shapes(d):
    with open(f"{d}/model.safetensors", "rb") as h:
        n = struct.unpack("<Q", h.read(8))[0]
        hd = json.loads(h.read(n))
    return {k: v["shape"] for k, v in hd.items() if k != "__metadata__"}
a, b = shapes(sys.argv[1]), shapes(sys.argv[2])
print(f"{'ok  ' if a == b else 'FAIL:'} grit ckpt export of the TP=2 checkpoint: {len(a)} whole tensors, the shapes of a TP=1 checkpoint's")
sys.exit(0 if a == b else 1)
PY

# the same layout resumes bitwise
from10 "$tmp/a" "$tmp/b"; run 2 "$tmp/tp2.json" "$tmp/b"
cmp -s "$tmp/a/model.safetensors" "$tmp/b/model.safetensors" &&
  diff -q <(grep -E '"step":(1[1-9]|20),' "$tmp/a/metrics.jsonl" | sed -E 's/,"tokens_per_s".*//') \
          <(sed -E 's/,"tokens_per_s".*//' "$tmp/b/metrics.jsonl") > /dev/null &&
  echo "ok   TP=2 -> TP=2 from step 10: bitwise equal to the uninterrupted run" ||
  bad "TP=2 resumed at TP=2 differs"
grep -q '"event":"resume"' "$tmp/b/events.jsonl" || bad "TP=2 -> TP=2: no resume event"

# other layouts
# c: TP=2 -> TP=1, d: TP=2 -> TP=2 x DP=2 ZeRO-1, e: TP=1 -> TP=2
from10 "$tmp/a" "$tmp/c"; run 1 "$tmp/base.json" "$tmp/c" && close "$tmp/a" "$tmp/c" 11
from10 "$tmp/a" "$tmp/d"; run 4 "$tmp/tp2z.json" "$tmp/d" && close "$tmp/a" "$tmp/d" 11
from10 "$tmp/one" "$tmp/e"; run 2 "$tmp/tp2.json" "$tmp/e" && close "$tmp/one" "$tmp/e" 11

# init_from: weights only
sed "s#\"seed\": 42,#\"seed\": 42, \"init_from\": \"$tmp/one/ckpt/step_00000010\",#" "$tmp/tp2.json" > "$tmp/ft.json"
sed "s#\"seed\": 42,#\"seed\": 42, \"init_from\": \"$tmp/one/ckpt/step_00000010\",#" "$tmp/base.json" > "$tmp/ft1.json"
run 2 "$tmp/ft.json" "$tmp/ft" && run 1 "$tmp/ft1.json" "$tmp/ft1" &&
  "$py" - "$tmp/ft/metrics.jsonl" "$tmp/ft1/metrics.jsonl" <<'PY' || fail=1
import json, sys
a, b = (json.loads(open(p).readline()) for p in sys.argv[1:3])
d = abs(a["loss"] - b["loss"]) / b["loss"]
print(f"{'ok  ' if d < 2e-7 else 'FAIL:'} init_from a TP=1 checkpoint at TP=2: step-1 loss {a['loss']} vs {b['loss']} at TP=1")
sys.exit(0 if d < 2e-7 else 1)
PY
grep -q '"event":"init_from"' "$tmp/ft/events.jsonl" || bad "init_from at TP=2: no event"

# pipeline stages (src/train/pipeline.c): each stage writes its own tensors, a resume
# keeps each stage's tensors
lay '{"pipeline": 2}' > "$tmp/pp2.json"
lay '{"pipeline": 2, "zero": 1}' > "$tmp/pp2z.json"
lay '{"tensor": 2, "pipeline": 2}' > "$tmp/g8.json"
run 2 "$tmp/pp2.json" "$tmp/p"
same=1
cmp -s "$tmp/one/model.safetensors" "$tmp/p/model.safetensors" || same=0
for s in 10 20; do
  "$py" "$here/mp_assemble.py" "$tmp/p/ckpt/step_000000$s" "$tmp/one/ckpt/step_000000$s" --bitwise --layout 1x2 || same=0
done
[ $same -eq 1 ] && echo "ok   PP=2: final weights and both checkpoints (weights, AdamW moments) bitwise the single rank's" ||
  bad "PP=2 differs from the single-rank run (weights or checkpoints)"
from10 "$tmp/p" "$tmp/pr"; run 2 "$tmp/pp2.json" "$tmp/pr"
cmp -s "$tmp/p/model.safetensors" "$tmp/pr/model.safetensors" &&
  echo "ok   PP=2 -> PP=2 from step 10: bitwise equal to the uninterrupted run" || bad "PP=2 resumed at PP=2 differs"
# stage 1 killed once its step-20 file is durable, before the commit: step 20 is never
# trusted, the rerun resumes from step 10 and ends bitwise equal; stage 1 out of space in a
# synchronous save with on_error "continue": reported naming rank 1, nothing left, later fine
d="$tmp/pkill"; rc=0
GRIT_CKPT_FAULT_RANK=1 GRIT_CKPT_FAULT=crash:shard@2 \
  mpirun -np 2 "$grit" train "$tmp/pp2.json" --run-dir "$d" --quiet >"$d.out" 2>&1 || rc=$?
left=$(ls "$d/ckpt" | tr '\n' ' ')
if [ $rc -ne 0 ] && [ ! -e "$d/ckpt/step_00000020" ] && [ -d "$d/ckpt/step_00000010" ] &&
   run 2 "$tmp/pp2.json" "$d" && grep -q '"event":"resume","dir":"step_00000010"' "$d/events.jsonl" &&
   cmp -s "$tmp/p/model.safetensors" "$d/model.safetensors" && "$grit" ckpt verify "$d" >/dev/null; then
  echo "ok   PP=2 stage 1 killed after writing its step-20 file: left $left; resumed from step 10, bitwise equal"
else
  bad "PP=2 kill in the save: rc $rc, left $left, $(tail -2 "$d.out")"
fi
sed 's/"keep_last": 3/"keep_last": 3, "async": false, "on_error": "continue"/' "$tmp/pp2.json" > "$tmp/pp2sync.json"
d="$tmp/penospc"
GRIT_CKPT_FAULT_RANK=1 GRIT_CKPT_FAULT=enospc:1 mpirun -np 2 "$grit" train "$tmp/pp2sync.json" \
  --run-dir "$d" --quiet >"$d.out" 2>&1 || bad "PP=2 enospc: the run failed: $(tail -2 "$d.out")"
if grep -q '"event":"ckpt_failed","step":10,"error":"rank 1: .*No space left' "$d/events.jsonl" &&
   [ "$(ls "$d/ckpt" | tr '\n' ' ')" = "LATEST step_00000020 " ] && "$grit" ckpt verify "$d" >/dev/null; then
  echo "ok   PP=2 stage 1 out of space at step 10: save reported failed naming rank 1, no trace left, step 20 saved"
else
  bad "PP=2 enospc: $(grep ckpt_ "$d/events.jsonl" | head -3) / $(ls "$d/ckpt")"
fi
# TP=2 x PP=2 x DP=2 (8 ranks) -> one rank, and -> TP=2 x DP=1; one rank -> PP=2 x DP=2 ZeRO-1
run 8 "$tmp/g8.json" "$tmp/g"
from10 "$tmp/g" "$tmp/g1"; run 1 "$tmp/base.json" "$tmp/g1" && close "$tmp/g" "$tmp/g1" 11
from10 "$tmp/g" "$tmp/gt"; run 2 "$tmp/tp2.json" "$tmp/gt" && close "$tmp/g" "$tmp/gt" 11
"$py" "$here/mp_assemble.py" "$tmp/g/ckpt/step_00000010" "$tmp/one/ckpt/step_00000010" --layout 2x2 || fail=1
lay '{"zero": 3}' > "$tmp/z3.json"
from10 "$tmp/g" "$tmp/gz"; run 4 "$tmp/z3.json" "$tmp/gz" && close "$tmp/g" "$tmp/gz" 11
from10 "$tmp/one" "$tmp/op"; run 4 "$tmp/pp2z.json" "$tmp/op" && close "$tmp/one" "$tmp/op" 11

# ZeRO-3 under TP and PP: each rank keeps its DP shard of its slices; bitwise ZeRO-2 (the
# same reductions, the weights only live elsewhere), checkpoints byte for byte, and a
# ZeRO-3 TP=2 x DP=2 run resumed from step 10 bitwise
for L in 'tp:{"tensor": 2, "data": 2' 'pp:{"pipeline": 2, "data": 2'; do
  n=${L%%:*}
  for z in 2 3; do lay "${L#*:}, \"zero\": $z}" > "$tmp/z$n$z.json"; run 4 "$tmp/z$n$z.json" "$tmp/z$n$z"; done
  same=1
  cmp -s "$tmp/z${n}2/model.safetensors" "$tmp/z${n}3/model.safetensors" || same=0
  for f in "$tmp/z${n}2"/ckpt/step_000000*/*.safetensors; do cmp -s "$f" "${f/z${n}2/z${n}3}" || same=0; done
  [ $same -eq 1 ] && echo "ok   ZeRO-3 at ${L#*:}}: final weights and checkpoint files bitwise ZeRO-2's" ||
    bad "ZeRO-3 at ${L#*:}} differs from ZeRO-2"
done
from10 "$tmp/ztp3" "$tmp/ztpr"; run 4 "$tmp/ztp3.json" "$tmp/ztpr" &&
  cmp -s "$tmp/ztp3/model.safetensors" "$tmp/ztpr/model.safetensors" &&
  echo "ok   ZeRO-3 TP=2 x DP=2 resumed from step 10: bitwise equal" || bad "ZeRO-3 TP=2 x DP=2 resume differs"

# tied embeddings (Falcon) through stages: the last stage's copy is not written (the
# checkpoint has one embedding), a resume fills both from it
sed 's/"llama-tiny"/"falcon-tiny-new"/' "$tmp/base.json" > "$tmp/fbase.json"
sed 's/"seed": 42/"seed": 42, "parallel": {"pipeline": 2}/' "$tmp/fbase.json" > "$tmp/fpp2.json"
run 2 "$tmp/fpp2.json" "$tmp/fp"
from10 "$tmp/fp" "$tmp/fpr"; run 2 "$tmp/fpp2.json" "$tmp/fpr"
cmp -s "$tmp/fp/model.safetensors" "$tmp/fpr/model.safetensors" &&
  echo "ok   Falcon (tied) PP=2 -> PP=2 from step 10: bitwise equal to the uninterrupted run" ||
  bad "Falcon (tied) PP=2 resumed at PP=2 differs"
from10 "$tmp/fp" "$tmp/fp1"; run 1 "$tmp/fbase.json" "$tmp/fp1" && close "$tmp/fp" "$tmp/fp1" 11
run 1 "$tmp/fbase.json" "$tmp/f1"
"$py" "$here/mp_assemble.py" "$tmp/fp/ckpt/step_00000010" "$tmp/f1/ckpt/step_00000010" --rel 1e-5 --layout 1x2 || fail=1

# SIGTERM to one rank of TP=2 x DP=2: all stop at one step, a final checkpoint, bitwise rerun
sed 's/"total_steps": 20/"total_steps": 200/; s/"interval_steps": 10/"interval_steps": 1000/' "$tmp/tp2.json" > "$tmp/long.json"
run 4 "$tmp/long.json" "$tmp/lref"
mpirun -np 4 "$grit" train "$tmp/long.json" --run-dir "$tmp/stop" --quiet > "$tmp/stop.out" 2>&1 &
mp=$!
for _ in $(seq 1 600); do grep -qs '"step":5,' "$tmp/stop/metrics.jsonl" && break; sleep 0.05; done
r3=$(rank_pid "$tmp/stop" 3 || true)
[ -n "$r3" ] && kill -TERM "$r3" || bad "stop: rank 3's PID not found"
rc=0; timeout 120 tail --pid="$mp" -f /dev/null || rc=$?
wait "$mp" || true; mp=""
st=$(grep -o '"event":"train_stopped".*' "$tmp/stop/events.jsonl" | grep -o '"step":[0-9]*' | head -1 | cut -d: -f2 || true)
if [ $rc -eq 0 ] && [ -n "$st" ] && [ -d "$tmp/stop/ckpt/step_$(printf %08d "$st")" ]; then
  echo "ok   SIGTERM to rank 3 of TP=2 x DP=2: every rank stopped after step $st, checkpoint saved"
else
  bad "stop: rc $rc, stopped at '$st': $(tail -3 "$tmp/stop.out")"
fi
run 4 "$tmp/long.json" "$tmp/stop" &&
  cmp -s "$tmp/lref/model.safetensors" "$tmp/stop/model.safetensors" &&
  echo "ok   stopped TP=2 x DP=2 run resumed: bitwise equal to the uninterrupted run" ||
  bad "the stopped run's rerun differs"
[ $fail -eq 0 ] && echo "tp_ckpt: all cases passed"
exit $fail
