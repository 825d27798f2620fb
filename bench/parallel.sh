#!/usr/bin/env bash
# parallel.sh - the parallel layouts side by side (issue #17's benchmark), one run per layout
# with the single rank as the baseline, for a ~160M-parameter shape of each family:
#   layouts  1 | DP=2 | DP=2 ZeRO-1 | DP=2 ZeRO-2 | DP=2 ZeRO-3 | TP=2 | TP=2 x DP=2 |
#            TP=2 x DP=2 ZeRO-3 | TP=2 full recomputation | TP=2 sequence parallel | PP=2 |
#            TP=2 x PP=2
#   columns  tok/s (median of the timed steps), vs one rank, peak RSS of the largest rank
#            (/usr/bin/time), the step's communication payload over the data-parallel and
#            the tensor-parallel group as measured by the trainer (metrics.jsonl dp_bytes,
#            tp_bytes: comm.h counts the bytes of every collective) next to the analytic
#            formula below, and the time a step waited on the data-parallel reduction.
# Analytic payload per step (P = parameters per rank, N = micro batch x seq tokens, C =
# hidden, L = layers, A = micro-batches per step on a rank):
#   DP, no ZeRO     4 P               (one all-reduce of the gradients; the input embedding
#                                      is reduced densely here, GRIT_DP_SPARSE_EMBED=0)
#   DP, ZeRO-1      8 P               (reduce-scatter of the gradients, all-gather of the
#                                      updated parameters)
#   DP, ZeRO-2      4 P (A + 1)       (a reduce-scatter per micro-batch, the all-gather)
#   DP, ZeRO-3      4 A (2 P + P_l)   (+ 4 A P_h when the vocabulary tensors are cut into pieces,
#                                      docs/parallel.md: the head's gathered again; tied
#                                      embeddings (Falcon) 4 A (3 P + P_e), in pieces
#                                      4 A (3 P + 2 P_e), and ZeRO-2 + 4 A P_e: the
#                                      embedding's gradient reduced in two parts, its weights
#                                      gathered for the lookup and the head)
#                                     (per micro-batch: every weight all-gathered for the
#                                      forward, the layers' P_l again for the backward (the
#                                      head's window stays from the forward, the input
#                                      embedding's backward reads no weights), the gradients
#                                      reduce-scattered; nothing after the step)
#   TP              A (4 N C (4 L + 2) + 12 N)
#                                     (forward: the embedding and 2 row-parallel outputs per
#                                      layer; backward: the head's input gradient and 2
#                                      column-parallel input gradients per layer; 3 floats
#                                      per token for the vocabulary-parallel cross-entropy)
#                   + A 4 N C 2 (L - 1) with full recomputation (the forward again, less the
#                                      last layer)
#   TP, sequence parallel  A (4 N C (L (4 + b) + 4) + 12 N + 16 C (L + 1))
#                                     (b = 5 for a parallel block (GPT-NeoX, Falcon), 6 sequential
#                                      (Llama); an all-gather's or reduce-scatter's payload is
#                                      the whole [N, C]: forward per layer 2 norm outputs
#                                      gathered, 2 partial sums reduce-scattered; backward dy
#                                      gathered (again after norm2 when sequential), both norm
#                                      outputs re-gathered, 2 input gradients
#                                      reduce-scattered; the embedding reduce-scattered, the
#                                      final norm gathered, the head's gradient
#                                      reduce-scattered and dy gathered for the embedding;
#                                      each norm's weight gradients all-reduced). Over the
#                                      wire (p - 1) / p of it, against TP's 2 (p - 1) / p of
#                                      4 N C (4 L + 2): (9 L + 4) / (8 L + 4) of TP's for
#                                      GPT-NeoX, (10 L + 4) / (8 L + 4) for Llama, for
#                                      activations of the norm and residual regions / TP
# plus a few dozen bytes of flags and norms. A ring all-reduce moves 2 (p - 1) / p of its
# payload per rank over the wire, a reduce-scatter or all-gather (p - 1) / p. What grows:
# DP bytes with P (so they fall by TP), not with the batch; TP bytes with tokens x hidden x
# layers, not with the parameters, and a TP step has 4 L + 2 blocking all-reduces per
# micro-batch on its critical path; ZeRO-1 doubles the DP payload and divides AdamW's state.
# Under TP x PP, rank 0 (stage 0: the embedding and L / PP layers, its forward run twice)
# carries A 4 N C (2 (1 + 2 L/PP) + 2 L/PP) over its TP group.
# Pipeline (PP = stages, A micro-batches per step): each stage boundary carries one [N, C]
# float tensor per micro-batch each way, so stage 0 sends A 4 N C bytes per step (pp_bytes,
# stage 0's); the ideal bubble is (PP - 1) / (A + PP - 1), printed beside stage 0's measured
# time blocked in exchanges (pp_wait_s) as a fraction of the step. A stage recomputes its
# forward before its backward (train/pipeline.h): one more forward per micro-batch.
#
# Usage: bash bench/parallel.sh        (STEPS=3 timed steps after one warm-up; FAMILIES="neox
#        llama falcon"; SEQ=512; SHAPE=small runs 4-layer shapes for a quick look)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
grit=${GRIT:-$root/build/grit}
STEPS=${STEPS:-3} SEQ=${SEQ:-512} FAMILIES=${FAMILIES:-neox llama falcon}
. "$(dirname "$0")/blas_coretype.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export GRIT_DP_SPARSE_EMBED=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "bench: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores;" \
     "flags: $(grep -m1 -o -w 'avx2\|avx512f\|avx512_bf16\|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "bench: load average $(cut -d' ' -f1-3 /proc/loadavg)"
layers=12 hidden=768
[ "${SHAPE:-}" = small ] && layers=4
model() { # FAMILY: a ~160M shape (GPT-NeoX: pythia-160m's; Llama: 12 x 768, GQA 12/4; Falcon:
          # 12 x 768 in Falcon-40B/180B's block (new decoder architecture, GQA 12/4, two
          # norms, tied embeddings, 65,024-token vocabulary), 125M parameters)
  case $1 in
    neox) echo "{\"preset\": \"pythia-160m\", \"num_layers\": $layers}" ;;
    llama) echo "{\"family\": \"llama\", \"hidden_size\": $hidden, \"num_layers\": $layers, \"num_heads\": 12,
                 \"num_kv_heads\": 4, \"intermediate_size\": 2048, \"vocab_size\": 32000,
                 \"make_vocab_size_divisible_by\": 1, \"max_positions\": 2048}" ;;
    falcon) echo "{\"family\": \"falcon\", \"hidden_size\": $hidden, \"num_layers\": $layers, \"num_heads\": 12,
                  \"num_kv_heads\": 4, \"norms_per_block\": 2, \"qkv_layout\": \"grouped\",
                  \"intermediate_size\": 3072, \"vocab_size\": 65024,
                  \"make_vocab_size_divisible_by\": 1, \"max_positions\": 2048}" ;;
  esac
}
mk() { # NAME FAMILY TP ZERO-LEVEL RECOMPUTE [PP [SEQUENCE]]
  cat > "$tmp/$1.json" <<CFG
{"model": $(model "$2"),
 "optim": {"micro_batch": 1, "global_batch": 4, "seq_len": $SEQ, "warmup_steps": 1,
           "total_steps": $((STEPS + 1))},
 "parallel": {"tensor": $3, "pipeline": ${6:-1}, "zero": $4, "sequence": ${7:-false}},
 "recompute": "$5", "threads": 1,
 "data": {"synthetic_vocab": 32000}, "checkpoint": {"interval_steps": 0}, "run_dir": "$tmp/$1"}
CFG
}
run() { # NAME NP
  local n=$1 np=$2
  echo "bench: $n ($np rank$([ "$np" -gt 1 ] && echo s))"
  if [ "$np" -eq 1 ]; then
    /usr/bin/time -f "maxrss %M" "$grit" train "$tmp/$n.json" --quiet 2> "$tmp/$n.log" > /dev/null
  else
    mpirun --bind-to none -np "$np" /usr/bin/time -f "maxrss %M" "$grit" train "$tmp/$n.json" --quiet \
      2> "$tmp/$n.log" > /dev/null
  fi || { echo "bench: $n FAILED:"; tail -n 5 "$tmp/$n.log"; }
}
for f in $FAMILIES; do
  mk "$f-1" "$f" 1 0 none;  mk "$f-dp2" "$f" 1 0 none; mk "$f-dp2z" "$f" 1 1 none
  mk "$f-dp2z2" "$f" 1 2 none; mk "$f-dp2z3" "$f" 1 3 none
  mk "$f-tp2" "$f" 2 0 none; mk "$f-tp2dp2" "$f" 2 0 none; mk "$f-tp2dp2z3" "$f" 2 3 none
  mk "$f-tp2rc" "$f" 2 0 full; mk "$f-tp2sp" "$f" 2 0 none 1 true
  mk "$f-pp2" "$f" 1 0 none 2; mk "$f-tp2pp2" "$f" 2 0 none 2
  run "$f-1" 1; run "$f-dp2" 2; run "$f-dp2z" 2; run "$f-dp2z2" 2; run "$f-dp2z3" 2
  run "$f-tp2" 2; run "$f-tp2dp2" 4; run "$f-tp2dp2z3" 4; run "$f-tp2rc" 2; run "$f-tp2sp" 2
  run "$f-pp2" 2; run "$f-tp2pp2" 4
done
echo "bench: load average $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$tmp" "$grit" "$FAMILIES" <<'PY'
import json, re, statistics, subprocess, sys
tmp, grit, fams = sys.argv[1], sys.argv[2], sys.argv[3].split()
def plan_params(name):
    out = subprocess.run([grit, "train", f"{tmp}/{name}.json", "--plan"], capture_output=True,
                         text=True, env={"GRIT_RANKS_PER_NODE": "1", "PATH": "/usr/bin:/bin"}).stdout
    m = re.search(r"parameters per rank\s+([0-9.]+)M", out)
    return float(m.group(1)) * 1e6 if m else float("nan")
def mib(b): return f"{b / 1048576:,.1f}"
def max_layer(c, C):  # one layer's parameters (ZeRO-2/3 cut the vocabulary into pieces no larger)
    I = c.get("intermediate_size", 4 * C)
    kv = c.get("num_kv_heads", c.get("num_heads", 12)); hd = C // c.get("num_heads", 12)
    if c.get("family") == "llama":
        return C * (C + 2 * kv * hd) + C * C + 3 * C * I + 2 * C
    if c.get("family") == "falcon":  # no biases, two LayerNorms
        return C * (C + 2 * kv * hd) + C * C + 2 * C * I + 4 * C
    return 4 * C * C + 4 * C + 2 * C * I + I + C + 4 * C
layouts = [("1", "1 rank", 1, 1, 0, False), ("dp2", "DP=2", 1, 2, 0, False),
           ("dp2z", "DP=2 ZeRO-1", 1, 2, 1, False), ("dp2z2", "DP=2 ZeRO-2", 1, 2, 2, False),
           ("dp2z3", "DP=2 ZeRO-3", 1, 2, 3, False), ("tp2", "TP=2", 2, 1, 0, False),
           ("tp2dp2", "TP=2 x DP=2", 2, 2, 0, False),
           ("tp2dp2z3", "TP=2 x DP=2 ZeRO-3", 2, 2, 3, False),
           ("tp2rc", "TP=2, full recomputation", 2, 1, 0, True),
           ("tp2sp", "TP=2, sequence parallel", 2, 1, 0, False),
           ("pp2", "PP=2", 1, 1, 0, False), ("tp2pp2", "TP=2 x PP=2", 2, 1, 0, False)]
for fam in fams:
    cfg = json.load(open(f"{tmp}/{fam}-1.json"))
    print(f"\n{fam}: micro batch 1 x {cfg['optim']['seq_len']} tokens, global batch 4")
    print(f"{'layout':<26} {'tok/s':>7} {'vs 1':>5} {'peak RSS MiB':>12} {'DP MiB/step':>11} "
          f"{'analytic':>9} {'TP MiB/step':>11} {'analytic':>9} {'DP wait s':>9} "
          f"{'PP MiB/step':>11} {'analytic':>9} {'blocked':>7} {'bubble':>6}")
    base = None
    for key, label, tp, dp, zero, rc in layouts:
        name = f"{fam}-{key}"
        try:
            rows = [json.loads(l) for l in open(f"{tmp}/{name}/metrics.jsonl")][1:]
        except (OSError, ValueError):
            print(f"{label:<26} (not run or failed)")
            continue
        tps = statistics.median(r["tokens_per_s"] for r in rows)
        base = base or tps
        rss = max(int(x) for x in re.findall(r"maxrss (\d+)", open(f"{tmp}/{name}.log").read()) or [0]) * 1024
        P = plan_params(name)
        c = cfg["model"]
        L = c.get("num_layers", 12)
        C = 768
        N = cfg["optim"]["seq_len"]
        A = 4 // dp
        dpb = statistics.median(r.get("dp_bytes", 0) for r in rows)
        tpb = statistics.median(r.get("tp_bytes", 0) for r in rows)
        V, fn = {"neox": (50304, 2 * C), "llama": (32000, C), "falcon": (65024, 2 * C)}[fam]
        tied = fam == "falcon"
        Pe = (V // tp) * C  # the input embedding (and, untied, the head) on this rank
        Pl = P - (1 if tied else 2) * Pe - fn  # the layers' weights
        Ph = Pe + fn  # the head and final norm: gathered again in vocabulary pieces
        pieces = tp == 1 and Pe > max_layer(c, C)
        # tied embeddings under ZeRO-2/3: the embedding's gradient is reduced twice per
        # micro-batch (the head's part, the lookup's part); ZeRO-3 gathers it for the lookup
        # and again for the head (each piece twice, for the softmax statistics and the
        # gradients, in pieces) and the final norm again for the backward
        dpa = {0: 4 * P, 1: 8 * P, 2: 4 * P * (A + 1) + (4 * A * Pe if tied else 0),
               3: (4 * A * (3 * P + Pe * (2 if pieces else 1)) if tied else
                   4 * A * (2 * P + Pl + (Ph if pieces else 0)))}[zero] if dp > 1 else 0
        tpa = A * (4 * N * C * (4 * L + 2) + 12 * N + (4 * N * C * 2 * (L - 1) if rc else 0)) if tp > 1 else 0
        if key.endswith("sp"):  # reduce-scatters and all-gathers (payload: the whole [N, C])
            b = 6 if fam == "llama" else 5
            tpa = A * (4 * N * C * (L * (4 + b) + 4) + 12 * N + 16 * C * (L + 1))
        pp = json.load(open(f"{tmp}/{name}.json"))["parallel"]["pipeline"]
        if tp > 1 and pp > 1:  # stage 0 (rank 0): embedding + Ls layers, its forward twice
            Ls = L // pp
            tpa = A * 4 * N * C * (2 * (1 + 2 * Ls) + 2 * Ls)
        wait = statistics.median(r.get("comm_wait_s", 0) for r in rows)
        ppb = statistics.median(r.get("pp_bytes", 0) for r in rows)
        ppa = A * 4 * N * C if pp > 1 else 0
        blocked = statistics.median(r.get("pp_wait_s", 0) / r["step_time_s"] for r in rows)
        f = lambda x: mib(x) if x else "-"
        pcols = (f"{f(ppb):>11} {f(ppa):>9} {100 * blocked:>6.0f}% {100 * (pp - 1) / (A + pp - 1):>5.0f}%"
                 if pp > 1 else f"{'-':>11} {'-':>9} {'-':>7} {'-':>6}")
        print(f"{label:<26} {tps:>7.1f} {tps / base:>5.2f} {mib(rss):>12} {f(dpb):>11} {f(dpa):>9} "
              f"{f(tpb):>11} {f(tpa):>9} {wait if dp > 1 else 0:>9.3f} {pcols}")
PY
