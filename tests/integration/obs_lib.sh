# obs_lib.sh - sourced by the obs_*.sh tests: a temp dir with cleanup of every process
# the test starts (by PID), a tiny job, and obs_run DIR, which runs it under grit launch
# with a node killed at step 6 (node1 is cordoned, node2 swapped in, the job resumes).
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
command -v mpirun >/dev/null || { echo "FAIL: mpirun not found (make deps)"; exit 1; }

cat > "$tmp/job.json" <<CFG
{"model": {"hidden_size": 64, "num_layers": 2, "num_heads": 4, "intermediate_size": 256,
           "vocab_size": 500, "max_positions": 256},
 "optim": {"micro_batch": 2, "global_batch": 8, "seq_len": 64, "lr": 3e-3, "min_lr": 3e-4,
           "warmup_steps": 2, "total_steps": 24},
 "data": {"synthetic_vocab": 500}, "seed": 42, "threads": 1,
 "checkpoint": {"interval_steps": 4, "keep_last": 3, "async": false}}
CFG

obs_run() { # DIR: the job on 2 nodes + 1 spare, node1 killed at step 6
  local d=$1
  "$grit" launch --nodes 2 --spares 1 --run "$d" --hang-timeout 5 --backoff 0.1 \
    --straggler-factor 0 --price-node-hour 2.5 --grid-gco2-kwh 400 --node-watts 300 \
    --peak-tflops 0.05 --inject kill:node=node1:step=6 \
    -- "$grit" train "$tmp/job.json" --run-dir "$d" --quiet > "$d.out" 2>&1 ||
    { echo "FAIL: grit launch failed:"; tail -20 "$d.out"; exit 1; }
  grep -q '"event":"cordon","node":"node1"' "$d/events.jsonl" ||
    { echo "FAIL: node1 was not cordoned"; exit 1; }
}

free_port() {
  "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

serve() { # DIR PORTFILE: grit dashboard DIR on a free port in the background
  rm -f "$2"
  "$grit" dashboard "$1" --port 0 --port-file "$2" 2> "$2.log" &
  pids+=($!)
  for _ in $(seq 1 100); do [ -s "$2" ] && return 0; sleep 0.1; done
  echo "FAIL: grit dashboard did not start: $(cat "$2.log")"; exit 1
}
