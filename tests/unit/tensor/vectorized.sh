#!/usr/bin/env bash
# vectorized.sh BIN - the elementwise kernels that call tensor/mathfn.h's exp/erfc
# (cross-entropy whole, vocabulary-parallel and in pieces, GELU and its backward,
# SwiGLU, the attention softmax) and AdamW (sqrtf) were compiled to packed SIMD code in
# BIN (a Release build). Each must hold at least MIN packed single-precision multiplies
# or FMAs (the exp polynomial alone is 7 per vector); a scalar build of the same loops
# holds 0 to 2 (gcc 12 on AVX2 without -fno-trapping-math: every exp loop ran scalar,
# 1.3x slower steps on pythia-14m; without -fno-math-errno AdamW does). The check is
# also run against one function with no float loop, so a counter that finds packed
# math everywhere fails too.
set -euo pipefail
bin=${1:?usage: vectorized.sh BIN}
MIN=8
command -v objdump >/dev/null || { echo "vectorized.sh: objdump (binutils) not found" >&2; exit 1; }

packed() { # function symbol -> number of packed float multiplies / FMAs in it
  objdump -d --no-show-raw-insn "$bin" --disassemble="$1" |
    grep -cE $'\t(v?mulps|vfn?m(add|sub)[0-9]+ps) ' || true
}

fail=0
for fn in op_xent_rows._omp_fn.0 op_xent_rows_bf16._omp_fn.0 op_gelu_fwd._omp_fn.0 \
          op_gelu_bwd_bias._omp_fn.0 \
          op_swiglu_fwd._omp_fn.0 op_swiglu_bwd._omp_fn.0 op_attn_fwd._omp_fn.0 \
          op_attn_bwd._omp_fn.0 op_xent_tp_exp._omp_fn.0 op_xent_piece_stats._omp_fn.0 \
          op_xent_piece_grad._omp_fn.0 adamw_update._omp_fn.0; do
  if ! nm "$bin" | grep " $fn\$" >/dev/null; then
    echo "FAIL $fn: no such symbol in $bin (renamed? update this list)"; fail=1; continue
  fi
  n=$(packed "$fn")
  if [ "$n" -ge "$MIN" ]; then echo "ok   $fn: $n packed multiplies/FMAs"
  else echo "FAIL $fn: $n packed multiplies/FMAs, expected >= $MIN (the loop runs scalar)"; fail=1; fi
done
# Control: embedding lookup copies rows and does no float arithmetic.
n=$(packed op_embed_fwd_range._omp_fn.0)
if [ "$n" -ge "$MIN" ]; then
  echo "FAIL control op_embed_fwd_range._omp_fn.0: $n packed multiplies (the counter is broken)"
  fail=1
else echo "ok   control op_embed_fwd_range._omp_fn.0: $n"; fi
exit $fail
