#!/usr/bin/env bash
# run_all.sh - every benchmark, one after the other (make bench). Each prints its own table.
# BENCH=name[,name] picks some: train, contention, ckpt, dp, recovery, tokenizer, health, obs,
# supervisor.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
want=${BENCH:-train,contention,ckpt,dp,recovery,tokenizer,health,obs,supervisor}
run() { case ",$want," in *",$1,"*) echo; echo "######## $1: $2"; shift 2; "$@" ;; esac; }
run train "grit vs PyTorch training throughput" bash "$here/train_vs_pytorch.sh"
run contention "1 and 2 threads beside a busy process, libgomp's waits vs grit's" \
  env BEFORE_BIN="${BEFORE_BIN:-}" bash "$here/contention.sh"
run ckpt "checkpoint save, async stall, resume" bash "$here/ckpt_save.sh"
run dp "data-parallel scaling, all-reduce overlap, ZeRO-1" bash "$here/dp_scaling.sh"
run recovery "grit launch recovery time and goodput (MINUTES=${MINUTES:=4}, FAULT_EVERY=${FAULT_EVERY:=2})" \
  env MINUTES="$MINUTES" FAULT_EVERY="$FAULT_EVERY" bash "$here/recovery.sh"
run tokenizer "tokenizer throughput vs tiktoken" bash "$here/tokenizer.sh" "$here/../build"
run health "grit health durations and sensitivity" bash "$here/health_sensitivity.sh"
run obs "dashboard and /metrics request time on a 100k-step run" bash "$here/obs_view.sh"
run supervisor "grit launch CPU per second of heartbeats at 4,096 ranks" bash "$here/supervisor_scale.sh" "$here/../build"
