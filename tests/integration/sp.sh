#!/usr/bin/env bash
# sp.sh GRIT PYTHON - sequence parallelism (model/tp.h: the norm and residual regions' token
# rows split over the tensor-parallel group) over real MPI ranks:
#  - GPT-NeoX (two norms, parallel block), Llama (GQA, sequential block), Falcon (multi-query,
#    one shared norm, tied embeddings) at TP=2 with "sequence": true against the single rank
#    over 20 steps (tp_compare.py: the bounds tp.sh uses for plain TP, validation included),
#    final weights within per-tensor relative L2 3e-5;
#  - bf16: step 1 bitwise plain TP=2's in bf16, 20 steps within bf16's scale of it;
#  - step 1 bitwise plain TP=2's loss and grad norm (at two ranks a reduce-scatter adds the
#    same two numbers an all-reduce does; only the norms' weight gradients, summed per rank
#    and then over the group, add in another order, so later steps differ in the last bits);
#  - twice, the second without validation and saving checkpoints: bitwise identical; resumed
#    from its step-10 checkpoint: bitwise the uninterrupted run;
#  - TP=2 x PP=2 with full recomputation and TP=2 x DP=2 with ZeRO-1 (4 ranks), within the
#    same bounds;
#  - the tensor group's bytes per step (metrics.jsonl tp_bytes) equal bench/parallel.sh's
#    analytic payload;
#  - the plan's activations fall; sequence without tensor > 1, and token rows that TP does not
#    divide, are refused naming the numbers.
set -euo pipefail
grit=$1 py=$2
. "$(dirname "$0")/mpi_lib.sh" # $here, $tmp (removed on exit), Open MPI env, fail=0
bad() { echo "FAIL: $*"; fail=1; }

cfg() { # NAME MODEL PARALLEL [EXTRA]: a 20-step config
  cat > "$tmp/$1.json" <<CFG
{"model": $2,
 "optim": {"micro_batch": 2, "global_batch": 8, "seq_len": 64, "lr": 3e-3, "min_lr": 3e-4,
           "warmup_steps": 2, "total_steps": 20},
 "data": {"synthetic_vocab": 500}, "seed": 42, "threads": 1, "parallel": $3,
 "checkpoint": {"interval_steps": 0}, "eval": {"interval_steps": 5, "samples": 6}${4:-}}
CFG
}
run() { # NP CONFIG DIR
  if [ "$1" -eq 1 ]; then "$grit" train "$tmp/$2.json" --run-dir "$tmp/$3" 2>"$tmp/$3.log" >/dev/null
  else mpirun -np "$1" "$grit" train "$tmp/$2.json" --run-dir "$tmp/$3" 2>"$tmp/$3.log" >/dev/null; fi ||
    { bad "run $1 $2 $3 failed: $(tail -3 "$tmp/$3.log")"; return 1; }
}
against() { # DIR REF: tp.sh's bounds
  "$py" "$here/tp_compare.py" "$tmp/$1" "$tmp/$2" 1.5 5e-8 1e-5 || fail=1
  "$py" "$here/dp_compare.py" weights "$tmp/$1" "$tmp/$2" 3e-5 || fail=1
}
one='{"tensor": 1}' sp='{"tensor": 2, "sequence": true}'
neox='{"hidden_size": 64, "num_layers": 2, "num_heads": 4, "intermediate_size": 256,
       "vocab_size": 512, "max_positions": 256}'
for f in neox llama falcon; do
  case $f in neox) m=$neox ;; llama) m='"llama-tiny"' ;; falcon) m='"falcon-tiny"' ;; esac
  cfg "$f-1" "$m" "$one"; cfg "$f-sp" "$m" "$sp"
  run 1 "$f-1" "$f-1" && run 2 "$f-sp" "$f-sp" && against "$f-sp" "$f-1"
done
grep -q 'tensor 2 x pipeline 1 x data 1 (sequence parallel)' "$tmp/llama-sp.log" ||
  bad "no sequence-parallel plan line: $(head -3 "$tmp/llama-sp.log")"

# step 1: plain TP's numbers bit for bit
cfg tp '"llama-tiny"' '{"tensor": 2}'
run 2 tp tp
s1() { head -1 "$tmp/$1/metrics.jsonl" | sed -E 's/,"lr".*//'; }
[ "$(s1 tp)" = "$(s1 llama-sp)" ] && echo "ok   step 1 at TP=2: sequence parallel $(s1 llama-sp) = plain TP" ||
  bad "step 1: sequence parallel $(s1 llama-sp) vs plain TP $(s1 tp)"

# bf16: step 1 plain TP's in bf16 bit for bit; step 20 within bf16's scale (tp.sh's bound)
cfg tpbf '"llama-tiny"' '{"tensor": 2}' ', "precision": "bf16"'
cfg spbf '"llama-tiny"' "$sp" ', "precision": "bf16"'
run 2 tpbf tpbf && run 2 spbf spbf
"$py" "$here/bf16_close.py" "$tmp/spbf" "$tmp/tpbf" "sequence parallel vs plain TP at TP=2" || fail=1

# bitwise: again without validation and with checkpoints; resumed from step 10
cfg again '"llama-tiny"' "$sp"
"$py" -c 'import json,sys; c=json.load(open(sys.argv[1])); del c["eval"]; c["checkpoint"]={"interval_steps": 10}; json.dump(c, open(sys.argv[1], "w"))' "$tmp/again.json"
run 2 again again
strip() { sed -E 's/,"tokens_per_s".*//' "$1"; }
cmp -s "$tmp/llama-sp/model.safetensors" "$tmp/again/model.safetensors" &&
  diff -q <(strip "$tmp/llama-sp/metrics.jsonl") <(strip "$tmp/again/metrics.jsonl") > /dev/null &&
  echo "ok   TP=2 sequence parallel twice (validation and saves only in one): bitwise identical" ||
  bad "two sequence-parallel runs differ"
mkdir -p "$tmp/resumed/ckpt" && cp -r "$tmp/again/ckpt/step_00000010" "$tmp/resumed/ckpt/"
run 2 again resumed
cmp -s "$tmp/again/model.safetensors" "$tmp/resumed/model.safetensors" &&
  diff -q <(grep -E '"step":(1[1-9]|20),' "$tmp/again/metrics.jsonl" | sed -E 's/,"tokens_per_s".*//') \
          <(strip "$tmp/resumed/metrics.jsonl") > /dev/null &&
  echo "ok   resumed from step 10: bitwise the uninterrupted run" || bad "the resumed run differs"

# with pipeline stages and full recomputation; with data parallelism and ZeRO-1
cfg tppp '"llama-tiny"' '{"tensor": 2, "pipeline": 2, "sequence": true}' ', "recompute": "full"'
cfg tpdp '"llama-tiny"' '{"tensor": 2, "data": 2, "zero": 1, "sequence": true}'
run 4 tppp tppp && against tppp llama-1
run 4 tpdp tpdp && against tpdp llama-1

# the tensor group's payload: bench/parallel.sh's formula (llama-tiny: C 64, 2 layers, a
# sequential block; N = 2 x 64 tokens, 4 micro-batches), plus the step's few flag bytes
"$py" - "$tmp/llama-sp/metrics.jsonl" <<'PY' || fail=1
import json, sys
C, L, N, A = 64, 2, 128, 4
want = A * (4 * N * C * (L * (4 + 6) + 4) + 12 * N + 16 * C * (L + 1))
rows = [json.loads(l) for l in open(sys.argv[1])]
got = [r["tp_bytes"] for r in rows if "val_loss" not in r]  # validation's forward adds its own
ok = len(got) >= 10 and all(0 <= g - want <= 64 for g in got)
print(f"{'ok  ' if ok else 'FAIL:'} tensor-group bytes per step {got[0]:,} (analytic {want:,} + flags), "
      f"{len(got)} steps without validation")
sys.exit(0 if ok else 1)
PY

# the plan; refusals
plan_act() { "$grit" train "$tmp/$1.json" --plan 2>&1 | awk '/^  activations/ {print $2}'; }
cfg big '"pythia-160m"' '{"tensor": 2}'; cfg bigsp '"pythia-160m"' "$sp"
a=$(plan_act big) b=$(plan_act bigsp)
"$py" -c "import sys; sys.exit(0 if float('$b') < float('$a') else 1)" &&
  echo "ok   plan (pythia-160m, TP=2): activations $a MiB -> $b MiB with sequence parallelism" ||
  bad "plan: activations $a -> $b MiB"
cfg no1 '"llama-tiny"' '{"tensor": 1, "sequence": true}'
out=$("$grit" train "$tmp/no1.json" --plan 2>&1 || true)
grep -q 'parallel.sequence .*needs parallel.tensor > 1' <<<"$out" && echo "ok   refused: $out" ||
  bad "sequence at tensor 1: $out"
cfg odd '"llama-tiny"' "$sp"
sed -i 's/"micro_batch": 2/"micro_batch": 1/; s/"global_batch": 8/"global_batch": 4/; s/"seq_len": 64/"seq_len": 63/' "$tmp/odd.json"
out=$(mpirun -np 2 "$grit" train "$tmp/odd.json" --run-dir "$tmp/odd" 2>&1 || true)
grep -q '1 x optim.seq_len 63 = 63 token rows is not divisible by parallel.tensor 2' <<<"$out" &&
  echo "ok   refused: $(grep -m1 -o 'parallel.sequence: .*' <<<"$out")" || bad "63 rows at TP=2: $out"
[ ! -e "$tmp/odd/model.safetensors" ] || bad "the refused run wrote weights"

[ $fail -eq 0 ] && echo "sp: all ok" || echo "sp: FAILED"
exit $fail
