#!/usr/bin/env bash
# validate.sh GRIT PYTHON TOKENIZER_JSON - held-out loss during training (src/train/validate.h):
#  - a run with validation ends with weights bitwise equal to one without, and logs val_loss /
#    val_ppl at the configured steps only (metrics.jsonl and TensorBoard);
#  - with the weights held still (lr 0), the validation value is bitwise the same at DP=1, 2, 3
#    (5 windows: uneven shares per rank);
#  - on a Megatron dataset's valid split, val_loss equals the PyTorch reference at two
#    checkpoints (tests/reference/validate_ref.py, 1e-5);
#  - killed after step 6 and resumed from step 4: the validation rows and the final weights
#    equal the uninterrupted run's;
#  - a valid split too short for eval.samples, and an unknown eval key, are clear errors.
set -uo pipefail
grit=$1 py=$2 neox=$3
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
vals() { grep -o '"step":[0-9]*\|"val_loss":[^,]*,"val_ppl":[^,}]*' "$1/metrics.jsonl" | grep -B1 val_ || true; }

# --- synthetic: no effect on training, logged where configured --------------------------------
base='"model": {"hidden_size": 32, "num_layers": 2, "num_heads": 4, "intermediate_size": 64,
           "vocab_size": 200, "rotary_pct": 0.25, "max_positions": 64},
 "data": {"synthetic_vocab": 200}, "seed": 7, "threads": 1'
echo "{$base, \"optim\": {\"micro_batch\": 2, \"global_batch\": 4, \"seq_len\": 32, \"lr\": 3e-3,
 \"warmup_steps\": 1, \"total_steps\": 6}}" > "$tmp/a.json"
echo "{$base, \"optim\": {\"micro_batch\": 2, \"global_batch\": 4, \"seq_len\": 32, \"lr\": 3e-3,
 \"warmup_steps\": 1, \"total_steps\": 6}, \"eval\": {\"interval_steps\": 3, \"samples\": 5}}" > "$tmp/b.json"
"$grit" train "$tmp/a.json" --run-dir "$tmp/a" --quiet || fail "training without validation"
"$grit" train "$tmp/b.json" --run-dir "$tmp/b" --quiet || fail "training with validation"
cmp -s "$tmp/a/model.safetensors" "$tmp/b/model.safetensors" ||
  fail "validation changed the trained weights"
[ "$(grep -c val_loss "$tmp/b/metrics.jsonl")" = 2 ] && grep -q '"step":3,.*"val_loss"' "$tmp/b/metrics.jsonl" &&
  grep -q '"step":6,.*"val_loss"' "$tmp/b/metrics.jsonl" ||
  fail "expected val_loss at steps 3 and 6 only: $(grep -c val_loss "$tmp/b/metrics.jsonl") rows"
grep -q val_loss "$tmp/a/metrics.jsonl" && fail "a run without eval logged val_loss"
# tb_decode.py expects val/loss and val/perplexity at exactly the steps with val_loss
"$py" "$here/tb_decode.py" "$tmp/b" > "$tmp/tb.txt" 2>&1 ||
  fail "TensorBoard scalars do not match metrics.jsonl: $(head -c 600 "$tmp/tb.txt")"
grep -q "(28 step values)" "$tmp/tb.txt" || fail "expected 6 x 4 train + 2 x 2 val scalars: $(cat "$tmp/tb.txt")"

# the dashboard's /api/run series and Prometheus /metrics carry it (a real grit dashboard, by PID)
"$grit" dashboard "$tmp/b" --port 0 --port-file "$tmp/dport" > "$tmp/dash.out" 2>&1 &
dpid=$!
for _ in $(seq 1 100); do [ -s "$tmp/dport" ] && break; sleep 0.1; done
dport=$(cat "$tmp/dport" 2>/dev/null)
curl -sf "http://127.0.0.1:$dport/api/run" > "$tmp/run.json" || fail "GET /api/run: $(cat "$tmp/dash.out")"
curl -sf "http://127.0.0.1:$dport/metrics" > "$tmp/prom.txt" || fail "GET /metrics"
kill "$dpid"; wait "$dpid" 2>/dev/null
"$py" - "$tmp/run.json" "$tmp/prom.txt" "$tmp/b/metrics.jsonl" <<'PY' || fail "dashboard view"
import json, sys
view, prom = json.load(open(sys.argv[1])), open(sys.argv[2]).read()
rows = [json.loads(l) for l in open(sys.argv[3])]
want = [r.get("val_loss") for r in rows]
got = view["series"]["val_loss"]
if len(got) != len(want) or any((a is None) != (b is None) or (a is not None and abs(a - b) > 1e-9 * abs(b))
                                for a, b in zip(got, want)):
    sys.exit(f"series.val_loss {got} != metrics.jsonl {want}")
last = [v for v in want if v is not None][-1]
line = [l for l in prom.splitlines() if l.startswith("grit_validation_loss ")]
if not line or abs(float(line[0].split()[1]) - last) > 1e-9 * last or view["summary"].get("val_loss") != last:
    sys.exit(f"grit_validation_loss {line}, summary {view['summary'].get('val_loss')}, expected {last}")
PY

# --- the same value on every data-parallel layout (weights held still) -----------------------
sed 's/"lr": 3e-3,/"lr": 0, "min_lr": 0,/' "$tmp/b.json" > "$tmp/still.json"
"$grit" train "$tmp/still.json" --run-dir "$tmp/dp1" --quiet || fail "DP=1"
if command -v mpirun >/dev/null; then
  for np in 2 3; do
    sed 's/"global_batch": 4/"global_batch": 6/; s/"micro_batch": 2/"micro_batch": 1/' "$tmp/still.json" > "$tmp/still$np.json"
    [ $np = 2 ] && sed -i 's/"global_batch": 6/"global_batch": 4/' "$tmp/still$np.json"
    mpirun -np $np "$grit" train "$tmp/still$np.json" --run-dir "$tmp/dp$np" --quiet || fail "DP=$np"
    if [ -n "$(vals "$tmp/dp1")" ] && [ "$(vals "$tmp/dp1")" = "$(vals "$tmp/dp$np")" ]; then
      echo "DP=$np: validation bitwise equal to DP=1: ok"
    else
      fail "DP=$np validation differs from DP=1: [$(vals "$tmp/dp$np" | tr '\n' ' ')] vs [$(vals "$tmp/dp1" | tr '\n' ' ')]"
    fi
  done
else
  fail "mpirun not found (make deps installs openmpi-bin)"
fi

# --- Megatron valid split vs the PyTorch reference --------------------------------------------
"$py" - "$tmp/corpus.jsonl" <<'PY' || exit 1
import json, sys
paras = [p for f in ("GPL-3", "Apache-2.0") for p in
         open("/usr/share/common-licenses/" + f).read().split("\n\n") if len(p.split()) > 20]
with open(sys.argv[1], "w") as out:
    for p in paras:
        out.write(json.dumps({"text": " ".join(p.split())}) + "\n")
PY
"$grit" tokenize "$tmp/corpus.jsonl" -o "$tmp/corpus" --tokenizer "$neox" --threads 2 --quiet || exit 1
mk() { # FILE SAMPLES
  cat > "$1" <<JSON
{"model": {"hidden_size": 32, "num_layers": 2, "num_heads": 4, "intermediate_size": 64,
           "vocab_size": 50277, "rotary_pct": 0.25, "max_positions": 96},
 "optim": {"micro_batch": 2, "grad_accum": 1, "seq_len": 48, "lr": 1e-2, "min_lr": 1e-3,
           "warmup_steps": 2, "total_steps": 8},
 "data": {"source": "megatron", "paths": ["$tmp/corpus"], "split": "80,20,0"},
 "eval": {"interval_steps": 4, "samples": $2},
 "checkpoint": {"interval_steps": 4, "keep_last": 10, "async": false}, "seed": 5, "threads": 2}
JSON
}
mk "$tmp/mg.json" 6
"$grit" train "$tmp/mg.json" --run-dir "$tmp/mg" --quiet || fail "Megatron training with validation"
"$py" "$here/../reference/validate_ref.py" "$tmp/mg" "$tmp/corpus" 80,20,0 48 6 4 8 ||
  fail "validation loss differs from the reference"

# --- resume: killed after step 6, resumed from step 4 -----------------------------------------
GRIT_FAULTS=kill:step=6 "$grit" train "$tmp/mg.json" --run-dir "$tmp/mgk" --quiet > "$tmp/kill.out" 2>&1 &
pid=$!
wait $pid && fail "the injected kill did not happen"
"$grit" train "$tmp/mg.json" --run-dir "$tmp/mgk" --quiet > "$tmp/resume.out" 2>&1 || fail "resume: $(tail -3 "$tmp/resume.out")"
[ -n "$(vals "$tmp/mg")" ] && [ "$(vals "$tmp/mg")" = "$(vals "$tmp/mgk")" ] ||
  fail "validation after resume differs: [$(vals "$tmp/mgk" | tr '\n' ' ')] vs [$(vals "$tmp/mg" | tr '\n' ' ')]"
cmp -s "$tmp/mg/model.safetensors" "$tmp/mgk/model.safetensors" || fail "resumed weights differ"

# --- clear errors -----------------------------------------------------------------------------
mk "$tmp/big.json" 100000
"$grit" train "$tmp/big.json" --run-dir "$tmp/big" --quiet > "$tmp/big.out" 2>&1 && fail "eval.samples past the valid split was accepted"
grep -q "eval.samples 100000 windows.*valid split" "$tmp/big.out" || fail "no clear error for a short valid split: $(cat "$tmp/big.out")"
sed 's/"samples": 6}/"samples": 6, "every": 2}/' "$tmp/mg.json" > "$tmp/unk.json"
"$grit" train "$tmp/unk.json" --run-dir "$tmp/unk" --quiet > "$tmp/unk.out" 2>&1 && fail "an unknown eval key was accepted"
grep -q "every" "$tmp/unk.out" || fail "no clear error for an unknown eval key: $(cat "$tmp/unk.out")"

[ $fails -eq 0 ] && echo "validate: all checks passed"
exit $((fails > 0))
