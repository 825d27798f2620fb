#!/bin/bash
# Try srun --auto-resume on this machine: a 4-node local Slurm cluster
# (scripts/slurm-local-cluster.sh), Pythia-70m on 3 nodes + 1 spare, and a node crash
# after 30 steps. Run as root from the repository root after building (build/grit,
# build/spank_grit.so). Short run: 60 steps of one 64-token sequence per rank.
set -euo pipefail
root=$(pwd)
export GRIT_SLURM_DIR=${GRIT_SLURM_DIR:-/tmp/grit-slurm}
export GRIT_SLURM_PLUGIN=$root/build/spank_grit.so GRIT_SLURM_PLUGIN_ARGS="grit=$root/build/grit"
lc=$root/scripts/slurm-local-cluster.sh
"$lc" start
trap '"$lc" stop' EXIT
eval "$("$lc" env)"
run=${RUN:-/tmp/grit-pythia-70m-run}  # outside the cluster directory
rm -rf "$run"
sed 's/"micro_batch": 4, "grad_accum": 2, "seq_len": 512/"micro_batch": 1, "grad_accum": 1, "seq_len": 64/; s/"total_steps": 5000/"total_steps": 60/; s/"interval_steps": 50/"interval_steps": 10/; s/"warmup_steps": 100/"warmup_steps": 5/; s/"threads": 2/"threads": 1/' \
  "$root/examples/slurm/pythia-70m.json" > "$GRIT_SLURM_DIR/pythia-70m.json"
cat > "$GRIT_SLURM_DIR/job.sh" <<JOB
#!/bin/bash
export GRIT_LAUNCH_OPTS="--run $run --spares 1 --hang-timeout 20"
srun --auto-resume=1 "$root/build/grit" train "$GRIT_SLURM_DIR/pythia-70m.json" --run-dir "$run"
JOB
jid=$(sbatch --parsable -N 4 --no-kill -o "$GRIT_SLURM_DIR/job.out" "$GRIT_SLURM_DIR/job.sh")
echo "job $jid; waiting for step 30, then crashing node n2"
until [ "$(cat "$run/metrics.jsonl" 2> /dev/null | grep -c '"step"')" -ge 30 ]; do sleep 1; done
"$lc" kill-node n2
while squeue -h -j "$jid" | grep -q .; do sleep 2; done
cat "$GRIT_SLURM_DIR/job.out"
sinfo -N -o '%N %T %E'
